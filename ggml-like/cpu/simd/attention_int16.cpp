// MHA prefill attention on 16-bit integers. Like the float32 kernel for this case
// (op_attention.cpp), a pass serves consecutive tokens of one head, one per lane of two vectors (32
// tokens with AVX-512, 16 with AVX2), each masked causally, with an online softmax over blocks of 32
// keys; but both products run on pairs of 16-bit integers (VPDPWSSD, or VPMADDWD + VPADDD without
// VNNI), twice the multiply-adds per instruction of a float32 FMA, and K and V are read as 16-bit
// integers, half the bytes:
//   scores: the queries (times the softmax scale) and the K rows are rounded to 14-bit integers
//           per block of 32 elements with a float scale each; a block's 32 products fit an int32
//           (32 * 8191^2 < 2^31) and are scaled into the float score once per block;
//   values: each V row is rounded to 14 bits with one scale, which folds into the probabilities:
//           p * scale of a block of keys is rounded to 14 bits per lane, so each output element
//           of a block is one integer sum scaled once.
// The rounding is ~6e-5 of each block's largest value, finer than fp16's 2^-11 per element.
// K and V are converted once per op into the shared work area (all heads, all keys), with V
// interleaved by pairs of keys (the pair one product step multiplies), then the passes are dealt
// round-robin as in the float kernel. Only those steps are per instruction set (the kernel set's
// attention_lanes.h under cpu/arch/, GGL_ATTN_INT16 where it has them); the float side is xsimd.

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ggml-like/cpu/int_gemm.h"
#include "ggml-like/cpu/simd/attention_wide.h"

#include "ggml-like/cpu/simd/simd_kernels.h"

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
inline Vec to_float(IVec v) { return xsimd::to_float(v); }
inline IVec round_to_int(Vec v) { return xsimd::nearbyint_as_int(v); }
// The pair (a, b) of 32-bit lanes' low halves: a in the low 16 bits, b in the high.
inline IVec pack_pair(IVec a, IVec b) { return (a & IVec(0xFFFF)) | (b << 16); }
inline IVec broadcast_pair(const int16_t* p) {
  int32_t pair;
  std::memcpy(&pair, p, sizeof pair);
  return IVec(pair);
}
constexpr int kVecs = 2;                  // lane vectors per pass
constexpr int64_t kWidth = kVecs * kLanes;  // tokens per pass
constexpr int64_t kBlock = 32;            // elements per scale block, and keys per key block
constexpr float kLevels = 8191.0f;        // 14-bit values: 32 products of two fit an int32
constexpr int kKeyGroup = 4;              // keys whose scores are accumulated together (named below)
constexpr int kValueGroup = 4;            // output elements accumulated together (named below)
constexpr int64_t kMinTokens = 4;         // fewer tokens take the float kernels
constexpr int64_t kMaxHead = 1024;        // head sizes beyond this take the float kernels

struct Dims {
  int64_t Dk, Dv, H, T, N, pairs;  // pairs: key pairs, (N + 1) / 2
};

Dims dims_of(const Tensor& dst) {
  const Tensor& q = *dst.src[0];
  const Tensor& k = *dst.src[1];
  return {q.ne[0], dst.src[2]->ne[0], q.ne[1], q.ne[2], k.ne[2], (k.ne[2] + 1) / 2};
}

constexpr size_t align64(size_t b) { return (b + 63) / 64 * 64; }

// Shared work: K as int16 [H][N][Dk] with block scales [H][N][Dk / 32]; V as int16 pairs
// [H][pairs][Dv][2] (element e of keys 2i, 2i + 1 side by side) with row scales [H][2 * pairs];
// then per thread the pass buffers.
struct Layout {
  size_t kq, ks, vq, vs, pass, per_thread;
  size_t qt, qs, acc, sc, pp;  // offsets inside a pass buffer
};

