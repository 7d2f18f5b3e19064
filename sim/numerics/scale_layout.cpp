#include "sim/numerics/scale_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "sim/base/error.h"
#include "sim/numerics/mx_isa.h"

namespace trnsim::num {

namespace {

int64_t roundup(int64_t v, int64_t m) {
  return (v + m - 1) / m * m;
}
int64_t ceil_div(int64_t v, int64_t m) {
  return (v + m - 1) / m;
}

void check_mk(const char* fn, int64_t M, int64_t K, bool both) {
  if (M < 0 || K < 0) throw InputError(fmt::format("{}: negative shape [{}, {}]", fn, M, K));
  if (both && M % kMxBlock != 0) throw InputError(fmt::format("{}: M = {} is not a multiple of 32", fn, M));
  if (both && K % kMxBlock != 0) throw InputError(fmt::format("{}: K = {} is not a multiple of 32", fn, K));
}

void check_index(const char* fn, int64_t i, int64_t j, ScaleShape s) {
  if (i < 0 || i >= s.rows || j < 0 || j >= s.cols)
    throw InputError(fmt::format("{}: scale index ({}, {}) outside [{}, {}]", fn, i, j, s.rows, s.cols));
}

// Sub-tile of the WrapX scheme containing logical row k: first row and size (512, 256 or 128).
struct SubTile {
  int64_t base;
  int64_t size;
};
SubTile wrapx_subtile_of_k(int64_t k, int64_t K) {
  const int64_t full = K / kTileKLogical * kTileKLogical;
  if (k < full) return {k / kTileKLogical * kTileKLogical, kTileKLogical};
  const int64_t rem = K - full;
  if (rem >= 256 && k - full < 256) return {full, 256};
  return {full + (rem >= 256 ? 256 : 0), 128};
}

}  // namespace

ScaleShape mx_scale_shape(int64_t M, int64_t K, MxAxis axis) {
  check_mk("mx_scale_shape", M, K, false);
  if (axis == MxAxis::Row) {
    if (K % kMxBlock != 0) throw InputError(fmt::format("mx_scale_shape: K = {} is not a multiple of 32", K));
    return {M, K / kMxBlock};
  }
  if (M % kMxBlock != 0) throw InputError(fmt::format("mx_scale_shape: M = {} is not a multiple of 32", M));
  return {M / kMxBlock, K};
}

// ---- TransformerEngine ----

ScaleShape te_scale_shape(int64_t M, int64_t K, MxAxis axis) {
  check_mk("te_scale_shape", M, K, true);
  if (axis == MxAxis::Row) return {roundup(M, 128), roundup(K / kMxBlock, 4)};
  return {roundup(M / kMxBlock, 4), roundup(K, 128)};
}

int64_t te_compact_index(int64_t i, int64_t j, int64_t M, int64_t K, MxAxis axis) {
  const ScaleShape padded = te_scale_shape(M, K, axis);
  check_index("te_compact_index", i, j, mx_scale_shape(M, K, axis));
  return i * padded.cols + j;
}

int64_t te_swizzled_index(int64_t i, int64_t j, int64_t M, int64_t K, MxAxis axis) {
  check_mk("te_swizzled_index", M, K, true);
  check_index("te_swizzled_index", i, j, mx_scale_shape(M, K, axis));
  if (axis == MxAxis::Row) return gemm_swizzle_index(i, j, ceil_div(K, 128));
  return gemm_swizzle_index(j, i, ceil_div(M, 128));  // transposed: i' = column, j' = block-row
}

void to_te_compact(const uint8_t* scales, int64_t M, int64_t K, MxAxis axis, uint8_t* out) {
  const ScaleShape p = te_scale_shape(M, K, axis);
  const ScaleShape c = mx_scale_shape(M, K, axis);
  std::memset(out, 0, static_cast<size_t>(p.size()));
  for (int64_t i = 0; i < c.rows; ++i) std::memcpy(out + i * p.cols, scales + i * c.cols, c.cols);
}

void from_te_compact(const uint8_t* te, int64_t M, int64_t K, MxAxis axis, uint8_t* scales) {
  const ScaleShape p = te_scale_shape(M, K, axis);
  const ScaleShape c = mx_scale_shape(M, K, axis);
  for (int64_t i = 0; i < c.rows; ++i) std::memcpy(scales + i * c.cols, te + i * p.cols, c.cols);
}

void to_te_swizzled(const uint8_t* scales, int64_t M, int64_t K, MxAxis axis, uint8_t* out) {
  const ScaleShape p = te_scale_shape(M, K, axis);
  const ScaleShape c = mx_scale_shape(M, K, axis);
  std::memset(out, 0, static_cast<size_t>(p.size()));
  const bool row = axis == MxAxis::Row;
  const int64_t ntx = row ? ceil_div(K, 128) : ceil_div(M, 128);
  for (int64_t i = 0; i < c.rows; ++i)
    for (int64_t j = 0; j < c.cols; ++j)
      out[row ? gemm_swizzle_index(i, j, ntx) : gemm_swizzle_index(j, i, ntx)] = scales[i * c.cols + j];
}

void from_te_swizzled(const uint8_t* te, int64_t M, int64_t K, MxAxis axis, uint8_t* scales) {
  te_scale_shape(M, K, axis);  // validates
  const ScaleShape c = mx_scale_shape(M, K, axis);
  const bool row = axis == MxAxis::Row;
  const int64_t ntx = row ? ceil_div(K, 128) : ceil_div(M, 128);
  for (int64_t i = 0; i < c.rows; ++i)
    for (int64_t j = 0; j < c.cols; ++j)
      scales[i * c.cols + j] = te[row ? gemm_swizzle_index(i, j, ntx) : gemm_swizzle_index(j, i, ntx)];
}

// ---- Trainium ----

void check_swizzle_shape(int64_t K, int64_t F, QuantScheme s) {
  if (K < 0 || F < 0) throw InputError(fmt::format("swizzle: negative shape [{}, {}]", K, F));
  if (s == QuantScheme::WrapX && K % 128 != 0)
    throw InputError(
        fmt::format("swizzle: K = {} is not a multiple of 128 (required by the wrapX scheme)", K));
  if (s == QuantScheme::OneX32 && K % 32 != 0)
    throw InputError(fmt::format("swizzle: K = {} is not a multiple of 32 (required by the 1x32 scheme)", K));
}

SwizzlePos swizzle_pos(int64_t k, int64_t f, int64_t K, int64_t F, QuantScheme s) {
  check_swizzle_shape(K, F, s);
  if (k < 0 || k >= K || f < 0 || f >= F)
    throw InputError(fmt::format("swizzle_pos: (k, f) = ({}, {}) outside [{}, {}]", k, f, K, F));
  if (s == QuantScheme::OneX32) return {k / kInterleave, kInterleave * f + k % kInterleave};
  const SubTile t = wrapx_subtile_of_k(k, K);
  const int64_t q = t.size / kInterleave, local = k - t.base;
  return {t.base / kInterleave + local % q, kInterleave * f + local / q};
}

LogicalPos unswizzle_pos(int64_t partition, int64_t free, int64_t K, int64_t F, QuantScheme s) {
  check_swizzle_shape(K, F, s);
  if (partition < 0 || partition >= K / kInterleave || free < 0 || free >= kInterleave * F)
    throw InputError(fmt::format("unswizzle_pos: (partition, free) = ({}, {}) outside [{}, {}]", partition,
                                 free, K / kInterleave, kInterleave * F));
  const int64_t f = free / kInterleave, j = free % kInterleave;
  if (s == QuantScheme::OneX32) return {partition * kInterleave + j, f};
  // Any row of the partition's sub-tile identifies it: use its first-quarter row.
  const int64_t full = K / kTileKLogical * kTileKLogical;
  int64_t k0 = partition * kInterleave;  // some logical row in the same sub-tile region
  if (k0 < full) {
    k0 = k0 / kTileKLogical * kTileKLogical;
  } else {
    const int64_t rem = K - full, offp = partition - full / kInterleave;
    k0 = (rem >= 256 && offp < 64) ? full : full + (rem >= 256 ? 256 : 0);
  }
  const SubTile t = wrapx_subtile_of_k(k0, K);
  const int64_t q = t.size / kInterleave;
  return {t.base + j * q + (partition - t.base / kInterleave), f};
}

int64_t mx_group_row(int64_t k, int64_t K, QuantScheme s) {
  return swizzle_pos(k, 0, K, 1, s).partition / 8;
}

std::array<int64_t, 32> mx_group_k_indices(int64_t g, int64_t K, QuantScheme s) {
  check_swizzle_shape(K, 1, s);
  if (g < 0 || g >= K / kMxBlock)
    throw InputError(fmt::format("mx_group_k_indices: group row {} outside [0, {})", g, K / kMxBlock));
  std::array<int64_t, 32> ks{};
  for (int pp = 0; pp < 8; ++pp)
    for (int j = 0; j < kInterleave; ++j) ks[pp * kInterleave + j] = unswizzle_pos(g * 8 + pp, j, K, 1, s).k;
  std::sort(ks.begin(), ks.end());
  return ks;
}

int64_t scale_partition(int64_t g, int scale_offset) {
  if (scale_offset != 0 && scale_offset != 4 && scale_offset != 8 && scale_offset != 12)
    throw InputError(fmt::format("scale offset {} is not one of 0, 4, 8, 12", scale_offset));
  if (g < 0) throw InputError(fmt::format("scale_partition: negative group row {}", g));
  return (g / 4) * 32 + g % 4 + scale_offset;
}

int64_t packed_scale_partition(int64_t g) {
  if (g < 0) throw InputError(fmt::format("packed_scale_partition: negative group row {}", g));
  const int64_t t = g / 16, gl = g % 16;
  return (t / kScalePackingTiles) * 128 + (gl / 4) * 32 + 4 * (t % kScalePackingTiles) + gl % 4;
}

ScaleShape trainium_scale_shape(int64_t K, int64_t F, bool packed) {
  if (K < 0 || F < 0) throw InputError(fmt::format("trainium_scale_shape: negative shape [{}, {}]", K, F));
  if (K % kMxBlock != 0)
    throw InputError(fmt::format("trainium_scale_shape: K = {} is not a multiple of 32", K));
  if (packed) return {ceil_div(K, kScalePackingTiles * kTileKLogical) * 128, F};
  return {K / kInterleave, F};
}

namespace {

// Partition of every group row, validated against the tile.
template <class Fn>
void for_each_scale_row(const char* fn, int64_t K, int64_t F, bool packed, int scale_offset, Fn body) {
  const ScaleShape tile = trainium_scale_shape(K, F, packed);
  if (packed && scale_offset != 0)
    throw InputError(
        fmt::format("{}: packed scales take their offset from the K tile; scale_offset must be 0, "
                    "got {}",
                    fn, scale_offset));
  for (int64_t g = 0; g < K / kMxBlock; ++g) {
    const int64_t p = packed ? packed_scale_partition(g) : scale_partition(g, scale_offset);
    if (p >= tile.rows)
      throw InputError(fmt::format("{}: scale row of group {} lands on partition {}, outside the {}-row tile",
                                   fn, g, p, tile.rows));
    body(g, p);
  }
}

}  // namespace

void scales_to_trainium(const uint8_t* compact, int64_t K, int64_t F, bool packed, int scale_offset,
                        uint8_t* tile) {
  for_each_scale_row("scales_to_trainium", K, F, packed, scale_offset,
                     [&](int64_t g, int64_t p) { std::memcpy(tile + p * F, compact + g * F, F); });
}

void scales_from_trainium(const uint8_t* tile, int64_t K, int64_t F, bool packed, int scale_offset,
                          uint8_t* compact) {
  for_each_scale_row("scales_from_trainium", K, F, packed, scale_offset,
                     [&](int64_t g, int64_t p) { std::memcpy(compact + g * F, tile + p * F, F); });
}

void quantize_x4(const uint16_t* x_bf16, int64_t P, int64_t F, Fp8Format fmt, ScaleRule rule, uint8_t* data,
                 uint8_t* scales) {
  if (P < 0 || F < 0) throw InputError(fmt::format("quantize_x4: negative shape [{}, {}]", P, F));
  if (P % 8 != 0)
    throw InputError(
        fmt::format("quantize_x4: partitions = {} is not a multiple of 8 (one MX group spans 8)", P));
  const int64_t W = kInterleave * F;
  for (int64_t g = 0; g < P / 8; ++g)
    quantize_x4_groups(x_bf16 + g * 8 * W, W, F, fmt, rule, data + g * 8 * W, W, scales + g * F);
}

template <class T>
void quantize_operand_x4(const T* kf, int64_t K, int64_t F, QuantScheme s, Fp8Format fmt, ScaleRule rule,
                         bool packed, uint8_t* data, uint8_t* tile) {
  std::vector<T> sw(static_cast<size_t>(K * F));
  swizzle(kf, K, F, s, sw.data());
  // Group g of f: 8 partition rows x the 4 slots of f (quantize_x4's groups), whatever the input type.
  const int64_t W = kInterleave * F;
  std::vector<uint8_t> compact(static_cast<size_t>(K / kMxBlock * F));
  for (int64_t g = 0; g < K / kMxBlock; ++g)
    quantize_x4_groups(sw.data() + g * 8 * W, W, F, fmt, rule, data + g * 8 * W, W, compact.data() + g * F);
  const ScaleShape ts = trainium_scale_shape(K, F, packed);
  std::fill(tile, tile + ts.size(), uint8_t{0x7F});
  scales_to_trainium(compact.data(), K, F, packed, 0, tile);
}

template void quantize_operand_x4<uint16_t>(const uint16_t*, int64_t, int64_t, QuantScheme, Fp8Format,
                                            ScaleRule, bool, uint8_t*, uint8_t*);
template void quantize_operand_x4<float>(const float*, int64_t, int64_t, QuantScheme, Fp8Format, ScaleRule,
                                         bool, uint8_t*, uint8_t*);

}  // namespace trnsim::num
