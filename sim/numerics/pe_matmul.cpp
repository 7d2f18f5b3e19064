#include "sim/numerics/pe_matmul.h"

// GCC 12's AVX-512 intrinsics start from a self-initialised "undefined" vector (GCC bug 105593): its
// uninitialised-use warnings in this file are false.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "sim/numerics/host_threads.h"
#include "sim/numerics/pair_range.h"

namespace trnsim::num {
namespace {

// Every path below computes c = fma(a, b, c) per element in ascending k, so all give the same bits; the
// vector paths only hold more accumulators in registers.
using ColumnsFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int, int, int, int,
                           bool);

void edge(const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, int K, int m0,
          int m1, int n0, int n1, bool accumulate) {
  for (int m = m0; m < m1; ++m)
    for (int n = n0; n < n1; ++n) {
      float c = accumulate ? C[m * ldc + n] : 0.0f;
      for (int k = 0; k < K; ++k) c = std::fma(A[k * lda + m], B[k * ldb + n], c);
      C[m * ldc + n] = c;
    }
}

void columns_scalar(const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, int K,
                    int M, int n0, int n1, bool accumulate) {
  edge(A, lda, B, ldb, C, ldc, K, 0, M, n0, n1, accumulate);
}

// MB rows x 32 columns of accumulators (2 * MB zmm registers) over kc contraction rows of the packed panel
// Bp ([kc][32], 64-byte aligned).
template <int MB>
__attribute__((target("avx512f"))) inline void block_avx512(const float* A, int64_t lda, const float* Bp,
                                                            float* C, int64_t ldc, int kc, int m, int n,
                                                            bool accumulate) {
  __m512 acc[MB][2];
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < 2; ++j)
      acc[i][j] = accumulate ? _mm512_loadu_ps(C + (m + i) * ldc + n + 16 * j) : _mm512_setzero_ps();
  for (int k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_load_ps(Bp + 32 * k), b1 = _mm512_load_ps(Bp + 32 * k + 16);
    const float* a = A + k * lda + m;
    for (int i = 0; i < MB; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < 2; ++j) _mm512_storeu_ps(C + (m + i) * ldc + n + 16 * j, acc[i][j]);
}

// --- BF16 pairs (AVX512_BF16) ---
// VDPBF16PS adds to each FP32 lane the product of the lanes' high BF16 halves, then that of the low halves,
// each step an FP32 fused multiply-add rounded to nearest even with denormal inputs and results flushed to
// zero (Intel SDM pseudo-code; bf16_pairs_check tests this host does exactly that). With logical k in the
// high half and k + 1 in the low half this is two steps of the documented chain, twice the products per
// instruction. It is used only where that gives the FMA path's bits: every operand value is BF16-exact,
// finite and normal, and no step can produce a subnormal or overflow (pairs_exact below).

// Products a*b of BF16-exact normal values are multiples of 2^(ea + eb - 268) (8 significant bits each); a
// PSUM value is a multiple of 2^(ec - 150). If both quanta are at least 2^-126, every exact partial sum, and
// so every rounded one, is zero or normal: the flushes never act. The magnitudes bound every partial sum
// below 2^127: no step overflows. A value with exponent 0 (subnormal) or 255 fails the bounds.
bool pairs_exact(const PairRange& a, const PairRange& b, const PairRange& c, int K) {
  if (a.low | b.low) return false;
  if (a.emin < 1 || b.emin < 1 || c.emin < 24) return false;
  if (a.emin + b.emin < 142 && a.emin != 255 && b.emin != 255) return false;
  if (a.emax > 254 || b.emax > 254 || c.emax > 250) return false;
  int log2k = 0;
  while ((1 << log2k) < K) ++log2k;
  return (a.emax - 126) + (b.emax - 126) + log2k <= 125;
}

// Two BF16 halves from the high halves of BF16-exact FP32 values: logical k high, k + 1 low.
inline uint32_t pair(const float* hi, const float* lo) {
  uint32_t h, l;
  std::memcpy(&h, hi, 4);
  std::memcpy(&l, lo, 4);
  return (h & 0xFFFF0000u) | (l >> 16);
}
// An odd K's last step pairs with -0 * +0 = -0, which leaves every accumulator as it is.
constexpr uint32_t kNegZeroLow = 0x8000u;

// Row blocks of the pair kernel: 12 rows while they last, then 8, 4 or 1.
inline int block_rows(int m, int M) {
  return m + 12 <= M ? 12 : m + 8 <= M ? 8 : m + 4 <= M ? 4 : 1;
}

// f(std::integral_constant<int, mb>) for a block_rows size mb: one instantiation per size.
template <class F>
inline void with_block_rows(int mb, F&& f) {
  switch (mb) {
    case 12:
      return f(std::integral_constant<int, 12>{});
    case 8:
      return f(std::integral_constant<int, 8>{});
    case 4:
      return f(std::integral_constant<int, 4>{});
    default:
      return f(std::integral_constant<int, 1>{});
  }
}

// A as pairs, each row block's contraction contiguous: the block of MB rows at m holds
// Ap[m * K2 + kk * MB + i] = (A[2kk, m + i], A[2kk + 1, m + i]) (low half +0 past an odd K's end).
std::unique_ptr<uint32_t[]> pack_a(const float* A, int64_t lda, int K, int M) {
  const int K2 = (K + 1) / 2;
  std::unique_ptr<uint32_t[]> ap(new uint32_t[static_cast<size_t>(K2) * M]);  // every element written below
  for (int m = 0; m < M; m += block_rows(m, M)) {
    const int mb = block_rows(m, M);
    uint32_t* out = &ap[static_cast<size_t>(m) * K2];
    for (int kk = 0; kk < K2; ++kk) {
      const float* r0 = A + 2 * kk * lda + m;
      const bool odd = 2 * kk + 1 == K;
      for (int i = 0; i < mb; ++i)
        out[kk * mb + i] = odd ? pair(r0 + i, r0 + i) & 0xFFFF0000u : pair(r0 + i, r0 + lda + i);
    }
  }
  return ap;
}

// acc + the lanes' pairs of b times the pair at a (broadcast): one VDPBF16PS. Clang 16 crashes on the
// intrinsic with a broadcast operand, so clang gets inline assembly (GCC keeps the intrinsic: with the
// assembly it keeps the accumulators in memory).
#if defined(__clang__)
__attribute__((target("avx512f"), always_inline)) inline __m512 dot_pairs(__m512 acc, __m512i b,
                                                                          const uint32_t* a) {
  asm("vdpbf16ps %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(b), "m"(*a));
  return acc;
}
#else
__attribute__((target("avx512f,avx512bf16"), always_inline)) inline __m512 dot_pairs(__m512 acc, __m512i b,
                                                                                     const uint32_t* a) {
  return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_set1_epi32(static_cast<int>(*a)), (__m512bh)b);
}
#endif

// The MB pairs of contraction pair kk lie at Ap + kk * a_step (MB: pack_a's blocks; M: the row-major layout).
template <int MB>
__attribute__((target("avx512f,avx512bf16"))) inline void block_pairs(const uint32_t* Ap, int64_t a_step,
                                                                      const uint32_t* Bq, float* C,
                                                                      int64_t ldc, int kc2, int m, int n,
                                                                      bool accumulate) {
  __m512 acc[MB][2];
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < 2; ++j)
      acc[i][j] = accumulate ? _mm512_loadu_ps(C + (m + i) * ldc + n + 16 * j) : _mm512_setzero_ps();
  for (int kk = 0; kk < kc2; ++kk) {
    const __m512i b0 = _mm512_load_si512(Bq + 32 * kk), b1 = _mm512_load_si512(Bq + 32 * kk + 16);
    const uint32_t* a = Ap + kk * a_step;
    for (int i = 0; i < MB; ++i) {
      acc[i][0] = dot_pairs(acc[i][0], b0, a + i);
      acc[i][1] = dot_pairs(acc[i][1], b1, a + i);
    }
  }
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < 2; ++j) _mm512_storeu_ps(C + (m + i) * ldc + n + 16 * j, acc[i][j]);
}

