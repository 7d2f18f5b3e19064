#include "sim/numerics/pe_matmul.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sim/numerics/host_threads.h"

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

// Each 32-column panel of B is first copied to a contiguous, aligned buffer (B rows are far apart in a wide
// tile, so the panel would not stay in cache) and walked in slices of kKc contraction rows (the slice fits
// L1). Between slices the accumulators go through C as FP32, which they already are: the chain of fused
// multiply-adds per element, in ascending k, is the same.
__attribute__((target("avx512f"))) void columns_avx512(const float* A, int64_t lda, const float* B,
                                                       int64_t ldb, float* C, int64_t ldc, int K, int M,
                                                       int n0, int n1, bool accumulate) {
  constexpr int NB = 32, kKc = 256;
  // Per call, not thread_local: this runs on the host helper threads too, which live on, and LeakSanitizer
  // reports what their thread_locals hold at exit.
  std::vector<float> panel(static_cast<size_t>(NB) * K + 16);
  float* Bp = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(panel.data()) + 63) & ~uintptr_t{63});
  int n = n0;
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

ColumnsFn pick() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return columns_avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return columns_avx2;
  return columns_scalar;
}

}  // namespace

void pe_matmul(const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, int K, int M,
               int N, bool accumulate, int threads) {
  static const ColumnsFn columns = pick();
  if (M <= 0 || N <= 0) return;
  constexpr int kChunk = 32;  // column granularity of the thread split
  threads = std::clamp(threads, 1, std::max(1, N / kChunk));
  if (threads == 1) {
    columns(A, lda, B, ldb, C, ldc, K, M, 0, N, accumulate);
    return;
  }
  // Each output element is computed by exactly one thread, in the same order as with one thread.
  const int chunks = (N + kChunk - 1) / kChunk;
  const auto slice = [&](int t) {
    const int n0 = chunks * t / threads * kChunk, n1 = std::min(N, chunks * (t + 1) / threads * kChunk);
    if (n0 < n1) columns(A, lda, B, ldb, C, ldc, K, M, n0, n1, accumulate);
  };
  host_split(threads, slice);
}

}  // namespace trnsim::num
