// nki_tutorial_matmul: result[M, N] = lhsT[K, M]^T @ rhs[K, N], a port of the four kernels of the NKI
// matrix-multiplication optimisation walkthrough, "Introduction to NKI Kernel Optimization"
// (github.com/aws-neuron/aws-neuron-sdk @4373fac, nki/guides/tutorials/kernel-optimization.rst; the same
// kernels are in aws-neuron/nki-samples @0c2963b, src/nki_samples/tutorials/matrix_multiplication/
// matrix_multiplication_nki_kernels.py). The guide profiles each step on Trn2 with lhsT [8192, 4096] and
// rhs [8192, 8192] in FP32. Tiles: 128 (M) x 128 (K, partitions) x 512 (N, one FP32 PSUM bank).
//   tiled             for m, n: PSUM tile; for k: lhsT [128, 128] and rhs [128, 512] tiles loaded, matmul;
//                     copy PSUM -> SBUF (FP32), store
//   hoisted           for m: the K / 128 lhsT tiles of m loaded; for n: the K / 128 rhs tiles of n loaded,
//                     K / 128 matmuls into a PSUM tile, copy (FP32), store (result FP32)
//   free_dim_blocked  blocks of 2 m-tiles x 2 n-tiles (block_m, block_n): for m block: its lhsT tiles; for n
//                     block: its rhs tiles; for bm, bn: K / 128 matmuls, copy (result dtype), store
//   fully_optimized   for n block (block_n): result tiles in SBUF (input dtype) memset to 0; for K block
//                     (block_k, sequential): block_k rhs tiles [128, block_n x 512]; for m block (block_m):
//                     block_k lhsT tiles [128, block_m x 128]; for bn, bm: block_k matmuls into a PSUM tile,
//                     tensor_tensor add into the result tile; then for each m-tile: result tiles copied into
//                     one FP32 [128, block_n x 512] tile, stored (result FP32)
// Result dtype as in the guide: the input dtype for tiled and free_dim_blocked, FP32 for hoisted and
// fully_optimized.
//
// Engines. The guide leaves every engine to the compiler (tensor_copy's and memset's default engine is
// `unknown`): its profiles show VectorE unused until the fully-optimised step adds the tensor_tensor adds
// ("VectorE active 10.55 % of the time, where it was previously unused"), so the compiler put the PSUM ->
// SBUF tensor_copy of the earlier steps on ScalarE (GpSimd cannot read PSUM): copies on `copy_engine`
// (Scalar by default), the adds on Vector (tensor_tensor reading PSUM), memsets on `memset_engine` (GpSimd
// by default, the engine the compiler has otherwise idle). DMAs carry no engine or dge_mode: NKI's defaults
// as the builder resolves them (kernels/api/dma_mode.h: hardware DGE, loads on SP, stores on ACT).
//
// Allocation and order. Every tile the guide allocates inside a loop comes from a pool (pool.h), one per
// declaration, placed by the scoped rule (kernels/api/alloc_rule.h "Scope", the one the NKI front end
// applies): a pool lives for one iteration of its outermost loop and keeps its buffers across iterations
// while no other site takes their space, so only fully_optimized's operand and packing pools are made again
// per N block (see there); the other pools are made once. The buffer count is
// the compiler's allocation rule's (kernels/api/alloc_rule.h) for that declaration: its loops' trip count,
// the tiles it declares at once (hoisted: the K / 128 tiles of an m or an n; fully_optimized: the block_k
// tiles of a K block), the free SBUF or PSUM when it is declared, and room for one buffer of each tile
// declared after it while it lives; `bufs` / `psum_bufs` override the rule (the guide sets neither). The
// loads are issued in the guide's order and run ahead of the matmuls as far as those buffers allow
// (schedule.h: NKI's default scheduler; the guide's profiles show the DMAs overlapping the matmuls): by
// operand tile (k-step) in tiled and hoisted (the lhsT tiles of an m together, before its first rhs tile), by
// block in free_dim_blocked, by (K block, m block) in fully_optimized.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/api/package.h"
#include "kernels/api/schedule.h"
#include "sim/base/error.h"

