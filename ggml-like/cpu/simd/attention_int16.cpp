// Attention on 16-bit integers, for the two shapes in which many queries share every key row read:
//   MHA prefill (one query head per KV head: MLA's naive form, Llama MHA) with float32 K and V: a
//     pass serves consecutive tokens of one head, one per lane (32 with AVX-512, 16 with AVX2), each
//     masked causally. A head's K and V are read by all its passes, so they are converted once per
//     op into the shared work area.
//   grouped heads (MLA's absorbed attention: 16 to 128 heads on one latent cache; GQA groups as
//     large) with K and V of a cache type: a pass serves up to 32 (AVX-512) heads of one token, one
//     per lane. Each key row is read by one pass, so it is converted block by block inside the pass
//     (the block stays in L1/L2 instead of a cache-sized copy going out to memory and back); a
//     decode step with fewer passes than threads splits the keys and merges the partial states.
//     The conversion is paid per pass, so a set takes this from a number of heads on that its
//     measurements chose (kGroupedInt16MinHeads in its attention_lanes.h; the AVX2 sets never:
//     without VNNI the integer product step saves no instructions).
// Both products run on pairs of 16-bit integers (VPDPWSSD, or VPMADDWD + VPADDD without VNNI),
// twice the multiply-adds per instruction of a float32 FMA, with an online softmax over blocks of
// 32 keys:
//   scores: the queries (times the softmax scale) and the K rows are rounded to 14-bit integers
//           per block of 32 elements with a float scale each; a block's 32 products fit an int32
//           (32 * 8191^2 < 2^31) and are scaled into the float score once per block;
//   values: each V row is rounded to 14 bits with one scale, which folds into the probabilities:
//           p * scale of a block of keys is rounded to 14 bits per lane, so each output element
//           of a block is one integer sum scaled once. V is interleaved by pairs of keys (the pair
//           one product step multiplies).
// The rounding is ~6e-5 of each block's largest value, finer than fp16's 2^-11 per element. Only
// the integer steps are per instruction set (the kernel set's attention_lanes.h under cpu/arch/,
// GGL_ATTN_INT16 where it has them); the float side is xsimd.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "ggml-like/core/fp16.h"
#include "ggml-like/cpu/arch/avx512_undefined.h"
#include "ggml-like/cpu/int_gemm.h"
#include "ggml-like/cpu/simd/attention_merge.h"
#include "ggml-like/cpu/simd/attention_wide.h"
#include "ggml-like/quant/legacy.h"

#include "ggml-like/cpu/simd/set_declarations.h"

