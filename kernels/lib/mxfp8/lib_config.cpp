#include "kernels/lib/mxfp8/lib_config.h"

#include <algorithm>

#include "kernels/lib/mxfp8/layout.h"

namespace trnsim::kernels::mxfp8::lib {
namespace {

constexpr int64_t kMaxBlockF = 2048;                // MAX_BLOCK_M, MAX_BLOCK_N (elements)
constexpr double kSbufBudget = 32.0 * 1024 * 1024;  // SBUF_LIMIT_BYTES, whole SBUF
constexpr int64_t kPartitionRunLimit = 256 * 1024;  // SBUF_F_DIM_LIMIT_BYTES
constexpr int64_t kInterleave = 4;                  // x4 bytes per logical column of a K tile
constexpr int64_t kDgtMaxColumns = 32 * 128;        // vector-offset columns x partitions

struct Shape {
  int64_t tile_m, tile_n, tile_k;
  int64_t k_bytes, out_bytes;
  double budget;
  bool fits(int64_t bm, int64_t bn, int64_t bk) const {
    const int64_t block_m = bm * tile_m, block_n = bn * tile_n, block_k = bk * tile_k;
    const double total = static_cast<double>(k_bytes * block_k * (block_m + block_n)) +
                         static_cast<double>(block_m * block_n * out_bytes);
    if (total >= budget) return false;
    return bk * block_m * kInterleave <= kPartitionRunLimit &&
           bk * block_n * kInterleave <= kPartitionRunLimit && bm * block_n * out_bytes <= kPartitionRunLimit;
  }
};

// Largest divisor of n that is at most `limit` (1 if none).
int64_t divisor_within(int64_t n, int64_t limit) {
  for (int64_t d = std::min(n, limit); d >= 1; --d)
    if (n % d == 0) return d;
  return 1;
}

// Tiles of a dim for the block search: at least 1, capped (cap 0: none).
int64_t max_tiles(int64_t dim, int64_t tile, int64_t cap) {
  const int64_t t = std::max<int64_t>(1, cdiv(dim, tile));
  return cap > 0 ? std::min(t, cap) : t;
}

}  // namespace

Tiling default_tiling(const MatmulSpec& spec) {
  Tiling t = spec.tiling;
  const int64_t M = spec.M, N = spec.N, K = spec.K;
  // resolve_lnc2_sharding on the full shape, then matmul_mxfp8's per-core shape, then auto_generate_default's
  // second halving of the sharded dim.
  bool lnc2 = spec.cores == Cores::Lnc && spec.run_with_lnc2;
  const bool shard_n = spec.shard_rhs.value_or(N >= M);
  if (lnc2 && (shard_n ? N : M) <= 128) lnc2 = false;
  int64_t eff_m = M, eff_n = N;
  if (lnc2) (shard_n ? eff_n : eff_m) /= 4;

  const auto unswizzled = [](const Operand& o) { return o.layout != Layout::Swizzled; };
  const auto bf16 = [](const Operand& o) { return !o.quantized(); };
  Shape s;
  s.tile_m = t.tile_m ? t.tile_m : 128;
  if (t.tile_k)
    s.tile_k = t.tile_k;
  else if (unswizzled(spec.lhs) || unswizzled(spec.rhs) || K >= 512)
    s.tile_k = 512;
  else
    s.tile_k = K >= 256 ? 256 : 128;
  if (t.tile_n) {
    s.tile_n = t.tile_n;
  } else {
    s.tile_n = 128;
    for (int64_t c : {512, 256, 128})
      if (eff_n >= c && eff_n % c == 0) {
        s.tile_n = c;
        break;
      }
  }
  const int bf16_operands = (bf16(spec.lhs) ? 1 : 0) + (bf16(spec.rhs) ? 1 : 0);
  s.k_bytes = 2 + bf16_operands;
  s.out_bytes = spec.out_dtype == isa::DType::F32 ? 4 : 2;
  s.budget = kSbufBudget * static_cast<double>(s.tile_k) / 512.0 * 0.8;

  const int64_t max_m = max_tiles(eff_m, s.tile_m, kMaxBlockF / s.tile_m);
  const int64_t max_n = max_tiles(eff_n, s.tile_n, kMaxBlockF / s.tile_n);
  const int64_t max_k = max_tiles(K, s.tile_k, 0);
  int64_t bm = std::min<int64_t>(16, max_m), bn = std::min<int64_t>(2, max_n),
          bk = std::min<int64_t>(8, max_k);
  while (!s.fits(bm, bn, bk) && (bm > 1 || bn > 1 || bk > 1)) {
    const int64_t k_cost = bk * s.tile_k * (bm * s.tile_m + bn * s.tile_n);
    const int64_t mn_cost = bm * s.tile_m * bn * s.tile_n;
    if (k_cost >= mn_cost && bk > 1)
      bk = std::max<int64_t>(1, bk / 2);
    else if (bm >= bn && bm > 1)
      bm = std::max<int64_t>(1, bm / 2);
    else if (bn > 1)
      bn = std::max<int64_t>(1, bn / 2);
    else
      bk = std::max<int64_t>(1, bk / 2);
  }
  for (int64_t k = bk + 1; k <= max_k && s.fits(bm, bn, k); ++k)
    if (cdiv(K, k * s.tile_k) < cdiv(K, bk * s.tile_k)) bk = k;
  for (int64_t m = bm + 1; m <= max_m && s.fits(m, bn, bk); ++m)
    if (cdiv(eff_m, m * s.tile_m) < cdiv(eff_m, bm * s.tile_m)) bm = m;
  for (int64_t n = bn + 1; n <= max_n && s.fits(bm, n, bk); ++n)
    if (cdiv(eff_n, n * s.tile_n) < cdiv(eff_n, bn * s.tile_n)) bn = n;

  t.tile_m = s.tile_m, t.tile_k = s.tile_k, t.tile_n = s.tile_n;
  if (!t.blocks_m) t.blocks_m = bm;
  if (!t.blocks_n) t.blocks_n = bn;
  if (!t.blocks_k) t.blocks_k = bk;
  const auto load = [&](const Operand& o, int64_t block, int64_t tile) {
    return unswizzled(o) && bf16(o) ? divisor_within(block, kDgtMaxColumns / (kInterleave * tile)) : block;
  };
  if (!t.load_m) t.load_m = load(spec.lhs, t.blocks_m, s.tile_m);
  if (!t.load_n) t.load_n = load(spec.rhs, t.blocks_n, s.tile_n);
  return t;
}

}  // namespace trnsim::kernels::mxfp8::lib
