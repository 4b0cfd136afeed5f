// Every weight type the 16-bit integer GEMM unpacks to 16-bit weights per 32 values, by Type: the
// K-quant / IQ4 / Q5 Kinds (kquant_unpack.h) and the i-quant Kinds (iquant_unpack.h).
#pragma once
#include "ggml-like/cpu/arch/iquant_unpack.h"
#include "ggml-like/cpu/arch/kquant_unpack.h"
#if GGL_INT16_UNPACK
#include <cstdint>

#include "ggml-like/core/types.h"

namespace ggl::GGL_ISA::unpack16 {

// Calls body.template operator()<Kind>() with the Kind of type t and returns true, or returns
// false where t is not one of these types.
template <class Body>
bool with_kind(Type t, Body&& body) {
  switch (t) {
    case Type::Q2_K: body.template operator()<Q2_K>(); return true;
    case Type::Q3_K: body.template operator()<Q3_K>(); return true;
    case Type::Q4_K: body.template operator()<Q45_K<false>>(); return true;
    case Type::Q5_K: body.template operator()<Q45_K<true>>(); return true;
    case Type::Q6_K: body.template operator()<Q6_K>(); return true;
    case Type::IQ4_XS: body.template operator()<IQ4_XS>(); return true;
    case Type::IQ4_NL: body.template operator()<IQ4_NL>(); return true;
    case Type::Q5_0: body.template operator()<Q5<false>>(); return true;
    case Type::Q5_1: body.template operator()<Q5<true>>(); return true;
    case Type::IQ2_XXS: body.template operator()<IQ2_XXS>(); return true;
    case Type::IQ2_XS: body.template operator()<IQ2_XS>(); return true;
    case Type::IQ2_S: body.template operator()<IQ2_S>(); return true;
    case Type::IQ3_XXS: body.template operator()<IQ3_XXS>(); return true;
    case Type::IQ3_S: body.template operator()<IQ3_S>(); return true;
    case Type::IQ1_S: body.template operator()<IQ1_S>(); return true;
    case Type::IQ1_M: body.template operator()<IQ1_M>(); return true;
    default: return false;
  }
}

// Values per weight block of type t where it is one of these types, else 0.
inline int64_t block_values(Type t) {
  int64_t values = 0;
  with_kind(t, [&]<class Kind>() { values = Kind::kValues; });
  return values;
}

}  // namespace ggl::GGL_ISA::unpack16
#endif