// The same chain with FP32 fused multiply-adds, one step at a time: each pair of Bq widened in registers
// (high half logical k = 2kk, low half k + 1), A given widened as Af (row k at Af + k * a_step). An odd K's
// last pair adds -0 * +0 = -0 as VDPBF16PS does, which leaves every accumulator as it is.
template <int MB>
__attribute__((target("avx512f"))) inline void block_pairs_fma(const float* Af, int64_t a_step,
                                                               const uint32_t* Bq, float* C, int64_t ldc,
                                                               int kc2, int m, int n, bool accumulate) {
  __m512 acc[MB][2];
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < 2; ++j)
      acc[i][j] = accumulate ? _mm512_loadu_ps(C + (m + i) * ldc + n + 16 * j) : _mm512_setzero_ps();
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  for (int kk = 0; kk < kc2; ++kk) {
    const __m512i p0 = _mm512_load_si512(Bq + 32 * kk), p1 = _mm512_load_si512(Bq + 32 * kk + 16);
    const __m512 h0 = _mm512_castsi512_ps(_mm512_and_si512(p0, high));
    const __m512 h1 = _mm512_castsi512_ps(_mm512_and_si512(p1, high));
    const __m512 l0 = _mm512_castsi512_ps(_mm512_slli_epi32(p0, 16));
    const __m512 l1 = _mm512_castsi512_ps(_mm512_slli_epi32(p1, 16));
    const float* a = Af + 2 * kk * a_step;
    for (int i = 0; i < MB; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
      acc[i][0] = _mm512_fmadd_ps(ai, h0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, h1, acc[i][1]);
    }
    for (int i = 0; i < MB; ++i) {
      const __m512 ai = _mm512_set1_ps(a[a_step + i]);
      acc[i][0] = _mm512_fmadd_ps(ai, l0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, l1, acc[i][1]);
    }
  }
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < 2; ++j) _mm512_storeu_ps(C + (m + i) * ldc + n + 16 * j, acc[i][j]);
}

