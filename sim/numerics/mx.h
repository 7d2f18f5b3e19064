// MX (OCP microscaling) quantization to MXFP8: blocks of 32 values share one E8M0 scale byte.
// Three scale rules (docs/facts/mx-numerics.md §2, trainium-hardware.md §2.2, docs/architecture.md):
//
//  Trn3 - the Trainium3 quantize_mx rule: X = 2^(floor(log2 amax) - (emax - 1)), twice the OCP scale, so the
//         block maximum lands in [2^(emax-1), 2^emax) and never saturates. An all-zero block gives 2^-127
//         (byte 0x00); shared exponents below -127 are clamped to -127 (byte 0x00: amax < 2^(emax-128),
//         e.g. any FP32-subnormal amax); the upper end cannot overflow (amax < 2^128 gives at most 0xF7).
//         NaN/Inf: the public sources are silent. We apply the OCP whole-block rule (scale 0xFF, all 32
//         elements 0x7F): the rule reads the exponent of amax, and an Inf/NaN amax has no finite exponent,
//         so any finite scale would be invented; a NaN block also stays visibly NaN through nc_matmul_mx,
//         as a NaN would through a BF16 matmul.
//  Ocp  - OCP MX v1.0 §6.3: X = 2^(floor(log2 amax) - emax), clamped to E8M0 (below -127 -> 0x00); elements
//         saturate to +-max; any NaN or +-Inf in the block makes the whole block NaN (0xFF, elements 0x7F).
//  Te   - TransformerEngine (Blackwell RCEIL), emulated literally: amax = FP32 max of |x| ignoring NaN;
//         p = amax * fl32(1/max_norm) (one FP32 multiply); byte = f32_to_e8m0_ceil(p) (NaN 0xFF, Inf 0xFE,
//         0 -> 0x00); elements = satfinite(x * 2^(127-byte)) with the FP32 multiply and 2^(127-byte) built
//         from bits. A NaN element becomes 0x7F, Inf gives scale 0xFE and +-max.
//
// Elements (every rule): e = f32_to_fp8(x * 2^(127-byte), satfinite). For Trn3/Ocp the FP32 product is the
// exact value x / 2^shared: a multiply by a power of two within [2^-120, 2^127] is exact unless the product
// is below 2^-126, and such products are far below half the FP8 minimum subnormal, so they give +-0 either
// way. Each element is therefore rounded once (RNE), never twice. For Te the product is TE's own FP32 one.
//
// Element bytes: FP8 in the chosen format. Scale bytes: E8M0. Results are bit-reproducible and identical
// for any thread count.
#pragma once

#include <bit>
#include <cstdint>
#include <string_view>

#include "sim/numerics/float_formats.h"