namespace trnsim::kernels {
namespace {

constexpr int64_t kTileM = 128, kTileK = 128, kTileN = 512;

struct Params {
  int64_t M = 0, N = 0, K = 0;
  DType dtype = DType::F32;
  std::string variant = "fully_optimized";
  int64_t block_m = 16, block_n = 2, block_k = 8;
  std::optional<int64_t> bufs, psum_bufs;
  Engine copy_engine = Engine::ACT;
  Engine memset_engine = Engine::POOL;

  static void describe(Schema<Params>& s) {
    s.dim(&Params::M, "M", "rows of the result (columns of lhsT), a multiple of 128 x block_m");
    s.dim(&Params::N, "N", "columns of the result and rhs, a multiple of 512 x block_n");
    s.dim(&Params::K, "K", "contraction (rows of lhsT and rhs), a multiple of 128 x block_k");
    s.choice(&Params::dtype, "dtype", "dtype of lhsT and rhs",
             {{"float32", DType::F32}, {"bfloat16", DType::BF16}}, DType::F32);
    s.choice(&Params::variant, "variant", "tutorial step",
             {{"tiled", std::string("tiled")},
              {"hoisted", std::string("hoisted")},
              {"free_dim_blocked", std::string("free_dim_blocked")},
              {"fully_optimized", std::string("fully_optimized")}},
             std::string("fully_optimized"));
    s.add(&Params::block_m, "block_m", "m-tiles per block (free_dim_blocked: 2, fully_optimized: 16)", 16)
        .range(1, 64);
    s.add(&Params::block_n, "block_n", "n-tiles per block (free_dim_blocked and fully_optimized: 2)", 2)
        .range(1, 64);
    s.add(&Params::block_k, "block_k", "k-tiles per block (fully_optimized: 8)", 8).range(1, 64);
    s.add(&Params::bufs, "bufs",
          "SBUF buffers of each in-loop allocation, in iterations' worth of its live tiles (1: no load runs "
          "ahead into a tile the loop still holds); null: the compiler's allocation rule")
        .range(1, 8);
    s.add(&Params::psum_bufs, "psum_bufs",
          "PSUM banks the in-loop PSUM tiles rotate over; null: the compiler's allocation rule")
        .range(1, 8);
    s.choice(&Params::copy_engine, "copy_engine", "engine of the tensor_copy drains (PSUM and SBUF)",
             {{"scalar", Engine::ACT}, {"vector", Engine::DVE}}, Engine::ACT);
    s.choice(&Params::memset_engine, "memset_engine", "engine of the fully_optimized result memsets",
             {{"gpsimd", Engine::POOL}, {"vector", Engine::DVE}}, Engine::POOL);
  }
};

struct Ops {
  const Params& p;
  View lhsT, rhs, res;

