// Routed experts read from the model file into a cache of whole experts within a byte budget, for
// models larger than RAM (docs/memory-budget.md). The graph's mul_mat_id nodes ask it
// (ggl::PagedWeights) for the experts their ids name. An expert of a layer is its gate, up and
// down slices: a miss reads all three into one slot, with O_DIRECT where the file system allows
// it (so the page cache does not hold a second copy outside the budget), evicting the least
// recently used expert the node does not need. When every slot is needed by the node, the rest
// are read from the file's mapping, as without a budget. The bytes are the file's either way:
// results are bit-identical to a run without a budget.
//
// A read that fails, comes up short, or finds the file changed since it was opened (size or
// modification time) is a ggl::Error naming the file, the layer and the expert.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ggml-like/backend/paged_weights.h"
#include "ggml-like/gguf/gguf.h"
#include "src/model/weights.h"

namespace latte {

class ExpertPager final : public ggl::PagedWeights {
 public:
  struct Stats {
    // Counted once per layer and step (at the first of its three nodes): experts a token's layer
    // found in the cache (read earlier, ahead of need included), and those it read into a slot or
    // from the mapping.
    int64_t hits = 0;
    int64_t misses = 0;  // experts read from the file into a slot when the layer asked for them
    int64_t mapped = 0;  // experts read through the mapping: no slot was free for them
    // Pre-gating (docs/memory-budget.md): experts a layer used where its experts had been guessed
    // beforehand, and of those, the ones guessed right.
    int64_t predicted = 0;
    int64_t predicted_right = 0;
    int64_t prefetched = 0;  // experts read ahead of need, on the guess
    size_t bytes_read = 0;
    double read_seconds = 0;  // the reads' own time (they overlap the computation where prefetched)
    double wait_seconds = 0;  // the time the computation waited for reads
    int64_t steps = 0;        // graphs that asked for experts

    int64_t asked() const { return hits + misses + mapped; }
    double hit_rate() const { return asked() > 0 ? static_cast<double>(hits) / static_cast<double>(asked()) : 0.0; }
    // The share of the used experts that the guess named (0 without pre-gating).
    double prefetch_accuracy() const {
      return predicted > 0 ? static_cast<double>(predicted_right) / static_cast<double>(predicted) : 0.0;
    }
    double read_mb_per_s() const { return read_seconds > 0 ? static_cast<double>(bytes_read) / 1e6 / read_seconds : 0.0; }
    Stats since(const Stats& earlier) const;  // the counts after `earlier`
  };

  // cache_bytes: what the slots may take (whole experts; at least one). Throws ggl::Error when
  // the file cannot be opened or the model has no routed experts.
  ExpertPager(const ggl::GgufFile& file, const ModelWeights& weights, size_t cache_bytes);
  ~ExpertPager() override;

  bool pages(const ggl::Tensor& leaf) const override { return holds(leaf.data); }
  // Whether the weight whose bytes are at `data` (a routed expert tensor's, in the mapping) is paged.
  bool holds(const void* data) const { return leaves_.count(data) > 0; }
  void acquire(const ggl::Tensor& leaf, std::span<const int32_t> used, std::span<const uint8_t*> at) override;

  int64_t slots() const { return slots_; }
  size_t slot_bytes() const { return slot_bytes_; }
  bool direct_io() const { return direct_; }  // O_DIRECT reads (else buffered)
  const Stats& stats() const { return stats_; }
  // "expert cache (N slots of X MB): H hits, M misses, K beyond the slots (P% hits); R MB read at
  // S MB/s": what it did since the counts were `since`.
  std::string describe(const Stats& since) const;
  std::string describe() const { return describe(Stats{}); }

  // For tests: reads through `read` instead of pread (to inject errors and short reads).
  using ReadFn = std::function<ssize_t(int fd, void* buf, size_t n, off_t offset)>;
  void set_read_for_testing(ReadFn read) { read_ = std::move(read); }

 private:
  struct Part {                // one of a layer's three stacked tensors
    uint64_t file_offset = 0;  // of expert 0's slice
    size_t slice_bytes = 0;
  };
  struct Layer {
    Part parts[3];  // gate, up, down
    int64_t n_expert = 0;
  };
  struct Slot {
    int64_t key = -1;  // layer * n_expert_max + expert; -1: empty
    uint64_t last_use = 0;
    uint64_t loaded = 0;  // the clock when it was read
    const uint8_t* part[3] = {};
  };

  void read_expert(int layer, int64_t expert, Slot& slot);
  void check_unchanged() const;

  std::string path_;
  int fd_ = -1;
  bool direct_ = false;
  size_t file_size_ = 0;
  int64_t mtime_ns_ = 0;
  std::vector<Layer> layers_;
  std::unordered_map<const void*, std::pair<int, int>> leaves_;  // leaf data -> (layer, part)
  int64_t key_stride_ = 0;
  int64_t slots_ = 0;
  size_t slot_bytes_ = 0;
  size_t part_capacity_[3] = {};
  std::unique_ptr<uint8_t, void (*)(void*)> buffer_{nullptr, nullptr};
  std::vector<Slot> slot_;
  std::unordered_map<int64_t, int> where_;  // key -> slot
  uint64_t clock_ = 0;                      // one tick per acquire
  int last_layer_ = -1;                     // of the last acquire
  int round_part_ = -1;                     // the part (gate, up, down) the layer's current round started with
  uint64_t round_start_ = 0;
  Stats stats_;
  ReadFn read_;
};

}  // namespace latte