namespace ggl::GGL_ISA {

#if defined(GGL_ATTN_INT16)
namespace {

using attention_wide::kLanes;
using attention_wide::Vec;
// The set's steps (attention_lanes.h): add_pair_products, store_int16, interleave_pairs,
// largest_lane; the rest on xsimd's integer vector of the same lanes.
using attention_lanes::add_pair_products;
using attention_lanes::interleave_pairs;
using attention_lanes::IVec;
using attention_lanes::kInterleave;
using attention_lanes::largest_lane;
using attention_lanes::store_int16;
inline IVec int_zero() { return IVec(0); }
inline IVec load_int(const int32_t* p) { return IVec::load_aligned(p); }
inline void store_int(int32_t* p, IVec v) { v.store_aligned(p); }
GGL_AVX512_UNDEFINED_BEGIN
inline Vec to_float(IVec v) { return xsimd::to_float(v); }
inline IVec round_to_int(Vec v) { return xsimd::nearbyint_as_int(v); }
// The pair (a, b) of 32-bit lanes' low halves: a in the low 16 bits, b in the high.
inline IVec pack_pair(IVec a, IVec b) { return (a & IVec(0xFFFF)) | (b << 16); }
GGL_AVX512_UNDEFINED_END
inline IVec broadcast_pair(const int16_t* p) {
  int32_t pair;
  std::memcpy(&pair, p, sizeof pair);
  return IVec(pair);
}
constexpr int kVecs = 2;                    // lane vectors per pass
constexpr int64_t kWidth = kVecs * kLanes;  // queries per pass
constexpr int64_t kBlock = 32;              // elements per scale block, and keys per key block
constexpr float kLevels = 8191.0f;          // 14-bit values: 32 products of two fit an int32
// Keys whose scores, and output elements whose sums, accumulate together: times the lane vectors,
// 8 integer accumulators, which with the lane vectors and a broadcast fit AVX2's 16 registers.
constexpr int kKeyGroup = 4;
constexpr int kValueGroup = 4;
constexpr int64_t kMinTokens = 4;   // MHA batches with fewer tokens take the float kernels
constexpr int64_t kMaxHead = 1024;  // head sizes beyond this take the float kernels

// Calls f(std::integral_constant<int, i>) for i in [0, N): the indices are constants before the
// compiler's scalar replacement runs, so arrays of accumulators indexed by them stay in registers
// (with loop indices, unrolled later, GCC keeps such an array in memory around the asm steps).
template <int N, class F>
inline void each(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (f(std::integral_constant<int, I>{}), ...); }
  (std::make_integer_sequence<int, N>{});
}

struct Dims {
  int64_t Dk, Dv, H, Hkv, G, T, N, pairs;  // pairs: key pairs, (N + 1) / 2
};

Dims dims_of(const Tensor& dst) {
  const Tensor& q = *dst.src[0];
  const Tensor& k = *dst.src[1];
  return {q.ne[0], dst.src[2]->ne[0], q.ne[1], k.ne[1], q.ne[1] / k.ne[1], q.ne[2], k.ne[2], (k.ne[2] + 1) / 2};
}

constexpr size_t align64(size_t b) { return (b + 63) / 64 * 64; }

int64_t visible_keys(const Tensor& dst, const Dims& d, int64_t t) {
  const int32_t pos = reinterpret_cast<const int32_t*>(dst.src[3]->data)[t];
  return std::clamp<int64_t>(static_cast<int64_t>(pos) + 1, 0, d.N);
}

// K and V of a run of keys as 16-bit integers, the run's first key (an even one) at index 0.
struct KvInt16 {
  int16_t* kq;  // [keys][Dk], rounded per block of 32
  float* ks;    // [keys][Dk / 32] steps
  int16_t* vq;  // [key pairs][Dv][2]: element e of keys 2i and 2i + 1 side by side
  float* vs;    // [keys] steps, one per V row

  // The same arrays from key pair i on.
  KvInt16 from_pair(const Dims& d, int64_t i) const {
    return {kq + 2 * i * d.Dk, ks + 2 * i * (d.Dk / kBlock), vq + i * d.Dv * 2, vs + 2 * i};
  }
  static size_t bytes(const Dims& d, int64_t pairs) {
    return align64(2 * pairs * d.Dk * sizeof(int16_t)) + align64(2 * pairs * (d.Dk / kBlock) * sizeof(float)) +
           align64(pairs * d.Dv * 2 * sizeof(int16_t)) + align64(2 * pairs * sizeof(float));
  }
  static KvInt16 at(uint8_t* p, const Dims& d, int64_t pairs) {
    KvInt16 kv;
    kv.kq = reinterpret_cast<int16_t*>(p);
    p += align64(2 * pairs * d.Dk * sizeof(int16_t));
    kv.ks = reinterpret_cast<float*>(p);
    p += align64(2 * pairs * (d.Dk / kBlock) * sizeof(float));
    kv.vq = reinterpret_cast<int16_t*>(p);
    p += align64(pairs * d.Dv * 2 * sizeof(int16_t));
    kv.vs = reinterpret_cast<float*>(p);
    return kv;
  }
};

// A pass's per-thread buffers: the queries rounded per block and transposed, [Dk / 2][kWidth] int16
// pairs, with their steps [Dk / 32][kWidth]; the accumulators [Dv][kWidth]; a key block's scores [kBlock][kWidth]
// and its rounded probabilities [kBlock / 2][kWidth] int16 pairs (kWidth: the pass's lanes).
struct PassBuffers {
  int32_t* qt;
  float* qs;
  float* acc;
  float* sc;
  int32_t* pp;

