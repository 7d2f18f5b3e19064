// 32 x 32 transposes of 16-bit elements (BF16, FP16, int16 bits) and byte permutations within 16-byte
// blocks for the simulator's transposes and permuted copies.
#pragma once

#include <cstdint>

namespace trnsim::num {

// True when this host runs transpose32_u16 (AVX-512BW).
bool has_transpose32_u16();
// dst[j][i] = src[i][j] for i, j < 32: src[i] and dst[j] each point at 32 consecutive elements. The rows may
// be anywhere but must not overlap. Only where has_transpose32_u16() is true.
void transpose32_u16(const uint16_t* const src[32], uint16_t* const dst[32]);

// True when this host runs shuffle16_blocks (SSSE3).
bool has_shuffle16();
// dst[16 b + i] = src[16 b + index[i]] for b < blocks, i < 16 (index[i] < 16). src and dst must not overlap.
// Only where has_shuffle16() is true.
void shuffle16_blocks(const uint8_t* src, uint8_t* dst, uint64_t blocks, const uint8_t index[16]);

}  // namespace trnsim::num
