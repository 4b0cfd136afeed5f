// Graph construction: shape inference and validation for every op.
#include "ggml-like/graph/graph.h"

#include <algorithm>
#include <cstring>

#include "ggml-like/core/error.h"
#include "ggml-like/quant/quant.h"

namespace ggl {
namespace {

Tensor* storage_base(Tensor* t) { return t->view_src ? t->view_src : t; }

void require(bool ok, Op op, std::string_view what, const Tensor& a) {
  if (!ok)
    fail("{}: {} ({} {} {})", op_name(op), what, a.name.empty() ? "tensor" : a.name, type_name(a.type),
         shape_string(a));
}

void require_f32_rows(Op op, const Tensor& a) {
  require(a.type == Type::F32, op, "expects f32", a);
  require(a.rows_contiguous(), op, "expects contiguous rows", a);
  for (int d = 1; d < kMaxDims; ++d) require(a.nb[d] % sizeof(float) == 0, op, "expects float-aligned strides", a);
}

void require_rows(Op op, const Tensor& w) {
  require(w.rows_contiguous(), op, "expects contiguous rows", w);
  require(w.ne[0] % traits(w.type).block_size == 0, op, "row length is not a multiple of the block size", w);
}

void require_i32(Op op, const Tensor& a) { require(a.type == Type::I32, op, "expects i32 ids", a); }

void require_weight(Op op, const Tensor& w) {
  require(is_weight_type(w.type), op, "unsupported element type", w);
  require_rows(op, w);
}

// Size of a broadcast dimension: the larger one, which the smaller must divide.
int64_t broadcast_dim(Op op, const Tensor& a, const Tensor& b, int d) {
  const int64_t hi = std::max(a.ne[d], b.ne[d]);
  if (hi % a.ne[d] != 0 || hi % b.ne[d] != 0)
    fail("{}: cannot broadcast {} and {} in dimension {}", op_name(op), shape_string(a), shape_string(b), d);
  return hi;
}

}  // namespace

Tensor* Graph::new_tensor(Type type, std::span<const int64_t> ne, std::string name) {
  if (ne.empty() || ne.size() > static_cast<size_t>(kMaxDims))
    fail("graph: tensor '{}' has {} dimensions", name, ne.size());
  Tensor& t = tensors_.emplace_back();
  t.type = type;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 0) fail("graph: tensor '{}' has a negative dimension", name);
    t.ne[d] = ne[d];
  }
  packed_strides(type, t.ne, t.nb);
  t.index = static_cast<int>(tensors_.size()) - 1;
  t.name = std::move(name);
  return &t;
}

Tensor* Graph::new_node(Op op, Type type, std::array<int64_t, 4> ne, std::initializer_list<Tensor*> srcs) {
  Tensor* t = new_tensor(type, ne, {});
  t->op = op;
  int i = 0;
  for (Tensor* s : srcs) t->src[i++] = s;
  nodes_.push_back(t);
  return t;
}

Tensor* Graph::external(Type type, std::span<const int64_t> ne, const void* data, std::string name) {
  Tensor* t = new_tensor(type, ne, std::move(name));
  t->data = const_cast<void*>(data);
  return t;
}

Tensor* Graph::input(Type type, std::span<const int64_t> ne, std::string name) {
  Tensor* t = new_tensor(type, ne, std::move(name));
  auto& bytes = owned_.emplace_back(t->span_bytes() + 64, 0);
  t->data = bytes.data();
  inputs_.push_back(t->index);
  return t;
}

bool Graph::is_input(const Tensor& t) const {
  return std::find(inputs_.begin(), inputs_.end(), t.index) != inputs_.end() && &tensors_[t.index] == &t;
}

Tensor* Graph::replicate(const Tensor& node, std::span<Tensor* const> srcs) {
  if (!node.is_computed() && node.op != Op::kCopy) fail("graph: '{}' is not a node to replicate", node.name);
  if (node.op == Op::kCopy) return copy(srcs[0], srcs[1]);
  Tensor* t = new_tensor(node.type, std::span<const int64_t>(node.ne, kMaxDims), node.name);
  t->op = node.op;
  for (size_t i = 0; i < srcs.size() && i < static_cast<size_t>(kMaxSrc); ++i) t->src[i] = srcs[i];
  std::copy(std::begin(node.params), std::end(node.params), std::begin(t->params));
  nodes_.push_back(t);
  return t;
}

