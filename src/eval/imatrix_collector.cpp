#include "src/eval/imatrix_collector.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ggml-like/core/error.h"
#include "ggml-like/graph/graph.h"

namespace latte::eval {
namespace {

// Smaller ordinary products are left out, as in the reference (its comment asks why; a decode
// step's few tokens would weigh as much per call as a prompt's).
constexpr int64_t kMinTokens = 16;

// A tensor's bytes as the backend holds them: enough to index it by its strides.
std::vector<uint8_t> read_bytes(ggl::Backend& backend, const ggl::Tensor& t) {
  std::vector<uint8_t> bytes(t.span_bytes());
  backend.read(t, bytes.data(), 0, bytes.size());
  return bytes;
}

const float* column(const std::vector<uint8_t>& bytes, const ggl::Tensor& t, int64_t i1, int64_t i2) {
  return reinterpret_cast<const float*>(bytes.data() + i1 * t.nb[1] + i2 * t.nb[2]);
}

void check_finite(float v, const std::string& name) {
  if (!std::isfinite(v)) ggl::fail("imatrix: a non-finite sum ({}) in {}", v, name);
}

}  // namespace

void ImatrixCollector::attach(SessionOptions& options) {
  options.on_graph_built = [this](ggl::Graph& g) { mark(g); };
  options.on_graph_run = [this](const ggl::Graph& g, ggl::Backend& backend) { collect(g, backend); };
}

bool ImatrixCollector::wanted(const ggl::Tensor& node) const {
  const ggl::Tensor* w = node.src[0];
  if (w->op != ggl::Op::kLeaf || node.src[1]->type != ggl::Type::F32) return false;
  if (node.op == ggl::Op::kMulMatId) return true;
  if (node.op != ggl::Op::kMulMat || w->ne[2] != 1 || w->ne[3] != 1) return false;
  if (node.src[1]->ne[2] != 1 || node.src[1]->ne[3] != 1) return false;
  return w->name.starts_with("blk.") || (process_output_ && w->name == "output.weight");
}

void ImatrixCollector::mark(ggl::Graph& g) const {
  for (ggl::Tensor* node : g.nodes()) {
    if (!wanted(*node)) continue;
    g.mark_output(node->src[1]);
    if (node->op == ggl::Op::kMulMatId) g.mark_output(node->src[2]);
  }
}

void ImatrixCollector::collect(const ggl::Graph& g, ggl::Backend& backend) {
  for (const ggl::Tensor* node : g.nodes()) {
    if (!wanted(*node)) continue;
    if (node->op == ggl::Op::kMulMatId)
      add_mul_mat_id(*node, backend);
    else
      add_mul_mat(*node, backend);
  }
}

ImatrixEntry& ImatrixCollector::entry(const std::string& name, int64_t n_cols, int64_t n_matrix) {
  ImatrixEntry& e = sums_.entries[name];
  const size_t n = static_cast<size_t>(n_cols * n_matrix);
  if (e.sums.empty()) {
    e.n_cols = n_cols;
    e.sums.assign(n, 0.0f);
    e.counts.assign(n, 0);
  } else if (e.sums.size() != n) {
    ggl::fail("imatrix: {} has {} values, this product gives {}", name, e.sums.size(), n);
  } else {
    e.n_cols = n_cols;  // an entry merged from a legacy file learns its matrices
  }
  ++e.ncall;
  return e;
}

void ImatrixCollector::add_mul_mat(const ggl::Tensor& node, ggl::Backend& backend) {
  const ggl::Tensor& x = *node.src[1];
  const int64_t cols = x.ne[1];
  const int64_t used = step_tokens_ > 0 && cols > step_tokens_ ? step_tokens_ : cols;
  if (used < kMinTokens) return;
  const std::vector<uint8_t> bytes = read_bytes(backend, x);
  const std::string& name = node.src[0]->name;
  ImatrixEntry& e = entry(name, x.ne[0], 1);
  for (int64_t t = cols - used; t < cols; ++t) {
    const float* v = column(bytes, x, t, 0);
    for (int64_t j = 0; j < x.ne[0]; ++j) {
      e.sums[j] += v[j] * v[j];
      ++e.counts[j];
      check_finite(e.sums[j], name);
    }
  }
}

// x [K, S, T] (S: 1, or one column per chosen expert), ids [k, T]: token t's slot i went through
// expert ids[i, t] with x's column i % S. Summed expert by expert, slot by slot, token by token.
void ImatrixCollector::add_mul_mat_id(const ggl::Tensor& node, ggl::Backend& backend) {
  const ggl::Tensor& x = *node.src[1];
  const ggl::Tensor& ids = *node.src[2];
  const int64_t K = x.ne[0], S = x.ne[1], T = x.ne[2], k = ids.ne[0], n_expert = node.src[0]->ne[2];
  const std::vector<uint8_t> bytes = read_bytes(backend, x);
  const std::vector<uint8_t> id_bytes = read_bytes(backend, ids);
  const std::string& name = node.src[0]->name;
  ImatrixEntry& e = entry(name, K, n_expert);
  for (int64_t ex = 0; ex < n_expert; ++ex) {
    float* sums = e.sums.data() + ex * K;
    int64_t* counts = e.counts.data() + ex * K;
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t t = 0; t < T; ++t) {
        const int32_t chosen = *reinterpret_cast<const int32_t*>(id_bytes.data() + t * ids.nb[1] + i * ids.nb[0]);
        if (chosen < 0 || chosen >= n_expert)
          ggl::fail("imatrix: {} routed to expert {} of {}", name, chosen, n_expert);
        if (chosen != ex) continue;
        const float* v = column(bytes, x, i % S, t);
        for (int64_t j = 0; j < K; ++j) {
          sums[j] += v[j] * v[j];
          ++counts[j];
          check_finite(sums[j], name);
        }
      }
    }
  }
}

NllSums collect_imatrix(Session& session, std::span<const int32_t> tokens, const ImatrixRun& run,
                        ImatrixCollector& collector) {
  NllSums nll;
  std::vector<float> logits;
  for (int64_t c = 0; c < run.n_chunk; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + c * run.n_ctx, tokens.begin() + (c + 1) * run.n_ctx);
    const int32_t first = chunk.front();
    if (run.bos >= 0) chunk.front() = run.bos;
    session.clear();
    logits.clear();
    for (int64_t at = 0; at < run.n_ctx; at += run.n_batch) {
      const int64_t n = std::min(run.n_batch, run.n_ctx - at);
      collector.set_step_tokens(n);
      const std::vector<float> part = session.eval(std::span(chunk).subspan(at, n), Logits::kAll);
      logits.insert(logits.end(), part.begin(), part.end());
    }
    chunk.front() = first;
    if (run.perplexity) score_chunk(logits, chunk, session.n_vocab(), nll);
    ++collector.sums().chunks;
    collector.sums().chunk_size = run.n_ctx;
    if (run.on_chunk) run.on_chunk(c + 1, nll);
  }
  return nll;
}

}  // namespace latte::eval