  static size_t bytes(const Dims& d) {
    return align64(d.Dk / 2 * kWidth * sizeof(int32_t)) + align64(d.Dk / kBlock * kWidth * sizeof(float)) +
           align64(d.Dv * kWidth * sizeof(float)) + align64(kBlock * kWidth * sizeof(float)) +
           align64(kBlock / 2 * kWidth * sizeof(int32_t));
  }
  static PassBuffers at(uint8_t* p, const Dims& d) {
    PassBuffers b;
    b.qt = reinterpret_cast<int32_t*>(p);
    p += align64(d.Dk / 2 * kWidth * sizeof(int32_t));
    b.qs = reinterpret_cast<float*>(p);
    p += align64(d.Dk / kBlock * kWidth * sizeof(float));
    b.acc = reinterpret_cast<float*>(p);
    p += align64(d.Dv * kWidth * sizeof(float));
    b.sc = reinterpret_cast<float*>(p);
    p += align64(kBlock * kWidth * sizeof(float));
    b.pp = reinterpret_cast<int32_t*>(p);
    return b;
  }
};

// x[0, n) rounded to 14-bit integers against m, their largest magnitude (n a multiple of kLanes):
// returns the step.
float round14(const float* x, int64_t n, float m, int16_t* out) {
  const Vec k(m > 0.0f ? kLevels / m : 0.0f);
  for (int64_t i = 0; i < n; i += kLanes) store_int16(out + i, round_to_int(Vec::load_unaligned(x + i) * k));
  return m / kLevels;
}

float quantize14(const float* x, int64_t n, int16_t* out) {
  Vec amax(0.0f);
  GGL_AVX512_UNDEFINED_BEGIN
  for (int64_t i = 0; i < n; i += kLanes) amax = xsimd::max(amax, xsimd::abs(Vec::load_unaligned(x + i)));
  GGL_AVX512_UNDEFINED_END
  return round14(x, n, largest_lane(amax), out);  // (xsimd 8 has no horizontal max)
}

// Row j of KV head h of t as float32: the row itself, or decoded into buf.
const float* row_as_float(const Tensor& t, int64_t h, int64_t j, int64_t n, float* buf) {
  if (t.type == Type::F32) return reinterpret_cast<const float*>(t.row(h, j));
  decode_row(t.type, t.row(h, j), buf, n);
  return buf;
}

// A Q8_0 row's blocks as the 16-bit K row (its bytes: no rounding) and block steps (its scales);
// returns its largest magnitude (each Q8_0 block's largest byte is +-127).
float q8_0_to_int16(const void* row, int64_t n, int16_t* kq, float* ks) {
  const auto* blocks = static_cast<const BlockQ8_0*>(row);
  float m = 0.0f;
  for (int64_t b = 0; b < n / kBlock; ++b) {
    for (int64_t e = 0; e < kBlock; ++e) kq[b * kBlock + e] = blocks[b].qs[e];
    ks[b] = fp16_to_f32(blocks[b].d);
    m = std::max(m, std::fabs(ks[b]) * 127.0f);
  }
  return m;
}

// Keys 2i and 2i + 1 of KV head h into `to` (positioned at that pair). A second key past the last
// gets a zero V row (its probability is 0) and no K row (its score is never computed).
void convert_pair(const Tensor& dst, const Dims& d, int64_t h, int64_t i, const KvInt16& to) {
  const Tensor& k = *dst.src[1];
  const Tensor& v = *dst.src[2];
  // MLA's absorbed form reads V as the leading part of the K rows: decode each row once.
  const bool v_in_k = v.type == k.type && v.data == k.data && v.nb[1] == k.nb[1] && v.nb[2] == k.nb[2];
  alignas(64) float kbuf[kMaxHead], vbuf[kMaxHead];
  alignas(64) int16_t rows[2][kMaxHead];
  for (int side = 0; side < 2; ++side) {
    const int64_t j = 2 * i + side;
    if (j >= d.N) {
      std::fill(rows[side], rows[side] + d.Dv, int16_t{0});
      to.vs[side] = 0.0f;
      continue;
    }
    int16_t* kq = to.kq + side * d.Dk;
    float* ks = to.ks + side * (d.Dk / kBlock);
    if (k.type == Type::Q8_0) {
      const float m = q8_0_to_int16(k.row(h, j), d.Dk, kq, ks);
      if (v_in_k) {  // V: the leading blocks, at 14 bits against the largest of the whole K row
        decode_row(k.type, k.row(h, j), vbuf, d.Dv);
        to.vs[side] = round14(vbuf, d.Dv, m, rows[side]);
        continue;
      }
    } else {
      const float* krow = row_as_float(k, h, j, d.Dk, kbuf);
      for (int64_t b = 0; b < d.Dk / kBlock; ++b) ks[b] = quantize14(krow + b * kBlock, kBlock, kq + b * kBlock);
      if (v_in_k) {
        to.vs[side] = quantize14(krow, d.Dv, rows[side]);
        continue;
      }
    }
    to.vs[side] = quantize14(row_as_float(v, h, j, d.Dv, vbuf), d.Dv, rows[side]);
  }
  // Interleave: word e = (row 0 element e, row 1 element e).
  for (int64_t e = 0; e < d.Dv; e += kInterleave) interleave_pairs(rows[0] + e, rows[1] + e, to.vq + 2 * e);
}

// The queries of one pass, one per lane: lane i's query row and the keys it sees, [0, visible[i]).
struct QueryLanes {
  int64_t n = 0;
  const float* q[kWidth];
  int64_t visible[kWidth];
};

// What a pass leaves: per lane the running max and sum, and the accumulators transposed,
// [Dv][kWidth] (lane i of element e at acc[e * kWidth + i]).
struct PassState {
  alignas(64) float m[kWidth];
  alignas(64) float l[kWidth];
  const float* acc;
};

// One pass over keys [j0, j1) (j0 even) of one KV head for the queries of `lanes`; kv_at(jb, nk)
// gives the 16-bit K and V of keys [jb, jb + nk), key jb first.
template <class KvAt>
void pass(const Tensor& dst, const Dims& d, const PassBuffers& buf, const QueryLanes& lanes, int64_t j0, int64_t j1,
          KvAt&& kv_at, PassState& out) {
  static_assert(kBlock % kKeyGroup == 0, "key groups tile a key block");
  const float scale = dst.params[0].f;
  const int64_t blocks = d.Dk / kBlock;
  out.acc = buf.acc;

  // Queries times the scale, rounded per block and transposed to [pair][lane]; unused lanes 0 and
  // seeing every key of the pass.
  alignas(64) float limit[kWidth];
  int64_t j_end = j0;
  for (int64_t i = 0; i < lanes.n; ++i) j_end = std::max(j_end, std::min(lanes.visible[i], j1));
  auto* qt16 = reinterpret_cast<int16_t*>(buf.qt);
  for (int64_t i = 0; i < kWidth; ++i) {
    alignas(64) float row[kMaxHead];
    alignas(64) int16_t rounded[kMaxHead];
    if (i < lanes.n) {
      for (int64_t e = 0; e < d.Dk; ++e) row[e] = lanes.q[i][e] * scale;
      limit[i] = static_cast<float>(std::min(lanes.visible[i], j1));
    } else {
      std::fill(row, row + d.Dk, 0.0f);
      limit[i] = static_cast<float>(j_end);
    }
    for (int64_t b = 0; b < blocks; ++b)
      buf.qs[b * kWidth + i] = quantize14(row + b * kBlock, kBlock, rounded + b * kBlock);
    for (int64_t p = 0; p < d.Dk / 2; ++p) {
      qt16[(p * kWidth + i) * 2] = rounded[2 * p];
      qt16[(p * kWidth + i) * 2 + 1] = rounded[2 * p + 1];
    }
  }
  attention_wide::PassLanes<kVecs> pl(limit, j_end);
  Vec* m = pl.m;
  Vec* lsum = pl.l;
  const bool masked = pl.masked;
  std::fill(buf.acc, buf.acc + d.Dv * kWidth, 0.0f);

  for (int64_t jb = j0; jb < j_end; jb += kBlock) {
    const int64_t nk = std::min(kBlock, j_end - jb);
    const KvInt16 kv = kv_at(jb, nk);
    // Scores, kKeyGroup keys at a time (a short last group repeats the block's first key).
    for (int64_t j = 0; j < nk; j += kKeyGroup) {
      const int16_t* krow[kKeyGroup];
      const float* kscale[kKeyGroup];
      for (int r = 0; r < kKeyGroup; ++r) {
        const int64_t key = j + r < nk ? j + r : 0;
        krow[r] = kv.kq + key * d.Dk;
        kscale[r] = kv.ks + key * blocks;
      }
      // Block sums in integers, scaled into the scores (kept in sc) once per block.
      float* srow = buf.sc + j * kWidth;
      std::fill(srow, srow + kKeyGroup * kWidth, 0.0f);
      for (int64_t b = 0; b < blocks; ++b) {
        IVec s[kKeyGroup][kVecs];
        each<kKeyGroup>([&](auto r) { each<kVecs>([&](auto u) { s[r][u] = int_zero(); }); });
        const int32_t* qp = buf.qt + b * kBlock / 2 * kWidth;
        for (int64_t p = 0; p < kBlock / 2; ++p, qp += kWidth) {
          IVec qv[kVecs];
          each<kVecs>([&](auto u) { qv[u] = load_int(qp + u * kLanes); });
          each<kKeyGroup>([&](auto r) {
            const IVec kk = broadcast_pair(krow[r] + b * kBlock + 2 * p);
            each<kVecs>([&](auto u) { add_pair_products(s[r][u], qv[u], kk); });
          });
        }
        each<kVecs>([&](auto u) {
          const Vec qsu = Vec::load_aligned(buf.qs + b * kWidth + u * kLanes);
          each<kKeyGroup>([&](auto r) {
            float* o = srow + r * kWidth + u * kLanes;
            xsimd::fma(to_float(s[r][u]), qsu * Vec(kscale[r][b]), Vec::load_aligned(o)).store_aligned(o);
          });
        });
      }
      // Masked keys score -inf. All kKeyGroup rows are kept (rows past nk are never read).
      if (masked)
        for (int r = 0; r < kKeyGroup; ++r)
          for (int u = 0; u < kVecs; ++u) {
            float* o = srow + r * kWidth + u * kLanes;
            pl.mask(Vec::load_aligned(o), jb + j + r, u).store_aligned(o);
          }
    }
    Vec c[kVecs];
    attention_wide::softmax_block<kVecs>(buf.sc, nk, masked, m, lsum, c);

    // Probabilities times the V rows' scales, rounded per lane over the block, paired by keys.
    const int64_t npairs = (nk + 1) / 2;
    Vec step[kVecs];
    for (int u = 0; u < kVecs; ++u) {
      auto scaled = [&](int64_t j) { return Vec::load_aligned(buf.sc + j * kWidth + u * kLanes) * Vec(kv.vs[j]); };
      Vec top(0.0f);
      GGL_AVX512_UNDEFINED_BEGIN
      for (int64_t j = 0; j < nk; ++j) top = xsimd::max(top, scaled(j));
      GGL_AVX512_UNDEFINED_END
      step[u] = top / Vec(kLevels);
      const Vec inv = xsimd::select(top > Vec(0.0f), Vec(kLevels) / top, Vec(0.0f));
      auto rounded = [&](int64_t j) { return j < nk ? round_to_int(scaled(j) * inv) : int_zero(); };
      for (int64_t jp = 0; jp < npairs; ++jp)
        store_int(buf.pp + jp * kWidth + u * kLanes, pack_pair(rounded(2 * jp), rounded(2 * jp + 1)));
    }
    // acc[e] = acc[e] * c + step * sum over key pairs, kValueGroup elements at a time.
    for (int64_t e = 0; e < d.Dv; e += kValueGroup) {
      IVec o[kValueGroup][kVecs];
      each<kValueGroup>([&](auto r) { each<kVecs>([&](auto u) { o[r][u] = int_zero(); }); });
      const int16_t* vrow = kv.vq + e * 2;
      const int32_t* pj = buf.pp;
      for (int64_t jp = 0; jp < npairs; ++jp, vrow += d.Dv * 2, pj += kWidth) {
        IVec pv[kVecs];
        each<kVecs>([&](auto u) { pv[u] = load_int(pj + u * kLanes); });
        each<kValueGroup>([&](auto r) {
          const IVec vv = broadcast_pair(vrow + 2 * r);
          each<kVecs>([&](auto u) { add_pair_products(o[r][u], pv[u], vv); });
        });
      }
      each<kValueGroup>([&](auto r) {
        each<kVecs>([&](auto u) {
          float* a = buf.acc + (e + r) * kWidth + u * kLanes;
          xsimd::fma(to_float(o[r][u]), step[u], Vec::load_aligned(a) * c[u]).store_aligned(a);
        });
      });
    }
  }
  for (int u = 0; u < kVecs; ++u) {
    m[u].store_aligned(out.m + u * kLanes);
    lsum[u].store_aligned(out.l + u * kLanes);
  }
}

// The normalised outputs of a pass's lanes: lane i into out_row(i).
template <class OutRow>
void write_outputs(const Dims& d, const QueryLanes& lanes, const PassState& st, OutRow&& out_row) {
  for (int64_t i = 0; i < lanes.n; ++i) {
    float* out = out_row(i);
    const float inv = st.l[i] > 0.0f ? 1.0f / st.l[i] : 0.0f;
    for (int64_t e = 0; e < d.Dv; ++e) out[e] = st.acc[e * kWidth + i] * inv;
  }
}

// ---- MHA prefill: K and V converted once per op, passes of consecutive tokens of one head ----

bool mha_applies(const Tensor& dst, const Dims& d) {
  return d.G == 1 && d.T >= kMinTokens && dst.src[1]->type == Type::F32 && dst.src[2]->type == Type::F32;
}

size_t mha_work(const Dims& d, int n_threads) {
  return KvInt16::bytes(d, d.H * d.pairs) + PassBuffers::bytes(d) * static_cast<size_t>(n_threads);
}

void mha(const Tensor& dst, const Dims& d, const CpuThread& th) {
  const KvInt16 all = KvInt16::at(th.work, d, d.H * d.pairs);  // [H][pairs]
  auto [i0, i1] = split_range(d.H * d.pairs, th.ith, th.nth);
  for (int64_t item = i0; item < i1; ++item)
    convert_pair(dst, d, item / d.pairs, item % d.pairs, all.from_pair(d, item));
  th.barrier();
  const PassBuffers buf =
      PassBuffers::at(th.work + KvInt16::bytes(d, d.H * d.pairs) + th.ith * PassBuffers::bytes(d), d);
  const Tensor& q = *dst.src[0];
  // Items dealt round-robin (later token blocks see more keys, so contiguous ranges would not
  // balance) head by head: the team works through one head's K and V at a time, which then stay in
  // the last-level cache for all its token blocks instead of coming from memory for each.
  const int64_t blocks = (d.T + kWidth - 1) / kWidth;
  for (int64_t item = th.ith; item < blocks * d.H; item += th.nth) {
    const int64_t t0 = (item % blocks) * kWidth, h = item / blocks;
    QueryLanes lanes;
    lanes.n = std::min(kWidth, d.T - t0);
    for (int64_t i = 0; i < lanes.n; ++i) {
      lanes.q[i] = q.f32_row(h, t0 + i);
      lanes.visible[i] = visible_keys(dst, d, t0 + i);
    }
    const KvInt16 head = all.from_pair(d, h * d.pairs);
    PassState st;
    pass(
        dst, d, buf, lanes, 0, d.N, [&](int64_t jb, int64_t) { return head.from_pair(d, jb / 2); }, st);
    write_outputs(d, lanes, st, [&](int64_t i) { return dst.f32_row(h, t0 + i); });
  }
}

// ---- Grouped heads: passes of the heads of one token, K and V converted per key block ----

bool grouped_takes(int64_t heads) {
  return attention_lanes::kGroupedInt16MinHeads > 0 && heads >= attention_lanes::kGroupedInt16MinHeads;
}

bool grouped_applies(const Dims& d, const Tensor& dst) {
  auto cache_type = [](Type t) { return t == Type::F32 || t == Type::F16 || t == Type::BF16 || t == Type::Q8_0; };
  return grouped_takes(d.G) && cache_type(dst.src[1]->type) && cache_type(dst.src[2]->type);
}

// Per thread: the pass buffers, one key block's 16-bit K and V, and a partial state [m[kWidth], l[kWidth],
// acc[kWidth][Dv]] for the split-keys mode.
size_t grouped_partial_offset(const Dims& d) { return PassBuffers::bytes(d) + KvInt16::bytes(d, kBlock / 2); }
size_t grouped_per_thread(const Dims& d) {
  return grouped_partial_offset(d) + align64(kWidth * (d.Dv + 2) * sizeof(float));
}

void grouped(const Tensor& dst, const Dims& d, const CpuThread& th) {
  const size_t per_thread = grouped_per_thread(d);
  uint8_t* mine = th.work + th.ith * per_thread;
  const PassBuffers buf = PassBuffers::at(mine, d);
  const KvInt16 block = KvInt16::at(mine + PassBuffers::bytes(d), d, kBlock / 2);
  const Tensor& q = *dst.src[0];
  const int64_t chunks = (d.G + kWidth - 1) / kWidth, items = d.T * d.Hkv * chunks;

  // Item -> token t, KV head hkv, and its heads [g0, g0 + lanes.n) on the lanes.
  struct Item {
    int64_t t, hkv, g0;
    QueryLanes lanes;
  };
  auto item_at = [&](int64_t item) {
    Item it;
    it.t = item / (d.Hkv * chunks);
    it.hkv = (item / chunks) % d.Hkv;
    it.g0 = (item % chunks) * kWidth;
    it.lanes.n = std::min(kWidth, d.G - it.g0);
    for (int64_t i = 0; i < it.lanes.n; ++i) {
      it.lanes.q[i] = q.f32_row(it.hkv * d.G + it.g0 + i, it.t);
      it.lanes.visible[i] = visible_keys(dst, d, it.t);
    }
    return it;
  };
  auto run = [&](const Item& it, int64_t j0, int64_t j1, PassState& st) {
    auto kv_at = [&](int64_t jb, int64_t nk) {
      for (int64_t i = 0; i < (nk + 1) / 2; ++i) convert_pair(dst, d, it.hkv, jb / 2 + i, block.from_pair(d, i));
      return block;
    };
    pass(dst, d, buf, it.lanes, j0, j1, kv_at, st);
  };
  auto out_rows = [&](const Item& it) {
    return [&](int64_t i) { return dst.f32_row(it.hkv * d.G + it.g0 + i, it.t); };
  };

  if (th.batch_invariant) {  // fixed chunks of keys per item (attention_merge.h)
    const size_t area = invariant_area_floats(d.N, kWidth, d.Dv);
    float* areas = reinterpret_cast<float*>(th.work + grouped_per_thread(d) * th.nth);
    attend_invariant(
        th, areas, area, items, d.Dv, [&](int64_t item) { return item_at(item).lanes.n; },
        [&](int64_t item) { return visible_keys(dst, d, item / (d.Hkv * chunks)); },
        [&](int64_t item, int64_t j0, int64_t j1, float* state) {
          const Item it = item_at(item);
          const int64_t n = it.lanes.n;
          PassState st;
          run(it, j0, j1, st);
          for (int64_t g = 0; g < n; ++g) {
            state[g] = st.m[g];
            state[n + g] = st.l[g];
            for (int64_t e = 0; e < d.Dv; ++e) state[2 * n + g * d.Dv + e] = st.acc[e * kWidth + g];
          }
        },
        [&](int64_t item, int64_t g) { return out_rows(item_at(item))(g); });
    return;
  }
  if (items >= th.nth) {
    auto [i0, i1] = split_range(items, th.ith, th.nth);
    for (int64_t item = i0; item < i1; ++item) {
      const Item it = item_at(item);
      PassState st;
      run(it, 0, d.N, st);
      write_outputs(d, it.lanes, st, out_rows(it));
    }
    return;
  }
  // Split-keys mode: every thread takes a slice of each item's key pairs, then the slices merge.
  const int64_t stride = static_cast<int64_t>(per_thread / sizeof(float));
  const float* partials = reinterpret_cast<const float*>(th.work + grouped_partial_offset(d));
  float* part = reinterpret_cast<float*>(mine + grouped_partial_offset(d));
  for (int64_t item = 0; item < items; ++item) {
    const Item it = item_at(item);
    const int64_t visible = it.lanes.visible[0], n = it.lanes.n;
    auto [p0, p1] = split_range((visible + 1) / 2, th.ith, th.nth);
    PassState st;
    run(it, 2 * p0, std::min(2 * p1, visible), st);
    for (int64_t g = 0; g < n; ++g) {
      part[g] = st.m[g];
      part[n + g] = st.l[g];
      for (int64_t e = 0; e < d.Dv; ++e) part[2 * n + g * d.Dv + e] = st.acc[e * kWidth + g];
    }
    th.barrier();
    auto [g0, g1] = split_range(n, th.ith, th.nth);
    for (int64_t g = g0; g < g1; ++g) merge_partial_states(partials, stride, th.nth, n, d.Dv, g, out_rows(it)(g));
    th.barrier();
  }
}

}  // namespace