Tensor* Graph::input_i32(std::span<const int32_t> values, std::string name) {
  const int64_t n = static_cast<int64_t>(values.size());
  Tensor* t = input(Type::I32, std::span<const int64_t>(&n, 1), std::move(name));
  if (!values.empty()) std::memcpy(t->data, values.data(), values.size_bytes());
  return t;
}

Tensor* Graph::view(Tensor* a, std::array<int64_t, 4> ne, std::array<size_t, 4> nb, size_t offset, std::string name) {
  Tensor* t = new_tensor(a->type, ne, name.empty() ? a->name : std::move(name));
  t->op = Op::kView;
  for (int d = 0; d < kMaxDims; ++d) t->nb[d] = nb[d];
  if (nb[0] != a->nb[0]) fail("view of '{}': element stride {} differs from {}", a->name, nb[0], a->nb[0]);
  t->view_src = storage_base(a);
  t->view_offset = (a->view_src ? a->view_offset : 0) + offset;
  t->src[0] = a;
  const Tensor* base = t->view_src;
  if (base->op == Op::kLeaf && base->data != nullptr) {
    t->data = base->bytes() + t->view_offset;
    // Views of leaves can be bounds-checked now; computed bases are checked by the planner's sizes.
    if (t->view_offset + t->span_bytes() > base->view_offset + base->span_bytes() && base->span_bytes() > 0)
      fail("view of '{}': {} at offset {} exceeds its {} bytes", a->name, shape_string(*t), t->view_offset,
           base->span_bytes());
  }
  return t;
}

Tensor* Graph::reshape(Tensor* a, std::array<int64_t, 4> ne) {
  if (!a->is_contiguous()) fail("reshape of '{}': not contiguous", a->name);
  if (ne[0] * ne[1] * ne[2] * ne[3] != a->n_elements())
    fail("reshape of '{}' {}: element count differs", a->name, shape_string(*a));
  int64_t tmp[kMaxDims] = {ne[0], ne[1], ne[2], ne[3]};
  size_t nb[kMaxDims];
  packed_strides(a->type, tmp, nb);
  return view(a, ne, {nb[0], nb[1], nb[2], nb[3]}, 0);
}

Tensor* Graph::permute(Tensor* a, int ax0, int ax1, int ax2, int ax3) {
  const int axes[kMaxDims] = {ax0, ax1, ax2, ax3};
  bool seen[kMaxDims] = {};
  for (int ax : axes) {
    if (ax < 0 || ax >= kMaxDims || seen[ax]) fail("permute of '{}': axes are not a permutation", a->name);
    seen[ax] = true;
  }
  if (axes[0] != 0) fail("permute of '{}': dimension 0 must stay first (rows stay contiguous)", a->name);
  std::array<int64_t, 4> ne{};
  std::array<size_t, 4> nb{};
  for (int d = 0; d < kMaxDims; ++d) {
    ne[axes[d]] = a->ne[d];
    nb[axes[d]] = a->nb[d];
  }
  return view(a, ne, nb, 0);
}

Tensor* Graph::get_rows(Tensor* table, Tensor* ids) {
  require_weight(Op::kGetRows, *table);
  require_i32(Op::kGetRows, *ids);
  require(ids->rows_contiguous(), Op::kGetRows, "expects contiguous ids", *ids);
  require(table->ne[2] == ids->ne[1] || table->ne[2] == 1, Op::kGetRows, "table batch does not match ids", *table);
  require(table->ne[3] == ids->ne[2] || table->ne[3] == 1, Op::kGetRows, "table batch does not match ids", *table);
  return new_node(Op::kGetRows, Type::F32, {table->ne[0], ids->ne[0], ids->ne[1], ids->ne[2]}, {table, ids});
}

Tensor* Graph::unary(Op op, Tensor* a) {
  require_f32_rows(op, *a);
  return new_node(op, Type::F32, {a->ne[0], a->ne[1], a->ne[2], a->ne[3]}, {a});
}

