// Layouts of MX data and E8M0 scales.
//
// "Compact" scales everywhere in trnsim mean the unpadded row-major array quantize() writes:
// rowwise (MxAxis::Row) [M, K/32], columnwise (MxAxis::Col) [M/32, K], for data [M, K].
//
// TransformerEngine layouts (docs/facts/mx-numerics.md §5):
//  - TE compact: the padded scale tensor, row-major. Rowwise [roundup(M,128), roundup(K/32,4)], columnwise
//    [roundup(M/32,4), roundup(K,128)]. Scale (i, j) is at i * padded_cols + j, where (i, j) = (row, block)
//    rowwise and (block-row, column) columnwise. trnsim writes padding bytes as 0x00 (TE leaves them
//    uninitialized).
//  - TE GEMM-swizzled (cuBLAS block-scaling layout): 128x4 tiles stored row-major, rows interleaved inside
//    each 512-byte tile: idx = (floor(i/128) * ntx + floor(j/4)) * 512 + (i%32) * 16 + ((i%128)/32) * 4 +
//    j%4. Rowwise: i = row, j = block, ntx = ceil(K/128). Columnwise: the transposed matrix, i = column, j =
//    block-row, ntx = ceil(M/128). Padding bytes are 0x00 (TE zero-fills).
//
// Trainium layouts (docs/facts/nkilib-kernels.md §1.2, trainium-hardware.md §2.2), for an operand [K, F]
// whose contraction dim K goes onto SBUF partitions:
//  - x4 interleave ("swizzle"): [K, F] -> [K/4, 4F]; logical (k, f) goes to partition row P and free index
//    4f + j (j = 0..3, the byte slot inside an x4 element).
//      WrapX (default): a 512-row K tile covers 128 partitions; partition p of the tile holds tile rows
//        p, p+128, p+256, p+384 (j = quarter). When K % 512 != 0 the remainder is split into a 256-row
//        sub-tile (if the remainder is >= 256) followed by a 128-row sub-tile (if remainder % 256 == 128),
//        each with its own quarters (S/4 rows apart). Requires K % 128 == 0. The order 256-then-128 is our
//        reading of "split into a 256-row and/or a 128-row sub-tile".
//      OneX32 (NKI QuantScheme._1x32): partition P holds rows 4P..4P+3 (j = k % 4). Requires K % 32 == 0.
//  - MX group: 8 consecutive partition rows x the 4 slots of one f, so group row g = P / 8 and one E8M0 scale
//    per (g, f). OneX32: group g is K rows 32g..32g+31 (the OCP group); WrapX: four runs of 8 contiguous K,
//    one from each quarter of the sub-tile. The Trainium compact scale array is [K/32, F] indexed by (g, f);
//    for OneX32 it equals the columnwise compact layout of quantize(MxAxis::Col).
//  - Scale placement: unpacked scale tile [K/4, F]; group row g sits in partition (g/4)*32 + g%4 + offset,
//  with
//    the scale offset 0/4/8/12 (quantize_mx / nc_matmul_mx scale_offset). Packed (scale packing): K-tile
//    t = g/16 (512 logical K) of packing group t/4 writes at offset 4*(t%4) of a shared 128-partition tile:
//    partition (t/4)*128 + ((g%16)/4)*32 + 4*(t%4) + g%4; packed shape [ceil(K/2048)*128, F].
//    The other partitions hold garbage on hardware; converters leave them untouched.
//
// Errors: shapes that break the divisibility rules above, indices out of range and bad offsets throw
// InputError naming the value.
#pragma once

#include <array>
#include <cstdint>

#include "sim/numerics/mx.h"

