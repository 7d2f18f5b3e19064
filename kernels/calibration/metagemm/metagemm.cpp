// metagemm (calibration port): result[M, N] = lhs[M, K] @ rhs[K, N] (or lhsT[K, M]^T @ rhs) in BF16 on one
// core, a port of nki-autotune's MetaGEMM template (github.com/awslabs/nki-autotune @616e222,
// autotune/gemm/kernels.py MetaGEMM and lhs_rhs_meta_gemm / lhsT_rhs_meta_gemm, autotune/gemm/config.py
// GEMMConfig, autotune/core/tensor.py SBUFTensor). Tiles: M 128 (stationary columns), N 512 (moving
// columns, one PSUM bank), K 128 (partitions). Each axis X has TILES_IN_X tiles in NUM_BLOCK_X blocks of
// TILES_PER_BLOCK_X tiles (config.py; the parameters tiles_per_block_{m,n,k} here).
//   Three loops over the blocks in loop_order (outermost first); the loop at position p runs NUM_BLOCK of its
//   axis if an operation deeper than p uses that axis, else once (MetaGEMM._get_loop_range).
//   lhs / rhs are loaded at their position (GEMMConfig: a relative position 0, 1 or 2 around their two axes,
//   lhs_position / rhs_position): an SBUF tensor [128, par tiles, free tiles, free tile] memset to zero
//   (nl.zeros) and filled one [128, tile] DMA per tile, the axes whose loops enclose the position taking
//   their block's tiles, the others all their tiles; lhs (not transposed) is then transposed tile by tile
//   (nc_transpose into a PSUM tile, copied back in place).
//   The result tensor [128, M tiles, N tiles, 512] (BF16) is made and memset at K's position; innermost, for
//   each (m, n) tile of the overlap a PSUM tile gets the overlapping K tiles' matmuls (its nl.zeros is the
//   first matmul's overwrite, as in the other ports) and is added (tensor_tensor) into the result; the
//   result is stored tile by tile when K's position is left.
// The loop order and block sizes are the workload's; the template's load positions are not in the issue's
// table, so unless given they follow the template's own guidance (MetaGEMM docstring: "Load LHS position
// ... Always try to stay <= N level if possible", rhs "<= M level"): the innermost position at or above the
// loop of the axis the operand lacks, if lhs, rhs and result fit in SBUF once together there; else, as every
// position inside that loop loads the operand equally often (the loops between them are of its own axes),
// the outermost at which the allocation rule gives it two buffers (the next block loads while the matmuls
// read this one), else the innermost (the fewest tiles) [our reading: an outer position that fits only once
// makes every reload wait for the previous block's last matmul, a schedule the autotuner's search over the
// positions would not keep]. Every tensor declared inside the loops rotates over
// the buffers the compiler's allocation rule gives it (kernels/api/alloc_rule.h; `bufs` / `psum_bufs`
// override); the matmul and transpose PSUM tiles share the banks evenly. Engines as the other calibration
// ports (the template leaves them to the compiler): memsets on GpSimd, the transpose copies on Scalar, the
// adds on Vector, the DMAs NKI's defaults (kernels/api/dma_mode.h). Instructions in program order.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "kernels/api/alloc_rule.h"
#include "kernels/api/nki.h"
#include "kernels/api/package.h"
#include "sim/base/error.h"

namespace trnsim::kernels {
namespace {

enum Axis { kM = 0, kN = 1, kK = 2 };
constexpr std::array<int64_t, 3> kTile = {128, 512, 128};  // M, N, K
constexpr char kName[] = "MNK";

struct Params {
  int64_t M = 0, N = 0, K = 0;
  bool transposed_lhs = false;
  std::string loop_order = "MNK";
  int64_t tiles_per_block_m = 1, tiles_per_block_n = 1, tiles_per_block_k = 1;
  std::optional<int64_t> lhs_position, rhs_position, bufs, psum_bufs;