Tensor* Graph::binary(Op op, Tensor* a, Tensor* b) {
  require_f32_rows(op, *a);
  require_f32_rows(op, *b);
  for (int d = 0; d < kMaxDims; ++d)
    if (a->ne[d] % b->ne[d] != 0)
      fail("{}: {} does not broadcast into {}", op_name(op), shape_string(*b), shape_string(*a));
  return new_node(op, Type::F32, {a->ne[0], a->ne[1], a->ne[2], a->ne[3]}, {a, b});
}

Tensor* Graph::rms_norm(Tensor* a, float eps) {
  Tensor* t = unary(Op::kRmsNorm, a);
  t->params[0].f = eps;
  return t;
}
Tensor* Graph::add(Tensor* a, Tensor* b) { return binary(Op::kAdd, a, b); }
Tensor* Graph::mul(Tensor* a, Tensor* b) { return binary(Op::kMul, a, b); }
Tensor* Graph::div(Tensor* a, Tensor* b) { return binary(Op::kDiv, a, b); }
Tensor* Graph::scale(Tensor* a, float s) {
  Tensor* t = unary(Op::kScale, a);
  t->params[0].f = s;
  return t;
}
Tensor* Graph::sum_rows(Tensor* a) {
  require_f32_rows(Op::kSumRows, *a);
  return new_node(Op::kSumRows, Type::F32, {1, a->ne[1], a->ne[2], a->ne[3]}, {a});
}
Tensor* Graph::softmax(Tensor* a) { return unary(Op::kSoftmax, a); }
Tensor* Graph::sigmoid(Tensor* a) { return unary(Op::kSigmoid, a); }
Tensor* Graph::silu(Tensor* a) { return unary(Op::kSilu, a); }
Tensor* Graph::swiglu(Tensor* gate, Tensor* up) {
  require_f32_rows(Op::kSwiglu, *gate);
  require_f32_rows(Op::kSwiglu, *up);
  for (int d = 0; d < kMaxDims; ++d)
    if (gate->ne[d] != up->ne[d]) fail("swiglu: shapes {} and {} differ", shape_string(*gate), shape_string(*up));
  return new_node(Op::kSwiglu, Type::F32, {gate->ne[0], gate->ne[1], gate->ne[2], gate->ne[3]}, {gate, up});
}

Tensor* Graph::mul_mat(Tensor* w, Tensor* x, ActivationPrecision precision) {
  require_weight(Op::kMulMat, *w);
  require(w->nb[1] == row_bytes(w->type, w->ne[0]), Op::kMulMat, "expects packed weight rows", *w);
  require_f32_rows(Op::kMulMat, *x);
  if (w->ne[0] != x->ne[0])
    fail("mul_mat: {} ({}) times {} ({}): inner dimensions differ", w->name, shape_string(*w), x->name,
         shape_string(*x));
  Tensor* t = new_node(
      Op::kMulMat, Type::F32,
      {w->ne[1], x->ne[1], broadcast_dim(Op::kMulMat, *w, *x, 2), broadcast_dim(Op::kMulMat, *w, *x, 3)}, {w, x});
  t->params[0].i = static_cast<int32_t>(precision);
  return t;
}

Tensor* Graph::mul_mat_t(Tensor* w, Tensor* x) {
  require_weight(Op::kMulMatT, *w);
  require_f32_rows(Op::kMulMatT, *x);
  if (w->ne[1] != x->ne[0])
    fail("mul_mat_t: {} ({}) transposed times {} ({}): inner dimensions differ", w->name, shape_string(*w), x->name,
         shape_string(*x));
  return new_node(Op::kMulMatT, Type::F32,
                  {w->ne[0], x->ne[1], broadcast_dim(Op::kMulMatT, *w, *x, 2), broadcast_dim(Op::kMulMatT, *w, *x, 3)},
                  {w, x});
}

