#include "kernels/ref/gemm_f64.h"

#include <fmt/format.h>
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

#include "sim/base/error.h"
#include "sim/numerics/host_threads.h"

namespace trnsim::ref {
namespace {

// Magnitude and granularity of a set of FP64 values: every nonzero one is below 2^e and an integer multiple
// of 2^t.
struct Span {
  int e = INT_MIN, t = INT_MAX;
  bool finite = true;
  bool any() const { return e != INT_MIN; }
};

Span span_of(const double* v, int64_t n) {
  // Branch-free over the values: the largest magnitude's bits, and the lowest set bit's exponent (biased
  // field plus trailing zeros of the significand; zeros excluded).
  uint64_t max_abs = 0;
  int64_t min_low = INT64_MAX;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t abs = std::bit_cast<uint64_t>(v[i]) & ~(uint64_t{1} << 63);
    max_abs = std::max(max_abs, abs);
    const int64_t exp = static_cast<int64_t>(abs >> 52);
    const uint64_t sig = (abs & ((uint64_t{1} << 52) - 1)) | (static_cast<uint64_t>(exp != 0) << 52);
    const int64_t low = std::max<int64_t>(exp, 1) + std::countr_zero(sig | (uint64_t{1} << 63));
    min_low = std::min(min_low, abs == 0 ? INT64_MAX : low);
  }
  Span s;
  if (max_abs >= uint64_t{0x7FF} << 52) {
    s.finite = false;
    return s;
  }
  if (max_abs == 0) return s;
  const int exp = static_cast<int>(max_abs >> 52);
  const uint64_t sig = (max_abs & ((uint64_t{1} << 52) - 1)) | (static_cast<uint64_t>(exp != 0) << 52);
  s.e = std::max(exp, 1) - 1075 + static_cast<int>(std::bit_width(sig));
  s.t = static_cast<int>(min_low) - 1075;
  return s;
}

// The bound of gemm_f64.h over all (row of a, row of b) pairs: it separates into the worst row of each. Stops
// at the first row of b that breaks it (operands of the exact references usually do at once).
bool exact_bound(const double* a, const double* b, int64_t n, int64_t c, int64_t K) {
  const int kbits = static_cast<int>(std::bit_width(static_cast<uint64_t>(K)));  // K < 2^kbits
  int a_width = INT_MIN, a_e = INT_MIN, a_t = INT_MAX;
  for (int64_t i = 0; i < n; ++i) {
    const Span s = span_of(a + i * K, K);
    if (!s.finite) return false;
    if (!s.any()) continue;
    a_width = std::max(a_width, s.e - s.t), a_e = std::max(a_e, s.e), a_t = std::min(a_t, s.t);
    if (a_width + kbits > 53) return false;
  }
  const bool a_zero = a_width == INT_MIN;  // every product is zero (if b is finite)
  for (int64_t j = 0; j < c; ++j) {
    const Span s = span_of(b + j * K, K);
    if (!s.finite) return false;
    if (!s.any() || a_zero) continue;
    if (a_width + (s.e - s.t) + kbits > 53 || a_t + s.t < -1074 || a_e + s.e + kbits > 1024) return false;
  }
  return true;
}

constexpr int kMr = 8, kNr = 24, kKc = 256;  // register tile (rows x columns) and K block

// Every kernel below computes each element of C the same way, so they give the same bytes: per K block,
// acc = 0, then acc = fma(a[i][k], b[k][j], acc) for k in order, then C[i][j] += acc. Vector lanes are
// different elements; nothing is summed across lanes.

// C[mr, nr] (row stride ldc) += ap^T bp over kc: ap [kc][kMr], bp [kc][kNr] packed, zero-padded.
__attribute__((target("avx512f"))) void micro_avx512(const double* ap, const double* bp, int kc, double* C,
                                                     int64_t ldc, int mr, int nr) {
  __m512d acc[kMr][3];
#pragma GCC unroll 8
  for (int i = 0; i < kMr; ++i)
#pragma GCC unroll 3
    for (int j = 0; j < 3; ++j) acc[i][j] = _mm512_setzero_pd();
  for (int k = 0; k < kc; ++k) {
    const double* b = bp + k * kNr;
    const __m512d b0 = _mm512_loadu_pd(b), b1 = _mm512_loadu_pd(b + 8), b2 = _mm512_loadu_pd(b + 16);
    const double* a = ap + k * kMr;
#pragma GCC unroll 8
    for (int i = 0; i < kMr; ++i) {
      const __m512d ai = _mm512_set1_pd(a[i]);
      acc[i][0] = _mm512_fmadd_pd(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_pd(ai, b1, acc[i][1]);
      acc[i][2] = _mm512_fmadd_pd(ai, b2, acc[i][2]);
    }
  }
  if (mr == kMr && nr == kNr) {  // a whole tile: C += acc from the registers
#pragma GCC unroll 8
    for (int i = 0; i < kMr; ++i)
#pragma GCC unroll 3
      for (int j = 0; j < 3; ++j) {
        double* c = C + i * ldc + 8 * j;
        _mm512_storeu_pd(c, _mm512_add_pd(_mm512_loadu_pd(c), acc[i][j]));
      }
    return;
  }
  alignas(64) double tile[kMr][kNr];
#pragma GCC unroll 8
  for (int i = 0; i < kMr; ++i)
#pragma GCC unroll 3
    for (int j = 0; j < 3; ++j) _mm512_store_pd(&tile[i][8 * j], acc[i][j]);
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) C[i * ldc + j] += tile[i][j];
}

// The same with AVX2 and FMA: the 8 x 24 tile as four 4 x 12 quarters (12 accumulators each).
__attribute__((target("avx2,fma"))) void micro_avx2(const double* ap, const double* bp, int kc, double* C,
                                                    int64_t ldc, int mr, int nr) {
  alignas(32) double tile[kMr][kNr];
  for (int i0 = 0; i0 < kMr; i0 += 4)
    for (int j0 = 0; j0 < kNr; j0 += 12) {
      __m256d acc[4][3];
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i)
#pragma GCC unroll 3
        for (int j = 0; j < 3; ++j) acc[i][j] = _mm256_setzero_pd();
      for (int k = 0; k < kc; ++k) {
        const double* b = bp + k * kNr + j0;
        const __m256d b0 = _mm256_loadu_pd(b), b1 = _mm256_loadu_pd(b + 4), b2 = _mm256_loadu_pd(b + 8);
        const double* a = ap + k * kMr + i0;
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {
          const __m256d ai = _mm256_broadcast_sd(a + i);
          acc[i][0] = _mm256_fmadd_pd(ai, b0, acc[i][0]);
          acc[i][1] = _mm256_fmadd_pd(ai, b1, acc[i][1]);
          acc[i][2] = _mm256_fmadd_pd(ai, b2, acc[i][2]);
        }
      }
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i)
#pragma GCC unroll 3
        for (int j = 0; j < 3; ++j) _mm256_store_pd(&tile[i0 + i][j0 + 4 * j], acc[i][j]);
    }
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) C[i * ldc + j] += tile[i][j];
}