// Row-major pairs Ap [K2][M] widened to FP32 rows Af [2 K2][M] (row 2kk the high halves, 2kk + 1 the low).
__attribute__((target("avx512f"))) void widen_pairs(const uint32_t* Ap, int K2, int M, float* af) {
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  for (int kk = 0; kk < K2; ++kk) {
    const uint32_t* p = Ap + static_cast<int64_t>(kk) * M;
    float* h = af + static_cast<int64_t>(2 * kk) * M;
    float* l = h + M;
    int m = 0;
    for (; m + 16 <= M; m += 16) {
      const __m512i v = _mm512_loadu_si512(p + m);
      _mm512_storeu_si512(h + m, _mm512_and_si512(v, high));
      _mm512_storeu_si512(l + m, _mm512_slli_epi32(v, 16));
    }
    for (; m < M; ++m) {
      const uint32_t hb = p[m] & 0xFFFF0000u, lb = p[m] << 16;
      std::memcpy(h + m, &hb, 4);
      std::memcpy(l + m, &lb, 4);
    }
  }
}

// Packs the panels of columns [n0, n0 + 32 * np) as pairs, panel p at Bq + p * K2 * 32 ([K2][32]), walking
// B's rows in order, and returns B's range there.
__attribute__((target("avx512f"))) PairRange pack_b_pairs(const float* B, int64_t ldb, int K, int n0, int np,
                                                          uint32_t* Bq) {
  PairRangeAcc acc;
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  const int K2 = (K + 1) / 2;
  for (int kk = 0; kk < K2; ++kk) {
    const float* r0 = B + 2 * kk * ldb + n0;
    const bool odd = 2 * kk + 1 == K;
    for (int j = 0; j < 32 * np; j += 16) {
      const __m512i h = _mm512_loadu_si512(r0 + j);
      acc.add(h);
      __m512i l = _mm512_set1_epi32(static_cast<int>(kNegZeroLow << 16));
      if (!odd) {
        l = _mm512_loadu_si512(r0 + ldb + j);
        acc.add(l);
      }
      _mm512_store_si512(Bq + static_cast<int64_t>(j / 32) * K2 * 32 + 32 * kk + j % 32,
                         _mm512_or_si512(_mm512_and_si512(h, high), _mm512_srli_epi32(l, 16)));
    }
  }
  return acc.get();
}