Tensor* Graph::mul_mat_id(Tensor* w, Tensor* x, Tensor* ids, ExpertRange only) {
  require_weight(Op::kMulMatId, *w);
  require(w->nb[1] == row_bytes(w->type, w->ne[0]), Op::kMulMatId, "expects packed weight rows", *w);
  require(w->ne[3] == 1, Op::kMulMatId, "expects [K, N, experts]", *w);
  require_f32_rows(Op::kMulMatId, *x);
  require_i32(Op::kMulMatId, *ids);
  require(ids->rows_contiguous(), Op::kMulMatId, "expects contiguous ids", *ids);
  if (w->ne[0] != x->ne[0])
    fail("mul_mat_id: {} times {}: inner dimensions differ", shape_string(*w), shape_string(*x));
  if (x->ne[1] != 1 && x->ne[1] != ids->ne[0])
    fail("mul_mat_id: activations {} do not match ids {}", shape_string(*x), shape_string(*ids));
  if (x->ne[2] != ids->ne[1])
    fail("mul_mat_id: activations {} and ids {} differ in tokens", shape_string(*x), shape_string(*ids));
  if (!only.valid()) fail("mul_mat_id: experts [{}, {}) are not a range", only.first, only.end);
  Tensor* t = new_node(Op::kMulMatId, Type::F32, {w->ne[1], ids->ne[0], ids->ne[1], 1}, {w, x, ids});
  set_expert_range(*t, only, w->ne[2]);
  return t;
}

void Graph::set_expert_range(Tensor& t, ExpertRange r, int64_t n_expert) {
  t.params[1].i = r.first;
  t.params[2].i = r.end;
  t.params[5].i = r.process;
  // A set: its owner table as a leaf of the node (src[3], free in the nodes that take a range).
  if (r.owner) t.src[3] = external(Type::I32, std::vector<int64_t>{n_expert}, r.owner, "expert_owners");
}

namespace {
void check_exchange(Op op, const Tensor& rows, const Tensor& ids, const ExchangeRows& what) {
  require_f32_rows(op, rows);
  require(rows.is_contiguous(), op, "expects packed rows", rows);
  require_i32(op, ids);
  require(ids.rows_contiguous(), op, "expects contiguous ids", ids);
  if (rows.ne[1] != ids.ne[0] || rows.ne[2] != ids.ne[1] || rows.ne[3] != 1)
    fail("{}: rows {} do not match ids {}", op_name(op), shape_string(rows), shape_string(ids));
  if (what.n_expert <= 0 || !what.computed.valid())
    fail("{}: experts [{}, {}) of {} are not a range", op_name(op), what.computed.first, what.computed.end,
         what.n_expert);
}
}  // namespace

void Graph::set_exchange_params(Tensor& t, const ExchangeRows& what) {
  set_expert_range(t, what.computed, what.n_expert);
  t.params[3].i = static_cast<int32_t>(what.n_expert);
  t.params[4].i = what.gathered;
}

Tensor* Graph::expert_exchange(Tensor* rows, Tensor* ids, ExchangeRows what, Tensor* sent) {
  check_exchange(Op::kExpertExchange, *rows, *ids, what);
  if (sent && (sent->op != Op::kExpertSend || sent->src[0] != rows || sent->src[1] != ids ||
               exchange_rows(*sent).gathered != what.gathered))
    fail("expert_exchange: {} is not the expert_send of these rows", sent->name);
  Tensor* t = new_node(Op::kExpertExchange, Type::F32, {rows->ne[0], rows->ne[1], rows->ne[2], 1}, {rows, ids, sent});
  set_exchange_params(*t, what);
  return t;
}

Tensor* Graph::expert_send(Tensor* rows, Tensor* ids, ExchangeRows what) {
  check_exchange(Op::kExpertSend, *rows, *ids, what);
  Tensor* t = new_node(Op::kExpertSend, Type::I32, {1, 1, 1, 1}, {rows, ids});
  set_exchange_params(*t, what);
  return t;
}

