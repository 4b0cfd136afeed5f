// ggml's scale searches, step for step (see search.h). Integer levels enter float products as
// floats after the weight: w * x * l is (w * x) * l, w * l * l is (w * l) * l, as in C.
#include "ggml-like/quant/strict_float.h"

#include "ggml-like/quant/search.h"

#include <algorithm>
#include <cmath>

namespace ggl::quant {
namespace {

// The weight of value i in make_qx_quants' error.
inline float qx_weight(const float* weights, int rmse_type, float x, int i) {
  if (weights) return weights[i];
  switch (rmse_type) {
    case 1: return x * x;
    case 2: return 1.0f;
    case 3: return std::fabs(x);
    default: return std::sqrt(std::fabs(x));
  }
}

inline int clamp_level(int l, int lo, int hi) { return std::max(lo, std::min(hi, l)); }

}  // namespace

float make_qx_quants(int n, int nmax, const float* x, int8_t* L, int rmse_type, const float* weights) {
  float amax;
  const float max = signed_absmax(x, n, &amax);
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  float iscale = static_cast<float>(-nmax) / max;
  if (rmse_type == 0) {
    for (int i = 0; i < n; ++i)
      L[i] = static_cast<int8_t>(nmax + clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1));
    return 1.0f / iscale;
  }
  bool return_early = false;
  if (rmse_type < 0) {
    rmse_type = -rmse_type;
    return_early = true;
  }
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = qx_weight(weights, rmse_type, x[i], i);
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  if (return_early) return suml2 > 0 ? 0.5f * (scale + 1.0f / iscale) : 1.0f / iscale;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      const float w = qx_weight(weights, rmse_type, x[i], i);
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i)
        L[i] = static_cast<int8_t>(nmax + clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

float make_q3_quants(int n, int nmax, const float* x, int8_t* L, bool do_rmse) {
  float amax;
  const float max = signed_absmax(x, n, &amax);
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  if (do_rmse) {
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      L[i] = static_cast<int8_t>(l);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    for (int itry = 0; itry < 5; ++itry) {
      int n_changed = 0;
      for (int i = 0; i < n; ++i) {
        const float w = x[i] * x[i];
        const float li = static_cast<float>(L[i]);
        float slx = sumlx - w * x[i] * li;
        if (slx > 0) {
          float sl2 = suml2 - w * li * li;
          const int new_l = clamp_level(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
          if (new_l != L[i]) {
            const float nl = static_cast<float>(new_l);
            slx += w * x[i] * nl;
            sl2 += w * nl * nl;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
              L[i] = static_cast<int8_t>(new_l);
              sumlx = slx;
              suml2 = sl2;
              ++n_changed;
            }
          }
        }
      }
      if (!n_changed) break;
    }
    for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
    return sumlx / suml2;
  }
  for (int i = 0; i < n; ++i)
    L[i] = static_cast<int8_t>(clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1) + nmax);
  return 1.0f / iscale;
}

float make_qkx_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min, uint8_t* Laux,
                      float rmin, float rdelta, int nstep, bool use_mad) {
  auto weight = [&](int i) { return weights ? weights[i] : x[i] * x[i]; };
  float min = x[0], max = x[0];
  float sum_w = weight(0);
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weight(i);
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max <= min) {  // make_qkx2_quants tests ==, the same for finite x (max >= min always)
    std::fill(L, L + n, uint8_t{0});
    *the_min = -min;
    return 0.0f;
  }
  const float nmaxf = static_cast<float>(nmax);
  float iscale = nmaxf / (max - min);
  float scale = 1.0f / iscale;
  float best_mad = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(clamp_level(l, 0, nmax));
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_mad += weight(i) * diff;
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + nmaxf) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_level(nearest_int(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weight(i);
      const float lf = static_cast<float>(l);
      sum_l += w * lf;
      sum_l2 += w * lf * lf;
      sum_xl += w * lf * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float mad = 0.0f;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        mad += weight(i) * diff;
      }
      if (mad < best_mad) {
        std::copy(Laux, Laux + n, L);
        best_mad = mad;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* weights) {
  float max = 0.0f;
  for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
  if (max == 0.0f) {
    std::fill(L, L + n, uint8_t{0});
    return 0.0f;
  }
  const float nmaxf = static_cast<float>(nmax);
  float iscale = nmaxf / max;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(nearest_int(iscale * x[i]));
  const float scale = 1.0f / iscale;
  float best_mse = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - scale * static_cast<float>(L[i]);
    best_mse += weights[i] * diff * diff;
  }
  for (int is = -4; is <= 4; ++is) {
    if (is == 0) continue;
    const float iscale_is = (0.1f * static_cast<float>(is) + nmaxf) / max;
    const float scale_is = 1.0f / iscale_is;
    float mse = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = std::min(nmax, nearest_int(iscale_is * x[i]));
      const float diff = x[i] - scale_is * static_cast<float>(l);
      mse += weights[i] * diff * diff;
    }
    if (mse < best_mse) {
      best_mse = mse;
      iscale = iscale_is;
    }
  }
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = std::min(nmax, nearest_int(iscale * x[i]));
    L[i] = static_cast<uint8_t>(l);
    const float w = weights[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = weights[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      float sl2 = suml2 - w * li * li;
      if (slx > 0 && sl2 > 0) {
        const int new_l = std::min(nmax, nearest_int(x[i] * sl2 / slx));
        if (new_l != L[i]) {
          const float nl = static_cast<float>(new_l);
          slx += w * x[i] * nl;
          sl2 += w * nl * nl;
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<uint8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  return sumlx / suml2;
}

void importance_weights(const float* importance, const float* x, float sigma2, int n, float* out) {
  for (int j = 0; j < n; ++j) out[j] = importance[j] * std::sqrt(sigma2 + x[j] * x[j]);
}

float sum_of_squares(const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) sum += x[j] * x[j];
  return sum;
}

}  // namespace ggl::quant