// The pair path on the panel at n (Bq packed) over all K, in slices of kKc2 pairs as the FP32 path. A is
// pack_a's blocks, or row-major pairs (Ap[kk * M + m]) when `a_row_major`; with Af (A row-major, widened:
// widen_pairs) the steps run as FP32 fused multiply-adds instead of VDPBF16PS (block_pairs_fma).
__attribute__((target("avx512f,avx512bf16"))) void panel_pairs(const uint32_t* Ap, bool a_row_major,
                                                               const uint32_t* Bq, float* C, int64_t ldc,
                                                               int K, int M, int n, bool accumulate,
                                                               const float* Af = nullptr) {
  constexpr int kKc2 = 128;
  const int K2 = (K + 1) / 2;
  for (int k0 = 0; k0 == 0 || k0 < K2; k0 += kKc2) {
    const int kc2 = std::min(kKc2, K2 - k0);
    const bool acc = accumulate || k0 > 0;
    const uint32_t* Bk = Bq + 32 * k0;
    for (int m = 0; m < M; m += block_rows(m, M)) {
      const int mb = block_rows(m, M);
      const uint32_t* Ak = a_row_major ? Ap + static_cast<int64_t>(k0) * M + m
                                       : Ap + static_cast<int64_t>(m) * K2 + static_cast<int64_t>(k0) * mb;
      const int64_t step = a_row_major ? M : mb;
      with_block_rows(mb, [&](auto rows) {
        constexpr int MB = decltype(rows)::value;
        if (Af != nullptr)
          block_pairs_fma<MB>(Af + static_cast<int64_t>(2 * k0) * M + m, M, Bk, C, ldc, kc2, m, n, acc);
        else
          block_pairs<MB>(Ak, step, Bk, C, ldc, kc2, m, n, acc);
      });
    }
  }
}

// The pair path on the whole 32-column panels of [n0, n1) when their B and C values pass pairs_exact with A's
// range a: returns the first column it did not compute (n0 when it computed nothing).
__attribute__((target("avx512f"))) int columns_pairs(const uint32_t* Ap, const PairRange& a, const float* B,
                                                     int64_t ldb, float* C, int64_t ldc, int K, int M, int n0,
                                                     int n1, bool accumulate) {
  const int np = (n1 - n0) / 32, K2 = (K + 1) / 2;
  if (np == 0) return n0;
  // Per call, not thread_local (as the FP32 panel below).
  // Not value-initialised (a memset per call): pack_b_pairs writes every element.
  std::unique_ptr<uint32_t[]> buf(new uint32_t[static_cast<size_t>(np) * K2 * 32 + 16]);
  uint32_t* Bq = reinterpret_cast<uint32_t*>((reinterpret_cast<uintptr_t>(buf.get()) + 63) & ~uintptr_t{63});
  const PairRange b = pack_b_pairs(B, ldb, K, n0, np, Bq);
  const PairRange c = accumulate ? pair_range_avx512(C + n0, ldc, M, 32 * np) : PairRange{};
  if (!pairs_exact(a, b, c, K)) return n0;
  for (int p = 0; p < np; ++p)
    panel_pairs(Ap, false, Bq + static_cast<int64_t>(p) * K2 * 32, C, ldc, K, M, n0 + 32 * p, accumulate);
  return n0 + 32 * np;
}

