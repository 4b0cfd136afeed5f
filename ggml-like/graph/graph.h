// A compute graph: tensors and the ops between them, described independently of any backend.
// Builder methods check shapes and types (throwing ggl::Error with the op and the shapes) and
// append computed tensors in creation order, which is the execution order: an op can only use
// tensors created before it, and an op that writes external memory (copy) runs before every op
// created after it. A Backend (backend.h) plans the memory and runs the nodes.
//
// Conventions (as in ggml): ne[0] is the fastest dimension; a matrix [K, N] has N rows of K
// elements; activations are f32 with ne[0] contiguous; "broadcast" means a size-1 (or dividing)
// dimension is repeated.
#pragma once
#include <array>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "ggml-like/core/rope_math.h"
#include "ggml-like/core/tensor.h"

namespace ggl {

// Rotary embedding parameters, with YaRN (ext_factor != 0) as in the YaRN paper: each rotated pair
// blends the interpolated angle (position * freq * freq_scale) and the original one by a linear
// ramp over the pair index between the dimensions whose wavelength corresponds to beta_fast and
// beta_slow rotations over n_ctx_orig positions; attn_factor scales cos/sin.
struct RopeParams {
  int n_rot = 0;      // leading elements of each row that are rotated (even)
  bool neox = false;  // pairs (i, i + n_rot/2) instead of adjacent pairs (2i, 2i+1)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;   // 1 / scaling factor
  float ext_factor = 0.0f;   // 0: plain (linear) scaling; 1: YaRN ramp
  float attn_factor = 1.0f;  // magnitude of the rotated values
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  int n_ctx_orig = 0;  // the original (training) context for the YaRN ramp
};

// How finely a backend may quantize a product's activations on its integer paths. kFine keeps them
// close to float32 (16-bit integers); kCoarse allows 8-bit integers (about twice the multiply-add
// rate) where the backend has such a path, for products whose caller measured the rounding to be
// tolerable. mul_mat_id products are always kCoarse.
enum class ActivationPrecision : int32_t { kFine = 0, kCoarse = 1 };

// The experts of a mul_mat_id's weights that this process computes (expert parallelism: other
// processes compute the rest): [first, end) (end < 0: through the last), or, with `owner`, any
// set: owner[e] is the process that computes expert e, and this one is `process`. The owner
// table must outlive the graphs that use it (a graph leaf points at it).
struct ExpertRange {
  int32_t first = 0;
  int32_t end = -1;
  const int32_t* owner = nullptr;  // [n_expert]
  int32_t process = 0;
  bool holds(int64_t e, int64_t n_expert) const {
    return owner ? owner[e] == process : e >= first && e < (end < 0 ? n_expert : end);
  }
  bool all(int64_t n_expert) const {
    if (!owner) return first == 0 && (end < 0 || end >= n_expert);
    for (int64_t e = 0; e < n_expert; ++e)
      if (owner[e] != process) return false;
    return true;
  }
  bool valid() const { return owner ? process >= 0 : first >= 0 && (end < 0 || end >= first); }
};

// The rows an expert_exchange completes: this process computed those of the experts `computed`
// of n_expert. `gathered`: the tokens are every process's own, gathered (token_gather), and each
// process gets back only the rows of its own tokens (data parallelism); else every process has
// every token and gets every row.
struct ExchangeRows {
  ExpertRange computed;
  int64_t n_expert = 0;
  bool gathered = false;
};

struct TopKParams {
  int k = 1;
  int n_groups = 1;       // > 1: group-limited selection (experts split into equal groups)
  int n_groups_used = 1;  // groups kept, ranked by the sum of each group's two largest values
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // ---- leaves ---------------------------------------------------------------------------
  // A tensor on external memory that outlives the graph (weights, caches). Packed strides.
  Tensor* external(Type type, std::span<const int64_t> ne, const void* data, std::string name);
  // A tensor whose bytes the graph owns (zero-initialised); fill it through data before running.
  Tensor* input(Type type, std::span<const int64_t> ne, std::string name);
  Tensor* input_i32(std::span<const int32_t> values, std::string name);

