// A simulated device backend for tests without a GPU: it keeps its bytes apart from the CPU's (its
// own buffers, host bytes that the scheduler must treat as unreachable), reports device memory,
// moves bytes only through upload / download, runs a chosen subset of ops with the CPU's kernels,
// and fails the test when it is given a leaf outside its memory or an op it does not support (the
// checks a CUDA backend's memory would make by crashing). CheckedCpu is the reverse check.
#pragma once
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <utility>
#include <string_view>
#include <vector>

#include "ggml-like/cpu/cpu_backend.h"
#include "ggml-like/graph/graph.h"
#include "ggml-like/backend/backend.h"

namespace latte::testing {

// Leaves of a graph a backend is asked to run.
inline std::vector<const ggl::Tensor*> leaves_of(const ggl::Graph& g) {
  std::vector<const ggl::Tensor*> out;
  for (const ggl::Tensor& t : g.tensors())
    if (t.op == ggl::Op::kLeaf) out.push_back(&t);
  return out;
}

// Every op the graph has.
inline std::set<ggl::Op> all_ops() {
  std::set<ggl::Op> all;
  for (int op = static_cast<int>(ggl::Op::kGetRows); op <= static_cast<int>(ggl::Op::kFlashAttn); ++op)
    all.insert(static_cast<ggl::Op>(op));
  return all;
}

// A CPU that refuses graphs reading the device's memory.
class CheckedCpu final : public ggl::Backend {
 public:
  explicit CheckedCpu(const ggl::Backend* device) : device_(device) {}
  std::string_view name() const override { return "cpu"; }
  bool supports_op(const ggl::Tensor&) const override { return true; }
  void compute(ggl::Graph& g) override {
    for (const ggl::Tensor* l : leaves_of(g))
      if (device_ && device_->holds(l->data)) ADD_FAILURE() << "cpu given device memory: " << l->name;
    ++graphs;
    cpu_.compute(g);
  }
  int graphs = 0;

 private:
  const ggl::Backend* device_;
  ggl::CpuBackend cpu_{1};
};

class SimulatedDevice final : public ggl::Backend {
 public:
  explicit SimulatedDevice(std::set<ggl::Op> ops = all_ops(), int threads = 1) : ops_(std::move(ops)), cpu_(threads) {}
  std::string_view name() const override { return "sim-gpu"; }
  ggl::Memory memory() const override { return ggl::Memory::kDevice; }
  bool supports_op(const ggl::Tensor& n) const override { return ops_.count(n.op) > 0; }
  void upload(void* dst, const void* src, size_t n) override {
    EXPECT_TRUE(holds(dst)) << "upload outside device memory";
    uploaded += n;
    Backend::upload(dst, src, n);
  }
  void download(void* dst, const void* src, size_t n) const override {
    EXPECT_TRUE(holds(src) || in_results(src, n)) << "download from outside device memory";
    downloaded += n;
    Backend::download(dst, src, n);
  }
  void compute(ggl::Graph& g) override {
    for (const ggl::Tensor* l : leaves_of(g))
      if (!holds(l->data)) ADD_FAILURE() << "device given host memory: " << l->name;
    for (const ggl::Tensor* n : g.nodes()) {
      EXPECT_TRUE(supports_op(*n)) << ggl::op_name(n->op);
      ++ran[n->op];
    }
    ++graphs;
    cpu_.compute(g);
    // The results live in the CPU kernels' arena, which stands for this device's work memory.
    results_.clear();
    for (const ggl::Tensor* n : g.nodes()) results_.emplace_back(static_cast<const uint8_t*>(n->data), n->span_bytes());
  }
  // Moves a leaf's bytes into this device's memory (what loading a weight onto a GPU does).
  void take(ggl::Tensor* leaf) {
    auto& buf = buffers_.emplace_back(allocate(leaf->span_bytes()));
    upload(buf->base(), leaf->data, leaf->span_bytes());
    leaf->data = buf->base();
  }
  size_t uploaded = 0;
  mutable size_t downloaded = 0;
  int graphs = 0;
  std::map<ggl::Op, int> ran;  // nodes run, by op

 private:
  bool in_results(const void* p, size_t n) const {
    const auto* b = static_cast<const uint8_t*>(p);
    for (const auto& [at, size] : results_)
      if (b >= at && b + n <= at + size) return true;
    return false;
  }

  std::set<ggl::Op> ops_;
  ggl::CpuBackend cpu_;
  std::vector<std::pair<const uint8_t*, size_t>> results_;  // the last graph's results
  std::vector<std::unique_ptr<ggl::BackendBuffer>> buffers_;
};

}  // namespace latte::testing