// Checks once that this host's VDPBF16PS is the two rounded steps pairs_exact relies on: order (high half
// first), a rounding after each step, ties to even, and signed zeros, against std::fma.
__attribute__((target("avx512f,avx512bf16"))) bool bf16_pairs_check() {
  const auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  const auto bf = [](uint32_t h) {
    const uint32_t u = h << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  uint32_t s = 12345;
  for (int t = 0; t < 4096; ++t) {
    uint16_t h[4];
    float c;
    if (t < 4) {
      // c = 1 with products 2^-24 and 2^-24 / -1: one rounding per step, high half first; then zeros.
      const uint16_t one = 0x3F80, tiny = 0x3380, minus_one = 0xBF80;
      const uint16_t cases[4][4] = {
          {tiny, tiny, one, one}, {tiny, minus_one, one, one}, {0, 0, 0x8000, 0}, {0x8000, one, 0, one}};
      for (int j = 0; j < 4; ++j) h[j] = cases[t][j];
      c = t < 2 ? 1.0f : (t == 2 ? -0.0f : 0.0f);
    } else {
      for (auto& x : h) {
        s = s * 1664525u + 1013904223u;
        x = static_cast<uint16_t>(((s >> 9) & 0x807F) | ((96 + (s >> 20) % 64) << 7));
      }
      s = s * 1664525u + 1013904223u;
      c = bf(h[0]) * static_cast<float>(s >> 8);
    }
    // lane: a = (h0 high, h1 low), b = (h2 high, h3 low)
    const uint32_t a = (uint32_t{h[0]} << 16) | h[1];
    const __m512 r =
        dot_pairs(_mm512_set1_ps(c), _mm512_set1_epi32(static_cast<int>((uint32_t{h[2]} << 16) | h[3])), &a);
    const float want = std::fma(bf(h[1]), bf(h[3]), std::fma(bf(h[0]), bf(h[2]), c));
    if (bits(_mm512_cvtss_f32(r)) != bits(want)) return false;
  }
  return true;
}

// Whether the pair path computes with FP32 fused multiply-adds (block_pairs_fma) rather than VDPBF16PS: on
// Intel cores VDPBF16PS multiplies at half FP32 FMA's rate (Sapphire Rapids, one core: 47 against 97 GMAC/s),
// so the pairs are widened in registers there; elsewhere VDPBF16PS as before. Either gives the same bits.
bool pairs_by_fma() {
  __builtin_cpu_init();
  static const bool intel = __builtin_cpu_is("intel");
  return intel;
}

bool bf16_pairs_usable() {
  __builtin_cpu_init();
  static const bool ok =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16") && bf16_pairs_check();
  return ok;
}

// Each 32-column panel of B is first copied to a contiguous, aligned buffer (B rows are far apart in a wide
// tile, so the panel would not stay in cache) and walked in slices of kKc contraction rows (the slice fits
// L1). Between slices the accumulators go through C as FP32, which they already are: the chain of fused
// multiply-adds per element, in ascending k, is the same. With Ap (A as BF16 pairs, its range a) the whole
// panels first take the pair path (columns_pairs) when B's and C's values there allow it.
__attribute__((target("avx512f"))) void columns_avx512(const float* A, int64_t lda, const float* B,
                                                       int64_t ldb, float* C, int64_t ldc, int K, int M,
                                                       int n0, int n1, bool accumulate, const uint32_t* Ap,
                                                       const PairRange& a) {
  constexpr int NB = 32, kKc = 256;
  int n = Ap ? columns_pairs(Ap, a, B, ldb, C, ldc, K, M, n0, n1, accumulate) : n0;
  // Per call, not thread_local: this runs on the host helper threads too, which live on, and LeakSanitizer
  // reports what their thread_locals hold at exit. Only when a panel is left, not value-initialised (the copy
  // below writes the rows the blocks read).
  std::unique_ptr<float[]> panel(n + NB <= n1 ? new float[static_cast<size_t>(NB) * K + 16] : nullptr);
  float* Bp = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(panel.get()) + 63) & ~uintptr_t{63});
  for (; n + NB <= n1; n += NB) {
    for (int k = 0; k < K; ++k) {
      _mm512_store_ps(Bp + NB * k, _mm512_loadu_ps(B + k * ldb + n));
      _mm512_store_ps(Bp + NB * k + 16, _mm512_loadu_ps(B + k * ldb + n + 16));
    }
    for (int k0 = 0; k0 == 0 || k0 < K; k0 += kKc) {  // once at K = 0: C = accumulate ? C : +0
      const int kc = std::min(kKc, K - k0);
      const bool acc = accumulate || k0 > 0;
      const float* Ak = A + k0 * lda;
      const float* Bk = Bp + NB * k0;
      int m = 0;
      for (; m + 12 <= M; m += 12) block_avx512<12>(Ak, lda, Bk, C, ldc, kc, m, n, acc);
      for (; m + 4 <= M; m += 4) block_avx512<4>(Ak, lda, Bk, C, ldc, kc, m, n, acc);
      for (; m < M; ++m) block_avx512<1>(Ak, lda, Bk, C, ldc, kc, m, n, acc);
    }
  }
  if (n < n1) edge(A, lda, B, ldb, C, ldc, K, 0, M, n, n1, accumulate);
}

