#include "kernels/lib/mxfp8/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <tuple>

#include "kernels/lib/mxfp8/layout.h"
#include "sim/base/error.h"

namespace trnsim::kernels::mxfp8 {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

// Largest divisor of `tiles` whose width stays within `max_elems` (at least 1).
int64_t auto_load(int64_t tiles, int64_t tile, int64_t max_elems) {
  int64_t best = 1;
  for (int64_t d = 1; d <= tiles; ++d)
    if (tiles % d == 0 && d * tile <= max_elems) best = d;
  return best;
}

struct Sizes {
  int64_t Mc, Nc;  // per-core M and N
  int64_t TK;      // K tiles
};

// SBUF bytes per partition of a block configuration.
int64_t sbuf_need(const MatmulSpec& spec, const Sizes& z, int64_t tk, int64_t tm, int64_t tn, int64_t bm,
                  int64_t bn, int64_t bk, int64_t lm, int64_t ln, int nbuf_l, int nbuf_r) {
  const auto a = [](int64_t b) { return round_up(b, 64); };
  const int64_t slots = scale_slots(bk, z.TK, spec.use_scale_packing);
  const int64_t bmf = bm * tm, bnf = bn * tn;
  const int pairs = spec.lhs2 ? 2 : 1;  // a paired stationary has its own blocks, staging and accumulators
  int64_t need =
      pairs * nbuf_l * (a(bk * bmf * 4) + a(slots * bmf)) + nbuf_r * (a(bk * bnf * 4) + a(slots * bnf));
  if (!spec.lhs.quantized()) need += pairs * 2 * a(8 * lm * tm);
  if (!spec.rhs.quantized()) need += 2 * a(8 * ln * tn);
  need += pairs * pe_rows_bytes(spec.lhs, tk, lm * tm) + pe_rows_bytes(spec.rhs, tk, ln * tn);
  const int64_t nbk = cdiv(z.TK, bk);
  const int64_t out_bytes = nbk > 1 ? 4 : isa::dtype_size(spec.out_dtype);
  need += pairs * 2 * a(bm * bnf * out_bytes);
  return need;
}

[[noreturn]] void fail(const MatmulSpec& spec, const std::string& msg) {
  throw InputError(fmt::format("{}: {}", spec.kernel, msg));
}

void check_operand(const MatmulSpec& spec, const Operand& o, int64_t F, const char* fdim) {
  const std::string fn = o.f_name.empty() ? fdim : o.f_name;

  if (o.source != Source::Hbm && (o.layout == Layout::Swizzled || o.quantized()))
    fail(spec,
         fmt::format("{} is {}: such operands are BF16 F-by-K or K-by-F (pre-swizzled and "
                     "pre-quantized operands come from HBM views)",
                     o.name, o.source == Source::Gather ? "gathered by row indices" : "resident in SBUF"));
  if (o.interleaved_rows &&
      (o.source == Source::Hbm || o.layout != Layout::KByF || spec.scheme != num::QuantScheme::OneX32))
    fail(spec, fmt::format("{}: rows in the 1x32 interleave order are for K-by-F gathered or resident "
                           "operands under quant_scheme 1x32",
                           o.name));
  if (o.source != Source::Hbm && o.layout == Layout::KByF && spec.scheme == num::QuantScheme::OneX32 &&
      !o.interleaved_rows)
    fail(spec,
         fmt::format("{} is K-by-F and {}: quant_scheme 1x32 puts rows 4p..4p+3 on partition p, which "
                     "one row index column (or one partition run) cannot pick; use wrapX",
                     o.name, o.source == Source::Gather ? "gathered by row indices" : "resident in SBUF"));
  if (o.source == Source::Hbm && o.layout == Layout::KByF && F % 512 != 0)
    fail(spec, fmt::format(
                   "{} is read K-by-F (contraction on its rows, unswizzled BF16), which needs {} % 512 == 0, "
                   "got {} = {}",
                   o.name, fn, fn, F));
  if (!o.quantized()) return;
  const auto& s = o.scales_shape;
  const auto un = unpacked_scales(spec.K, F), pk = packed_scales(spec.K, F);
  const bool is_un = s == un, is_pk = s == pk;
  if (!is_un && !is_pk)
    fail(spec, fmt::format("{} has shape {}; expected the unpacked shape {} or the packed shape {}",
                           o.scales_name, shape_str(s), shape_str(un), shape_str(pk)));
  if (un != pk && is_pk != spec.use_scale_packing)
    fail(spec, fmt::format("use_scale_packing={} but {} has the {} shape {} (the {} shape is {})",
                           spec.use_scale_packing, o.scales_name, is_pk ? "packed" : "unpacked", shape_str(s),
                           is_pk ? "unpacked" : "packed", shape_str(is_pk ? un : pk)));
}

}  // namespace