// The same without vector extensions (any x86-64): slow, but the same bytes.
void micro_scalar(const double* ap, const double* bp, int kc, double* C, int64_t ldc, int mr, int nr) {
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) {
      double acc = 0.0;
      for (int k = 0; k < kc; ++k) acc = std::fma(ap[k * kMr + i], bp[k * kNr + j], acc);
      C[i * ldc + j] += acc;
    }
}

using Micro = void (*)(const double*, const double*, int, double*, int64_t, int, int);

Micro micro_kernel() {
  static const Micro m = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return &micro_avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &micro_avx2;
    return &micro_scalar;
  }();
  return m;
}

// A matrix seen as op(X): element (r, k) at x[r * ld + k], or at x[k * ld + r] when transposed. FP64, or
// FP32 (xf) widened exactly as it is packed, so an FP32 operand needs no FP64 copy of its own.
struct Mat {
  const double* x;
  int64_t ld;
  bool trans;
  const float* xf = nullptr;
};

template <class T>
void pack_from(const T* x, const Mat& m, int64_t r0, int64_t rows, int tile_rows, int64_t k0, int kc,
               double* p) {
  if (m.trans) {
    for (int k = 0; k < kc; ++k) std::copy_n(x + (k0 + k) * m.ld + r0, rows, p + k * tile_rows);
    return;
  }
  for (int64_t i = 0; i < rows; ++i) {
    const T* src = x + (r0 + i) * m.ld + k0;
    for (int k = 0; k < kc; ++k) p[k * tile_rows + i] = src[k];
  }
}

// Packs rows [r0, r0 + tile_rows) of `m` (`rows` of them real, the rest zero) over K block [k0, k0 + kc) as
// p[k * tile_rows + i]: row-contiguous sources read along k, transposed ones along the rows.
void pack(const Mat& m, int64_t r0, int64_t rows, int tile_rows, int64_t k0, int kc, double* p) {
  if (rows < tile_rows) std::fill(p, p + static_cast<int64_t>(kc) * tile_rows, 0.0);
  if (m.xf != nullptr) return pack_from(m.xf, m, r0, rows, tile_rows, k0, kc, p);
  pack_from(m.x, m, r0, rows, tile_rows, k0, kc, p);
}

