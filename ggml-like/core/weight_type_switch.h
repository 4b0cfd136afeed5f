// The one switch from a runtime weight type to a compile-time one: the CPU and CUDA back ends
// each keep a per-type template (a block decoder, ...) and pick its instance through this, so
// the list of weight types is written once. Plain host C++ (no GGL_HD): g++ and nvcc's host pass
// both compile it, and the kernels it selects are launched from the host.
#pragma once
#include <type_traits>

#include "ggml-like/core/types.h"

namespace ggl {

// A weight type as a compile-time value: decltype(tag)::value is the Type.
template <Type T>
using TypeTag = std::integral_constant<Type, T>;

// Calls f(TypeTag<t>{}) and returns true where t is one of the weight types (the types a weight
// tensor may have: F32, F16, BF16, the legacy 32-value quants, the K-quants, IQ4_NL, IQ4_XS and
// the i-quants IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S); returns false for any other
// type (Q8_K, the integer types, F64).
template <class F>
bool with_weight_type(Type t, F&& f) {
  switch (t) {
    case Type::F32: f(TypeTag<Type::F32>{}); return true;
    case Type::F16: f(TypeTag<Type::F16>{}); return true;
    case Type::BF16: f(TypeTag<Type::BF16>{}); return true;
    case Type::Q8_0: f(TypeTag<Type::Q8_0>{}); return true;
    case Type::Q4_0: f(TypeTag<Type::Q4_0>{}); return true;
    case Type::Q4_1: f(TypeTag<Type::Q4_1>{}); return true;
    case Type::Q5_0: f(TypeTag<Type::Q5_0>{}); return true;
    case Type::Q5_1: f(TypeTag<Type::Q5_1>{}); return true;
    case Type::Q2_K: f(TypeTag<Type::Q2_K>{}); return true;
    case Type::Q3_K: f(TypeTag<Type::Q3_K>{}); return true;
    case Type::Q4_K: f(TypeTag<Type::Q4_K>{}); return true;
    case Type::Q5_K: f(TypeTag<Type::Q5_K>{}); return true;
    case Type::Q6_K: f(TypeTag<Type::Q6_K>{}); return true;
    case Type::IQ4_NL: f(TypeTag<Type::IQ4_NL>{}); return true;
    case Type::IQ4_XS: f(TypeTag<Type::IQ4_XS>{}); return true;
    case Type::IQ2_XXS: f(TypeTag<Type::IQ2_XXS>{}); return true;
    case Type::IQ2_XS: f(TypeTag<Type::IQ2_XS>{}); return true;
    case Type::IQ2_S: f(TypeTag<Type::IQ2_S>{}); return true;
    case Type::IQ1_S: f(TypeTag<Type::IQ1_S>{}); return true;
    case Type::IQ1_M: f(TypeTag<Type::IQ1_M>{}); return true;
    case Type::IQ3_XXS: f(TypeTag<Type::IQ3_XXS>{}); return true;
    case Type::IQ3_S: f(TypeTag<Type::IQ3_S>{}); return true;
    default: return false;
  }
}

}  // namespace ggl
