#include "sim/numerics/transpose.h"

// GCC 12's AVX-512 intrinsics start from a self-initialised "undefined" vector (GCC bug 105593): its
// uninitialised-use warnings in this file are false.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <array>

namespace trnsim::num {

bool has_transpose32_u16() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  }();
  return yes;
}

// Five butterfly stages, b = 16, 8, 4, 2, 1: in every 2b x 2b block, rows i and i + b (i & b == 0) swap
// their off-diagonal b x b blocks. Row i keeps columns with c & b == 0 and takes row i + b's columns c - b
// elsewhere; row i + b takes row i's columns c + b where c & b == 0 and keeps the rest. After all five the
// tile is transposed (the swaps of the recursive block transpose, which commute).
[[gnu::target("avx512f,avx512bw")]] void transpose32_u16(const uint16_t* const src[32],
                                                         uint16_t* const dst[32]) {
  __m512i r[32];
  for (int i = 0; i < 32; ++i) r[i] = _mm512_loadu_si512(src[i]);
  for (int b = 16; b >= 1; b /= 2) {
    alignas(64) std::array<uint16_t, 32> lo{}, hi{};
    for (int c = 0; c < 32; ++c) {  // permutex2var: index 0-31 the first row, 32-63 the second
      lo[c] = static_cast<uint16_t>((c & b) ? 32 + c - b : c);
      hi[c] = static_cast<uint16_t>((c & b) ? 32 + c : c + b);
    }
    const __m512i il = _mm512_load_si512(lo.data()), ih = _mm512_load_si512(hi.data());
    for (int i = 0; i < 32; ++i) {
      if (i & b) continue;
      const __m512i a = r[i], c = r[i + b];
      r[i] = _mm512_permutex2var_epi16(a, il, c);
      r[i + b] = _mm512_permutex2var_epi16(a, ih, c);
    }
  }
  for (int j = 0; j < 32; ++j) _mm512_storeu_si512(dst[j], r[j]);
}

bool has_shuffle16() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("ssse3") != 0;
  }();
  return yes;
}

[[gnu::target("ssse3")]] void shuffle16_blocks(const uint8_t* src, uint8_t* dst, uint64_t blocks,
                                               const uint8_t index[16]) {
  const __m128i m = _mm_loadu_si128(reinterpret_cast<const __m128i*>(index));
  for (uint64_t b = 0; b < blocks; ++b) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16 * b));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 16 * b), _mm_shuffle_epi8(v, m));
  }
}

}  // namespace trnsim::num
