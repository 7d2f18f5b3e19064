// 32 x 32 transposes of 16-bit elements (BF16, FP16, int16 bits) for the simulator's transposes.
#pragma once

#include <cstdint>

namespace trnsim::num {

// True when this host runs transpose32_u16 (AVX-512BW).
bool has_transpose32_u16();
// dst[j][i] = src[i][j] for i, j < 32: src[i] and dst[j] each point at 32 consecutive elements. The rows may
// be anywhere but must not overlap. Only where has_transpose32_u16() is true.
void transpose32_u16(const uint16_t* const src[32], uint16_t* const dst[32]);

}  // namespace trnsim::num
