// FP64 GEMM of the host references: out[n, c] = a[n, K] b[c, K]^T, all row-major.
//
// The references' operands are mostly MX-quantized (FP8 values times a power of two) or BF16 values, whose
// products need few significand bits. When a bound proves that every partial sum of every output element is
// exactly representable, the sum does not depend on the order of the additions, nor on fused multiply-adds,
// and the result equals the one of any BLAS: then a plain AVX-512 kernel computes it. Otherwise (or without
// AVX-512) OpenBLAS dgemm does, as before. Either way the bytes are those of cblas_dgemm.
//
// The bound, per output element (i, j): row i of a has its nonzero values at most 2^ea in magnitude and
// every one an integer multiple of 2^ta (ta: the exponent of the lowest set significand bit), column j of
// b likewise eb, tb. Every product and partial sum is then an integer multiple of 2^(ta + tb) below
// K 2^(ea + eb) in magnitude, exact in FP64 when K 2^(ea + eb) <= 2^(ta + tb + 53) and ta + tb >= -1074.
// Non-finite values fail it.
#pragma once

#include <cstdint>

namespace trnsim::ref {

// out[i * c + j] = sum over k of a[i * K + k] * b[j * K + k]; out holds n * c doubles (overwritten).
// `threads` > 1 splits the rows of `a` on the exact path (each output element summed by one thread);
// OpenBLAS keeps its own threading. The bytes do not depend on `threads`.
void gemm_nt_f64(const double* a, const double* b, int64_t n, int64_t c, int64_t K, double* out,
                 int threads = 1);

// Whether the bound above holds for every output element (the exact path is taken).
bool gemm_nt_is_exact(const double* a, const double* b, int64_t n, int64_t c, int64_t K);

}  // namespace trnsim::ref