namespace trnsim::num {

enum class ScaleRule : uint8_t { Trn3, Ocp, Te };

// Row: blocks of 32 along the last dim (OCP/TE rowwise). Col: blocks of 32 along the first dim (columnwise).
enum class MxAxis : uint8_t { Row, Col };

inline constexpr int kMxBlock = 32;

// Names used in configs and messages: "trn3", "ocp", "te"; "row", "col".
std::string_view scale_rule_name(ScaleRule r);
// Throws InputError "unknown MX scale rule 'x' (expected trn3, ocp or te)".
ScaleRule parse_scale_rule(std::string_view s);
std::string_view mx_axis_name(MxAxis a);

// fl32(1/max_norm) as TE stores it: 0x3B124925 (E4M3FN), 0x37924925 (E5M2) (docs/facts/mx-numerics.md §1).
inline float te_max_norm_rcp(Fp8Format f) {
  return f == Fp8Format::E4M3FN ? 1.0f / 448.0f : 1.0f / 57344.0f;
}

// The E8M0 scale byte of a block under `rule`, given the maximum of the 32 absolute FP32 bit patterns
// `abs_key` (u & 0x7FFFFFFF). For Te the key must exclude NaN elements (TE ignores NaN in amax); for
// Trn3/Ocp it includes them (a key above 0x7F800000 means NaN, equal to it means Inf).
inline uint8_t mx_scale_byte(uint32_t abs_key, Fp8Format fmt, ScaleRule rule) {
  if (rule == ScaleRule::Te) return f32_to_e8m0_ceil(std::bit_cast<float>(abs_key) * te_max_norm_rcp(fmt));
  if (abs_key >= 0x7F800000u) return kE8M0NaN;
  // byte = shared + 127 = biased exponent of amax - emax (+1 for Trn3); subnormal/zero amax have field 0,
  // and anything below byte 0 clamps to 0x00.
  const int drop = fp8_emax(fmt) - (rule == ScaleRule::Trn3 ? 1 : 0);
  const int byte = static_cast<int>(abs_key >> 23) - drop;
  return static_cast<uint8_t>(byte < 0 ? 0 : byte);
}

// One block: 32 contiguous FP32 values -> 32 FP8 bytes in `out`; returns the E8M0 scale byte.
uint8_t quantize_block(const float* v, uint8_t* out, Fp8Format fmt, ScaleRule rule);
// Same for 32 contiguous BF16 values given as raw bits.
uint8_t quantize_block_bf16(const uint16_t* v, uint8_t* out, Fp8Format fmt, ScaleRule rule);

// Whole 2-D array x [rows, cols], row-major. data: [rows, cols] FP8 bytes (same layout as x).
// scales: compact, unpadded, row-major: Row -> [rows, cols/32]; Col -> [rows/32, cols].
// Throws InputError if the blocked dim (cols for Row, rows for Col) is not a multiple of 32, if a dim is
// negative, if threads < 1, or if a pointer is null while the array is non-empty.
// Output bytes are identical for any `threads` >= 1.
void quantize(const float* x, int64_t rows, int64_t cols, MxAxis axis, Fp8Format fmt, ScaleRule rule,
              uint8_t* data, uint8_t* scales, int threads = 1);
// Same, reading raw BF16 bits (no FP32 copy of the input is made).
void quantize(const uint16_t* x_bf16, int64_t rows, int64_t cols, MxAxis axis, Fp8Format fmt, ScaleRule rule,
              uint8_t* data, uint8_t* scales, int threads = 1);

// out[r, c] = fp8_to_f32(data[r, c]) * e8m0_to_f32(scale of (r, c)), one FP32 multiply (reference §3.4):
// scale 0xFF gives NaN; 0x00 multiplies by 2^-127 (may round into FP32 subnormals). Shapes and errors
// as quantize().
void dequantize(const uint8_t* data, const uint8_t* scales, int64_t rows, int64_t cols, MxAxis axis,
                Fp8Format fmt, float* out, int threads = 1);

// One partition row of an x4 MX operand (nc_matmul_mx): `cols` x4 elements of 4 FP8 bytes each, contiguous at
// `bytes` (byte j of element c at bytes[4c + j]), and each element's E8M0 scale as FP32 (e8m0_to_f32) in
// scale[c]. out[j][c] = fp8_to_f32(bytes[4c + j]) * scale[c]: the one FP32 multiply of dequantize(), the
// same bits on every host (AVX-512 decodes the codes arithmetically, exact, and takes NaN and Inf codes
// from the table).
void dequantize_x4_row(const uint8_t* bytes, const float* scale, int64_t cols, Fp8Format fmt,
                       float* const out[4]);

struct PairRange;  // pair_range.h

// Two partition rows of one MX group (the same scales) as the BF16 pairs pe_matmul_pairs reads, for a host
// with AVX-512: value j of x4 element c of row `hi` (the lower logical k) in the high half and of row `lo` in
// the low half, each the high 16 bits of dequantize_x4_row's FP32 value, at out[j][(c / 32) * panel_step +
// c % 32]. Returns the range of those FP32 values (pair_range.h), which says whether they may take the pair
// path.
PairRange dequantize_x4_pairs(const uint8_t* hi, const uint8_t* lo, const float* scale, int64_t cols,
                              Fp8Format fmt, uint32_t* const out[4], int64_t panel_step);

}  // namespace trnsim::num