  // ---- views (no computation) -----------------------------------------------------------
  // A window onto a's bytes: shape ne, byte strides nb (nb[0] must be a's), starting at offset.
  Tensor* view(Tensor* a, std::array<int64_t, 4> ne, std::array<size_t, 4> nb, size_t offset, std::string name = {});
  // Same bytes, new shape (a must be contiguous).
  Tensor* reshape(Tensor* a, std::array<int64_t, 4> ne);
  // Dimension i of a becomes dimension axes[i] of the result.
  Tensor* permute(Tensor* a, int ax0, int ax1, int ax2, int ax3);

  // ---- ops -------------------------------------------------------------------------------
  // table [K, R, A2, A3] (any weight type), ids i32 [n, I1, I2] -> f32 [K, n, I1, I2];
  // A2 == I1 or 1, A3 == I2 or 1. Callers validate ids (an id outside the table yields zeros).
  Tensor* get_rows(Tensor* table, Tensor* ids);
  Tensor* rms_norm(Tensor* a, float eps);
  Tensor* add(Tensor* a, Tensor* b);
  Tensor* mul(Tensor* a, Tensor* b);
  Tensor* div(Tensor* a, Tensor* b);
  Tensor* scale(Tensor* a, float s);
  Tensor* sum_rows(Tensor* a);
  Tensor* softmax(Tensor* a);
  Tensor* sigmoid(Tensor* a);
  Tensor* silu(Tensor* a);
  Tensor* swiglu(Tensor* gate, Tensor* up);
  // w [K, N, W2, W3] (any weight type, packed rows), x f32 [K, M, X2, X3] -> f32 [N, M, B2, B3]
  // where B = max(W, X) per dimension and the smaller divides it (broadcast).
  Tensor* mul_mat(Tensor* w, Tensor* x, ActivationPrecision precision = ActivationPrecision::kFine);
  // w [N, K, W2, W3] used transposed, x f32 [K, M, X2, X3] -> f32 [N, M, B2, B3].
  Tensor* mul_mat_t(Tensor* w, Tensor* x);
  // w [K, N, E], x f32 [K, S, T] (S == 1 or k), ids i32 [k, T] -> f32 [N, k, T]:
  // out[:, i, t] = w[:, :, ids[i, t]] x[:, i % S, t], for the pairs whose expert lies in `only`;
  // the other rows are left unwritten (for an expert_exchange to fill).
  Tensor* mul_mat_id(Tensor* w, Tensor* x, Tensor* ids, ExpertRange only = {});
  // rows f32 [N, k, T], a mul_mat_id's result over ids i32 [k, T] whose rows for the experts
  // what.computed of what.n_expert this process computed -> f32 [N, k, T], every row (or, gathered,
  // every row of this process's tokens): the backend's ExpertExchange (backend/expert_exchange.h)
  // sends this process's rows to the other processes and receives theirs. With `sent`
  // (expert_send's result for the same rows), the rows left at that node and this one only
  // receives: the nodes between them compute while the rows travel.
  Tensor* expert_exchange(Tensor* rows, Tensor* ids, ExchangeRows what, Tensor* sent = nullptr);
  // The sending half of expert_exchange (same operands); its result (one i32) means nothing but
  // the order: give it to the expert_exchange that completes the rows.
  Tensor* expert_send(Tensor* rows, Tensor* ids, ExchangeRows what);
  // Data parallelism: every process's tokens, f32 [width, total], this process's `mine` f32
  // [width, n] at columns [first, first + n) and the others' received from them through the
  // backend's ExpertExchange (whose token_counts() gave the counts). mine may be null (n = 0: a
  // process without tokens of its own still serves its experts to the others).
  Tensor* token_gather(Tensor* mine, int64_t width, int64_t first, int64_t total);
  // a f32 [D, H, T], positions i32 [T], optional per-pair frequency divisors f32 [n_rot / 2].
  Tensor* rope(Tensor* a, Tensor* positions, const RopeParams& p, Tensor* freq_factors = nullptr);
  // a f32 [E, T] -> i32 [k, T], largest first (ties: lower index first).
  Tensor* top_k(Tensor* a, const TopKParams& p);
  // A hint, computing nothing: w's slices (w as mul_mat_id takes it) that ids i32 [k, T] name will
  // likely be used soon, so whoever pages w (backend/paged_weights.h) may read them ahead. Its
  // result (one i32) means nothing.
  Tensor* prefetch(Tensor* w, Tensor* ids);
  // Joins along dimension dim; other dimensions equal, or 1 in one operand (broadcast).
  Tensor* concat(Tensor* a, Tensor* b, int dim);
  // Packed f32 copy of any tensor with contiguous rows (f32, f16, bf16, quantized).
  Tensor* cont(Tensor* a);
  // Writes f32 src into dst (same shape, dst of any quantize_row type with contiguous rows:
  // typically a view of a cache). The result aliases dst.
  Tensor* copy(Tensor* src, Tensor* dst);
  // q f32 [Dk, H, T], k [Dk, Hkv, Nkv], v [Dv, Hkv, Nkv] (f32, f16, bf16 or q8_0, contiguous
  // rows, any strides), positions i32 [T]; key j is visible to query t when j <= positions[t].
  // H must be a multiple of Hkv (query head h reads kv head h / (H / Hkv)). -> f32 [Dv, H, T]
  Tensor* flash_attn(Tensor* q, Tensor* k, Tensor* v, Tensor* positions, float scale);