// 4 rows x 16 columns of accumulators in 8 ymm registers.
__attribute__((target("avx2,fma"))) void columns_avx2(const float* A, int64_t lda, const float* B,
                                                      int64_t ldb, float* C, int64_t ldc, int K, int M,
                                                      int n0, int n1, bool accumulate) {
  constexpr int MB = 4, NB = 16;
  const int m_full = M - M % MB;
  int n = n0;
  for (; n + NB <= n1; n += NB) {
    for (int m = 0; m < m_full; m += MB) {
      __m256 acc[MB][2];
      for (int i = 0; i < MB; ++i)
        for (int j = 0; j < 2; ++j)
          acc[i][j] = accumulate ? _mm256_loadu_ps(C + (m + i) * ldc + n + 8 * j) : _mm256_setzero_ps();
      for (int k = 0; k < K; ++k) {
        const float* b = B + k * ldb + n;
        const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        const float* a = A + k * lda + m;
        for (int i = 0; i < MB; ++i) {
          const __m256 ai = _mm256_set1_ps(a[i]);
          acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
          acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
        }
      }
      for (int i = 0; i < MB; ++i)
        for (int j = 0; j < 2; ++j) _mm256_storeu_ps(C + (m + i) * ldc + n + 8 * j, acc[i][j]);
    }
    if (m_full < M) edge(A, lda, B, ldb, C, ldc, K, m_full, M, n, n + NB, accumulate);
  }
  if (n < n1) edge(A, lda, B, ldb, C, ldc, K, 0, M, n, n1, accumulate);
}

__attribute__((target("avx512f"))) void columns_avx512_fp32(const float* A, int64_t lda, const float* B,
                                                            int64_t ldb, float* C, int64_t ldc, int K, int M,
                                                            int n0, int n1, bool accumulate) {
  columns_avx512(A, lda, B, ldb, C, ldc, K, M, n0, n1, accumulate, nullptr, PairRange{});
}

ColumnsFn pick() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return columns_avx512_fp32;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return columns_avx2;
  return columns_scalar;
}

}  // namespace

bool pe_matmul_bf16_pairs() {
  static const bool ok = pick() == columns_avx512_fp32 && bf16_pairs_usable();
  return ok;
}