  static void describe(Schema<Params>& s) {
    s.dim(&Params::M, "M", "rows of the result (multiple of 128)");
    s.dim(&Params::N, "N", "columns of the result (multiple of 512)");
    s.dim(&Params::K, "K", "contraction (multiple of 128)");
    s.choice(&Params::transposed_lhs, "layout", "lhs: lhs[M, K] (transposed on the PE); lhsT: lhsT[K, M]",
             {{"lhs", false}, {"lhsT", true}}, false);
    s.add(&Params::loop_order, "loop_order", "block loops, outermost first: a permutation of MNK", "MNK");
    s.add(&Params::tiles_per_block_m, "tiles_per_block_m", "128-row M tiles per M block", 1)
        .range(1, 1 << 16);
    s.add(&Params::tiles_per_block_n, "tiles_per_block_n", "512-column N tiles per N block", 1)
        .range(1, 1 << 16);
    s.add(&Params::tiles_per_block_k, "tiles_per_block_k", "128-row K tiles per K block", 1)
        .range(1, 1 << 16);
    s.add(&Params::lhs_position, "lhs_position",
          "lhs load position relative to its axes (0, 1, 2; GEMMConfig); null: the template's guidance")
        .range(0, 2);
    s.add(&Params::rhs_position, "rhs_position",
          "rhs load position relative to its axes (0, 1, 2; GEMMConfig); null: the template's guidance")
        .range(0, 2);
    s.add(&Params::bufs, "bufs", "SBUF buffers of the in-loop tensors; null: the compiler's allocation rule")
        .range(1, 8);
    s.add(&Params::psum_bufs, "psum_bufs", "PSUM banks of each in-loop PSUM tile; null: the allocation rule")
        .range(1, 8);
  }
};

// An operand's SBUF tensor where it is declared: kind 0 lhs, 1 rhs, 2 result; one buffer's bytes per
// partition.
struct Site {
  int at, kind;
  int64_t bytes;
};

struct Plan {
  std::array<int64_t, 3> tiles{}, tpb{}, blocks{};
  std::array<int, 3> pos{};    // loop position of each axis
  std::array<int, 3> order{};  // axis at each position
  int lhs = 0, rhs = 0, result = 0;
  std::array<int64_t, 3> range{};  // trip count of the loop at each position
  std::array<int, 2> lhs_axes{}, rhs_axes{kK, kN};
  bool transposed = false;

