#include "src/model/expert_pager.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "ggml-like/core/error.h"
#include "src/model/resident_memory.h"

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

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Whether the file system takes O_DIRECT reads on fd (tmpfs refuses them at open, some others
// only at read time).
bool direct_reads_work(int fd) {
  std::unique_ptr<void, void (*)(void*)> block{std::aligned_alloc(kAlign, kAlign), std::free};
  return block && (::pread(fd, block.get(), kAlign, 0) >= 0 || errno != EINVAL);
}

}  // namespace

ExpertPager::Options ExpertPager::Options::from_environment() {
  Options o;
  if (const char* e = std::getenv("LATTE_EXPERT_EVICTION")) {
    const std::string v = e;
    if (v == "lru")
      o.eviction = Eviction::kLeastRecent;
    else if (v == "lfu")
      o.eviction = Eviction::kLeastFrequent;
    else
      ggl::fail("LATTE_EXPERT_EVICTION={}: expected lru or lfu", v);
  }
  if (const char* e = std::getenv("LATTE_EXPERT_PREFETCH")) {
    const std::string v = e;
    if (v != "0" && v != "1") ggl::fail("LATTE_EXPERT_PREFETCH={}: expected 0 or 1", v);
    o.prefetch = v == "1";
  }
  return o;
}

ExpertPager::ExpertPager(const ggl::GgufFile& file, const ModelWeights& weights, size_t cache_bytes, Options options)
    : path_(file.path()),
      options_(options),
      read_([](int fd, void* buf, size_t n, off_t offset) { return ::pread(fd, buf, n, offset); }) {
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
        file.advise_random(*parts[p]);  // read through the mapping only where no slot is free
        // A slice's start may fall anywhere in a block: room for one more block before it.
        part_capacity_[p] = std::max(part_capacity_[p], round_up(layer.parts[p].slice_bytes) + kAlign);
      }
      key_stride_ = std::max(key_stride_, layer.n_expert);
    }
    layers_.push_back(layer);
  }
  if (leaves_.empty()) ggl::fail("{}: no routed experts to page", path_);
  slot_bytes_ = part_capacity_[0] + part_capacity_[1] + part_capacity_[2];
  const size_t slots = std::min(cache_bytes / slot_bytes_, owned_experts().size());  // no more than can be used
  if (slots > 0) {
    // Populated now: pages first touched by the reads would each be taken, in a memory cgroup near
    // its limit, from reclaim in the middle of a token (measured: the reads ran at a third of the
    // disk's rate while the cache filled; docs/memory-budget.md).
    void* p =
        ::mmap(nullptr, slots * slot_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED)
      ggl::fail("cannot allocate {} bytes for the expert cache: {}", slots * slot_bytes_, std::strerror(errno));
    buffer_ = Buffer(static_cast<uint8_t*>(p), Unmap{slots * slot_bytes_});
  }
  slot_.resize(slots);
  done_slot_.resize(slots);
  const size_t keys = layers_.size() * static_cast<size_t>(key_stride_);
  uses_.assign(keys, 0.0f);
  uses_step_.assign(keys, 0);
  guess_.resize(layers_.size());

  fd_ = ::open(path_.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  direct_ = fd_ >= 0 && direct_reads_work(fd_);
  if (!direct_) {  // no O_DIRECT here (tmpfs): buffered
    if (fd_ >= 0) ::close(fd_);
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (fd_ < 0) ggl::fail("{}: cannot open for reading experts: {}", path_, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) ggl::fail("{}: cannot stat: {}", path_, std::strerror(errno));
  file_size_ = static_cast<size_t>(st.st_size);
  mtime_ns_ = mtime_ns(st);
  reader_ = std::thread([this] { read_loop(); });
}

void ExpertPager::Unmap::operator()(uint8_t* p) const { ::munmap(p, bytes); }

ExpertPager::~ExpertPager() {
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
    queue_.clear();
  }
  work_.notify_all();
  reader_.join();
  if (fd_ >= 0) ::close(fd_);
}

void ExpertPager::set_read_for_testing(ReadFn read) {
  const std::lock_guard lock(mutex_);
  read_ = std::move(read);
}

