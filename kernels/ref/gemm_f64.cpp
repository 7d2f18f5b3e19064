#include "kernels/ref/gemm_f64.h"

#include <cblas.h>
#include <fmt/format.h>
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "sim/base/error.h"

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

// C[mr, nr] (row stride ldc) += ap^T bp over kc: ap [kc][kMr], bp [kc][kNr] packed, zero-padded.
__attribute__((target("avx512f"))) void micro(const double* ap, const double* bp, int kc, double* C,
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
  if (mr == kMr && nr == kNr) {
#pragma GCC unroll 8
    for (int i = 0; i < kMr; ++i)
#pragma GCC unroll 3
      for (int j = 0; j < 3; ++j) {
        double* p = C + i * ldc + 8 * j;
        _mm512_storeu_pd(p, _mm512_add_pd(_mm512_loadu_pd(p), acc[i][j]));
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

// Rows [r0, r1) of out, exact path.
__attribute__((target("avx512f"))) void exact_rows(const double* a, const double* b, int64_t r0, int64_t r1,
                                                   int64_t c, int64_t K, double* out) {
  const int64_t rows = r1 - r0, row_tiles = (rows + kMr - 1) / kMr;
  std::fill(out + r0 * c, out + r1 * c, 0.0);
  std::vector<double> ap(static_cast<size_t>(row_tiles * kKc * kMr)), bp(static_cast<size_t>(kKc * kNr));
  for (int64_t k0 = 0; k0 < K; k0 += kKc) {
    const int kc = static_cast<int>(std::min<int64_t>(kKc, K - k0));
    for (int64_t t = 0; t < row_tiles; ++t) {
      double* p = ap.data() + t * kKc * kMr;
      for (int i = 0; i < kMr; ++i) {
        const int64_t r = r0 + t * kMr + i;
        if (r < r1) {
          const double* src = a + r * K + k0;
          for (int k = 0; k < kc; ++k) p[k * kMr + i] = src[k];
        } else {
          for (int k = 0; k < kc; ++k) p[k * kMr + i] = 0.0;
        }
      }
    }
    for (int64_t j0 = 0; j0 < c; j0 += kNr) {
      const int nr = static_cast<int>(std::min<int64_t>(kNr, c - j0));
      for (int j = 0; j < kNr; ++j) {
        if (j < nr) {
          const double* src = b + (j0 + j) * K + k0;
          for (int k = 0; k < kc; ++k) bp[k * kNr + j] = src[k];
        } else {
          for (int k = 0; k < kc; ++k) bp[k * kNr + j] = 0.0;
        }
      }
      for (int64_t t = 0; t < row_tiles; ++t) {
        const int64_t i0 = r0 + t * kMr;
        micro(ap.data() + t * kKc * kMr, bp.data(), kc, out + i0 * c + j0, c,
              static_cast<int>(std::min<int64_t>(kMr, r1 - i0)), nr);
      }
    }
  }
}

bool has_avx512() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return yes;
}

}  // namespace

bool gemm_nt_is_exact(const double* a, const double* b, int64_t n, int64_t c, int64_t K) {
  return exact_bound(a, b, n, c, K);
}

void gemm_nt_f64(const double* a, const double* b, int64_t n, int64_t c, int64_t K, double* out,
                 int threads) {
  if (n < 0 || c < 0 || K < 0)
    throw InputError(fmt::format("gemm_nt_f64: negative shape [{}, {}, {}]", n, c, K));
  if (threads < 1) throw InputError(fmt::format("gemm_nt_f64: threads = {} must be at least 1", threads));
  if (n == 0 || c == 0) return;
  if (K == 0) {
    std::fill(out, out + n * c, 0.0);
    return;
  }
  if (has_avx512() && exact_bound(a, b, n, c, K)) {
    const int64_t tiles = (n + kMr - 1) / kMr;
    const int64_t parts = std::min<int64_t>(threads, tiles);
    if (parts <= 1) return exact_rows(a, b, 0, n, c, K, out);
    std::vector<std::thread> pool;
    for (int64_t p = 1; p < parts; ++p)
      pool.emplace_back(exact_rows, a, b, std::min(n, tiles * p / parts * kMr),
                        std::min(n, tiles * (p + 1) / parts * kMr), c, K, out);
    exact_rows(a, b, 0, std::min(n, tiles / parts * kMr), c, K, out);
    for (auto& th : pool) th.join();
    return;
  }
  constexpr int64_t kMaxBlas = 0x7FFFFFFF;
  if (n > kMaxBlas || c > kMaxBlas || K > kMaxBlas)
    throw InputError(fmt::format("gemm_nt_f64: dims [{}, {}, {}] exceed the BLAS int range", n, c, K));
  // OpenBLAS as configured: its K blocking differs between its single- and multi-threaded drivers when
  // 256 < K < 512 (Prescott kernels), so its thread count is left alone.
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(c),
              static_cast<int>(K), 1.0, a, static_cast<int>(K), b, static_cast<int>(K), 0.0, out,
              static_cast<int>(c));
}

}  // namespace trnsim::ref
