// Routed experts read from the model file into a cache of whole experts within a byte budget, for
// models larger than RAM (docs/memory-budget.md). The graph's mul_mat_id nodes ask it
// (ggl::PagedWeights) for the experts their ids name. An expert of a layer is its gate, up and
// down slices: a miss reads all three into one slot, with O_DIRECT where the file system allows
// it (so the page cache does not hold a second copy outside the budget), evicting the expert the
// node does not need that was used least often lately (or least recently: Eviction). When every
// slot is needed by the node, the rest are read from the file's mapping, as without a budget. The
// bytes are the file's either way: results are bit-identical to a run without a budget.
//
// Reads run on a thread of the pager's own, so they can overlap the computation: a graph's
// prefetch nodes (pre-gating: the next layer's router on this layer's hidden state) name the
// experts the next layer will likely use, and those are read while this layer computes. A layer
// that asks for an expert still being read waits for it; a guessed expert it does not use and
// whose read has not started is dropped.
//
// A read that fails, comes up short, or finds the file changed since it was opened (size or
// modification time) is a ggl::Error naming the file, the layer and the expert, when a layer asks
// for that expert.
//
// Not for concurrent computations: acquire and prefetch are called from one thread at a time.
#pragma once
#include <sys/types.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ggml-like/backend/paged_weights.h"
#include "ggml-like/gguf/gguf.h"
#include "ggml-like/graph/graph.h"
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
    double read_mb_per_s() const {
      return read_seconds > 0 ? static_cast<double>(bytes_read) / 1e6 / read_seconds : 0.0;
    }
    Stats since(const Stats& earlier) const;  // the counts after `earlier`
  };

  enum class Eviction {
    kLeastFrequent,  // LFU with aging: uses per step, halving every half_life steps; ties by recency
    kLeastRecent,    // LRU
  };
  struct Options {
    Eviction eviction = Eviction::kLeastFrequent;
    double half_life_steps = 8;
    bool prefetch = true;  // read the guessed experts ahead (else prefetch hints are ignored)
    // Per layer, the experts it may read (expert parallelism: this rank's share; none listed:
    // every expert); the cache has no more slots than they take, and asking for another is an
    // error.
    std::vector<ggl::ExpertRange> owned;
    // LATTE_EXPERT_EVICTION=lru|lfu and LATTE_EXPERT_PREFETCH=0|1 over the defaults, for
    // measuring one against the other (docs/memory-budget.md). Throws ggl::Error on other values.
    static Options from_environment();
  };

  // cache_bytes: what the slots may take (whole experts; at least one), at most the owned
  // experts' slots. Throws ggl::Error when the file cannot be opened or the model has no routed
  // experts.
  ExpertPager(const ggl::GgufFile& file, const ModelWeights& weights, size_t cache_bytes,
              Options options = Options::from_environment());
  ~ExpertPager() override;

  bool pages(const ggl::Tensor& leaf) const override { return holds(leaf.data); }
  // Whether the weight whose bytes are at `data` (a routed expert tensor's, in the mapping) is paged.
  bool holds(const void* data) const { return leaves_.count(data) > 0; }
  void acquire(const ggl::Tensor& leaf, std::span<const int32_t> used, std::span<const uint8_t*> at) override;
  void prefetch(const ggl::Tensor& leaf, std::span<const int32_t> likely) override;

  // Reads every owned expert of every layer into the slots and waits, when the slots hold them all
  // (else reads nothing and returns false): a rank of an expert-parallel job holds its share from
  // the start, and never reads during a step. Throws ggl::Error naming a read that failed.
  bool load_owned();
  bool preloaded() const { return preloaded_; }  // load_owned read them all: nothing is ever read later
  // The bytes of the slots resident in this process's memory (the kernel's page table).
  size_t resident_bytes() const;

  int64_t slots() const { return static_cast<int64_t>(slot_.size()); }
  size_t slot_bytes() const { return slot_bytes_; }
  bool direct_io() const { return direct_; }  // O_DIRECT reads (else buffered)
  const Options& options() const { return options_; }
  Stats stats() const;
  // "expert cache (N slots of X MB): H hits, M misses, K beyond the slots (P% hits); R MB read at
  // S MB/s, W s waited; G read ahead, guesses A% right": what it did since the counts were `since`;
  // with tokens, the MB read per token of those too.
  std::string describe(const Stats& since, int64_t tokens = 0) const;
  std::string describe() const { return describe(Stats{}); }

  // For tests: reads through `read` instead of pread (to inject errors and short reads); called on
  // the pager's reading thread.
  using ReadFn = std::function<ssize_t(int fd, void* buf, size_t n, off_t offset)>;
  void set_read_for_testing(ReadFn read);
  // For tests: what a prefetch hint for `layer` names is replaced by guess(layer, likely).
  using GuessFn = std::function<std::vector<int32_t>(int layer, std::span<const int32_t> likely)>;
  void set_guess_for_testing(GuessFn guess) { guess_for_testing_ = std::move(guess); }

 private:
  struct Part {                // one of a layer's three stacked tensors
    uint64_t file_offset = 0;  // of expert 0's slice
    size_t slice_bytes = 0;
    uint64_t offset(int64_t expert) const { return file_offset + static_cast<uint64_t>(expert) * slice_bytes; }
  };
  struct Layer {
    Part parts[3];  // gate, up, down
    int64_t n_expert = 0;
  };
  // Kept by the computing thread; the reading thread only fills a queued slot's bytes.
  struct Slot {
    int64_t key = -1;  // layer * key_stride_ + expert; -1: empty
    uint64_t last_use = 0;
    uint64_t loaded = 0;   // the clock when its read was queued
    uint64_t ticket = 0;   // of its last read
    bool reading = false;  // its read's end not seen yet
    const uint8_t* part[3] = {};
  };
  struct Read {  // a job for the reading thread
    int slot;
    int layer;
    int64_t expert;
    uint64_t ticket;
  };
  struct Done {  // what the reading thread says of a slot's last read
    uint64_t ticket = 0;
    std::string error;
  };

  // The slot to read expert `key` into, or nullptr. Never one the current node uses, nor one
  // being read; for a guess (ahead), neither one this layer's round uses nor one of `layer`.
  Slot* victim(int layer, bool ahead);
  double frequency(int64_t key) const;  // uses per step, decayed
  void count_use(int64_t key);
  Slot& queue_read(Slot& s, int layer, int64_t expert, bool urgent);
  void wait_for(const std::vector<Slot*>& slots);
  void drop_unused_guesses(int layer, std::span<const int32_t> used);
  void collect_finished();
  void read_loop();
  size_t read_expert(const Read& r);  // on the reading thread; throws ggl::Error
  void check_unchanged() const;
  std::vector<std::pair<int, int64_t>> owned_experts() const;  // (layer, expert) of every owned expert
  bool owns(int layer, int64_t e) const;
  uint8_t* slot_base(int index) const { return buffer_.get() + static_cast<size_t>(index) * slot_bytes_; }

  std::string path_;
  Options options_;
  int fd_ = -1;
  bool direct_ = false;
  size_t file_size_ = 0;
  int64_t mtime_ns_ = 0;
  std::vector<Layer> layers_;
  std::unordered_map<const void*, std::pair<int, int>> leaves_;  // leaf data -> (layer, part)
  int64_t key_stride_ = 0;
  size_t slot_bytes_ = 0;
  size_t part_capacity_[3] = {};
  struct Unmap {
    size_t bytes;
    void operator()(uint8_t* p) const;
  };
  using Buffer = std::unique_ptr<uint8_t, Unmap>;
  Buffer buffer_;  // the slots, page-aligned
  std::vector<Slot> slot_;
  std::unordered_map<int64_t, int> where_;  // key -> slot
  std::vector<float> uses_;                 // per key: uses per step, decayed as of uses_step_
  std::vector<int64_t> uses_step_;
  std::vector<std::vector<int32_t>> guess_;  // per layer: the experts its last hint named
  uint64_t clock_ = 0;                       // one tick per acquire or prefetch
  int last_layer_ = -1;                      // of the last acquire
  int round_part_ = -1;                      // the part (gate, up, down) the layer's current round started with
  uint64_t round_start_ = 0;
  uint64_t next_ticket_ = 0;
  Stats stats_;  // the computing thread's counts (not bytes_read, read_seconds)
  GuessFn guess_for_testing_;
  bool preloaded_ = false;

  // Shared with the reading thread, under mutex_.
  mutable std::mutex mutex_;
  std::condition_variable work_;  // a read was queued, or stop_
  std::condition_variable done_;  // a read ended
  std::deque<Read> queue_;        // urgent reads at the front, guesses at the back
  std::vector<Done> done_slot_;
  size_t io_bytes_ = 0;
  double io_seconds_ = 0;
  bool stop_ = false;
  ReadFn read_;
  std::thread reader_;
};

}  // namespace latte
