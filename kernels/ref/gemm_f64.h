// FP64 GEMM of the host references, deterministic: the same bytes on every run, thread count, CPU and
// environment (OPENBLAS_NUM_THREADS, an address-space limit), which a BLAS does not promise (OpenBLAS's
// order of additions depends on its thread count and on the kernel it dispatches to).
//
// Each output element is summed by one thread in a fixed order: per block of 256 along K, a fused
// multiply-add chain in K order starting from zero, then the block's sum added to the element, blocks in K
// order. AVX-512, AVX2 + FMA and plain code (chosen at run time by the CPU) all do exactly that, so they
// give the same bytes; threads split the output rows.
//
// gemm_nt_is_exact tells whether every partial sum is exactly representable (then the result is the exact
// sum, whatever the order, and equals any BLAS's): per output element (i, j), row i of a has its nonzero
// values at most 2^ea in magnitude and every one an integer multiple of 2^ta (ta: the exponent of the lowest
// set significand bit), column j of b likewise eb, tb. Every product and partial sum is then an integer
// multiple of 2^(ta + tb) below K 2^(ea + eb) in magnitude, exact in FP64 when K 2^(ea + eb) <= 2^(ta + tb +
// 53) and ta + tb >= -1074. Non-finite values fail it.
#pragma once

#include <cstdint>

namespace trnsim::ref {

// out[i * c + j] = sum over k of a[i * K + k] * b[j * K + k]; out holds n * c doubles (overwritten).
// `threads` >= 1 splits the rows of `a`. InputError "gemm_nt_f64: ..." for a negative shape or thread count.
void gemm_nt_f64(const double* a, const double* b, int64_t n, int64_t c, int64_t K, double* out,
                 int threads = 1);

// out [n, c] (row-major, row stride c) = op(A) op(B) with op(A) [n, K], op(B) [K, c], as BLAS's dgemm with
// alpha 1 and beta 0: A row-major with row stride lda ([n, K], or [K, n] when trans_a), B likewise ([K, c],
// or [c, K] when trans_b).
void gemm_f64(bool trans_a, bool trans_b, int64_t n, int64_t c, int64_t K, const double* a, int64_t lda,
              const double* b, int64_t ldb, double* out, int threads = 1);
// The same with B in FP32, read in place (each value widened exactly): the bytes of gemm_f64 on B's FP64
// copy, without the copy (a [K, c] B of 4096 x 14336 is 470 MB in FP64).
void gemm_f64(bool trans_a, bool trans_b, int64_t n, int64_t c, int64_t K, const double* a, int64_t lda,
              const float* b, int64_t ldb, double* out, int threads = 1);

// Whether the bound above holds for every output element.
bool gemm_nt_is_exact(const double* a, const double* b, int64_t n, int64_t c, int64_t K);

}  // namespace trnsim::ref