Layout layout_of(const Dims& d) {
  Layout l;
  l.kq = 0;
  l.ks = l.kq + align64(d.H * d.N * d.Dk * sizeof(int16_t));
  l.vq = l.ks + align64(d.H * d.N * (d.Dk / kBlock) * sizeof(float));
  l.vs = l.vq + align64(d.H * d.pairs * d.Dv * 2 * sizeof(int16_t));
  l.pass = l.vs + align64(d.H * d.pairs * 2 * sizeof(float));
  l.qt = 0;                                                              // [Dk / 2][kWidth] int16 pairs
  l.qs = l.qt + align64(d.Dk / 2 * kWidth * sizeof(int32_t));            // [Dk / 32][kWidth] scales
  l.acc = l.qs + align64(d.Dk / kBlock * kWidth * sizeof(float));        // [Dv][kWidth]
  l.sc = l.acc + align64(d.Dv * kWidth * sizeof(float));                 // [kBlock][kWidth]
  l.pp = l.sc + align64(kBlock * kWidth * sizeof(float));                // [kBlock / 2][kWidth] int16 pairs
  l.per_thread = l.pp + align64(kBlock / 2 * kWidth * sizeof(int32_t));
  return l;
}

// x[0, n) rounded to 14-bit integers against their largest magnitude (n a multiple of kLanes):
// returns the step.
float quantize14(const float* x, int64_t n, int16_t* out) {
  Vec amax(0.0f);
  for (int64_t i = 0; i < n; i += kLanes) amax = xsimd::max(amax, xsimd::abs(Vec::load_unaligned(x + i)));
  const float m = largest_lane(amax);  // (xsimd 8 has no horizontal max)
  const Vec k(m > 0.0f ? kLevels / m : 0.0f);
  for (int64_t i = 0; i < n; i += kLanes) store_int16(out + i, round_to_int(Vec::load_unaligned(x + i) * k));
  return m / kLevels;
}

// Keys 2i and 2i + 1 of head h (the second may be past the last key: zeros) into the work area.
void convert_pair(const Tensor& dst, const Dims& d, const Layout& l, uint8_t* work, int64_t h, int64_t i) {
  const Tensor& k = *dst.src[1];
  const Tensor& v = *dst.src[2];
  auto* kq = reinterpret_cast<int16_t*>(work + l.kq);
  auto* ks = reinterpret_cast<float*>(work + l.ks);
  auto* vq = reinterpret_cast<int16_t*>(work + l.vq) + (h * d.pairs + i) * d.Dv * 2;
  auto* vs = reinterpret_cast<float*>(work + l.vs) + (h * d.pairs + i) * 2;
  alignas(64) int16_t rows[2][kMaxHead];
  for (int side = 0; side < 2; ++side) {
    const int64_t j = 2 * i + side;
    if (j >= d.N) {
      std::fill(rows[side], rows[side] + d.Dv, int16_t{0});
      vs[side] = 0.0f;
      continue;
    }
    const auto* krow = reinterpret_cast<const float*>(k.row(h, j));
    for (int64_t b = 0; b < d.Dk / kBlock; ++b)
      ks[(h * d.N + j) * (d.Dk / kBlock) + b] =
          quantize14(krow + b * kBlock, kBlock, kq + (h * d.N + j) * d.Dk + b * kBlock);
    vs[side] = quantize14(reinterpret_cast<const float*>(v.row(h, j)), d.Dv, rows[side]);
  }
  // Interleave: word e = (row 0 element e, row 1 element e).
  for (int64_t e = 0; e < d.Dv; e += kInterleave) interleave_pairs(rows[0] + e, rows[1] + e, vq + 2 * e);
}

