// Index arithmetic of the MXFP8 pipeline: the x4 interleave of K onto partition rows (nkilib mxfp8_utils:
// quantize_mxfp8_utils.py and load_apis.py), scale shapes and packing slots, and the partition runs an SBUF
// access may use.
//
// Interleave (global over K, as num::swizzle_pos): wrapX splits K into 512-row sub-tiles (then a 256-row and
// a 128-row remainder); partition row p of a sub-tile of `size` rows holds logical rows k0 + p + j*size/4
// for slots j = 0..3. 1x32 puts rows 4P..4P+3 on partition row P. A K tile of tile_k logical rows is
// tile_k/4 partition rows.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sim/isa/instruction.h"
#include "sim/numerics/float_formats.h"
#include "sim/numerics/scale_layout.h"

namespace trnsim::kernels::mxfp8 {

inline int64_t cdiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
inline int64_t round_up(int64_t a, int64_t b) {
  return cdiv(a, b) * b;
}

// float8_e4m3fn_x4 or float8_e5m2_x4.
isa::DType x4_dtype(num::Fp8Format f);

// Shapes of E8M0 scales of a logical [K, F] operand: unpacked [K/4, F] (group row g in row (g/4)*32 + g%4 of
// its 128-row tile) and packed [ceil(K/2048)*128, F] (K tile t at offset 4*(t%4) of row group t/4).
std::vector<int64_t> unpacked_scales(int64_t K, int64_t F);
std::vector<int64_t> packed_scales(int64_t K, int64_t F);

// Scale slots a block of `bk` K tiles needs (of `TK` in all): bk unpacked; with packing, the most 4-tile
// groups any block spans.
int64_t scale_slots(int64_t bk, int64_t TK, bool packed);

// A run of partition rows [row, row + n) of one swizzle sub-tile: logical k of (row + i, slot j) is
// k0 + i * row_step + j * j_step. wrapX: the sub-tile holds K rows [sub_k0, sub_k0 + 4 j_step).
struct Segment {
  int64_t row, n, k0, row_step, j_step, sub_k0 = 0;
};

// Segments of partition rows [r0, r1) under the interleave of K.
std::vector<Segment> segments(int64_t r0, int64_t r1, int64_t K, num::QuantScheme s);

// Splits partitions [start, start + n) into runs an instruction operand may span (isa::check: more than 64
// partitions start at 0, 33-64 at 0 or 64, up to 32 at a multiple of 32): fn(start, count) per run. `start`
// must be a multiple of 32.
void partition_runs(int64_t start, int64_t n, const std::function<void(int64_t, int64_t)>& fn);

// Splits logical rows [r, r + n) of an operand whose rows live in 128-row groups (row r at partition r % 128
// of group r / 128, as index tiles and resident tiles hold them) and that go to partitions [d, d + n) of
// another operand, into runs inside one group that both operands may span: fn(partition, count, group,
// offset of the run from r). r % 32 and d % 32 must be 0.
void row_runs(int64_t r, int64_t n, int64_t d,
              const std::function<void(int64_t, int64_t, int64_t, int64_t)>& fn);

}  // namespace trnsim::kernels::mxfp8
