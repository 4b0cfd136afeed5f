// Included first by the quantizer sources (only .cpp files): ggml's reference quantizers round
// every product before the following add; a fused multiply-add (which -march=native lets the
// compiler form across statements) flips rare rounding edges and with them whole blocks of bytes.
#pragma once

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