namespace trnsim::num {

struct ScaleShape {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t size() const { return rows * cols; }
  bool operator==(const ScaleShape&) const = default;
};

// Compact unpadded scale shape of data [M, K]: Row [M, K/32], Col [M/32, K]. Throws if the blocked dim % 32.
ScaleShape mx_scale_shape(int64_t M, int64_t K, MxAxis axis);

// ---- TransformerEngine ----

// Padded TE scale shape (both TE layouts have this many bytes). Throws unless M % 32 == 0 and K % 32 == 0.
ScaleShape te_scale_shape(int64_t M, int64_t K, MxAxis axis);
// The raw cuBLAS swizzle formula for compact 2-D scale index (i, j) with ntx 4-wide tiles along j.
inline int64_t gemm_swizzle_index(int64_t i, int64_t j, int64_t ntx) {
  return ((i / 128) * ntx + j / 4) * 512 + (i % 32) * 16 + ((i % 128) / 32) * 4 + j % 4;
}
// Byte offsets of scale (i, j) in the two TE layouts; (i, j) = (row, block) for Row, (block-row, column)
// for Col, both within the unpadded compact shape (else InputError).
int64_t te_compact_index(int64_t i, int64_t j, int64_t M, int64_t K, MxAxis axis);
int64_t te_swizzled_index(int64_t i, int64_t j, int64_t M, int64_t K, MxAxis axis);
// Converters between compact scales (mx_scale_shape) and the TE layouts (te_scale_shape bytes; the to_*
// functions write every byte, padding 0x00).
void to_te_compact(const uint8_t* scales, int64_t M, int64_t K, MxAxis axis, uint8_t* out);
void from_te_compact(const uint8_t* te, int64_t M, int64_t K, MxAxis axis, uint8_t* scales);
void to_te_swizzled(const uint8_t* scales, int64_t M, int64_t K, MxAxis axis, uint8_t* out);
void from_te_swizzled(const uint8_t* te, int64_t M, int64_t K, MxAxis axis, uint8_t* scales);

// ---- Trainium ----

enum class QuantScheme : uint8_t { WrapX, OneX32 };

inline constexpr int kInterleave = 4;          // INTERLEAVE_FACTOR
inline constexpr int64_t kTileKLogical = 512;  // TILE_SIZE_P_MAX_LOGICAL
inline constexpr int kScalePackingTiles = 4;   // MAX_TILES_PER_SCALE_PACKING_GROUP

// Position in the interleaved [K/4, 4F] array.
struct SwizzlePos {
  int64_t partition = 0;
  int64_t free = 0;
  bool operator==(const SwizzlePos&) const = default;
};
struct LogicalPos {
  int64_t k = 0;
  int64_t f = 0;
  bool operator==(const LogicalPos&) const = default;
};

// Throws InputError unless K fits the scheme (WrapX: K % 128 == 0; OneX32: K % 32 == 0) and F >= 0.
void check_swizzle_shape(int64_t K, int64_t F, QuantScheme s);
SwizzlePos swizzle_pos(int64_t k, int64_t f, int64_t K, int64_t F, QuantScheme s);
LogicalPos unswizzle_pos(int64_t partition, int64_t free, int64_t K, int64_t F, QuantScheme s);
// MX group row (row of the Trainium compact scale array [K/32, F]) holding logical row k.
int64_t mx_group_row(int64_t k, int64_t K, QuantScheme s);
// The 32 logical K indices of group row g, ascending.
std::array<int64_t, 32> mx_group_k_indices(int64_t g, int64_t K, QuantScheme s);

// [K, F] row-major <-> [K/4, 4F] row-major. T is any trivially copyable element (BF16 bits, FP8 bytes,
// float).
template <class T>
void swizzle(const T* in, int64_t K, int64_t F, QuantScheme s, T* out) {
  check_swizzle_shape(K, F, s);
  for (int64_t k = 0; k < K; ++k) {
    const SwizzlePos p = swizzle_pos(k, 0, K, F, s);
    T* dst = out + p.partition * kInterleave * F + p.free;
    const T* src = in + k * F;
    for (int64_t f = 0; f < F; ++f) dst[kInterleave * f] = src[f];
  }
}
template <class T>
void unswizzle(const T* in, int64_t K, int64_t F, QuantScheme s, T* out) {
  check_swizzle_shape(K, F, s);
  for (int64_t k = 0; k < K; ++k) {
    const SwizzlePos p = swizzle_pos(k, 0, K, F, s);
    const T* src = in + p.partition * kInterleave * F + p.free;
    T* dst = out + k * F;
    for (int64_t f = 0; f < F; ++f) dst[f] = src[kInterleave * f];
  }
}

// Partition of group row g's scales: unpacked (g/4)*32 + g%4 + offset (offset 0, 4, 8 or 12, else
// InputError); packed (t = g/16) (t/4)*128 + ((g%16)/4)*32 + 4*(t%4) + g%4.
int64_t scale_partition(int64_t g, int scale_offset = 0);
int64_t packed_scale_partition(int64_t g);
// Scale tile shape: unpacked [K/4, F]; packed [ceil(K/2048)*128, F]. K % 32 == 0 required.
ScaleShape trainium_scale_shape(int64_t K, int64_t F, bool packed);
// Compact [K/32, F] <-> scale tile (trainium_scale_shape bytes). Only scale bytes are written by
// scales_to_trainium, so several tensors can share one tile through different offsets. Unpacked with an
// offset that leaves the tile (K/4 rows) throws InputError; packed ignores scale_offset (must be 0).
void scales_to_trainium(const uint8_t* compact, int64_t K, int64_t F, bool packed, int scale_offset,
                        uint8_t* tile);
void scales_from_trainium(const uint8_t* tile, int64_t K, int64_t F, bool packed, int scale_offset,
                          uint8_t* compact);

// quantize_mx on an interleaved tile: x [P, 4F] BF16 bits (P = K/4 partition rows, P % 8 == 0), groups of
// 8 partitions x 4 slots of one f. data [P, 4F] FP8 bytes (the x4 elements, slot j = byte j); scales compact
// [P/8, F]. Scheme-independent: the scheme only decides which logical k sit where.
void quantize_x4(const uint16_t* x_bf16, int64_t P, int64_t F, Fp8Format fmt, ScaleRule rule, uint8_t* data,
                 uint8_t* scales);

// A kernel input's pre-quantized form of a logical operand [K, F] (row-major, T = BF16 bits as uint16_t or
// float), quantized along K in x4 interleave `s`: data [K/4, 4F] FP8 bytes (the x4 elements [K/4, F]) and
// the scale tile of trainium_scale_shape(K, F, packed) (bytes holding no scale are 0x7F, scale 1). The
// bytes quantize_mx makes on chip from the same BF16 values in the same interleave (rule trn3).
template <class T>
void quantize_operand_x4(const T* kf, int64_t K, int64_t F, QuantScheme s, Fp8Format fmt, ScaleRule rule,
                         bool packed, uint8_t* data, uint8_t* tile);

}  // namespace trnsim::num