int64_t pe_rows_bytes(const Operand& o, int64_t tile_k, int64_t load_f) {
  if (!o.pe_rows_by_dma()) return 0;
  return 2 * round_up(cdiv(load_f, 128) * tile_k * 2, 64);
}

Plan plan_matmul(const MatmulSpec& spec, const isa::Limits& limits) {
  if (limits.generation != Generation::Trn3)
    fail(spec,
         "needs Trn3: nki-library's MXFP8 kernels have no Trn2 path (their tests mark them TRN3-only) and "
         "nc_matmul_mx and quantize_mx are available only on NeuronCore-v4 and newer (NKI ISA docs); the "
         "hardware is Trn2");
  const int64_t M = spec.M, N = spec.N, K = spec.K;
  if (M < 1 || N < 1 || K < 1) fail(spec, fmt::format("M, K, N must be positive, got {}, {}, {}", M, K, N));
  if (K % 128 != 0)
    fail(spec, fmt::format("K = {} must be a multiple of 128 (K/4 interleaved rows go on partitions in "
                           "multiples of 32)",
                           K));
  if (spec.lhs.quantized() && spec.rhs.quantized() && spec.spill_reload)
    fail(spec, "spill_reload=true has nothing to spill: both operands are pre-quantized");
  check_operand(spec, spec.lhs, M, "M");
  if (spec.lhs2) {
    if (spec.lhs2->layout != spec.lhs.layout || spec.lhs2->source != spec.lhs.source)
      fail(spec, fmt::format("the paired stationary {} must have the form of {} (same source and layout)",
                             spec.lhs2->name, spec.lhs.name));
    check_operand(spec, *spec.lhs2, M, "M");
  }
  check_operand(spec, spec.rhs, N, "N");
  const Tiling& t = spec.tiling;
  Plan p;

  // LNC2 sharding (nkilib resolve_lnc2_sharding).
  p.lnc2 = spec.cores == Cores::Lnc && spec.run_with_lnc2;
  p.shard_n = spec.shard_rhs.value_or(N >= M);
  if (p.lnc2 && !spec.shard_rhs && (p.shard_n ? N : M) <= 128) p.lnc2 = false;
  Sizes z{M, N, 0};
  if (p.lnc2) {
    const int64_t d = p.shard_n ? N : M;
    if (d % 4 != 0)
      fail(spec,
           fmt::format("run_with_lnc2 splits {} = {} between two cores; it must be a multiple of 4 (each "
                       "half even)",
                       p.shard_n ? "N" : "M", d));
    (p.shard_n ? z.Nc : z.Mc) = d / 2;
  }
  if (z.Mc % 2 != 0 || z.Nc % 2 != 0)
    fail(spec, fmt::format("M and N must be even (nc_matmul_mx free sizes), got M = {}, N = {}", M, N));

  // Tiles (nkilib MatmulMxfp8KernelConfig defaults and validate_shapes).
  p.tile_m = t.tile_m ? t.tile_m : 128;
  if (p.tile_m % 32 != 0 || p.tile_m > 128)
    fail(spec, fmt::format("tile_m = {} must be a multiple of 32 and at most 128 (stationary free size)",
                           p.tile_m));
  p.tile_k = t.tile_k ? t.tile_k : (K == 128 || K == 256 ? K : 512);
  if (p.tile_k != 128 && p.tile_k != 256 && p.tile_k != 512)
    fail(spec,
         fmt::format("tile_k = {} must be 128, 256 or 512 (32, 64 or 128 partitions of x4 data)", p.tile_k));
  if (t.tile_n) {
    p.tile_n = t.tile_n;
  } else {
    p.tile_n = std::min<int64_t>(512, round_up(z.Nc, 32));
    for (int64_t c : {128, 256, 512})
      if (z.Nc % c == 0) p.tile_n = c;
  }
  // Trn3 matmuls may span PSUM banks (nkilib: a moving tile of up to TILE_SIZE_GEMM_MOVING_MAX columns); FP32
  // accumulation bounds a tile by the whole PSUM partition.
  const int64_t max_n = limits.psum_bytes_per_partition / 4;
  if (p.tile_n % 32 != 0 || p.tile_n > max_n)
    fail(spec, fmt::format("tile_n = {} must be a multiple of 32 and at most {} (FP32 PSUM: {} banks of {}; "
                           "a tile above {} spans several banks)",
                           p.tile_n, max_n, limits.psum_bytes_per_partition / limits.psum_bank_bytes,
                           limits.psum_bank_bytes / 4, limits.psum_bank_bytes / 4));
  for (const Operand* o : {&spec.lhs, &spec.rhs})
    if (o->quantized() && spec.use_scale_packing && packed_scales(K, 1) != unpacked_scales(K, 1) &&
        p.tile_k != 512)
      fail(spec, fmt::format("packed pre-quantized scales ({}) need tile_k = 512 (128 partitions), "
                             "got tile_k = {}",
                             o->scales_name, p.tile_k));
  z.TK = cdiv(K, p.tile_k);
  const int64_t TM = cdiv(z.Mc, p.tile_m), TN = cdiv(z.Nc, p.tile_n);

  using Named = std::pair<int64_t, const char*>;
  for (auto [v, name] : std::initializer_list<Named>{{t.blocks_m, "TILES_IN_BLOCK_M"},
                                                     {t.blocks_n, "TILES_IN_BLOCK_N"},
                                                     {t.blocks_k, "TILES_IN_BLOCK_K"},
                                                     {t.load_m, "TILES_IN_LOAD_M"},
                                                     {t.load_n, "TILES_IN_LOAD_N"}})
    if (v < 0) fail(spec, fmt::format("{} = {} must be positive", name, v));

  // Blocks: explicit, or the cheapest configuration that fits SBUF.
  const int64_t budget = limits.sbuf_bytes_per_partition - spec.reserved_sbuf_bytes;
  const auto loads_for = [&](int64_t bm, int64_t bn) {
    return std::pair{t.load_m ? t.load_m : auto_load(bm, p.tile_m, 1024),
                     t.load_n ? t.load_n : auto_load(bn, p.tile_n, 1024)};
  };
  const auto choices = [](int64_t fixed, int64_t tiles) {
    std::vector<int64_t> v;
    if (fixed) return std::vector<int64_t>{fixed};
    for (int64_t b = 1; b < tiles; b *= 2) v.push_back(b);
    v.push_back(tiles);
    return v;
  };
  const auto need_of = [&](int64_t bm, int64_t bn, int64_t bk, int64_t lm, int64_t ln, int nbl, int nbr) {
    return sbuf_need(spec, z, p.tile_k, p.tile_m, p.tile_n, bm, bn, bk, lm, ln, nbl, nbr);
  };
  double best = std::numeric_limits<double>::infinity();
  for (int64_t bk : choices(t.blocks_k, z.TK))
    for (int64_t bm : choices(t.blocks_m, TM))
      for (int64_t bn : choices(t.blocks_n, TN)) {
        const auto [lm, ln] = loads_for(bm, bn);
        const int64_t nbm = cdiv(TM, bm), nbn = cdiv(TN, bn), nbk = cdiv(z.TK, bk);
        const bool l_reuse = nbk == 1, r_reuse = nbk == 1 && nbn == 1;
        const double lhs_loads = (spec.lhs2 ? 4.0 : 2.0) * z.Mc * K * (l_reuse ? 1 : nbn);
        const double rhs_loads = 2.0 * K * z.Nc * (r_reuse ? 1 : nbm);
        for (int nbl : {2, 1})
          for (int nbr : {2, 1}) {
            const int64_t need = need_of(bm, bn, bk, lm, ln, nbl, nbr);
            if (need > budget) continue;
            double score = lhs_loads * (nbl == 1 ? 2 : 1) + rhs_loads * (nbr == 1 ? 2 : 1) +
                           (nbk > 1 ? 8.0 * z.Mc * z.Nc * nbk : 0.0) + 32768.0 * nbm * nbn * nbk;
            if (score < best) {
              best = score;
              p.block_m = bm, p.block_n = bn, p.block_k = bk, p.load_m = lm, p.load_n = ln;
              p.sbuf_bytes = need;
              p.nbuf_lhs = nbl, p.nbuf_rhs = nbr;
            }
          }
      }
  if (!p.block_m) {
    const int64_t bm = t.blocks_m ? t.blocks_m : 1, bn = t.blocks_n ? t.blocks_n : 1,
                  bk = t.blocks_k ? t.blocks_k : 1;
    const auto [lm, ln] = loads_for(bm, bn);
    fail(spec,
         fmt::format("blocks of TILES_IN_BLOCK_M/N/K = {}/{}/{} (tile_m {}, tile_n {}, tile_k {}) need {} "
                     "bytes per partition of SBUF even single-buffered; the core has {}",
                     bm, bn, bk, p.tile_m, p.tile_n, p.tile_k, need_of(bm, bn, bk, lm, ln, 1, 1), budget));
  }
  using LoadRule = std::tuple<int64_t, int64_t, const char*, const char*>;
  for (auto [load, block, lname, bname] :
       std::initializer_list<LoadRule>{{p.load_m, p.block_m, "TILES_IN_LOAD_M", "TILES_IN_BLOCK_M"},
                                       {p.load_n, p.block_n, "TILES_IN_LOAD_N", "TILES_IN_BLOCK_N"}})
    if (load > block || block % load != 0)
      fail(spec, fmt::format("{} = {} must divide {} = {}", lname, load, bname, block));
  // Each dim at least half a block (unless smaller than one tile), on the per-core sizes.
  using DimRule = std::tuple<int64_t, int64_t, int64_t, const char*, const char*>;
  for (auto [dim, tile, block, dname, bname] :
       std::initializer_list<DimRule>{{z.Mc, p.tile_m, p.block_m, "M", "TILES_IN_BLOCK_M"},
                                      {z.Nc, p.tile_n, p.block_n, "N", "TILES_IN_BLOCK_N"},
                                      {K, p.tile_k, p.block_k, "K", "TILES_IN_BLOCK_K"}})
    if (dim >= tile && 2 * dim < block * tile)
      fail(spec,
           fmt::format("{} = {} (per core) is less than half a block ({} {} x tile {} = {}); 2*{} must be "
                       ">= the block",
                       dname, dim, bname, block, tile, block * tile, dname));
  if (p.lnc2) {
    const int64_t d = p.shard_n ? N : M, blk = p.shard_n ? p.block_n * p.tile_n : p.block_m * p.tile_m;
    if (cdiv(d, blk) < 2)
      fail(spec,
           fmt::format("run_with_lnc2 shards {} (lnc_2_shard_rhs={}) but {} = {} has {} block of {}; LNC2 "
                       "needs at least 2 blocks along the sharded dim",
                       p.shard_n ? "N" : "M", p.shard_n ? "true" : "false", p.shard_n ? "N" : "M", d,
                       cdiv(d, blk), blk));
  }
  return p;
}

}  // namespace trnsim::kernels::mxfp8

