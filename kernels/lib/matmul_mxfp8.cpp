// matmul_mxfp8 (forward, Trn3): Y[M, N] = X[M, K] W[N, K]^T with on-chip MX quantization. See matmul_mxfp8.h
// for the operand forms and reference/nkilib-kernels.md §1 for the algorithm.
//
// Schedule per core: blocks (m, n, k) in 'mnk' block order. The quantized LHS block (m, k) and RHS block (k,
// n) each live in one of two SBUF slots; the block of the next step is loaded and quantized before the
// current step's matmuls are emitted, so its DMAs and quantize_mx overlap the PE (the builder's region
// tracking orders a slot's reuse after the matmuls that read it). A block already in a slot is reused (so
// with one K block the LHS is quantized once per M block). Inside a block, tiles run 'mnk' or 'nmk' with K
// innermost accumulating in PSUM (8 rotating banks); PSUM is drained into the output tile (one K block: cast
// on ACT/DVE alternately) or an FP32 accumulator (first K block: copy; later ones: tensor_tensor add on DVE).
// Loads go on SP queues, output stores on ACT queues, spills on POOL queues. Deviation from nkilib: PSUM is
// always FP32 (nkilib uses BF16 PSUM when TILES_IN_BLOCK_K == 1 and the output is BF16; the result differs
// only by the extra rounding that avoids).
#include "kernels/lib/matmul_mxfp8.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <set>

#include "kernels/api/nki.h"
#include "sim/base/error.h"