Tensor* Graph::token_gather(Tensor* mine, int64_t width, int64_t first, int64_t total) {
  const int64_t n = mine ? mine->ne[1] : 0;
  if (mine) {
    require_f32_rows(Op::kTokenGather, *mine);
    require(mine->is_contiguous() && mine->ne[0] == width && mine->ne[2] == 1 && mine->ne[3] == 1, Op::kTokenGather,
            "expects packed rows of the width gathered", *mine);
  }
  if (width <= 0 || first < 0 || first + n > total || total <= 0)
    fail("token_gather: {} tokens at {} of {} are not a part of them", n, first, total);
  Tensor* t = new_node(Op::kTokenGather, Type::F32, {width, total, 1, 1}, {mine});
  t->params[0].i = static_cast<int32_t>(first);
  return t;
}

Tensor* Graph::prefetch(Tensor* w, Tensor* ids) {
  require_weight(Op::kPrefetch, *w);
  require_i32(Op::kPrefetch, *ids);
  require(ids->rows_contiguous(), Op::kPrefetch, "expects contiguous ids", *ids);
  return new_node(Op::kPrefetch, Type::I32, {1, 1, 1, 1}, {w, ids});
}

Tensor* Graph::rope(Tensor* a, Tensor* positions, const RopeParams& p, Tensor* freq_factors) {
  require_f32_rows(Op::kRope, *a);
  require_i32(Op::kRope, *positions);
  require(positions->ne[0] == a->ne[2], Op::kRope, "expects one position per token (dimension 2)", *positions);
  if (p.n_rot <= 0 || p.n_rot % 2 != 0 || p.n_rot > a->ne[0])
    fail("rope: n_rot {} is not an even count within the row length {}", p.n_rot, a->ne[0]);
  if (freq_factors) {
    require_f32_rows(Op::kRope, *freq_factors);
    require(freq_factors->ne[0] >= p.n_rot / 2, Op::kRope, "needs one frequency factor per rotated pair",
            *freq_factors);
  }
  Tensor* t = new_node(Op::kRope, Type::F32, {a->ne[0], a->ne[1], a->ne[2], a->ne[3]}, {a, positions, freq_factors});
  t->params[0].i = p.n_rot;
  t->params[1].i = p.neox ? 1 : 0;
  t->params[2].f = p.freq_base;
  t->params[3].f = p.freq_scale;
  t->params[4].f = p.ext_factor;
  t->params[5].f = p.attn_factor;
  t->params[6].f = p.beta_fast;
  t->params[7].f = p.beta_slow;
  t->params[8].i = p.n_ctx_orig;
  return t;
}

RopeParams rope_params(const Tensor& t) {
  RopeParams p;
  p.n_rot = t.params[0].i;
  p.neox = t.params[1].i != 0;
  p.freq_base = t.params[2].f;
  p.freq_scale = t.params[3].f;
  p.ext_factor = t.params[4].f;
  p.attn_factor = t.params[5].f;
  p.beta_fast = t.params[6].f;
  p.beta_slow = t.params[7].f;
  p.n_ctx_orig = t.params[8].i;
  return p;
}

RopeArgs rope_args(const Tensor& t) {
  const RopeParams p = rope_params(t);
  RopeArgs r{p.n_rot, p.neox ? 1 : 0, p.freq_base, p.freq_scale, p.ext_factor, p.attn_factor, 0.0f, 0.0f};
  rope_ramp(r, p.n_ctx_orig, p.beta_fast, p.beta_slow);
  return r;
}

Tensor* Graph::top_k(Tensor* a, const TopKParams& p) {
  require_f32_rows(Op::kTopK, *a);
  const int64_t n = a->ne[0];
  if (p.n_groups < 1 || n % p.n_groups != 0 || p.n_groups_used < 1 || p.n_groups_used > p.n_groups)
    fail("top_k: {} values cannot be split into {} groups keeping {}", n, p.n_groups, p.n_groups_used);
  if (p.k < 1 || p.k > n / p.n_groups * p.n_groups_used)
    fail("top_k: k = {} out of range for {} candidates", p.k, n / p.n_groups * p.n_groups_used);
  Tensor* t = new_node(Op::kTopK, Type::I32, {p.k, a->ne[1], a->ne[2], a->ne[3]}, {a});
  t->params[0].i = p.k;
  t->params[1].i = p.n_groups;
  t->params[2].i = p.n_groups_used;
  return t;
}

