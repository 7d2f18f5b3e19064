// MX quantization (mx.h) at a chosen instruction-set level, and quantize_mx's groups of the x4 interleave.
// mx.h's functions run the widest level the host has; every level gives the same bytes (integer operations
// and the scalar code's FP32 multiply and add, lane by lane), which tests check by pinning one.
#pragma once

#include <cstdint>

#include "sim/numerics/mx.h"

namespace trnsim::num {

// Scalar code, AVX2 (8 lanes) or AVX-512F (16 lanes).
enum class MxIsa : uint8_t { Scalar, Avx2, Avx512 };
// The widest level this host runs (read once from CPUID).
MxIsa mx_host_isa();

// mx.h's functions at level `isa` (a level above mx_host_isa() runs the host's): same shapes, bytes and
// errors.
uint8_t quantize_block(const float* v, uint8_t* out, Fp8Format fmt, ScaleRule rule, MxIsa isa);
uint8_t quantize_block_bf16(const uint16_t* v, uint8_t* out, Fp8Format fmt, ScaleRule rule, MxIsa isa);
void quantize(const float* x, int64_t rows, int64_t cols, MxAxis axis, Fp8Format fmt, ScaleRule rule,
              uint8_t* data, uint8_t* scales, int threads, MxIsa isa);
void quantize(const uint16_t* x_bf16, int64_t rows, int64_t cols, MxAxis axis, Fp8Format fmt, ScaleRule rule,
              uint8_t* data, uint8_t* scales, int threads, MxIsa isa);

// quantize_mx's MX groups (x4 interleave): 8 rows of 4F values, row r at x + r * ld; group f is the 4 values
// [4f, 4f + 4) of every row (32 in all), its FP8 bytes land in the same places of data (row r at
// data + r * ld_data) and its E8M0 byte in scales[f]. The bytes of quantize_block on those 32 values.
void quantize_x4_groups(const float* x, int64_t ld, int64_t F, Fp8Format fmt, ScaleRule rule, uint8_t* data,
                        int64_t ld_data, uint8_t* scales, MxIsa isa = mx_host_isa());
// Same for BF16 bits.
void quantize_x4_groups(const uint16_t* x, int64_t ld, int64_t F, Fp8Format fmt, ScaleRule rule,
                        uint8_t* data, int64_t ld_data, uint8_t* scales, MxIsa isa = mx_host_isa());

}  // namespace trnsim::num
