// The scale searches shared by ggml's quantizers (ggml-quants.c: nearest_int, make_qx_quants,
// make_q3_quants, make_qkx2/qkx3_quants, make_qp_quants), in the same float32 arithmetic order so
// that their results, and the bytes built from them, are identical to the reference's.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace ggl::quant {

// Smallest group maximum treated as non-zero (ggml's GROUP_MAX_EPS).
inline constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even, through the float magic-number trick ggml uses (valid for
// |v| < 2^22; every caller stays far inside that).
inline int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

// The element of largest magnitude, with its sign (the first of equals); amax receives |it|.
inline float signed_absmax(const float* x, int n, float* amax = nullptr) {
  float best = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > best) {
      best = ax;
      max = x[i];
    }
  }
  if (amax) *amax = best;
  return max;
}

// Symmetric scale for n values on levels [-nmax, nmax); L receives level + nmax. rmse_type 0:
// plain max scaling; 1 (with weights == nullptr: weights x^2): least squares with a +-0.9 scan
// of the starting scale. weights, when given, replace the x^2 weighting.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L, int rmse_type, const float* weights);

// Q3_K's symmetric search: x^2-weighted least squares refined by moving single levels; L receives
// level + nmax.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L, bool do_rmse);

// Scale and min for levels [0, nmax]: value ~ scale * L - the_min. Scans nstep + 1 starting scales
// (rmin + rdelta * is) and keeps the weighted least-squares fit with the smallest weighted error
// (absolute if use_mad, squared otherwise). weights == nullptr means x^2 (make_qkx3_quants'
// default); make_qkx2_quants is the same search with weights always given.
float make_qkx_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min, uint8_t* Laux,
                      float rmin, float rdelta, int nstep, bool use_mad);

// Non-negative values (sub-block scales or mins) on levels [0, nmax], weighted by weights.
float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* weights);

// out[j] = importance[j] * sqrt(sigma2 + x[j]^2): how ggml turns an importance vector into the
// weights of the error it minimises.
void importance_weights(const float* importance, const float* x, float sigma2, int n, float* out);

// sum of x[j]^2 over n values, accumulated in order.
float sum_of_squares(const float* x, int64_t n);

}  // namespace ggl::quant