  View lhsT_tile(int64_t k, int64_t m0, int64_t cols) const {
    return lhsT(S(k * kTileK, (k + 1) * kTileK), S(m0, m0 + cols));
  }
  View rhs_tile(int64_t k, int64_t n0, int64_t cols) const {
    return rhs(S(k * kTileK, (k + 1) * kTileK), S(n0, n0 + cols));
  }
  View res_tile(int64_t m0, int64_t n0, int64_t cols) const {
    return res(S(m0, m0 + kTileM), S(n0, n0 + cols));
  }
};

// Loops m, n, k; both operand tiles loaded per k. The loads run bufs - 1 k-steps ahead.
void tiled(Kernel& k, const Ops& o) {
  const Params& p = o.p;
  const int64_t nm = p.M / kTileM, nn = p.N / kTileN, kt = p.K / kTileK;
  const int64_t in_k = nm * nn * kt, in_n = nm * nn;
  TilePool lt = k.sbuf_pool(
      {kTileK, kTileM}, p.dtype, "lhsT_tile",
      {.trip_count = in_k, .reserve_bytes_per_partition = kTileN * elem_bytes(p.dtype), .bufs = p.bufs});
  TilePool rt = k.sbuf_pool({kTileK, kTileN}, p.dtype, "rhs_tile", {.trip_count = in_k, .bufs = p.bufs});
  TilePool ps =
      k.psum_pool({kTileM, kTileN}, DType::F32, "res_psum", {.trip_count = in_n, .bufs = p.psum_bufs});
  TilePool sb = k.sbuf_pool({kTileM, kTileN}, DType::F32, "res_sb", {.trip_count = in_n, .bufs = p.bufs});
  struct Tiles {
    View l, r;
  };
  View acc;
  pipelined_loop(
      in_k, std::min(lt.bufs(), rt.bufs()) - 1,
      [&](int64_t i) {
        const int64_t m = i / (nn * kt), n = i / kt % nn, kk = i % kt;
        Tiles t{lt.next(), rt.next()};
        nki::dma_copy(t.l, o.lhsT_tile(kk, m * kTileM, kTileM));
        nki::dma_copy(t.r, o.rhs_tile(kk, n * kTileN, kTileN));
        return t;
      },
      [&](int64_t i, Tiles& t) {
        const int64_t m = i / (nn * kt), n = i / kt % nn, kk = i % kt;
        if (kk == 0) acc = ps.next();
        nki::nc_matmul(acc, t.l, t.r, {.accumulate = kk > 0});
        if (kk + 1 < kt) return;
        View r = sb.next();
        nki::tensor_copy(r, acc, p.copy_engine);
        nki::dma_copy(o.res_tile(m * kTileM, n * kTileN, kTileN), r);
      });
}

// Loops m (the K / 128 lhsT tiles of m), n (the K / 128 rhs tiles of n), k. As in the guide, the lhsT tiles
// of m are loaded together, before the rhs tiles of its first n; the rhs loads stream by k-step, as far ahead
// as the rhs pool (bufs x K / 128 tiles) allows.
void hoisted(Kernel& k, const Ops& o) {
  const Params& p = o.p;
  const int64_t nm = p.M / kTileM, nn = p.N / kTileN, kt = p.K / kTileK;
  TilePool lt =
      k.sbuf_pool({kTileK, kTileM}, p.dtype, "lhsT_tile", {.trip_count = nm, .tiles = kt, .bufs = p.bufs});
  TilePool rt = k.sbuf_pool(
      {kTileK, kTileN}, p.dtype, "rhs_tile",
      {.trip_count = nm * nn, .tiles = kt, .reserve_bytes_per_partition = kTileN * 4, .bufs = p.bufs});
  TilePool ps =
      k.psum_pool({kTileM, kTileN}, DType::F32, "res_psum", {.trip_count = nm * nn, .bufs = p.psum_bufs});
  TilePool sb = k.sbuf_pool({kTileM, kTileN}, DType::F32, "res_sb", {.trip_count = nm * nn, .bufs = p.bufs});
  // rhs tile (n + 1, k) reuses the buffer of the tile rt.bufs() k-steps before it; the lhsT set of m + 1,
  // loaded at m + 1's first step, reuses the set of m + 1 - lhsT sets, last read lhsT sets - 1 m's earlier.
  const int64_t lookahead = std::min(rt.bufs() - 1, (lt.bufs() / kt - 1) * nn * kt);
  View acc;
  pipelined_loop(
      nm * nn * kt, lookahead,
      [&](int64_t i) {
        const int64_t m = i / (nn * kt), n = i / kt % nn, kk = i % kt;
        if (n == 0 && kk == 0)
          for (int64_t j = 0; j < kt; ++j) nki::dma_copy(lt.next(), o.lhsT_tile(j, m * kTileM, kTileM));
        View r = rt.next();
        nki::dma_copy(r, o.rhs_tile(kk, n * kTileN, kTileN));
        return r;
      },
      [&](int64_t i, View& r) {
        const int64_t m = i / (nn * kt), n = i / kt % nn, kk = i % kt;
        if (kk == 0) acc = ps.next();
        // lhsT tile (m, k) is the (m K / 128 + k)-th the pool handed out.
        nki::nc_matmul(acc, lt.buffer((m * kt + kk) % lt.bufs()), r, {.accumulate = kk > 0});
        if (kk + 1 < kt) return;
        View t = sb.next();
        nki::tensor_copy(t, acc, p.copy_engine);
        nki::dma_copy(o.res_tile(m * kTileM, n * kTileN, kTileN), t);
      });
}

// Blocks of block_m x block_n tiles: the lhsT tiles of an m block (bm, k) and the rhs tiles of an n block
// (bn, k) are loaded before the block's matmuls (order bm, bn, k). The loads run bufs - 1 blocks ahead.
void free_dim_blocked(Kernel& k, const Ops& o) {
  const Params& p = o.p;
  const int64_t kt = p.K / kTileK, nbm = p.M / (p.block_m * kTileM), nbn = p.N / (p.block_n * kTileN);
  const int64_t per_block = nbm * nbn * p.block_m * p.block_n;  // declarations of the per-tile result tiles
  TilePool lt = k.sbuf_pool({kTileK, kTileM}, p.dtype, "lhsT_tile",
                            {.trip_count = nbm, .tiles = p.block_m * kt, .bufs = p.bufs});
  TilePool rt = k.sbuf_pool({kTileK, kTileN}, p.dtype, "rhs_tile",
                            {.trip_count = nbm * nbn,
                             .tiles = p.block_n * kt,
                             .reserve_bytes_per_partition = kTileN * elem_bytes(p.dtype),
                             .bufs = p.bufs});
  TilePool ps = k.psum_pool({kTileM, kTileN}, DType::F32, "result_tile",
                            {.trip_count = per_block, .bufs = p.psum_bufs});
  TilePool sb =
      k.sbuf_pool({kTileM, kTileN}, p.dtype, "result_tmp", {.trip_count = per_block, .bufs = p.bufs});
  struct Block {
    std::vector<View> rhs;  // [bn * kt + k]
  };
  // The rhs set of block b + L reuses the set of block b + L - rhs sets; the lhsT set of m block m + 1 the
  // set of m + 1 - lhsT sets, last used nbn blocks before m + 1 starts.
  const int64_t rhs_sets = rt.bufs() / (p.block_n * kt), lhsT_sets = lt.bufs() / (p.block_m * kt);
  pipelined_loop(
      nbm * nbn, std::min(rhs_sets - 1, (lhsT_sets - 1) * nbn),
      [&](int64_t b) {
        const int64_t m = b / nbn, n = b % nbn;
        if (n == 0)
          for (int64_t bm = 0; bm < p.block_m; ++bm)
            for (int64_t kk = 0; kk < kt; ++kk)
              nki::dma_copy(lt.next(), o.lhsT_tile(kk, (m * p.block_m + bm) * kTileM, kTileM));
        Block blk;
        for (int64_t bn = 0; bn < p.block_n; ++bn)
          for (int64_t kk = 0; kk < kt; ++kk) {
            blk.rhs.push_back(rt.next());
            nki::dma_copy(blk.rhs.back(), o.rhs_tile(kk, (n * p.block_n + bn) * kTileN, kTileN));
          }
        return blk;
      },
      [&](int64_t b, Block& blk) {
        const int64_t m = b / nbn, n = b % nbn;
        for (int64_t bm = 0; bm < p.block_m; ++bm)
          for (int64_t bn = 0; bn < p.block_n; ++bn) {
            View acc = ps.next();
            for (int64_t kk = 0; kk < kt; ++kk)
              nki::nc_matmul(acc, lt.buffer((m * p.block_m * kt + bm * kt + kk) % lt.bufs()),
                             blk.rhs[bn * kt + kk], {.accumulate = kk > 0});
            View t = sb.next();
            nki::tensor_copy(t, acc, p.copy_engine);
            nki::dma_copy(o.res_tile((m * p.block_m + bm) * kTileM, (n * p.block_n + bn) * kTileN, kTileN),
                          t);
          }
      });
}

// N blocks (plain loop); inside, (K block, m block) steps with their loads bufs - 1 steps ahead; then the
// n block's results are packed and stored. Every tile of the guide is declared inside the N-block loop and
// none outlives its N block, so by the scoped rule (alloc_rule.h "Scope") each pool lives for one N block:
// the operand pools die when the K loop ends, the packing tiles take their space (first fit), and the next
// N block's operand pools are made anew there (their first loads wait for the packing stores). The result
// and PSUM tiles' space is taken by no other site, so they keep their buffers across N blocks: made once.
void fully_optimized(Kernel& k, const Ops& o) {
  const Params& p = o.p;
  const int64_t BM = p.block_m * kTileM, BN = p.block_n * kTileN;
  const int64_t nbm = p.M / BM, nbn = p.N / BN, nbk = p.K / (p.block_k * kTileK);
  const int64_t per_n = nbm * p.block_m * p.block_n;  // result tiles [128, 512] of one n block
  const std::string scope = "one N block";
  // One buffer of each SBUF tile the N-block body declares after the result tiles: a K block's rhs and
  // lhsT sets and the FP32 packing tile.
  const int64_t lhsT_set_bytes = p.block_k * BM * elem_bytes(p.dtype);
  const int64_t later_bytes = lhsT_set_bytes + p.block_k * BN * elem_bytes(p.dtype) + BN * 4;
  TilePool results = k.sbuf_pool({kTileM, kTileN}, p.dtype, "result_tmp",
                                 {.trip_count = nbn,
                                  .tiles = per_n,
                                  .reserve_bytes_per_partition = later_bytes,
                                  .bufs = p.bufs,
                                  .scope = scope});
  TilePool ps = k.psum_pool({kTileM, kTileN}, DType::F32, "result_tile",
                            {.trip_count = nbn * nbk * per_n, .bufs = p.psum_bufs, .scope = scope});
  for (int64_t n = 0; n < nbn; ++n) {
    std::vector<View> res(per_n);  // [(m * block_m + bm) * block_n + bn]
    for (View& r : res) {
      r = results.next();
      nki::memset(r, 0.0, p.memset_engine);
    }
    {
      TilePool rt = k.sbuf_pool({kTileK, BN}, p.dtype, "rhs_tile",
                                {.trip_count = nbn * nbk,
                                 .tiles = p.block_k,
                                 .reserve_bytes_per_partition = lhsT_set_bytes,
                                 .bufs = p.bufs,
                                 .scope = scope});
      TilePool lt =
          k.sbuf_pool({kTileK, BM}, p.dtype, "lhsT_tile",
                      {.trip_count = nbn * nbk * nbm, .tiles = p.block_k, .bufs = p.bufs, .scope = scope});
      std::vector<View> rhs_of_kb(p.block_k);
      // The lhsT set of step s + L reuses the set of step s + L - lhsT sets; the rhs set of K block kb + 1
      // the set of kb + 1 - rhs sets, last used nbm steps before kb + 1 starts.
      const int64_t rhs_sets = rt.bufs() / p.block_k, lhsT_sets = lt.bufs() / p.block_k;
      pipelined_loop(
          nbk * nbm, std::min(lhsT_sets - 1, (rhs_sets - 1) * nbm),
          [&](int64_t s) {
            const int64_t kb = s / nbm, m = s % nbm;
            if (m == 0)
              for (int64_t bk = 0; bk < p.block_k; ++bk) {
                rhs_of_kb[bk] = rt.next();
                nki::dma_copy(rhs_of_kb[bk], o.rhs_tile(kb * p.block_k + bk, n * BN, BN));
              }
            std::vector<View> lhsT_tiles(p.block_k);
            for (int64_t bk = 0; bk < p.block_k; ++bk) {
              lhsT_tiles[bk] = lt.next();
              nki::dma_copy(lhsT_tiles[bk], o.lhsT_tile(kb * p.block_k + bk, m * BM, BM));
            }
            return lhsT_tiles;
          },
          [&](int64_t s, std::vector<View>& lhsT_tiles) {
            const int64_t kb = s / nbm, m = s % nbm;
            for (int64_t bn = 0; bn < p.block_n; ++bn)
              for (int64_t bm = 0; bm < p.block_m; ++bm) {
                View acc = ps.next();
                for (int64_t bk = 0; bk < p.block_k; ++bk)
                  nki::nc_matmul(
                      acc, lhsT_tiles[bk](all, S(bm * kTileM, (bm + 1) * kTileM)),
                      rt.buffer((kb * p.block_k + bk) % rt.bufs())(all, S(bn * kTileN, (bn + 1) * kTileN)),
                      {.accumulate = bk > 0});
                View& r = res[(m * p.block_m + bm) * p.block_n + bn];
                nki::tensor_tensor(r, r, acc, nki::AluOp::Add);
              }
          });
    }
    TilePool packed = k.sbuf_pool({kTileM, BN}, DType::F32, "result_packed",
                                  {.trip_count = nbn * nbm * p.block_m, .bufs = p.bufs, .scope = scope});
    for (int64_t m = 0; m < nbm; ++m)
      for (int64_t bm = 0; bm < p.block_m; ++bm) {
        View t = packed.next();
        for (int64_t bn = 0; bn < p.block_n; ++bn)
          nki::tensor_copy(t(all, S(bn * kTileN, (bn + 1) * kTileN)),
                           res[(m * p.block_m + bm) * p.block_n + bn], p.copy_engine);
        nki::dma_copy(o.res_tile(m * BM + bm * kTileM, n * BN, BN), t);
      }
  }
}

DType result_dtype(const Params& p) {
  return p.variant == "hoisted" || p.variant == "fully_optimized" ? DType::F32 : p.dtype;
}

void kernel(Kernel& k, const Params& p) {
  Ops o{p, k.input("lhsT", p.dtype, {p.K, p.M}), k.input("rhs", p.dtype, {p.K, p.N}),
        k.output("result", result_dtype(p), {p.M, p.N})};
  const bool blocked = p.variant == "free_dim_blocked", full = p.variant == "fully_optimized";
  const int64_t bm = (blocked || full) ? p.block_m : 1, bn = (blocked || full) ? p.block_n : 1,
                bk = full ? p.block_k : 1;
  if (p.M % (bm * kTileM) || p.N % (bn * kTileN) || p.K % (bk * kTileK))
    throw InputError(
        fmt::format("kernel 'nki_tutorial_matmul' ({}): M, N, K = {}, {}, {} must be multiples of {}, {}, {}",
                    p.variant, p.M, p.N, p.K, bm * kTileM, bn * kTileN, bk * kTileK));
  if (p.variant == "tiled")
    tiled(k, o);
  else if (p.variant == "hoisted")
    hoisted(k, o);
  else if (blocked)
    free_dim_blocked(k, o);
  else
    fully_optimized(k, o);
}

}  // namespace

std::unique_ptr<KernelDef> nki_tutorial_matmul_kernel() {
  KernelPackage<Params> k;
  k.name = "nki_tutorial_matmul";
  k.doc =
      "result[M,N] = lhsT[K,M]^T @ rhs[K,N], the NKI kernel-optimization guide's steps (tiled, hoisted, "
      "free_dim_blocked, fully_optimized); calibration port";
  k.kernel = kernel;
  k.useful_flops = [](const Params& p) { return 2.0 * p.M * p.N * p.K; };
  k.checks = [](const Params& p) {
    // fully_optimized accumulates its K blocks in SBUF tiles of the input dtype: BF16 partial sums round
    // like a BF16 output.
    Tolerance tol;
    if (p.variant == "fully_optimized" && p.dtype == DType::BF16)
      tol.max_rel_l2_vs_quantized = kRelL2BoundBf16;
    return std::vector{matmul_check("result", {"lhsT", ref::Contract::Rows}, {"rhs", ref::Contract::Rows},
                                    std::nullopt, 2.0 * p.M * p.N * p.K, tol)};
  };
  return make_kernel(std::move(k));
}

}  // namespace trnsim::kernels