namespace trnsim::kernels::mxfp8 {

void check_operand_views(const MatmulSpec& spec, const Operand& o, int64_t F, const char* which) {
  const int64_t K = spec.K;
  const std::string what = fmt::format("{} operand '{}'", which, o.name.empty() ? o.data.name() : o.name);
  const auto bad = [&](const std::string& msg) { fail(spec, fmt::format("{}: {}", what, msg)); };
  if (!o.data.valid()) bad("no data view is bound");
  const auto want = [&](const View& v, isa::MemSpace space, std::vector<isa::DType> dtypes,
                        const char* role) {
    if (v.space() != space)
      bad(fmt::format("{} {} must be in {}", role, v.describe(),
                      space == isa::MemSpace::HBM ? "HBM" : "SBUF"));
    if (std::find(dtypes.begin(), dtypes.end(), v.dtype()) == dtypes.end())
      bad(fmt::format("{} {} has the wrong dtype", role, v.describe()));
  };
  const auto shape = [&](const View& v, const std::vector<int64_t>& s, const char* role) {
    if (v.shape() != s) bad(fmt::format("{} {} must be {}", role, v.describe(), shape_str(s)));
  };
  const bool fk = o.layout == Layout::FByK;
  if (o.scalar_offset.valid()) {
    if (o.source != Source::Hbm)
      bad("a scalar_offset moves HBM loads (hardware-DGE DMAs); this operand is not read from an HBM view");
    want(o.scalar_offset, isa::MemSpace::SBUF, {isa::DType::I32, isa::DType::U32}, "scalar_offset");
    shape(o.scalar_offset, {1, 1}, "scalar_offset");
  }
  switch (o.source) {
    case Source::Hbm:
      if (o.quantized()) {
        want(o.data, isa::MemSpace::HBM, {x4_dtype(spec.fp8)}, "data");
        shape(o.data, {K / 4, F}, "data");
        if (!o.scales.valid()) bad("pre-quantized operands need a scales view");
        want(o.scales, isa::MemSpace::HBM, {isa::DType::E8M0}, "scales");
        shape(o.scales, o.scales_shape, "scales");
        return;
      }
      want(o.data, isa::MemSpace::HBM, {isa::DType::BF16}, "data");
      if (o.layout == Layout::Swizzled)
        shape(o.data, {K / 4, 4 * F}, "data");
      else
        shape(o.data, fk ? std::vector<int64_t>{F, K} : std::vector<int64_t>{K, F}, "data");
      return;
    case Source::Gather: {
      want(o.data, isa::MemSpace::HBM, {isa::DType::BF16}, "data");
      if (o.data.rank() != 2 || o.data.size(1) != (fk ? K : F))
        bad(fmt::format("gathered rows {} must be [rows, {}]", o.data.describe(), fk ? K : F));
      const View::Region rg = o.data.region();
      if (rg.r0 != 0 || rg.r1 - rg.r0 != o.data.size(0))
        bad(
            fmt::format("gathered rows {} must be the rows (dim 0) of its tensor: an indirect DMA indexes "
                        "tensor rows",
                        o.data.describe()));
      const View& ix = o.rows.index;
      if (!ix.valid()) bad("a gathered operand needs a row index");
      want(ix, isa::MemSpace::SBUF, {isa::DType::I32, isa::DType::U32}, "row index");
      const int64_t rows = fk ? F : K;
      if (o.interleaved_rows) {
        if (ix.partitions() != 128 || ix.rank() != 2 || ix.size(1) < 4 * cdiv(rows, 512))
          bad(fmt::format("row index {} must be [128, >= {}] (row 4 R + j at [R % 128, 4 (R / 128) + j])",
                          ix.describe(), 4 * cdiv(rows, 512)));
        return;
      }
      if (ix.partitions() != 128 || ix.rank() != 2 || ix.size(1) < cdiv(rows, 128))
        bad(fmt::format("row index {} must be [128, >= {}] (row r at [r % 128, r / 128])", ix.describe(),
                        cdiv(rows, 128)));
      return;
    }
    case Source::Sbuf: {
      want(o.data, isa::MemSpace::SBUF, {isa::DType::BF16}, "resident tile");
      const int64_t rows = fk ? F : K, cols = fk ? K : F;
      if (o.interleaved_rows) {
        if (o.data.rank() != 3 || o.data.partitions() != 128 || o.data.size(1) < 4 * cdiv(rows, 512) ||
            o.data.size(2) != cols)
          bad(fmt::format(
              "resident tile {} must be [128, >= {}, {}] (row 4 R + j at [R % 128, 4 (R / 128) + j])",
              o.data.describe(), 4 * cdiv(rows, 512), cols));
        return;
      }
      if (o.data.rank() != 3 || o.data.partitions() != 128 || o.data.size(1) < cdiv(rows, 128) ||
          o.data.size(2) != cols)
        bad(fmt::format("resident tile {} must be [128, >= {}, {}] (row r at [r % 128, r / 128])",
                        o.data.describe(), cdiv(rows, 128), cols));
      return;
    }
  }
}

CoreShare core_share(const MatmulSpec& spec, const Plan& p, int core) {
  CoreShare c{spec.M, spec.N, 0, 0};
  if (!p.lnc2) return c;
  if (p.shard_n)
    c.N = spec.N / 2, c.n_lo = core * c.N;
  else
    c.M = spec.M / 2, c.m_lo = core * c.M;
  return c;
}

}  // namespace trnsim::kernels::mxfp8