// One pass: head h at tokens [t0, t0 + tn), tn <= kWidth; writes their normalised outputs.
void pass(const Tensor& dst, const Dims& d, const Layout& l, const uint8_t* work, uint8_t* mine, int64_t h,
          int64_t t0, int64_t tn) {
  const Tensor& q = *dst.src[0];
  const float scale = dst.params[0].f;
  const auto* kq = reinterpret_cast<const int16_t*>(work + l.kq) + h * d.N * d.Dk;
  const auto* ks = reinterpret_cast<const float*>(work + l.ks) + h * d.N * (d.Dk / kBlock);
  const auto* vq = reinterpret_cast<const int16_t*>(work + l.vq) + h * d.pairs * d.Dv * 2;
  const auto* vs = reinterpret_cast<const float*>(work + l.vs) + h * d.pairs * 2;
  auto* qt = reinterpret_cast<int16_t*>(mine + l.qt);
  auto* qs = reinterpret_cast<float*>(mine + l.qs);
  auto* acc = reinterpret_cast<float*>(mine + l.acc);
  auto* sc = reinterpret_cast<float*>(mine + l.sc);
  auto* pp = reinterpret_cast<int32_t*>(mine + l.pp);
  const int64_t blocks = d.Dk / kBlock;

  // Queries times the scale, rounded per block and transposed to [pair][lane]; unused lanes 0.
  alignas(64) float limit[kWidth];
  int64_t j_end = 0;
  for (int64_t i = 0; i < kWidth; ++i) {
    alignas(64) float row[kMaxHead];
    alignas(64) int16_t rounded[kMaxHead];
    int64_t visible = 0;
    if (i < tn) {
      const float* qr = q.f32_row(h, t0 + i);
      for (int64_t e = 0; e < d.Dk; ++e) row[e] = qr[e] * scale;
      const int32_t pos = reinterpret_cast<const int32_t*>(dst.src[3]->data)[t0 + i];
      visible = std::clamp<int64_t>(static_cast<int64_t>(pos) + 1, 0, d.N);
    } else {
      std::fill(row, row + d.Dk, 0.0f);
    }
    for (int64_t b = 0; b < blocks; ++b) qs[b * kWidth + i] = quantize14(row + b * kBlock, kBlock, rounded + b * kBlock);
    for (int64_t p = 0; p < d.Dk / 2; ++p) {
      qt[(p * kWidth + i) * 2] = rounded[2 * p];
      qt[(p * kWidth + i) * 2 + 1] = rounded[2 * p + 1];
    }
    limit[i] = static_cast<float>(visible);
    j_end = std::max(j_end, visible);
  }
  for (int64_t i = tn; i < kWidth; ++i) limit[i] = static_cast<float>(j_end);  // unused lanes see all
  attention_wide::PassLanes<kVecs> lanes(limit, j_end);
  Vec* m = lanes.m;
  Vec* lsum = lanes.l;
  const bool masked = lanes.masked;
  std::fill(acc, acc + d.Dv * kWidth, 0.0f);

  for (int64_t jb = 0; jb < j_end; jb += kBlock) {
    const int64_t nk = std::min(kBlock, j_end - jb);
    // Scores, kKeyGroup keys at a time (a short last group repeats the block's first key).
    for (int64_t j = 0; j < nk; j += kKeyGroup) {
      const int16_t* krow[kKeyGroup];
      const float* kscale[kKeyGroup];
      for (int r = 0; r < kKeyGroup; ++r) {
        const int64_t key = jb + (j + r < nk ? j + r : 0);
        krow[r] = kq + key * d.Dk;
        kscale[r] = ks + key * blocks;
      }
      // Block sums in integers, scaled into the scores (kept in sc) once per block.
      float* srow = sc + j * kWidth;
      std::fill(srow, srow + kKeyGroup * kWidth, 0.0f);
      for (int64_t b = 0; b < blocks; ++b) {
        // Eight accumulators as named locals: GCC keeps an array of them in memory around the asm.
        IVec s00 = int_zero(), s01 = s00, s10 = s00, s11 = s00, s20 = s00, s21 = s00, s30 = s00, s31 = s00;
        const int16_t* k0 = krow[0] + b * kBlock;
        const int16_t* k1 = krow[1] + b * kBlock;
        const int16_t* k2 = krow[2] + b * kBlock;
        const int16_t* k3 = krow[3] + b * kBlock;
        const int32_t* qp = reinterpret_cast<const int32_t*>(qt) + b * kBlock / 2 * kWidth;
        for (int64_t p = 0; p < kBlock / 2; ++p, qp += kWidth) {
          const IVec q0 = load_int(qp), q1 = load_int(qp + kLanes);
          IVec kk = broadcast_pair(k0 + 2 * p);
          add_pair_products(s00, q0, kk);
          add_pair_products(s01, q1, kk);
          kk = broadcast_pair(k1 + 2 * p);
          add_pair_products(s10, q0, kk);
          add_pair_products(s11, q1, kk);
          kk = broadcast_pair(k2 + 2 * p);
          add_pair_products(s20, q0, kk);
          add_pair_products(s21, q1, kk);
          kk = broadcast_pair(k3 + 2 * p);
          add_pair_products(s30, q0, kk);
          add_pair_products(s31, q1, kk);
        }
        const IVec isum[kKeyGroup][kVecs] = {{s00, s01}, {s10, s11}, {s20, s21}, {s30, s31}};
        for (int u = 0; u < kVecs; ++u) {
          const Vec qsu = Vec::load_aligned(qs + b * kWidth + u * kLanes);
          for (int r = 0; r < kKeyGroup; ++r) {
            float* out = srow + r * kWidth + u * kLanes;
            xsimd::fma(to_float(isum[r][u]), qsu * Vec(kscale[r][b]), Vec::load_aligned(out)).store_aligned(out);
          }
        }
      }
      // Masked keys score -inf. All kKeyGroup rows are kept (rows past nk are never read).
      if (masked)
        for (int r = 0; r < kKeyGroup; ++r)
          for (int u = 0; u < kVecs; ++u) {
            float* out = srow + r * kWidth + u * kLanes;
            lanes.mask(Vec::load_aligned(out), jb + j + r, u).store_aligned(out);
          }
    }
    Vec c[kVecs];
    attention_wide::softmax_block<kVecs>(sc, nk, masked, m, lsum, c);

    // Probabilities times the V rows' scales, rounded per lane over the block, paired by keys.
    const int64_t npairs = (nk + 1) / 2;
    Vec step[kVecs];
    for (int u = 0; u < kVecs; ++u) {
      auto scaled = [&](int64_t j) { return Vec::load_aligned(sc + j * kWidth + u * kLanes) * Vec(vs[jb + j]); };
      Vec top(0.0f);
      for (int64_t j = 0; j < nk; ++j) top = xsimd::max(top, scaled(j));
      step[u] = top / Vec(kLevels);
      const Vec inv = xsimd::select(top > Vec(0.0f), Vec(kLevels) / top, Vec(0.0f));
      auto rounded = [&](int64_t j) { return j < nk ? round_to_int(scaled(j) * inv) : int_zero(); };
      for (int64_t jp = 0; jp < npairs; ++jp)
        store_int(pp + jp * kWidth + u * kLanes, pack_pair(rounded(2 * jp), rounded(2 * jp + 1)));
    }
    // acc[e] = acc[e] * c + step * sum over key pairs, kValueGroup elements at a time.
    const int16_t* vblock = vq + (jb / 2) * d.Dv * 2;
    for (int64_t e = 0; e < d.Dv; e += kValueGroup) {
      IVec o00 = int_zero(), o01 = o00, o10 = o00, o11 = o00, o20 = o00, o21 = o00, o30 = o00, o31 = o00;
      const int16_t* vrow = vblock + e * 2;
      const int32_t* pj = pp;
      for (int64_t jp = 0; jp < npairs; ++jp, vrow += d.Dv * 2, pj += kWidth) {
        const IVec p0 = load_int(pj), p1 = load_int(pj + kLanes);
        IVec vv = broadcast_pair(vrow);
        add_pair_products(o00, p0, vv);
        add_pair_products(o01, p1, vv);
        vv = broadcast_pair(vrow + 2);
        add_pair_products(o10, p0, vv);
        add_pair_products(o11, p1, vv);
        vv = broadcast_pair(vrow + 4);
        add_pair_products(o20, p0, vv);
        add_pair_products(o21, p1, vv);
        vv = broadcast_pair(vrow + 6);
        add_pair_products(o30, p0, vv);
        add_pair_products(o31, p1, vv);
      }
      const IVec isum[kValueGroup][kVecs] = {{o00, o01}, {o10, o11}, {o20, o21}, {o30, o31}};
      for (int r = 0; r < kValueGroup; ++r)
        for (int u = 0; u < kVecs; ++u) {
          float* a = acc + (e + r) * kWidth + u * kLanes;
          xsimd::fma(to_float(isum[r][u]), step[u], Vec::load_aligned(a) * c[u]).store_aligned(a);
        }
    }
  }

  alignas(64) float l_out[kWidth];
  for (int u = 0; u < kVecs; ++u) lsum[u].store_aligned(l_out + u * kLanes);
  for (int64_t i = 0; i < tn; ++i) {
    float* out = dst.f32_row(h, t0 + i);
    const float inv = l_out[i] > 0.0f ? 1.0f / l_out[i] : 0.0f;
    for (int64_t e = 0; e < d.Dv; ++e) out[e] = acc[e * kWidth + i] * inv;
  }
}

}  // namespace

