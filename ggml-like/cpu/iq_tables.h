// The i-quants' decode tables for the CPU kernels, derived at compile time from the grids
// (quant/iq_grids.h, quant/iq3.h): the same for every kernel set, so outside the sets' namespaces.
#pragma once
#include <array>
#include <cstdint>

#include "ggml-like/quant/iq3.h"
#include "ggml-like/quant/iq_grids.h"

namespace ggl::iq_tables {

// An IQ3 grid's points as 4 bytes each, byte i the magnitude of coordinate i.
template <int N, class Value>
constexpr std::array<uint32_t, N> iq3_point_bytes(const uint16_t (&codes)[N], Value value) {
  std::array<uint32_t, N> t{};
  for (int p = 0; p < N; ++p)
    for (int i = 0; i < 4; ++i) t[p] |= static_cast<uint32_t>(value(iq3_level(codes[p], i))) << (8 * i);
  return t;
}
inline constexpr auto kIq3XxsBytes = iq3_point_bytes(kIq3XxsGrid, [](int l) { return iq3_xxs_value(l); });
inline constexpr auto kIq3SBytes = iq3_point_bytes(kIq3SGrid, [](int l) { return iq3_s_value(l); });

// IQ1's points with each coordinate c as the byte 8 c + 1 (-7, 1, 9): the value 8 (c + 1/8); a
// negative shift subtracts 2.
inline constexpr uint8_t kIq1Levels8[3] = {0xf9, 0x01, 0x09};
inline constexpr IqGrid<2048> kIq1sGrid8 = make_iq_grid(kIq1sPoints, kIq1Levels8);

}  // namespace ggl::iq_tables
