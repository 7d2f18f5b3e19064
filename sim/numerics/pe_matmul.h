// Host arithmetic of the Tensor Engine (PE): the FP32 accumulation every nc_matmul / nc_matmul_mx result goes
// through. Plain C++, shared by the ISA semantics and the kernels' quantized host references.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "sim/numerics/pair_range.h"

namespace trnsim::num {

// C[m, n] = (accumulate ? C[m, n] : +0) + sum over k = 0 .. K-1 of A[k, m] * B[k, n].
// A is the stationary operand [K, M] (row k at A + k*lda), B the moving operand [K, N] (row k at B + k*ldb),
// C the PSUM tile [M, N] (row m at C + m*ldc); all FP32, K on partitions as on the PE.
// Order (fixed, documented, independent of host threads and vector width): for each output element the
// products are added in ascending k, each step c = fl32(c + a*b) rounded once (fused multiply-add). For
// operands whose products are exact in FP32 (BF16, FP16, FP8 and MX-dequantized values, barring FP32
// underflow) this equals rounding the product and then the sum. The public sources do not document the PE's
// internal order (docs/facts/trainium-hardware.md §7, open question 1); this choice makes runs
// bit-reproducible. `threads` > 1 splits the N columns; the bytes do not depend on it.
//
// Where the host has AVX512_BF16 and the operands allow it (every value BF16-exact, e.g. FP8/MX-dequantized
// or BF16; no subnormal, NaN or Inf; magnitudes that keep every step normal and finite: pe_matmul.cpp,
// pairs_exact) two steps of the chain run in one VDPBF16PS, which rounds after each step as above: the same
// bits, about twice the rate. pe_matmul_bf16_pairs() says whether this host takes that path (checked once
// against std::fma). On Intel hosts, where VDPBF16PS multiplies at half FP32 FMA's rate, pe_matmul takes the
// FP32 path instead and pe_matmul_pairs computes its pairs with FP32 fused multiply-adds: the same bits.
bool pe_matmul_bf16_pairs();

void pe_matmul(const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, int K, int M,
               int N, bool accumulate, int threads = 1);

// The pair path on operands the caller already holds as BF16 pairs (nc_matmul_mx dequantizes straight into
// them), for a host where pe_matmul_bf16_pairs() holds, K even and N a multiple of 32:
//   Ap[kk * M + m] = A[2kk, m]'s high half << 16 | A[2kk + 1, m]'s high half (kk < K / 2);
//   Bq[(n / 32) * (K / 2) * 32 + kk * 32 + n % 32] the same for B (64-byte aligned);
// a and b the ranges of A's and B's FP32 values (pair_range.h). Columns whose A, B and PSUM values allow the
// pair path (where it runs as FP32 fused multiply-adds: any BF16-exact A and B) get pe_matmul's bits; the
// column ranges [n0, n1) returned are left untouched for pe_matmul.
// `threads` splits the columns as pe_matmul does. Where pe_matmul_pairs_by_fma(), Af may give A already
// widened (pe_matmul_pairs_widen of the same Ap): a caller that keeps Ap across calls keeps that too; nullptr
// widens A here, each call. Af is ignored elsewhere.
std::vector<std::pair<int, int>> pe_matmul_pairs(const uint32_t* Ap, const PairRange& a, const uint32_t* Bq,
                                                 const PairRange& b, float* C, int64_t ldc, int K, int M,
                                                 int N, bool accumulate, int threads = 1,
                                                 const float* Af = nullptr);

// Whether pe_matmul_pairs computes with FP32 fused multiply-adds on A widened to FP32 (Intel hosts); then, on
// a host where pe_matmul_bf16_pairs() holds, pe_matmul_pairs_widen makes that widening.
bool pe_matmul_pairs_by_fma();
// Af [K][M] (2 K / 2 rows of M floats) = A's values from its pairs Ap (pe_matmul_pairs' layout, K even): row
// 2kk the high halves, row 2kk + 1 the low halves.
void pe_matmul_pairs_widen(const uint32_t* Ap, int K, int M, float* Af);

}  // namespace trnsim::num
