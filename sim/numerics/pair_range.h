// The value range that decides whether an operand may take pe_matmul's BF16 pair path (pe_matmul.cpp,
// pairs_exact): the biased FP32 exponents of its nonzero values and whether each is BF16-exact. Shared by
// pe_matmul and the MX dequantizer that writes the pair layout directly (mx.h, dequantize_x4_pairs).
#pragma once

// GCC 12's AVX-512 intrinsics start from a self-initialised "undefined" vector (GCC bug 105593).
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace trnsim::num {

// Biased FP32 exponents of an operand's nonzero values and the OR of their low 16 bits.
struct PairRange {
  uint32_t low = 0;  // nonzero: some value is not BF16-exact
  int emin = 255;    // 255: no nonzero value
  int emax = 0;      // 255: a NaN or Inf
  void add(const PairRange& r) {
    low |= r.low;
    emin = std::min(emin, r.emin);
    emax = std::max(emax, r.emax);
  }
};

inline PairRange pair_range_scalar(const float* x, int n) {
  PairRange r;
  for (int i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, 4);
    r.low |= u & 0xFFFFu;
    const int e = static_cast<int>((u >> 23) & 0xFF);
    if (u & 0x7FFFFFFFu) r.emin = std::min(r.emin, e);
    r.emax = std::max(r.emax, e);
  }
  return r;
}

// The range over many 16-float vectors, kept in registers and reduced once.
struct PairRangeAcc {
  __m512i low, emin, emax;
  __attribute__((target("avx512f"))) PairRangeAcc()
      : low(_mm512_setzero_si512()), emin(_mm512_set1_epi32(255)), emax(_mm512_setzero_si512()) {}
  __attribute__((target("avx512f"), always_inline)) void add(__m512i u) {
    const __m512i e = _mm512_and_si512(_mm512_srli_epi32(u, 23), _mm512_set1_epi32(0xFF));
    low = _mm512_or_si512(low, _mm512_and_si512(u, _mm512_set1_epi32(0xFFFF)));
    emin = _mm512_mask_min_epi32(emin, _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x7FFFFFFF)), emin, e);
    emax = _mm512_max_epi32(emax, e);
  }
  __attribute__((target("avx512f"))) PairRange get() const {
    alignas(64) uint32_t l[16], lo[16], hi[16];
    _mm512_store_si512(l, low);
    _mm512_store_si512(lo, emin);
    _mm512_store_si512(hi, emax);
    PairRange r;
    for (int i = 0; i < 16; ++i) {
      r.low |= l[i];
      r.emin = std::min(r.emin, static_cast<int>(lo[i]));
      r.emax = std::max(r.emax, static_cast<int>(hi[i]));
    }
    return r;
  }
};

// The range of rows [0, rows) x cols at x (row stride ld).
__attribute__((target("avx512f"))) inline PairRange pair_range_avx512(const float* x, int64_t ld, int rows,
                                                                      int cols) {
  PairRangeAcc acc;
  PairRange tail;
  const int full = cols - cols % 16;
  for (int r = 0; r < rows; ++r) {
    const float* row = x + r * ld;
    for (int j = 0; j < full; j += 16) acc.add(_mm512_loadu_si512(row + j));
    if (full < cols) tail.add(pair_range_scalar(row + full, cols - full));
  }
  PairRange out = acc.get();
  out.add(tail);
  return out;
}

}  // namespace trnsim::num

#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