  // Keeps t's bytes alive until the whole graph has run.
  void mark_output(Tensor* t) { t->is_output = true; }

  // Batch-invariant graphs: every token's results come out of the same operations in the same
  // order whatever else the graph carries (other tokens, other sequences), however its products are
  // chunked and however many threads run it, so a sequence's logits are bit-identical alone or in
  // any batch (`--deterministic`). A backend honours it or declines the graph (cpu_backend.h).
  void set_batch_invariant(bool on) { batch_invariant_ = on; }
  bool batch_invariant() const { return batch_invariant_; }

  // ---- cutting a graph into parts (scheduler.h) ------------------------------------------
  // Whether t was made by input() / input_i32(): bytes the graph owns, which a part running on
  // another backend receives by copy (external leaves stay where their memory is).
  bool is_input(const Tensor& t) const;
  // A node like `node` of another graph (same op, shape, parameters) reading srcs, its sources
  // as they exist in this graph (for a copy, srcs[1] is the destination).
  Tensor* replicate(const Tensor& node, std::span<Tensor* const> srcs);

  // Every tensor in creation order (leaves, views, computed).
  const std::deque<Tensor>& tensors() const { return tensors_; }
  std::deque<Tensor>& tensors() { return tensors_; }
  // Computed tensors and copies, in execution order.
  const std::vector<Tensor*>& nodes() const { return nodes_; }

 private:
  Tensor* new_tensor(Type type, std::span<const int64_t> ne, std::string name);
  Tensor* new_node(Op op, Type type, std::array<int64_t, 4> ne, std::initializer_list<Tensor*> srcs);
  Tensor* unary(Op op, Tensor* a);
  Tensor* binary(Op op, Tensor* a, Tensor* b);
  // A mul_mat_id's or an exchange node's experts (params, and an owner table's leaf).
  void set_expert_range(Tensor& t, ExpertRange r, int64_t n_expert);
  void set_exchange_params(Tensor& t, const ExchangeRows& what);

  std::deque<Tensor> tensors_;
  std::vector<Tensor*> nodes_;
  std::deque<std::vector<uint8_t>> owned_;  // bytes of graph inputs
  std::vector<int> inputs_;                 // their indices
  bool batch_invariant_ = false;
};

// Parameters stored in a kRope / kTopK tensor.
RopeParams rope_params(const Tensor& t);
// A kRope tensor's parameters as the angle functions take them (core/rope_math.h).
RopeArgs rope_args(const Tensor& t);
TopKParams top_k_params(const Tensor& t);
// The activation precision a kMulMat / kMulMatId tensor allows.
ActivationPrecision activation_precision(const Tensor& product);
// The experts a kMulMatId tensor computes.
ExpertRange expert_range(const Tensor& t);
// What a kExpertSend / kExpertExchange tensor's rows are.
ExchangeRows exchange_rows(const Tensor& t);
// Where a kTokenGather tensor's own tokens start (their count: its source's, or 0 without one).
int64_t gather_first(const Tensor& t);

}  // namespace ggl