void pe_matmul(const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, int K, int M,
               int N, bool accumulate, int threads) {
  static const ColumnsFn columns = pick();
  if (M <= 0 || N <= 0) return;
  // A as BF16 pairs when its values allow the pair path (B and C are checked per panel).
  std::unique_ptr<uint32_t[]> ap;
  PairRange a;
  if (K > 0 && N >= 32 && pe_matmul_bf16_pairs() && !pairs_by_fma()) {
    a = pair_range_avx512(A, lda, K, M);
    if (a.low == 0 && a.emin >= 1 && a.emax <= 254) ap = pack_a(A, lda, K, M);
  }
  const auto run = [&](int n0, int n1) {
    if (!ap)
      columns(A, lda, B, ldb, C, ldc, K, M, n0, n1, accumulate);
    else
      columns_avx512(A, lda, B, ldb, C, ldc, K, M, n0, n1, accumulate, ap.get(), a);
  };
  constexpr int kChunk = 32;  // column granularity of the thread split
  threads = std::clamp(threads, 1, std::max(1, N / kChunk));
  if (threads == 1) {
    run(0, N);
    return;
  }
  // Each output element is computed by exactly one thread, in the same order as with one thread; the
  // threads claim the 32-column chunks one at a time.
  const int chunks = (N + kChunk - 1) / kChunk;
  host_for(chunks, [&](int p) { run(p * kChunk, std::min(N, (p + 1) * kChunk)); });
}

bool pe_matmul_pairs_by_fma() {
  return pairs_by_fma();
}

void pe_matmul_pairs_widen(const uint32_t* Ap, int K, int M, float* Af) {
  widen_pairs(Ap, K / 2, M, Af);
}

std::vector<std::pair<int, int>> pe_matmul_pairs(const uint32_t* Ap, const PairRange& a, const uint32_t* Bq,
                                                 const PairRange& b, float* C, int64_t ldc, int K, int M,
                                                 int N, bool accumulate, int threads, const float* Af) {
  const int K2 = K / 2, chunks = N / 32;
  // One part of 32-column panels per thread, or (several threads) one panel a part, claimed in turn.
  const int parts = std::clamp(threads, 1, std::max(1, chunks)) > 1 ? chunks : 1;
  // Each part's columns once their PSUM values are known to pass (else they are left, untouched).
  std::vector<char> left(static_cast<size_t>(parts), 0);
  // With FP32 fused multiply-adds (pairs_by_fma) the steps are pe_matmul's own instructions on the same
  // values, whatever their range: only values the pairs do not hold exactly leave columns.
  const bool fma = pairs_by_fma();
  std::unique_ptr<float[]> own;  // A widened here when the caller holds no widening
  if (fma && Af == nullptr) {
    own.reset(new float[static_cast<size_t>(2 * K2) * M]);  // every element written by widen_pairs
    widen_pairs(Ap, K2, M, own.get());
    Af = own.get();
  }
  host_for(parts, [&](int t) {
    const int p0 = chunks * t / parts, p1 = chunks * (t + 1) / parts;
    if (p0 == p1) return;
    const PairRange c =
        accumulate && !fma ? pair_range_avx512(C + 32 * p0, ldc, M, 32 * (p1 - p0)) : PairRange{};
    if (fma ? (a.low | b.low) != 0 : !pairs_exact(a, b, c, K)) {
      left[static_cast<size_t>(t)] = 1;
      return;
    }
    for (int p = p0; p < p1; ++p)
      panel_pairs(Ap, true, Bq + static_cast<int64_t>(p) * K2 * 32, C, ldc, K, M, 32 * p, accumulate,
                  fma ? Af : nullptr);
  });
  // The left columns as ranges, adjacent parts joined.
  std::vector<std::pair<int, int>> out;
  for (int t = 0; t < parts; ++t) {
    if (!left[static_cast<size_t>(t)]) continue;
    const int n0 = 32 * (chunks * t / parts), n1 = 32 * (chunks * (t + 1) / parts);
    if (!out.empty() && out.back().second == n0)
      out.back().second = n1;
    else
      out.emplace_back(n0, n1);
  }
  return out;
}

}  // namespace trnsim::num
