// Scalar ALU and activation-function math of the compute engines, shared by execute() and host references.
// Arithmetic is FP32 (docs/facts/trainium-hardware.md §2.4: "All math is done in FP32"); bitwise ops and
// shifts work on 32-bit integers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sim/isa/instruction.h"

namespace trnsim::isa {

// True for the ops computed on integers: bitwise_and/or/xor, left_shift, right_shift.
bool alu_is_bitwise(AluOp op);

// a op b in FP32. bypass returns a; comparisons and logical ops give 1.0 or 0.0 (non-zero is true);
// abs is |a| (b unread: NKI's operator table lists nl.abs among the binary ALU operators); maximum/minimum/
// abs_max return NaN if either input is NaN (so poisoned memory stays visible); power is
// FP64 pow rounded once to FP32 (NKI documents no algorithm; this is the correctly rounded power, the same on
// every host). Bitwise ops truncate both inputs to int32 and return the int32 result as a float.
float alu_f32(AluOp op, float a, float b);

// a op b on int32 values (inputs wrapped to 32 bits, result returned sign-extended): arithmetic wraps,
// divide truncates toward zero (x / 0 = 0), right_shift is logical, shifts by 32 or more (or negative) give
// 0, power goes through FP64 pow and truncates.
int64_t alu_i32(AluOp op, int64_t a, int64_t b);

// a op b on the exact values of int32/uint32 elements (GpSimd's native integer arithmetic, exact for every
// 32-bit value: nki.isa.tensor_tensor, NKI 2.33): comparisons, maximum/minimum and divide (truncating toward
// zero, x / 0 = 0) see a uint32 above 2^31 as the large unsigned value; add, subtract, multiply and power
// (exact integer power; a negative exponent gives 1 / a^|b| truncated) return a value whose low 32 bits are
// the wrapped result (the int32/uint32 store keeps them). The bitvec ops are alu_i32's.
int64_t alu_int_exact(AluOp op, int64_t a, int64_t b);

// The same ops over a row, element for element equal to the calls above: x[i] = x[i] op s (s op x[i] when
// reverse), x[i] = x[i] op y[i], and the int32 form. Bypass leaves x unchanged (alu_i32_row wraps it to
// int32, as alu_i32 does).
void alu_f32_row(AluOp op, float* x, float s, bool reverse, size_t n);
void alu_f32_rows(AluOp op, float* x, const float* y, size_t n);
void alu_i32_row(AluOp op, int64_t* x, int64_t s, bool reverse, size_t n);
// x[0] op x[1] op ... x[n - 1], left to right (n >= 1).
float alu_f32_fold(AluOp op, const float* x, size_t n);

// Activation function in FP32 with the host libm (expf, logf, tanhf, erff, sqrtf). The hardware evaluates
// piecewise polynomials, so results can differ from hardware in the last bits (reference §2.4).
// silu = x * sigmoid(x); silu_dx = d/dx silu = sigmoid(x) (1 + x (1 - sigmoid(x))) (NKI nl.silu_dx, the
// derivative of nl.silu); sign(0) = 0; relu and sign keep NaN; floor, ceil and trunc are exact.
// sin, cos, arctan, erf, erf_dx = 2/sqrt(pi) exp(-x^2), softplus = log(1 + exp(x)), mish = x
// tanh(softplus(x)), gelu = x Phi(x) = 0.5x(1 + erf(x/sqrt2)), gelu_apprx_tanh = 0.5x(1 + tanh(sqrt(2/pi)(x +
// 0.044715x^3))) and gelu_dx = d/dx gelu = Phi(x) + x phi(x) are FP64 libm rounded once to FP32 (NKI's
// nki.language pages define them; no source gives the hardware's polynomials).
float act_f32(ActFunc f, float x);

}  // namespace trnsim::isa