const double kMhaInt16Speedup = attention_lanes::kInt16Speedup;
const double kGroupedInt16Speedup = attention_lanes::kGroupedInt16Speedup;

bool mha_int16_takes(int64_t Dk, int64_t Dv) {
  return int_gemm_enabled() && Dk % kBlock == 0 && Dv % kBlock == 0 && Dk > 0 && Dv > 0 && Dk <= kMaxHead &&
         Dv <= kMaxHead;
}

bool grouped_int16_takes(int64_t Dk, int64_t Dv, int64_t heads) {
  return mha_int16_takes(Dk, Dv) && grouped_takes(heads);
}

bool attention_int16_applies(const Tensor& dst) {
  const Dims d = dims_of(dst);
  return mha_int16_takes(d.Dk, d.Dv) && dst.src[0]->type == Type::F32 && d.N > 0 &&
         (mha_applies(dst, d) || grouped_applies(d, dst));
}

size_t attention_int16_work(const Tensor& dst, int n_threads, bool batch_invariant) {
  const Dims d = dims_of(dst);
  if (mha_applies(dst, d)) return mha_work(d, n_threads);
  const size_t invariant = batch_invariant ? invariant_area_floats(d.N, kWidth, d.Dv) * sizeof(float) : 0;
  return (grouped_per_thread(d) + invariant) * static_cast<size_t>(n_threads);
}

void attention_int16(const Tensor& dst, const CpuThread& th) {
  const Dims d = dims_of(dst);
  if (mha_applies(dst, d)) return mha(dst, d, th);
  grouped(dst, d, th);
}

#else  // no 16-bit integer steps in this set: the float32 kernels take every case

const double kMhaInt16Speedup = 0.0;
const double kGroupedInt16Speedup = 0.0;
bool mha_int16_takes(int64_t, int64_t) { return false; }
bool grouped_int16_takes(int64_t, int64_t, int64_t) { return false; }
bool attention_int16_applies(const Tensor&) { return false; }
size_t attention_int16_work(const Tensor&, int, bool) { return 0; }
void attention_int16(const Tensor&, const CpuThread&) {}

#endif

}  // namespace ggl::GGL_ISA
