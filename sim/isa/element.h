// Single elements of the ISA dtypes as bytes in memory: the one place that converts between a dtype's
// bytes and a number (used by OperandView, host tensors and the .npy mapping).
#pragma once

#include <cstdint>

#include "sim/isa/instruction.h"

namespace trnsim::isa {

bool is_x4(DType t);   // packed FP8 x4 (no single value)
bool is_int(DType t);  // int8/16/32, uint8/16/32
bool is_fp8(DType t);  // single FP8 (not x4)

// Value as FP32: floats exactly, ints converted (RNE for |v| > 2^24). RuleError for x4 dtypes.
float load_element(DType t, const uint8_t* p);
// FP32 -> dtype: RNE; FP8 satfinite; ints RNE then saturate, NaN -> 0; E8M0 keeps the FP32 exponent
// (rounds down to a power of two; NaN, Inf and negatives -> 0xFF, zero -> 0x00). RuleError for x4 dtypes.
void store_element(DType t, uint8_t* p, float v);
// Integer view: int dtypes exactly; floats truncated toward zero (NaN -> 0) and saturated to int64.
int64_t load_element_int(DType t, const uint8_t* p);
// Integer write: int dtypes wrap to their width (two's complement); float dtypes get the value converted.
void store_element_int(DType t, uint8_t* p, int64_t v);

// A fill value (memset's) as an instruction's two FP32 immediates: imm0 = v rounded to FP32; imm1 = 0, or
// for an integer dtype and an integer v in its range that FP32 does not hold exactly (|v| > 2^24: I32, U32)
// the rest v - imm0 (exact: at most 2^8), so that imm0 + imm1 is v and the fill writes v exactly, as the
// hardware's memset of a compile-time constant does for every dtype (NKI's nki.isa.memset). iota's offset
// and affine_select's on_false_value are split the same way (into imm0 / imm2 and Instruction::imm3).
void split_fill(DType t, double v, float& imm0, float& imm1);
// The fill value split_fill made, in FP64.
inline double fill_value(float imm0, float imm1) {
  return static_cast<double>(imm0) + static_cast<double>(imm1);
}

}  // namespace trnsim::isa
