#include "src/model/expert_pager.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "ggml-like/core/error.h"

namespace latte {
namespace {

// O_DIRECT wants file offsets, lengths and buffers aligned to the device's logical block; 4 KiB
// covers every common one.
constexpr size_t kAlign = 4096;
constexpr const char* kPartNames[3] = {"gate", "up", "down"};

size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

int64_t mtime_ns(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

}  // namespace

ExpertPager::ExpertPager(const ggl::GgufFile& file, const ModelWeights& weights, size_t cache_bytes)
    : path_(file.path()), read_([](int fd, void* buf, size_t n, off_t offset) { return ::pread(fd, buf, n, offset); }) {
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    const LayerWeights& lw = weights.layers[l];
    const WeightRef parts[3] = {lw.ffn_gate_exps, lw.ffn_up_exps, lw.ffn_down_exps};
    Layer layer;
    if (parts[0] && parts[1] && parts[2]) {
      layer.n_expert = parts[0]->ne[2];
      for (int p = 0; p < 3; ++p) {
        layer.parts[p] = {file.data_offset() + parts[p]->offset,
                          parts[p]->nbytes / static_cast<size_t>(layer.n_expert)};
        leaves_[parts[p]->data] = {static_cast<int>(l), p};
        // A slice's start may fall anywhere in a block: room for one more block before it.
        part_capacity_[p] = std::max(part_capacity_[p], round_up(layer.parts[p].slice_bytes) + kAlign);
      }
      key_stride_ = std::max(key_stride_, layer.n_expert);
    }
    layers_.push_back(layer);
  }
  if (leaves_.empty()) ggl::fail("{}: no routed experts to page", path_);
  slot_bytes_ = part_capacity_[0] + part_capacity_[1] + part_capacity_[2];
  slots_ = static_cast<int64_t>(cache_bytes / slot_bytes_);
  if (slots_ > 0) {
    buffer_ = {static_cast<uint8_t*>(std::aligned_alloc(kAlign, static_cast<size_t>(slots_) * slot_bytes_)), std::free};
    if (!buffer_) ggl::fail("cannot allocate {} bytes for the expert cache", static_cast<size_t>(slots_) * slot_bytes_);
  }
  slot_.resize(static_cast<size_t>(slots_));

  fd_ = ::open(path_.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  direct_ = fd_ >= 0;
  if (fd_ < 0) fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);  // no O_DIRECT here (tmpfs): buffered
  if (fd_ < 0) ggl::fail("{}: cannot open for reading experts: {}", path_, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) ggl::fail("{}: cannot stat: {}", path_, std::strerror(errno));
  file_size_ = static_cast<size_t>(st.st_size);
  mtime_ns_ = mtime_ns(st);
}

ExpertPager::~ExpertPager() {
  if (fd_ >= 0) ::close(fd_);
}

void ExpertPager::check_unchanged() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) ggl::fail("{}: cannot stat: {}", path_, std::strerror(errno));
  if (static_cast<size_t>(st.st_size) != file_size_ || mtime_ns(st) != mtime_ns_)
    ggl::fail("{}: the file changed on disk since it was loaded (size or modification time): load it again", path_);
}

void ExpertPager::read_expert(int layer, int64_t expert, Slot& slot) {
  const auto start_time = std::chrono::steady_clock::now();
  uint8_t* dst = buffer_.get() + static_cast<size_t>(&slot - slot_.data()) * slot_bytes_;
  for (int p = 0; p < 3; ++p) {
    const Part& part = layers_[layer].parts[p];
    const uint64_t offset = part.file_offset + static_cast<uint64_t>(expert) * part.slice_bytes;
    const uint64_t first = offset / kAlign * kAlign;
    const size_t skip = offset - first, need = skip + part.slice_bytes, length = round_up(need);
    size_t got = 0;
    while (got < need) {
      const ssize_t r = read_(fd_, dst + got, length - got, static_cast<off_t>(first + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && errno == EINVAL && direct_) {  // O_DIRECT refused at read time: buffered from now on
        const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) ggl::fail("{}: cannot open for reading experts: {}", path_, std::strerror(errno));
        ::close(fd_);
        fd_ = fd;
        direct_ = false;
        continue;
      }
      if (r < 0)
        ggl::fail("{}: cannot read expert {} of layer {} ({}): {}", path_, expert, layer, kPartNames[p],
                  std::strerror(errno));
      if (r == 0)
        ggl::fail("{}: expert {} of layer {} ({}) ends early: the file is shorter than its tensor table says", path_,
                  expert, layer, kPartNames[p]);
      got += static_cast<size_t>(r);
    }
    stats_.bytes_read += got;
    slot.part[p] = dst + skip;
    dst += part_capacity_[p];
  }
  stats_.read_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
}