namespace trnsim::kernels {
namespace {

int64_t cdiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
int64_t round_up(int64_t a, int64_t b) {
  return cdiv(a, b) * b;
}

std::string shape_str(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

DType x4_dtype(num::Fp8Format f) {
  return f == num::Fp8Format::E4M3FN ? DType::FP8_E4M3FN_X4 : DType::FP8_E5M2_X4;
}

bool is_quantized(const MxOperand& o) {
  return o.scales_shape.has_value();
}
bool is_swizzled(const MxOperand& o) {
  return o.swizzled || is_quantized(o);
}

// Shapes of the scales input (nkilib §1.2).
std::vector<int64_t> unpacked_scales(int64_t K, int64_t F) {
  return {K / 4, F};
}
std::vector<int64_t> packed_scales(int64_t K, int64_t F) {
  return {cdiv(K, 2048) * 128, F};
}

// A run of partition rows [row, row + n) of one swizzle sub-tile: logical k of (row + i, slot j) is
// k0 + i * row_step + j * j_step.
struct Segment {
  int64_t row, n, k0, row_step, j_step;
};

// Segments of partition rows [r0, r1) under the global interleave of K (num::swizzle_pos).
std::vector<Segment> segments(int64_t r0, int64_t r1, int64_t K, num::QuantScheme s) {
  if (s == num::QuantScheme::OneX32) return {{r0, r1 - r0, 4 * r0, 4, 1}};
  std::vector<Segment> out;
  // Sub-tiles: full 512-row tiles, then a 256-row and a 128-row remainder.
  std::vector<std::pair<int64_t, int64_t>> subs;  // (first k, size)
  int64_t k = 0;
  for (; k + 512 <= K; k += 512) subs.push_back({k, 512});
  if (K - k >= 256) subs.push_back({k, 256}), k += 256;
  if (K - k >= 128) subs.push_back({k, 128}), k += 128;
  for (const auto& [ks, size] : subs) {
    const int64_t a = std::max(r0, ks / 4), b = std::min(r1, (ks + size) / 4);
    if (a < b) out.push_back({a, b - a, ks + (a - ks / 4), 1, size / 4});
  }
  return out;
}

// Largest divisor of `tiles` whose width stays within `max_elems` (at least 1).
int64_t auto_load(int64_t tiles, int64_t tile, int64_t max_elems) {
  int64_t best = 1;
  for (int64_t d = 1; d <= tiles; ++d)
    if (tiles % d == 0 && d * tile <= max_elems) best = d;
  return best;
}

struct Sizes {
  int64_t Mc, Nc, K;   // per-core M and N
  int64_t tk, kp, TK;  // tile_k, its partition rows, K tiles
};

int64_t scale_slots(int64_t bk, int64_t TK, bool packed) {
  if (!packed) return bk;
  int64_t best = 0;
  for (int64_t kt0 = 0; kt0 < TK; kt0 += bk) {
    const int64_t kt1 = std::min(kt0 + bk, TK);
    best = std::max(best, (kt1 - 1) / 4 - kt0 / 4 + 1);
  }
  return best;
}

// SBUF bytes per partition of a block configuration.
int64_t sbuf_need(const MxMatmulSpec& spec, const Sizes& z, int64_t tm, int64_t tn, int64_t bm, int64_t bn,
                  int64_t bk, int64_t lm, int64_t ln, int nbuf_l, int nbuf_r) {
  const auto a = [](int64_t b) { return round_up(b, 64); };
  const bool packed = spec.use_scale_packing;
  const int64_t slots = scale_slots(bk, z.TK, packed);
  const int64_t bmf = bm * tm, bnf = bn * tn;
  int64_t need = nbuf_l * (a(bk * bmf * 4) + a(slots * bmf)) + nbuf_r * (a(bk * bnf * 4) + a(slots * bnf));
  if (!is_quantized(spec.lhs)) need += 2 * a(8 * lm * tm);
  if (!is_quantized(spec.rhs)) need += 2 * a(8 * ln * tn);
  const int64_t nbk = cdiv(z.TK, bk);
  const int64_t out_bytes = nbk > 1 ? 4 : isa::dtype_size(spec.out_dtype);
  need += 2 * a(bm * bnf * out_bytes);
  return need;
}

[[noreturn]] void fail(const MxMatmulSpec& spec, const std::string& msg) {
  throw InputError(fmt::format("{}: {}", spec.kernel, msg));
}

void check_operand(const MxMatmulSpec& spec, const MxOperand& o, int64_t F, const char* fdim) {
  if (o.swizzled && !o.f_by_k && !is_quantized(o))
    fail(spec,
         fmt::format("{}_is_swizzled=true with {}_is_f_by_k=false: a pre-swizzled operand is [K/4, 4{}] "
                     "(K on rows) already; the K-by-F layout is illegal for pre-swizzled inputs",
                     o.param, o.param, fdim));
  const std::string fn = o.f_name.empty() ? fdim : o.f_name;
  if (!is_swizzled(o) && !o.f_by_k && F % 512 != 0)
    fail(spec, fmt::format(
                   "{} is read K-by-F (contraction on its rows, unswizzled BF16), which needs {} % 512 == 0, "
                   "got {} = {}",
                   o.name, fn, fn, F));
  if (!is_quantized(o)) return;
  const auto& s = *o.scales_shape;
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

MxPlan plan_matmul_mxfp8(const MxMatmulSpec& spec, const isa::Limits& limits) {
  if (limits.generation != Generation::Trn3)
    fail(spec, "needs Trn3 (nc_matmul_mx and quantize_mx exist on Trn3 only); the hardware is Trn2");
  const int64_t M = spec.M, N = spec.N, K = spec.K;
  if (M < 1 || N < 1 || K < 1) fail(spec, fmt::format("M, K, N must be positive, got {}, {}, {}", M, K, N));
  if (K % 128 != 0)
    fail(spec, fmt::format("K = {} must be a multiple of 128 (K/4 interleaved rows go on partitions in "
                           "multiples of 32)",
                           K));
  if (is_quantized(spec.lhs) && is_quantized(spec.rhs) && spec.spill_reload)
    fail(spec, "spill_reload=true has nothing to spill: both operands are pre-quantized");
  check_operand(spec, spec.lhs, M, "M");
  check_operand(spec, spec.rhs, N, "N");
  const MxTiling& t = spec.tiling;
  MxPlan p;

  // LNC2 sharding (nkilib §1.5).
  p.lnc2 = spec.run_with_lnc2;
  p.shard_n = spec.shard_rhs.value_or(N >= M);
  if (p.lnc2 && !spec.shard_rhs && (p.shard_n ? N : M) <= 128) p.lnc2 = false;
  Sizes z{M, N, K, 0, 0, 0};
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

  // Tiles (nkilib §1.4, §1.7).
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
  if (p.tile_n % 32 != 0 || p.tile_n > 512)
    fail(spec,
         fmt::format("tile_n = {} must be a multiple of 32 and at most 512 (one FP32 PSUM bank)", p.tile_n));
  for (const MxOperand* o : {&spec.lhs, &spec.rhs})
    if (is_quantized(*o) && spec.use_scale_packing && packed_scales(K, 1) != unpacked_scales(K, 1) &&
        p.tile_k != 512)
      fail(spec, fmt::format("packed pre-quantized scales ({}) need tile_k = 512 (128 partitions), "
                             "got tile_k = {}",
                             o->scales_name, p.tile_k));
  z.tk = p.tile_k;
  z.kp = p.tile_k / 4;
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
  const int64_t budget = limits.sbuf_bytes_per_partition;
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
  double best = std::numeric_limits<double>::infinity();
  for (int64_t bk : choices(t.blocks_k, z.TK))
    for (int64_t bm : choices(t.blocks_m, TM))
      for (int64_t bn : choices(t.blocks_n, TN)) {
        const auto [lm, ln] = loads_for(bm, bn);
        const int64_t nbm = cdiv(TM, bm), nbn = cdiv(TN, bn), nbk = cdiv(z.TK, bk);
        const bool l_reuse = nbk == 1, r_reuse = nbk == 1 && nbn == 1;
        const double lhs_loads = 2.0 * z.Mc * K * (l_reuse ? 1 : nbn);
        const double rhs_loads = 2.0 * K * z.Nc * (r_reuse ? 1 : nbm);
        for (int nbl : {2, 1})
          for (int nbr : {2, 1}) {
            const int64_t need = sbuf_need(spec, z, p.tile_m, p.tile_n, bm, bn, bk, lm, ln, nbl, nbr);
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
                     bm, bn, bk, p.tile_m, p.tile_n, p.tile_k,
                     sbuf_need(spec, z, p.tile_m, p.tile_n, bm, bn, bk, lm, ln, 1, 1), budget));
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

namespace {

// One operand's side of the emitted schedule.
class OperandBlocks {
 public:
  OperandBlocks(Kernel& k, const MxMatmulSpec& spec, const MxOperand& op, const MxPlan& plan, const Sizes& z,
                int64_t F, int64_t f_lo, int64_t f_core, int64_t tile_f, int64_t block_f, int64_t load_f,
                int nbuf, int n_kblocks, const std::string& tag)
      : spec_(spec),
        op_(op),
        z_(z),
        F_(F),
        f_lo_(f_lo),
        f_core_(f_core),
        block_f_(block_f * tile_f),
        load_f_(load_f * tile_f),
        bk_(plan.block_k),
        slots_(scale_slots(plan.block_k, z.TK, spec.use_scale_packing)),
        xdt_(x4_dtype(spec.fp8)) {
    const bool q = is_quantized(op);
    if (q) {
      data_ = k.input(op.name, xdt_, {z.K / 4, F});
      scales_ = k.input(op.scales_name, DType::E8M0, *op.scales_shape);
      packed_hbm_ = *op.scales_shape != unpacked_scales(z.K, F);
    } else if (op.swizzled) {
      data_ = k.input(op.name, DType::BF16, {z.K / 4, 4 * F});
    } else if (op.f_by_k) {
      data_ = k.input(op.name, DType::BF16, {F, z.K});
    } else {
      data_ = k.input(op.name, DType::BF16, {z.K, F});
    }
    for (int i = 0; i < nbuf; ++i) {
      slot_data_.push_back(k.sbuf({128, bk_, block_f_}, xdt_, fmt::format("{}_{}_q{}", spec.scope, tag, i)));
      slot_scales_.push_back(
          k.sbuf({128, slots_, block_f_}, DType::E8M0, fmt::format("{}_{}_s{}", spec.scope, tag, i)));
    }
    if (!q)
      for (int i = 0; i < 2; ++i)
        staging_.push_back(
            k.sbuf({128, 4 * load_f_}, DType::BF16, fmt::format("{}_{}_bf16_{}", spec.scope, tag, i)));
    if (spec.spill_reload && !q) {
      const bool priv = k.num_programs() == 2;
      spill_data_ = k.scratch(fmt::format("{}_{}_spill_data", spec.scope, tag), xdt_,
                              {n_kblocks * bk_ * 128, f_core}, priv);
      spill_scales_ = k.scratch(fmt::format("{}_{}_spill_scales", spec.scope, tag), DType::E8M0,
                                {n_kblocks * slots_ * 128, f_core}, priv);
    }
  }

  // Which slot serves block (fb, kb) given the step sequence; filled by schedule().
  struct Use {
    int slot;
    bool miss;
    bool spill;   // quantized here and written to the scratch (a later miss reloads it)
    bool reload;  // read back from the scratch
  };

  // Slot policy: a block already in a slot is reused; a miss takes the slot the previous step did not use.
  std::vector<Use> schedule(const std::vector<std::pair<int64_t, int64_t>>& keys) const {
    std::vector<Use> uses;
    std::vector<std::pair<int64_t, int64_t>> held(slot_data_.size(), {-1, -1});
    std::set<std::pair<int64_t, int64_t>> seen;
    int prev = -1;
    for (const auto& key : keys) {
      int s = -1;
      for (size_t i = 0; i < held.size(); ++i)
        if (held[i] == key) s = static_cast<int>(i);
      Use u{s, s < 0, false, false};
      if (s < 0) {
        s = held.size() == 1 ? 0 : (prev == 0 ? 1 : 0);
        held[s] = key;
        u.slot = s;
        u.reload = spill_data_.valid() && seen.count(key);
        seen.insert(key);
      }
      uses.push_back(u);
      prev = s;
    }
    // Spill at a block's first miss if it misses again later.
    if (spill_data_.valid()) {
      std::set<std::pair<int64_t, int64_t>> later;
      for (size_t i = uses.size(); i-- > 0;) {
        if (!uses[i].miss) continue;
        if (!uses[i].reload && later.count(keys[i])) uses[i].spill = true;
        later.insert(keys[i]);
      }
    }
    return uses;
  }

  // Loads (or reloads) block (fb, kb) into `slot`.
  void prepare(int64_t fb, int64_t kb, const Use& u) {
    const int64_t f0 = f_lo_ + fb * block_f_, bf = std::min(block_f_, f_lo_ + f_core_ - f0);
    const int64_t kt0 = kb * bk_, kt1 = std::min(kt0 + bk_, z_.TK);
    const View& qd = slot_data_[u.slot];
    const View& qs = slot_scales_[u.slot];
    if (u.reload) {
      transfer_spill(qd, qs, f0 - f_lo_, bf, kb, kt1 - kt0, false);
      return;
    }
    for (int64_t kt = kt0; kt < kt1; ++kt) {
      const int64_t r0 = kt * z_.kp, kpt = std::min(z_.kp, z_.K / 4 - r0), t = kt - kt0;
      const int64_t slot = spec_.use_scale_packing ? kt / 4 - kt0 / 4 : t;
      const uint8_t offset = spec_.use_scale_packing ? static_cast<uint8_t>(4 * (kt % 4)) : 0;
      for (int64_t c = f0; c < f0 + bf; c += load_f_) {
        const int64_t nf = std::min(load_f_, f0 + bf - c), cc = c - f0;
        if (is_quantized(op_)) {
          nki::dma_copy(qd(S(0, kpt), t, S(cc, cc + nf)), data_(S(r0, r0 + kpt), S(c, c + nf)));
          if (!packed_hbm_)
            nki::dma_copy(qs(S(0, kpt), slot, S(cc, cc + nf)), scales_(S(r0, r0 + kpt), S(c, c + nf)));
          else if (kt == kt0 || kt % 4 == 0)
            nki::dma_copy(qs(all, slot, S(cc, cc + nf)),
                          scales_(S((kt / 4) * 128, (kt / 4) * 128 + 128), S(c, c + nf)));
          continue;
        }
        const View& st = staging_[stage_rr_++ % staging_.size()];
        View src;
        if (op_.swizzled) {
          View dst = st(S(0, kpt), S(0, 4 * nf));
          nki::dma_copy(dst, data_(S(r0, r0 + kpt), S(4 * c, 4 * (c + nf))));
          src = dst;
        } else {
          View s3 = st.reshape({128, 4, load_f_});
          for (const Segment& g : segments(r0, r0 + kpt, z_.K, spec_.scheme)) {
            const int64_t lp = g.row - r0;
            if (op_.f_by_k) {
              for (int64_t j = 0; j < 4; ++j) {
                const int64_t kj = g.k0 + j * g.j_step;
                nki::dma_transpose(s3(S(lp, lp + g.n), j, S(0, nf)),
                                   data_(S(c, c + nf), S(kj, kj + (g.n - 1) * g.row_step + 1, g.row_step)));
              }
            } else if (g.row_step == 1) {  // wrapX: slot j rows are j_step apart
              const int64_t q = g.j_step;
              View v = data_.reshape({z_.K / q, q, F_})(S(g.k0 / q, g.k0 / q + 4),
                                                        S(g.k0 % q, g.k0 % q + g.n), S(c, c + nf));
              nki::dma_copy(s3(S(lp, lp + g.n), all, S(0, nf)), v.permute({1, 0, 2}));
            } else {  // 1x32: rows 4P..4P+3
              nki::dma_copy(s3(S(lp, lp + g.n), all, S(0, nf)),
                            data_.reshape({z_.K / 4, 4, F_})(S(g.row, g.row + g.n), all, S(c, c + nf)));
            }
          }
          src = s3(S(0, kpt), all, S(0, nf)).permute({0, 2, 1});
        }
        nki::quantize_mx(qd(S(0, kpt), t, S(cc, cc + nf)), src, qs(S(0, kpt), slot, S(cc, cc + nf)), offset);
      }
    }
    if (u.spill) transfer_spill(qd, qs, f0 - f_lo_, bf, kb, kt1 - kt0, true);
  }

  // Operand views of K tile kt (of block kb) and free range [f, f + n) inside the block, in slot `slot`.
  struct TileRef {
    View data, scales;
    uint8_t offset;
  };
  TileRef tile(int slot, int64_t kb, int64_t kt, int64_t f, int64_t n) const {
    const int64_t kt0 = kb * bk_, kpt = std::min(z_.kp, z_.K / 4 - kt * z_.kp);
    const bool pk = spec_.use_scale_packing;
    const int64_t s = pk ? kt / 4 - kt0 / 4 : kt - kt0;
    return {slot_data_[slot](S(0, kpt), kt - kt0, S(f, f + n)), slot_scales_[slot](S(0, kpt), s, S(f, f + n)),
            static_cast<uint8_t>(pk ? 4 * (kt % 4) : 0)};
  }

 private:
  // Whole-block DMA between a slot and its region of the spill scratch (write = spill, else reload).
  void transfer_spill(const View& qd, const View& qs, int64_t fc, int64_t bf, int64_t kb, int64_t nt,
                      bool write) {
    View hd = spill_data_
                  .reshape({spill_data_.size(0) / 128, 128, spill_data_.size(1)})(S(kb * bk_, kb * bk_ + nt),
                                                                                  all, S(fc, fc + bf))
                  .permute({1, 0, 2});
    const int64_t ns = spec_.use_scale_packing ? (kb * bk_ + nt - 1) / 4 - (kb * bk_) / 4 + 1 : nt;
    View hs = spill_scales_
                  .reshape({spill_scales_.size(0) / 128, 128, spill_scales_.size(1)})(
                      S(kb * slots_, kb * slots_ + ns), all, S(fc, fc + bf))
                  .permute({1, 0, 2});
    View sd = qd(all, S(0, nt), S(0, bf)), ss = qs(all, S(0, ns), S(0, bf));
    if (write) {
      nki::dma_copy(hd, sd, {.engine = Engine::POOL});
      nki::dma_copy(hs, ss, {.engine = Engine::POOL});
    } else {
      nki::dma_copy(sd, hd);
      nki::dma_copy(ss, hs);
    }
  }

  const MxMatmulSpec& spec_;
  const MxOperand& op_;
  Sizes z_;
  int64_t F_, f_lo_, f_core_;
  int64_t block_f_, load_f_, bk_, slots_;
  DType xdt_;
  bool packed_hbm_ = false;
  View data_, scales_;
  std::vector<View> slot_data_, slot_scales_, staging_;
  View spill_data_, spill_scales_;
  size_t stage_rr_ = 0;
};

}  // namespace

void emit_matmul_mxfp8(Kernel& k, const MxMatmulSpec& spec, const MxPlan& p) {
  const int c = k.program_id();
  View y = k.output(spec.out_name, spec.out_dtype, {spec.M, spec.N});
  if (!p.lnc2 && c == 1) {
    // Declare the inputs on this core too (same tensors), then leave the work to core 0.
    return;
  }
  Sizes z{spec.M, spec.N, spec.K, p.tile_k, p.tile_k / 4, cdiv(spec.K, p.tile_k)};
  int64_t m_lo = 0, n_lo = 0;
  if (p.lnc2) {
    if (p.shard_n)
      z.Nc = spec.N / 2, n_lo = c * z.Nc;
    else
      z.Mc = spec.M / 2, m_lo = c * z.Mc;
  }
  const int64_t bmf = p.block_m * p.tile_m, bnf = p.block_n * p.tile_n;
  const int64_t nbm = cdiv(z.Mc, bmf), nbn = cdiv(z.Nc, bnf), nbk = cdiv(z.TK, p.block_k);

  // Step sequence ('mnk' block order) and each operand's block keys.
  struct Step {
    int64_t mb, nb, kb;
  };
  std::vector<Step> steps;
  std::vector<std::pair<int64_t, int64_t>> lkeys, rkeys;
  for (int64_t mb = 0; mb < nbm; ++mb)
    for (int64_t nb = 0; nb < nbn; ++nb)
      for (int64_t kb = 0; kb < nbk; ++kb) {
        steps.push_back({mb, nb, kb});
        lkeys.push_back({mb, kb});
        rkeys.push_back({nb, kb});
      }
  const int nbl = p.nbuf_lhs, nbr = p.nbuf_rhs;
  OperandBlocks L(k, spec, spec.lhs, p, z, spec.M, m_lo, z.Mc, p.tile_m, p.block_m, p.load_m, nbl,
                  static_cast<int>(nbk), "lhs");
  OperandBlocks R(k, spec, spec.rhs, p, z, spec.N, n_lo, z.Nc, p.tile_n, p.block_n, p.load_n, nbr,
                  static_cast<int>(nbk), "rhs");
  const auto luse = L.schedule(lkeys), ruse = R.schedule(rkeys);

  const DType acc_dtype = nbk > 1 ? DType::F32 : spec.out_dtype;
  std::vector<View> acc;
  for (int i = 0; i < 2; ++i)
    acc.push_back(k.sbuf({p.tile_m, p.block_m, bnf}, acc_dtype, spec.scope + "_acc"));
  std::vector<View> banks;
  for (int i = 0; i < 8; ++i) banks.push_back(k.psum({p.tile_m, p.tile_n}, DType::F32, spec.scope + "_psum"));
  size_t bank_rr = 0, drain_rr = 0, acc_rr = 0;

  const auto prepare = [&](size_t s) {
    if (luse[s].miss) L.prepare(steps[s].mb, steps[s].kb, luse[s]);
    if (ruse[s].miss) R.prepare(steps[s].nb, steps[s].kb, ruse[s]);
  };
  // A step's blocks are prepared before the previous step's matmuls when they go to the other slot.
  const auto early = [&](size_t s) { return (!luse[s].miss || nbl == 2) && (!ruse[s].miss || nbr == 2); };
  if (!steps.empty()) prepare(0);
  View out;
  for (size_t s = 0; s < steps.size(); ++s) {
    const Step& st = steps[s];
    if (s + 1 < steps.size() && early(s + 1)) prepare(s + 1);
    const int64_t m0 = m_lo + st.mb * bmf, n0 = n_lo + st.nb * bnf;
    const int64_t bm = std::min(bmf, m_lo + z.Mc - m0), bn = std::min(bnf, n_lo + z.Nc - n0);
    const int64_t tms = cdiv(bm, p.tile_m), tns = cdiv(bn, p.tile_n);
    const int64_t kt0 = st.kb * p.block_k, kt1 = std::min(kt0 + p.block_k, z.TK);
    if (st.kb == 0) out = acc[acc_rr++ % acc.size()];
    const bool last_k = st.kb == nbk - 1;
    const auto store_row = [&](int64_t mt) {
      const int64_t tm = std::min(p.tile_m, bm - mt * p.tile_m), r = m0 + mt * p.tile_m;
      nki::dma_copy(y(S(r, r + tm), S(n0, n0 + bn)), out(S(0, tm), mt, S(0, bn)), {.engine = Engine::ACT});
    };
    const auto tile = [&](int64_t mt, int64_t nt) {
      const int64_t tm = std::min(p.tile_m, bm - mt * p.tile_m), tn = std::min(p.tile_n, bn - nt * p.tile_n);
      const View& bank = banks[bank_rr++ % banks.size()];
      View ps = bank(S(0, tm), S(0, tn));
      for (int64_t kt = kt0; kt < kt1; ++kt) {
        const auto a = L.tile(luse[s].slot, st.kb, kt, mt * p.tile_m, tm);
        const auto b = R.tile(ruse[s].slot, st.kb, kt, nt * p.tile_n, tn);
        nki::nc_matmul_mx(
            ps, a.data, b.data, a.scales, b.scales,
            {.accumulate = kt > kt0, .stationary_scale_offset = a.offset, .moving_scale_offset = b.offset});
      }
      View dst = out(S(0, tm), mt, S(nt * p.tile_n, nt * p.tile_n + tn));
      if (st.kb > 0) {
        nki::tensor_tensor(dst, dst, ps, nki::AluOp::Add);
      } else if (drain_rr++ % 2) {
        nki::activation(dst, nki::ActFunc::Copy, ps);
      } else {
        nki::tensor_copy(dst, ps);
      }
    };
    if (!spec.nmk) {
      for (int64_t mt = 0; mt < tms; ++mt) {
        for (int64_t nt = 0; nt < tns; ++nt) tile(mt, nt);
        if (last_k) store_row(mt);
      }
    } else {
      for (int64_t nt = 0; nt < tns; ++nt)
        for (int64_t mt = 0; mt < tms; ++mt) tile(mt, nt);
      if (last_k)
        for (int64_t mt = 0; mt < tms; ++mt) store_row(mt);
    }
    if (s + 1 < steps.size() && !early(s + 1)) prepare(s + 1);
  }
}

}  // namespace trnsim::kernels