  // Absolute position of an operand over `axes` at relative position r (GEMMConfig._parse_absolute_position).
  int absolute(int r, const std::array<int, 2>& axes) const {
    const int a = std::min(pos[axes[0]], pos[axes[1]]), b = std::max(pos[axes[0]], pos[axes[1]]);
    return r == 0 ? 0 : r == 1 ? a + 1 : b + 1;
  }
  // Tiles an operand at position `at` holds along `axis`: its block's if the axis loop encloses it.
  int64_t held(int axis, int at) const { return pos[axis] < at ? tpb[axis] : tiles[axis]; }
  int64_t lhs_bytes(int at) const { return held(kM, at) * held(kK, at) * 128 * 2; }
  int64_t rhs_bytes(int at) const { return held(kK, at) * held(kN, at) * 512 * 2; }
  int64_t result_bytes() const { return held(kM, result) * held(kN, result) * 512 * 2; }
  int64_t declarations(int at) const {
    int64_t d = 1;
    for (int p = 0; p < at; ++p) d *= range[p];
    return d;
  }
  // The loop at each position runs NUM_BLOCK of its axis if an operand deeper uses it (_get_loop_range).
  void set_ranges() {
    for (int q = 0; q < 3; ++q) {
      const int a = order[q];
      const auto uses = [&](int at, std::array<int, 2> ax) { return at > q && (ax[0] == a || ax[1] == a); };
      range[q] = uses(lhs, lhs_axes) || uses(rhs, rhs_axes) || uses(result, {kM, kN}) ? blocks[a] : 1;
    }
  }
  // The sites in declaration order (outer positions first; lhs, rhs, result at one position).
  std::vector<Site> sites() const {
    std::vector<Site> s = {{lhs, 0, lhs_bytes(lhs)}, {rhs, 1, rhs_bytes(rhs)}, {result, 2, result_bytes()}};
    std::stable_sort(s.begin(), s.end(), [](const Site& a, const Site& b) { return a.at < b.at; });
    return s;
  }
  // Each site's InLoop as kernel() declares its pool: its declarations, room for the later sites once.
  static InLoop in_loop(const Plan& pl, const std::vector<Site>& s, size_t i, std::optional<int64_t> bufs) {
    int64_t reserve = 0;
    for (size_t j = i + 1; j < s.size(); ++j) reserve += s[j].bytes;
    return {.trip_count = pl.declarations(s[i].at), .reserve_bytes_per_partition = reserve, .bufs = bufs};
  }
  // Buffers the allocation rule gives site `kind`, the pools declared in turn in the space the earlier ones
  // left (ranges set).
  int64_t rule_buffers(int kind, int64_t sbuf_bytes) const {
    const std::vector<Site> s = sites();
    int64_t used = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      const int64_t b =
          loop_tile_buffers({.space = isa::MemSpace::SBUF,
                             .bytes_per_partition = s[i].bytes,
                             .loop = in_loop(*this, s, i, std::nullopt),
                             .free_bytes_per_partition = std::max<int64_t>(0, sbuf_bytes - used)})
              .bufs;
      if (s[i].kind == kind) return b;
      used += b * s[i].bytes;
    }
    return 1;
  }
};

Plan make_plan(const Params& p, int64_t sbuf_bytes) {
  Plan pl;
  pl.transposed = p.transposed_lhs;
  const std::array<int64_t, 3> size = {p.M, p.N, p.K};
  const std::array<int64_t, 3> tpb = {p.tiles_per_block_m, p.tiles_per_block_n, p.tiles_per_block_k};
  std::string sorted = p.loop_order;
  std::sort(sorted.begin(), sorted.end());
  if (sorted != "KMN")
    throw InputError(
        fmt::format("kernel 'metagemm': loop_order '{}' is not a permutation of MNK", p.loop_order));
  for (int a = 0; a < 3; ++a) {
    if (size[a] % kTile[a])
      throw InputError(fmt::format("kernel 'metagemm': {} = {} is not a multiple of its tile {}", kName[a],
                                   size[a], kTile[a]));
    pl.tiles[a] = size[a] / kTile[a];
    if (pl.tiles[a] % tpb[a])
      throw InputError(
          fmt::format("kernel 'metagemm': tiles_per_block_{} = {} does not divide the {} {} tiles",
                      static_cast<char>(kName[a] + 32), tpb[a], pl.tiles[a], kName[a]));
    pl.tpb[a] = tpb[a];
    pl.blocks[a] = pl.tiles[a] / tpb[a];
  }
  for (int i = 0; i < 3; ++i) {
    const int a = static_cast<int>(std::string(kName).find(p.loop_order[i]));
    pl.order[i] = a;
    pl.pos[a] = i;
  }
  pl.lhs_axes = {kM, kK};
  pl.result = pl.pos[kK];
  // The template's guidance for unstated positions: stay at or above the loop of the missing axis (N for
  // lhs, M for rhs) where everything fits once, innermost such. Else every position inside that loop loads
  // the operand as often: the outermost at which the allocation rule gives it two buffers (the rhs placed
  // innermost while lhs is chosen), else the innermost (the fewest tiles).
  const auto choose = [&](std::optional<int64_t> given, int kind, int missing, const auto& bytes_at) {
    const std::array<int, 2>& axes = kind == 0 ? pl.lhs_axes : pl.rhs_axes;
    if (given) return pl.absolute(static_cast<int>(*given), axes);
    std::optional<int> best, twice;
    for (int r = 0; r < 3; ++r) {
      const int at = pl.absolute(r, axes);
      if (at <= pl.pos[missing]) {
        if (bytes_at(at) <= sbuf_bytes) best = at;
        continue;
      }
      Plan q = pl;
      (kind == 0 ? q.lhs : q.rhs) = at;
      if (kind == 0) q.rhs = q.absolute(2, q.rhs_axes);
      q.set_ranges();
      if (!twice && q.rule_buffers(kind, sbuf_bytes) >= 2) twice = at;
    }
    return best ? *best : twice ? *twice : pl.absolute(2, axes);
  };
  const int64_t budget_result = pl.held(kM, pl.result) * pl.held(kN, pl.result) * 512 * 2;
  pl.lhs = choose(p.lhs_position, 0, kN, [&](int at) { return pl.lhs_bytes(at) + budget_result; });
  pl.rhs = choose(p.rhs_position, 1, kM,
                  [&](int at) { return pl.lhs_bytes(pl.lhs) + pl.rhs_bytes(at) + budget_result; });
  pl.set_ranges();
  return pl;
}

void kernel(Kernel& k, const Params& p) {
  const Plan pl = make_plan(p, k.limits().sbuf_bytes_per_partition);
  View lhs =
      p.transposed_lhs ? k.input("lhsT", DType::BF16, {p.K, p.M}) : k.input("lhs", DType::BF16, {p.M, p.K});
  View rhs = k.input("rhs", DType::BF16, {p.K, p.N});
  View res = k.output("result", DType::BF16, {p.M, p.N});

  // Pools in declaration order (outer positions first), each leaving room for the single buffers of those
  // after it.
  const std::vector<Site> sites = pl.sites();
  const int64_t lm = pl.held(kM, pl.lhs), lk = pl.held(kK, pl.lhs), rk = pl.held(kK, pl.rhs),
                rn = pl.held(kN, pl.rhs), om = pl.held(kM, pl.result), on = pl.held(kN, pl.result);
  std::array<TilePool, 3> pools;
  for (size_t i = 0; i < sites.size(); ++i) {
    const InLoop loop = Plan::in_loop(pl, sites, i, p.bufs);
    if (sites[i].kind == 0)
      pools[0] = k.sbuf_pool(p.transposed_lhs ? std::vector<int64_t>{128, lk, lm, 128}   // partitions: K
                                              : std::vector<int64_t>{128, lm, lk, 128},  // partitions: M
                             DType::BF16, "lhs_tiles", loop);
    else if (sites[i].kind == 1)
      pools[1] = k.sbuf_pool({128, rk, rn, 512}, DType::BF16, "rhs_tiles", loop);
    else
      pools[2] = k.sbuf_pool({128, om, on, 512}, DType::BF16, "result_tiles", loop);
  }
  // PSUM: the matmul tiles, per (m, n) tile of every innermost step; the transposes, per lhs tile. With both,
  // each keeps room for half the banks.
  const int64_t bank = k.limits().psum_bank_bytes, banks = k.limits().psum_bytes_per_partition / bank;
  int64_t steps = 1;
  for (int q = 0; q < 3; ++q) steps *= pl.range[q];
  const int64_t half = p.transposed_lhs ? 0 : banks / 2 * bank;
  TilePool mm_psum =
      k.psum_pool({128, 512}, DType::F32, "result_tile",
                  {.trip_count = std::max<int64_t>(1, steps * std::min(lm, om) * std::min(rn, on)),
                   .reserve_bytes_per_partition = half,
                   .bufs = p.psum_bufs});
  TilePool tr_psum;
  if (!p.transposed_lhs)
    tr_psum = k.psum_pool(
        {128, 128}, DType::BF16, "tileT",
        {.trip_count = std::max<int64_t>(1, pl.declarations(pl.lhs) * lm * lk), .bufs = p.psum_bufs});

  std::array<int64_t, 3> var{-1, -1, -1};  // current block of each axis (-1: no enclosing loop)
  View L, R, O;
  // First tile of an operand's region along `axis` at position `at`.
  const auto first = [&](int axis, int at) { return pl.pos[axis] < at ? var[axis] * pl.tpb[axis] : 0; };
  std::array<int64_t, 3> l0{}, r0{}, o0{};
  const auto init = [&](int at) {
    if (pl.lhs == at) {
      L = pools[0].next();
      l0 = {first(kM, at), 0, first(kK, at)};
      nki::memset(L, 0.0, Engine::POOL);
      // Partition axis: M (lhs) or K (lhsT); free axis the other.
      for (int64_t mi = 0; mi < lm; ++mi)
        for (int64_t ki = 0; ki < lk; ++ki) {
          const int64_t m0 = (l0[kM] + mi) * 128, k0 = (l0[kK] + ki) * 128;
          if (p.transposed_lhs)
            nki::dma_copy(L(all, ki, mi), lhs(S(k0, k0 + 128), S(m0, m0 + 128)));
          else
            nki::dma_copy(L(all, mi, ki), lhs(S(m0, m0 + 128), S(k0, k0 + 128)));
        }
      if (!p.transposed_lhs)
        for (int64_t mi = 0; mi < lm; ++mi)
          for (int64_t ki = 0; ki < lk; ++ki) {
            View t = tr_psum.next();
            nki::nc_transpose(t, L(all, mi, ki));
            nki::tensor_copy(L(all, mi, ki), t, Engine::ACT);
          }
    }
    if (pl.rhs == at) {
      R = pools[1].next();
      r0 = {0, first(kN, at), first(kK, at)};
      nki::memset(R, 0.0, Engine::POOL);
      for (int64_t ki = 0; ki < rk; ++ki)
        for (int64_t ni = 0; ni < rn; ++ni) {
          const int64_t k0 = (r0[kK] + ki) * 128, n0 = (r0[kN] + ni) * 512;
          nki::dma_copy(R(all, ki, ni), rhs(S(k0, k0 + 128), S(n0, n0 + 512)));
        }
    }
    if (pl.result == at) {
      O = pools[2].next();
      o0 = {first(kM, at), first(kN, at), 0};
      nki::memset(O, 0.0, Engine::POOL);
    }
  };
  const auto matmuls = [&] {
    const auto overlap = [](int64_t a0, int64_t an, int64_t b0, int64_t bn) {
      return std::pair<int64_t, int64_t>{std::max(a0, b0), std::min(a0 + an, b0 + bn)};
    };
    const auto [ms, me] = overlap(l0[kM], lm, o0[kM], om);
    const auto [ns, ne] = overlap(r0[kN], rn, o0[kN], on);
    const auto [ks, ke] = overlap(l0[kK], lk, r0[kK], rk);
    for (int64_t m = ms; m < me; ++m)
      for (int64_t n = ns; n < ne; ++n) {
        View ps = mm_psum.next();
        for (int64_t kk = ks; kk < ke; ++kk) {
          // Stationary [K, M]: lhsT's tile as loaded, lhs's tile after its transpose.
          const View st =
              p.transposed_lhs ? L(all, kk - l0[kK], m - l0[kM]) : L(all, m - l0[kM], kk - l0[kK]);
          nki::nc_matmul(ps, st, R(all, kk - r0[kK], n - r0[kN]), {.accumulate = kk > ks});
        }
        View o = O(all, m - o0[kM], n - o0[kN]);
        nki::tensor_tensor(o, o, ps, nki::AluOp::Add);
      }
  };
  const auto store = [&](int at) {
    if (pl.result != at) return;
    for (int64_t mi = 0; mi < om; ++mi)
      for (int64_t ni = 0; ni < on; ++ni) {
        const int64_t m0 = (o0[kM] + mi) * 128, n0 = (o0[kN] + ni) * 512;
        nki::dma_copy(res(S(m0, m0 + 128), S(n0, n0 + 512)), O(all, mi, ni));
      }
  };
  init(0);
  for (int64_t b0 = 0; b0 < pl.range[0]; ++b0) {
    var[pl.order[0]] = b0;
    init(1);
    for (int64_t b1 = 0; b1 < pl.range[1]; ++b1) {
      var[pl.order[1]] = b1;
      init(2);
      for (int64_t b2 = 0; b2 < pl.range[2]; ++b2) {
        var[pl.order[2]] = b2;
        init(3);
        matmuls();
      }
      var[pl.order[2]] = -1;
      store(2);
    }
    var[pl.order[1]] = -1;
    store(1);
  }
  var[pl.order[0]] = -1;
  store(0);
}

}  // namespace

std::unique_ptr<KernelDef> metagemm_kernel() {
  KernelPackage<Params> k;
  k.name = "metagemm";
  k.doc =
      "result[M,N] = lhs[M,K] @ rhs[K,N] or lhsT[K,M]^T @ rhs in BF16: nki-autotune's MetaGEMM template "
      "(loop "
      "order, blocks per axis, load positions); calibration port";
  k.kernel = kernel;
  k.useful_flops = [](const Params& p) { return 2.0 * p.M * p.N * p.K; };
  k.checks = [](const Params& p) {
    return std::vector{matmul_check("result",
                                    p.transposed_lhs ? MatmulOperand{"lhsT", ref::Contract::Rows}
                                                     : MatmulOperand{"lhs", ref::Contract::Cols},
                                    {"rhs", ref::Contract::Rows}, std::nullopt, 2.0 * p.M * p.N * p.K)};
  };
  return make_kernel(std::move(k));
}

}  // namespace trnsim::kernels