TopKParams top_k_params(const Tensor& t) { return {t.params[0].i, t.params[1].i, t.params[2].i}; }

ActivationPrecision activation_precision(const Tensor& product) {
  return product.op == Op::kMulMatId ? ActivationPrecision::kCoarse
                                     : static_cast<ActivationPrecision>(product.params[0].i);
}

ExpertRange expert_range(const Tensor& t) {
  return {.first = t.params[1].i,
          .end = t.params[2].i,
          .owner = t.src[3] ? static_cast<const int32_t*>(t.src[3]->data) : nullptr,
          .process = t.params[5].i};
}

ExchangeRows exchange_rows(const Tensor& t) {
  return {.computed = expert_range(t), .n_expert = t.params[3].i, .gathered = t.params[4].i != 0};
}

int64_t gather_first(const Tensor& t) { return t.params[0].i; }

Tensor* Graph::concat(Tensor* a, Tensor* b, int dim) {
  require_f32_rows(Op::kConcat, *a);
  require_f32_rows(Op::kConcat, *b);
  if (dim < 0 || dim >= kMaxDims) fail("concat: bad dimension {}", dim);
  std::array<int64_t, 4> ne{};
  for (int d = 0; d < kMaxDims; ++d) {
    if (d == dim) {
      ne[d] = a->ne[d] + b->ne[d];
    } else if (d == 0 && a->ne[0] != b->ne[0]) {
      fail("concat: {} and {} differ in row length", shape_string(*a), shape_string(*b));
    } else if (a->ne[d] == b->ne[d] || a->ne[d] == 1 || b->ne[d] == 1) {
      ne[d] = std::max(a->ne[d], b->ne[d]);
    } else {
      fail("concat: {} and {} differ in dimension {}", shape_string(*a), shape_string(*b), d);
    }
  }
  Tensor* t = new_node(Op::kConcat, Type::F32, ne, {a, b});
  t->params[0].i = dim;
  return t;
}

Tensor* Graph::cont(Tensor* a) {
  require_weight(Op::kCont, *a);
  return new_node(Op::kCont, Type::F32, {a->ne[0], a->ne[1], a->ne[2], a->ne[3]}, {a});
}

Tensor* Graph::copy(Tensor* src, Tensor* dst) {
  require_f32_rows(Op::kCopy, *src);
  require_weight(Op::kCopy, *dst);
  for (int d = 0; d < kMaxDims; ++d)
    if (src->ne[d] != dst->ne[d]) fail("copy: shapes {} and {} differ", shape_string(*src), shape_string(*dst));
  Tensor* t = new_node(Op::kCopy, dst->type, {dst->ne[0], dst->ne[1], dst->ne[2], dst->ne[3]}, {src, dst});
  for (int d = 0; d < kMaxDims; ++d) t->nb[d] = dst->nb[d];
  t->view_src = storage_base(dst);
  t->view_offset = dst->view_src ? dst->view_offset : 0;
  t->data = dst->data;
  t->name = dst->name;
  return t;
}

Tensor* Graph::flash_attn(Tensor* q, Tensor* k, Tensor* v, Tensor* positions, float scale) {
  require_f32_rows(Op::kFlashAttn, *q);
  require_weight(Op::kFlashAttn, *k);
  require_weight(Op::kFlashAttn, *v);
  require_i32(Op::kFlashAttn, *positions);
  if (q->ne[0] != k->ne[0] || k->ne[1] != v->ne[1] || k->ne[2] != v->ne[2] || k->ne[1] == 0 ||
      q->ne[1] % k->ne[1] != 0 || positions->ne[0] != q->ne[2] || q->ne[3] != 1 || k->ne[3] != 1 || v->ne[3] != 1)
    fail("flash_attn: incompatible shapes q {}, k {}, v {}, positions {}", shape_string(*q), shape_string(*k),
         shape_string(*v), shape_string(*positions));
  Tensor* t = new_node(Op::kFlashAttn, Type::F32, {v->ne[0], q->ne[1], q->ne[2], 1}, {q, k, v, positions});
  t->params[0].f = scale;
  return t;
}

}  // namespace ggl