void ExpertPager::check_unchanged() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) ggl::fail("{}: cannot stat: {}", path_, std::strerror(errno));
  if (static_cast<size_t>(st.st_size) != file_size_ || mtime_ns(st) != mtime_ns_)
    ggl::fail("{}: the file changed on disk since it was loaded (size or modification time): load it again", path_);
}

void ExpertPager::read_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const Read r = queue_.front();
    queue_.pop_front();
    lock.unlock();
    const Clock::time_point start = Clock::now();
    std::string error;
    size_t got = 0;
    try {
      got = read_expert(r);
    } catch (const std::exception& e) {
      error = e.what();
    }
    const double seconds = seconds_since(start);
    lock.lock();
    done_slot_[static_cast<size_t>(r.slot)] = {r.ticket, std::move(error)};
    io_bytes_ += got;
    io_seconds_ += seconds;
    done_.notify_all();
  }
}

size_t ExpertPager::read_expert(const Read& r) {
  ReadFn read;
  {
    const std::lock_guard lock(mutex_);
    read = read_;
  }
  uint8_t* dst = slot_base(r.slot);
  size_t total = 0;
  for (int p = 0; p < 3; ++p) {
    const Part& part = layers_[static_cast<size_t>(r.layer)].parts[p];
    const uint64_t offset = part.offset(r.expert);
    const uint64_t first = offset / kAlign * kAlign;
    const size_t need = offset - first + part.slice_bytes, length = round_up(need);
    size_t got = 0;
    while (got < need) {
      const ssize_t n = read(fd_, dst + got, length - got, static_cast<off_t>(first + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        ggl::fail("{}: cannot read expert {} of layer {} ({}): {}", path_, r.expert, r.layer, kPartNames[p],
                  std::strerror(errno));
      if (n == 0)
        ggl::fail("{}: expert {} of layer {} ({}) ends early: the file is shorter than its tensor table says", path_,
                  r.expert, r.layer, kPartNames[p]);
      got += static_cast<size_t>(n);
    }
    total += got;
    dst += part_capacity_[p];
  }
  return total;
}

ExpertPager::Slot& ExpertPager::queue_read(Slot& s, int layer, int64_t expert, bool urgent) {
  const int index = static_cast<int>(&s - slot_.data());
  if (s.key >= 0) where_.erase(s.key);
  uint8_t* dst = slot_base(index);
  for (int p = 0; p < 3; ++p) {
    const Part& part = layers_[static_cast<size_t>(layer)].parts[p];
    s.part[p] = dst + part.offset(expert) % kAlign;  // where read_expert's aligned read puts the slice
    dst += part_capacity_[p];
  }
  s.key = layer * key_stride_ + expert;
  where_[s.key] = index;
  s.loaded = s.last_use = clock_;
  s.ticket = ++next_ticket_;
  s.reading = true;
  {
    const std::lock_guard lock(mutex_);
    const Read r{index, layer, expert, s.ticket};
    if (urgent)
      queue_.push_front(r);
    else
      queue_.push_back(r);
  }
  work_.notify_one();
  return s;
}

// Notes the reads that ended; a guess whose read failed is forgotten (asking for it reads again,
// and fails there, naming the file).
void ExpertPager::collect_finished() {
  const std::lock_guard lock(mutex_);
  for (size_t i = 0; i < slot_.size(); ++i) {
    Slot& s = slot_[i];
    if (!s.reading || done_slot_[i].ticket != s.ticket) continue;
    s.reading = false;
    if (!done_slot_[i].error.empty()) {
      where_.erase(s.key);
      s.key = -1;
    }
  }
}

void ExpertPager::wait_for(const std::vector<Slot*>& slots) {
  const Clock::time_point start = Clock::now();
  std::string error;
  {
    std::unique_lock lock(mutex_);
    // The reads this layer waits for go before the guesses still queued.
    std::stable_partition(queue_.begin(), queue_.end(), [&](const Read& r) {
      return std::any_of(slots.begin(), slots.end(), [&](const Slot* s) { return s->ticket == r.ticket; });
    });
    done_.wait(lock, [&] {
      return std::all_of(slots.begin(), slots.end(), [&](const Slot* s) {
        return done_slot_[static_cast<size_t>(s - slot_.data())].ticket == s->ticket;
      });
    });
    for (Slot* s : slots) {
      s->reading = false;
      const std::string& e = done_slot_[static_cast<size_t>(s - slot_.data())].error;
      if (e.empty()) continue;
      if (error.empty()) error = e;
      where_.erase(s->key);
      s->key = -1;
    }
  }
  stats_.wait_seconds += seconds_since(start);
  if (!error.empty()) ggl::fail("{}", error);
}

void ExpertPager::drop_unused_guesses(int layer, std::span<const int32_t> used) {
  const std::lock_guard lock(mutex_);
  std::erase_if(queue_, [&](const Read& r) {
    if (r.layer != layer || std::find(used.begin(), used.end(), r.expert) != used.end()) return false;
    Slot& s = slot_[static_cast<size_t>(r.slot)];
    where_.erase(s.key);
    s.key = -1;
    s.reading = false;
    return true;
  });
}

double ExpertPager::frequency(int64_t key) const {
  const int64_t age = stats_.steps - uses_step_[static_cast<size_t>(key)];
  return uses_[static_cast<size_t>(key)] * std::exp2(-static_cast<double>(age) / options_.half_life_steps);
}

void ExpertPager::count_use(int64_t key) {
  uses_[static_cast<size_t>(key)] = static_cast<float>(frequency(key) + 1.0);
  uses_step_[static_cast<size_t>(key)] = stats_.steps;
}

ExpertPager::Slot* ExpertPager::victim(int layer, bool ahead) {
  Slot* best = nullptr;
  double best_uses = 0;
  for (Slot& s : slot_) {
    if (s.reading) continue;
    if (s.key < 0) return &s;
    if (s.last_use == clock_) continue;  // the current node's, or claimed by this same call
    if (ahead && (s.last_use >= round_start_ || s.key / key_stride_ == layer)) continue;
    const double uses = options_.eviction == Eviction::kLeastFrequent ? frequency(s.key) : 0.0;
    if (!best || uses < best_uses || (uses == best_uses && s.last_use < best->last_use)) {
      best = &s;
      best_uses = uses;
    }
  }
  return best;
}

void ExpertPager::acquire(const ggl::Tensor& leaf, std::span<const int32_t> used, std::span<const uint8_t*> at) {
  const auto [layer, part] = leaves_.at(leaf.data);
  for (const int32_t e : used)
    if (!owns(layer, e)) ggl::fail("{}: layer {} asked for expert {}, which is not this rank's", path_, layer, e);
  ++clock_;
  // A layer's three nodes (in the graph's order) form a round; its first counts the hits. A round
  // at or before the last one's layer starts a step (a graph).
  if (layer != last_layer_ || part == round_part_) {
    if (layer <= last_layer_ || last_layer_ < 0) ++stats_.steps;
    round_start_ = clock_;
    round_part_ = part;
  }
  last_layer_ = layer;
  collect_finished();
  const bool counting = part == round_part_;
  if (counting) {
    std::vector<int32_t>& guess = guess_[static_cast<size_t>(layer)];
    if (!guess.empty()) {
      stats_.predicted += static_cast<int64_t>(used.size());
      for (const int32_t e : used) stats_.predicted_right += std::find(guess.begin(), guess.end(), e) != guess.end();
      guess.clear();
    }
    drop_unused_guesses(layer, used);
    for (const int32_t e : used) count_use(layer * key_stride_ + e);
  }
  std::vector<Slot*> pending;
  std::vector<int32_t> missing;
  for (const int32_t e : used) {
    const auto it = where_.find(layer * key_stride_ + e);
    if (it == where_.end()) {
      missing.push_back(e);
      continue;
    }
    Slot& s = slot_[static_cast<size_t>(it->second)];
    s.last_use = clock_;
    at[e] = s.part[part];
    if (counting && s.loaded < round_start_) ++stats_.hits;
    if (s.reading) pending.push_back(&s);
  }
  if (!missing.empty()) check_unchanged();
  for (const int32_t e : missing) {
    Slot* v = victim(layer, false);
    if (!v) {  // every slot holds an expert this node needs: the rest from the mapping
      at[e] = static_cast<const uint8_t*>(leaf.data) + static_cast<size_t>(e) * leaf.nb[2];
      ++stats_.mapped;
      continue;
    }
    pending.push_back(&queue_read(*v, layer, e, true));
    at[e] = v->part[part];
    ++stats_.misses;
  }
  if (!pending.empty()) wait_for(pending);
}

void ExpertPager::prefetch(const ggl::Tensor& leaf, std::span<const int32_t> likely) {
  const auto it = leaves_.find(leaf.data);
  if (!options_.prefetch || it == leaves_.end()) return;
  const int layer = it->second.first;
  try {
    std::vector<int32_t> guess(likely.begin(), likely.end());
    if (guess_for_testing_) guess = guess_for_testing_(layer, likely);
    guess_[static_cast<size_t>(layer)] = guess;
    ++clock_;
    collect_finished();
    check_unchanged();  // else the layer's acquire names the change
    for (const int32_t e : guess) {
      const int64_t n_expert = layers_[static_cast<size_t>(layer)].n_expert;
      if (e < 0 || e >= n_expert || !owns(layer, e)) continue;
      if (const auto found = where_.find(layer * key_stride_ + e); found != where_.end()) {
        slot_[static_cast<size_t>(found->second)].last_use = clock_;  // not a victim for the others
        continue;
      }
      Slot* v = victim(layer, true);
      if (!v) break;
      queue_read(*v, layer, e, false);
      ++stats_.prefetched;
    }
  } catch (const std::exception&) {
    // A hint that cannot be taken is no error: the layer's acquire reads what it needs, or fails.
  }
}

bool ExpertPager::owns(int layer, int64_t e) const {
  const auto l = static_cast<size_t>(layer);
  return options_.owned.empty() || (l < options_.owned.size() && options_.owned[l].holds(e, layers_[l].n_expert));
}

std::vector<std::pair<int, int64_t>> ExpertPager::owned_experts() const {
  std::vector<std::pair<int, int64_t>> owned;
  for (size_t l = 0; l < layers_.size(); ++l)
    for (int64_t e = 0; e < layers_[l].n_expert; ++e)
      if (owns(static_cast<int>(l), e)) owned.emplace_back(static_cast<int>(l), e);
  return owned;
}

bool ExpertPager::load_owned() {
  const std::vector<std::pair<int, int64_t>> owned = owned_experts();
  if (owned.size() > slot_.size()) return false;
  std::vector<Slot*> reading;
  for (size_t i = 0; i < owned.size(); ++i)
    if (!where_.count(owned[i].first * key_stride_ + owned[i].second))
      reading.push_back(&queue_read(slot_[i], owned[i].first, owned[i].second, false));
  wait_for(reading);
  preloaded_ = true;
  return true;
}

size_t ExpertPager::resident_bytes() const {
  return slot_.empty() ? 0 : resident_in_memory(buffer_.get(), slot_.size() * slot_bytes_);
}

ExpertPager::Stats ExpertPager::stats() const {
  Stats s = stats_;
  const std::lock_guard lock(mutex_);
  s.bytes_read = io_bytes_;
  s.read_seconds = io_seconds_;
  return s;
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

std::string ExpertPager::describe(const Stats& earlier, int64_t tokens) const {
  const Stats d = stats().since(earlier);
  std::string s = fmt::format(
      "expert cache ({} slots of {:.1f} MB): {} hits, {} misses, {} beyond the slots ({:.1f}% hits); {:.1f} MB read "
      "at {:.0f} MB/s, {:.2f} s waited",
      slots(), static_cast<double>(slot_bytes_) / 1e6, d.hits, d.misses, d.mapped, 100.0 * d.hit_rate(),
      static_cast<double>(d.bytes_read) / 1e6, d.read_mb_per_s(), d.wait_seconds);
  if (d.predicted > 0)
    s += fmt::format("; {} read ahead, guesses {:.1f}% right", d.prefetched, 100.0 * d.prefetch_accuracy());
  if (tokens > 0)
    s += fmt::format("; {:.1f} MB read per token",
                     static_cast<double>(d.bytes_read) / 1e6 / static_cast<double>(tokens));
  return s;
}

}  // namespace latte