// Output rows a part computes at once: the packed rows of A for one K block (kMc x kKc doubles, 1 MiB) stay
// in the core's L2 while every panel of B goes past them.
constexpr int64_t kMc = 512;

// Columns [j0, j1) of rows [r0, r1) of out [n, c] = A [n, K] B^T, where B is given as [c, K] (bt: element
// (j, k)). Per row chunk and K block, A is packed once and each 24-column panel of B once.
void gemm_part(const Mat& a, const Mat& bt, int64_t r0, int64_t r1, int64_t j0, int64_t j1, int64_t c,
               int64_t K, double* out) {
  const Micro micro = micro_kernel();
  for (int64_t r = r0; r < r1; ++r) std::fill(out + r * c + j0, out + r * c + j1, 0.0);
  std::vector<double> ap(static_cast<size_t>(kMc * kKc)), bp(static_cast<size_t>(kKc * kNr));
  for (int64_t m0 = r0; m0 < r1; m0 += kMc) {
    const int64_t m1 = std::min(r1, m0 + kMc), tiles = (m1 - m0 + kMr - 1) / kMr;
    for (int64_t k0 = 0; k0 < K; k0 += kKc) {
      const int kc = static_cast<int>(std::min<int64_t>(kKc, K - k0));
      for (int64_t t = 0; t < tiles; ++t) {
        const int64_t i0 = m0 + t * kMr;
        pack(a, i0, std::min<int64_t>(kMr, m1 - i0), kMr, k0, kc, ap.data() + t * kKc * kMr);
      }
      for (int64_t jj = j0; jj < j1; jj += kNr) {
        const int nr = static_cast<int>(std::min<int64_t>(kNr, j1 - jj));
        pack(bt, jj, nr, kNr, k0, kc, bp.data());
        for (int64_t t = 0; t < tiles; ++t) {
          const int64_t i0 = m0 + t * kMr;
          micro(ap.data() + t * kKc * kMr, bp.data(), kc, out + i0 * c + jj, c,
                static_cast<int>(std::min<int64_t>(kMr, m1 - i0)), nr);
        }
      }
    }
  }
}

void gemm(const Mat& a, const Mat& bt, int64_t n, int64_t c, int64_t K, double* out, int threads) {
  if (n < 0 || c < 0 || K < 0)
    throw InputError(fmt::format("gemm_f64: negative shape [{}, {}, {}]", n, c, K));
  if (threads < 1) throw InputError(fmt::format("gemm_f64: threads = {} must be at least 1", threads));
  if (n == 0 || c == 0) return;
  // Parts split the larger side (whole row tiles or column panels); each packs all of the other operand.
  const int64_t tiles = (n + kMr - 1) / kMr, panels = (c + kNr - 1) / kNr;
  const bool by_rows = tiles >= panels;
  const int64_t units = by_rows ? tiles : panels, step = by_rows ? kMr : kNr;
  const int64_t parts = std::min<int64_t>(threads, units);
  const auto bound = [&](int64_t p) { return std::min(by_rows ? n : c, units * p / parts * step); };
  num::run_parts(static_cast<int>(parts), [&](int p) {
    if (by_rows)
      gemm_part(a, bt, bound(p), bound(p + 1), 0, c, c, K, out);
    else
      gemm_part(a, bt, 0, n, bound(p), bound(p + 1), c, K, out);
  });
}

}  // namespace

bool gemm_nt_is_exact(const double* a, const double* b, int64_t n, int64_t c, int64_t K) {
  return exact_bound(a, b, n, c, K);
}

void gemm_nt_f64(const double* a, const double* b, int64_t n, int64_t c, int64_t K, double* out,
                 int threads) {
  try {
    gemm({a, K, false}, {b, K, false}, n, c, K, out, threads);
  } catch (const InputError& e) {
    throw InputError(std::string("gemm_nt_f64: ") + (e.what() + std::strlen("gemm_f64: ")));
  }
}

void gemm_f64(bool trans_a, bool trans_b, int64_t n, int64_t c, int64_t K, const double* a, int64_t lda,
              const double* b, int64_t ldb, double* out, int threads) {
  // B^T as [c, K]: element (j, k) of op(B)^T is op(B)(k, j).
  gemm({a, lda, trans_a}, {b, ldb, !trans_b}, n, c, K, out, threads);
}

void gemm_f64(bool trans_a, bool trans_b, int64_t n, int64_t c, int64_t K, const double* a, int64_t lda,
              const float* b, int64_t ldb, double* out, int threads) {
  gemm({a, lda, trans_a}, {nullptr, ldb, !trans_b, b}, n, c, K, out, threads);
}

}  // namespace trnsim::ref
