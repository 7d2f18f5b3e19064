// Builder pieces both cross-entropy kernels share: the core's vocabulary range, per-row statistics, index
// arithmetic for element gathers, and small FP32/int32 vector operations. Shapes are [partitions, free];
// "row tile" t covers rows 128t .. 128t + 127 (natural layout, row r on partition r % 128).
#pragma once

#include <cstdint>
#include <limits>

#include "kernels/api/kernel.h"
#include "kernels/api/nki.h"
#include "kernels/cross_entropy/ce_params.h"

namespace trnsim::kernels::ce {

inline constexpr int64_t kP = 128;
inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
inline int64_t round_up(int64_t a, int64_t b) {
  return ceil_div(a, b) * b;
}

// FP32 constants of the gradient, identical on chip (immediates) and in the host emulation:
// one_minus_ls = fl32(1 - ls), neg_eps = fl32(-ls / V).
struct Consts {
  float one_minus_ls = 1.f;
  float neg_eps = 0.f;
};
Consts consts(const CommonParams& p);

// Vocabulary columns [lo, hi) of physical core `core` of `cores`: core 0 takes the first
// roundup(ceil(V/2), 128) columns (at most V), core 1 the rest.
struct ColRange {
  int64_t lo = 0, hi = 0;
  int64_t size() const { return hi - lo; }
};
ColRange core_columns(int64_t V, int core, int cores);

// Loads a [rows] HBM vector into a [128, ceil(rows/128)] tile (element (p, t) = row 128t + p); entries past
// `rows` keep what `dst` held (callers memset them first).
void load_rows(const View& dst, const View& src, int64_t rows);
// The inverse: writes a [128, ceil(rows/128)] tile to a [rows] HBM vector.
void store_rows(const View& dst, const View& src, int64_t rows);

// Per-row gradient factors from row_max m, row_sumexp d, target t (int32), grad_output g (any [P, n] views of
// one shape; g may be a [P, 1] broadcast) and c ([P, 1]: 1/count or 1):
//   s = m, or 0 when m is -inf;  b = -s, or -inf for ignored rows;  valid = (t != ignore_idx);
//   gc = g * c (0 for ignored rows);  gcd = gc * (1 / d) (0 for ignored rows);
//   h = gc * neg_eps;  hy = h + gc * -(1 - ls)  (the additive term of the target column).
// The gradient is then g_i = bf16(exp(x_i + b) * gcd + h), and h -> hy at i = y: exp(x - s) / d keeps the
// 1/d out of the exponent, so a huge shift s (logits near the BF16 maximum) cannot absorb log d.
// Each output is an FP32 [P, n] view. The host emulation (ce_reference.cpp) repeats these operations.
struct RowFactors {
  View b, gcd, h, hy, valid;
};
void row_factors(Kernel& k, const RowFactors& out, const View& m, const View& d, const View& t, const View& g,
                 const View& c, const CommonParams& p, const Consts& cs);

// [P, 1] FP32 count of non-ignored targets broadcast to every partition, from valid [128, n] (0/1, FP32):
// a free-dim add-reduce, then a ones-matrix matmul for the cross-partition sum (exact below 2^24).
View count_valid(Kernel& k, const View& valid);

// [128, n] int32 tile with element (p, j) = (128 j + p) * stride: flat offsets of rows for element gathers
// (exact below 2^31).
View row_offsets(Kernel& k, int64_t n, int64_t stride);

// dst = a + b exactly, int32 tiles of one shape [P, n], for 0 <= a < 2^31 and 0 <= b < 2^24 - 2^16 with a sum
// below 2^31 (other elements get an unspecified value; the callers mask them). Arithmetic ALU ops compute in
// FP32 (exact below 2^24) and bitvec ops run on DVE only and never share an instruction with arithmetic ones
// (NKI ISA docs, nki.isa.tensor_scalar), so the sum is made of 16-bit halves: lo = (a & 0xFFFF) + b,
// hi = (a >> 16) + (lo >> 16), dst = hi << 16 | (lo & 0xFFFF). Eight DVE instructions; temporaries from `k`.
void add_i32(Kernel& k, const View& dst, const View& a, const View& b);

// A [P, 1] FP32 value copied from partition 0 of `one` ([1, 1], any float dtype) to every partition (a K = 1
// matmul with ones, exact).
View broadcast_partitions(Kernel& k, const View& one);

}  // namespace trnsim::kernels::ce
