// The 32 x 32 16-bit vector transpose the simulator's BF16 transposes use: every element lands at its
// transposed place, rows scattered in memory (strides of a 4 KiB SBUF-like layout).
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "sim/numerics/transpose.h"

using namespace trnsim::num;

TEST_CASE("transpose32_u16 moves element (i, j) to (j, i)", "[numerics][transpose]") {
  if (!has_transpose32_u16()) {
    WARN("host without AVX-512BW: nothing to test");
    return;
  }
  // Source rows 2048 elements apart, destination rows 2051 apart (odd, so no row is 64-byte aligned).
  std::vector<uint16_t> src(32 * 2048), dst(32 * 2051 + 32, 0xFFFF);
  const uint16_t* s[32];
  uint16_t* d[32];
  for (int i = 0; i < 32; ++i) {
    s[i] = &src[static_cast<size_t>(i) * 2048 + 7];
    d[i] = &dst[static_cast<size_t>(i) * 2051 + 3];
    for (int j = 0; j < 32; ++j)
      src[static_cast<size_t>(i) * 2048 + 7 + j] = static_cast<uint16_t>(i * 1000 + j);
  }
  transpose32_u16(s, d);
  int wrong = 0;
  for (int j = 0; j < 32; ++j)
    for (int i = 0; i < 32; ++i) wrong += d[j][i] != static_cast<uint16_t>(i * 1000 + j);
  CHECK(wrong == 0);
  // Nothing outside the 32 destination runs was written.
  int outside = 0;
  for (size_t k = 0; k < dst.size(); ++k) {
    const size_t row = k / 2051, col = k % 2051;
    if (row >= 32 || col < 3 || col >= 35) outside += dst[k] != 0xFFFF;
  }
  CHECK(outside == 0);
}

TEST_CASE("shuffle16_blocks permutes each 16-byte block's bytes by one index", "[numerics][transpose]") {
  if (!has_shuffle16()) {
    WARN("host without SSSE3: nothing to test");
    return;
  }
  // The BF16 [4][2] -> [2][4] swap of a permuted PSUM tile's copy, unaligned source and destination.
  uint8_t index[16];
  for (int e = 0; e < 8; ++e)
    for (int b = 0; b < 2; ++b) index[2 * e + b] = static_cast<uint8_t>(2 * ((e % 4) * 2 + e / 4) + b);
  constexpr int kBlocks = 5;
  std::vector<uint8_t> src(16 * kBlocks + 3), dst(16 * kBlocks + 2, 0xEE);
  for (size_t k = 0; k < src.size(); ++k) src[k] = static_cast<uint8_t>(k * 7 + 1);
  shuffle16_blocks(src.data() + 3, dst.data() + 1, kBlocks, index);
  int wrong = 0;
  for (int blk = 0; blk < kBlocks; ++blk)
    for (int i = 0; i < 16; ++i) wrong += dst[1 + 16 * blk + i] != src[3 + 16 * blk + index[i]];
  CHECK(wrong == 0);
  CHECK(dst.front() == 0xEE);
  CHECK(dst.back() == 0xEE);
}