const double kMhaInt16Speedup = attention_lanes::kInt16Speedup;

bool mha_int16_takes(int64_t Dk, int64_t Dv) {
  return int_gemm_enabled() && Dk % kBlock == 0 && Dv % kBlock == 0 && Dk > 0 && Dv > 0 && Dk <= kMaxHead &&
         Dv <= kMaxHead;
}

bool mha_int16_applies(const Tensor& dst) {
  const Tensor& q = *dst.src[0];
  const Tensor& k = *dst.src[1];
  const Tensor& v = *dst.src[2];
  const Dims d = dims_of(dst);
  return mha_int16_takes(d.Dk, d.Dv) && q.ne[1] == k.ne[1] && d.T >= kMinTokens && k.type == Type::F32 &&
         v.type == Type::F32 && q.type == Type::F32 && d.N > 0;
}

size_t mha_int16_work(const Tensor& dst, int n_threads) {
  const Layout l = layout_of(dims_of(dst));
  return l.pass + l.per_thread * static_cast<size_t>(n_threads);
}

void mha_int16(const Tensor& dst, const CpuThread& th) {
  const Dims d = dims_of(dst);
  const Layout l = layout_of(d);
  auto [i0, i1] = split_range(d.H * d.pairs, th.ith, th.nth);
  for (int64_t item = i0; item < i1; ++item) convert_pair(dst, d, l, th.work, item / d.pairs, item % d.pairs);
  th.barrier();
  uint8_t* mine = th.work + l.pass + static_cast<size_t>(th.ith) * l.per_thread;
  // Items dealt round-robin (later token blocks see more keys, so contiguous ranges would not
  // balance) head by head: the team works through one head's K and V at a time, which then stay in
  // the last-level cache for all its token blocks instead of coming from memory for each.
  const int64_t blocks = (d.T + kWidth - 1) / kWidth;
  for (int64_t item = th.ith; item < blocks * d.H; item += th.nth) {
    const int64_t t0 = (item % blocks) * kWidth, h = item / blocks;
    pass(dst, d, l, th.work, mine, h, t0, std::min(kWidth, d.T - t0));
  }
}

#else  // no 16-bit integer steps in this set: the float32 kernels take every case

const double kMhaInt16Speedup = 0.0;
bool mha_int16_takes(int64_t, int64_t) { return false; }
bool mha_int16_applies(const Tensor&) { return false; }
size_t mha_int16_work(const Tensor&, int) { return 0; }
void mha_int16(const Tensor&, const CpuThread&) {}

#endif

}  // namespace ggl::GGL_ISA