void ExpertPager::acquire(const ggl::Tensor& leaf, std::span<const int32_t> used, std::span<const uint8_t*> at) {
  const auto [layer, part] = leaves_.at(leaf.data);
  ++clock_;
  // A layer's three nodes (in the graph's order) form a round; its first counts the hits.
  if (layer != last_layer_ || part == round_part_) {
    round_start_ = clock_;
    round_part_ = part;
  }
  last_layer_ = layer;
  const bool counting = part == round_part_;
  std::vector<int32_t> missing;
  for (const int32_t e : used) {
    const auto it = where_.find(layer * key_stride_ + e);
    if (it == where_.end()) {
      missing.push_back(e);
      continue;
    }
    Slot& s = slot_[it->second];
    s.last_use = clock_;
    at[e] = s.part[part];
    if (counting && s.loaded < round_start_) ++stats_.hits;
  }
  if (missing.empty()) return;
  check_unchanged();
  for (const int32_t e : missing) {
    // The least recently used slot this node does not need (empty ones first).
    Slot* victim = nullptr;
    for (Slot& s : slot_)
      if (s.last_use < clock_ && (!victim || s.last_use < victim->last_use)) victim = &s;
    if (!victim) {  // every slot holds an expert this node needs: the rest from the mapping
      at[e] = static_cast<const uint8_t*>(leaf.data) + static_cast<size_t>(e) * leaf.nb[2];
      ++stats_.mapped;
      continue;
    }
    if (victim->key >= 0) where_.erase(victim->key);
    victim->key = -1;  // empty until the read succeeds
    read_expert(layer, e, *victim);
    victim->key = layer * key_stride_ + e;
    victim->last_use = victim->loaded = clock_;
    where_[victim->key] = static_cast<int>(victim - slot_.data());
    at[e] = victim->part[part];
    ++stats_.misses;
  }
}

ExpertPager::Stats ExpertPager::Stats::since(const Stats& e) const {
  Stats d;
  d.hits = hits - e.hits;
  d.misses = misses - e.misses;
  d.mapped = mapped - e.mapped;
  d.predicted = predicted - e.predicted;
  d.predicted_right = predicted_right - e.predicted_right;
  d.prefetched = prefetched - e.prefetched;
  d.bytes_read = bytes_read - e.bytes_read;
  d.read_seconds = read_seconds - e.read_seconds;
  d.wait_seconds = wait_seconds - e.wait_seconds;
  d.steps = steps - e.steps;
  return d;
}

std::string ExpertPager::describe(const Stats& earlier) const {
  const Stats d = stats_.since(earlier);
  std::string s = fmt::format(
      "expert cache ({} slots of {:.1f} MB): {} hits, {} misses, {} beyond the slots ({:.1f}% hits); {:.1f} MB read "
      "at {:.0f} MB/s, {:.2f} s waited",
      slots_, static_cast<double>(slot_bytes_) / 1e6, d.hits, d.misses, d.mapped, 100.0 * d.hit_rate(),
      static_cast<double>(d.bytes_read) / 1e6, d.read_mb_per_s(), d.wait_seconds);
  if (d.predicted > 0)
    s += fmt::format("; {} read ahead, guesses {:.1f}% right", d.prefetched, 100.0 * d.prefetch_accuracy());
  return s;
}

}  // namespace latte
