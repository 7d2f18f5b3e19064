// matmul_lhs_dma_transpose (calibration port): result[M, N] = lhs[M, K] @ rhs[K, N] in BF16 on one core, a
// port of nki-autotune's hand-tuned lhs @ rhs kernel, github.com/awslabs/nki-autotune @d57bcc3,
// kernel_library/matmul/lhs_rhs/kernel_handtuned_89.26mfu.py (file unchanged since 0b6f309), measured on
// Trn2 at 2048^3 in kernel_library/README.md (same commit): best single run 89.47 % MFU, 0.2442 ms.
// Loops, in the published order (M blocks outer, N tiles, K blocks inner), for 2048^3:
//   for M block (m_tiles x 128 rows):
//     out: m_tiles tiles [128, N] BF16 allocated in this loop, memset to 0
//     for N tile (512 columns):
//       for K block (k_tiles x 128):
//         lhsT set (fixed per (K block mod 4, M block mod 4), allocated once before the loops): k_tiles
//           DMA transposes lhs[M block rows, k-tile] [m_tiles 128, 128] -> [128, m_tiles 128]
//         rhs set (allocated in the N loop, 8 sets rotating): k_tiles loads rhs[k-tile, N tile] [128, 512]
//         for each m-tile: PSUM tile [128, 512] FP32 memset to 0, k_tiles accumulating matmuls, copied to an
//           SBUF tile [128, 512] BF16, added (tensor_tensor) into out[m-tile][:, N tile]
// The PSUM memset is emitted as the accumulation group's first matmul overwriting the bank: accumulating into
// PSUM that a memset initialised is undefined on Trn2 (NKI ISA docs, nc_matmul), yet the published kernel
// runs correctly there, so the compiler lowers memset + accumulating matmuls to a zeroing first matmul (the
// MATMUL instruction's psum_zero flag in the profiler's operand syntax).
//       m_tiles stores out[m-tile][:, N tile] -> result
// The lhs block is transposed again for every N tile, into the same fixed buffer, as published.
// Compiled with enable-instruction-scheduling=false (README): program order is what the hardware runs, so
// nothing is reordered here. Buffer counts as published where the kernel states them: 16 (4 x 4) lhsT sets
// declared outside the loops (the ones the loops touch are allocated), 8 rhs sets per declaration (of which
// K block d1 uses set d1 mod 8: min(8, K blocks) are live). The out sets (in the M loop), the rhs sets (in
// the N loop), the PSUM tile and its SBUF copy (per m-tile) are declared inside loops: each site rotates over
// the buffers the compiler's allocation rule gives it (kernels/api/alloc_rule.h: every free PSUM bank, as
// the README observes, "matmul drains 8 M-tiles x 1 N-tile per call (saturates PSUM at 8 banks)"; 2 SBUF
// buffers), or `psum_bufs` / `bufs` as what-ifs.
// Engines: the kernel leaves them to the compiler (memset and tensor_copy default to `unknown`). The add runs
// on Vector (tensor_tensor), the PSUM copy on `copy_engine` (Scalar by default, as the NKI guide's
// profiles show for the compiler's PSUM copies; see nki_tutorial_matmul), the SBUF memsets on
// `memset_engine` (GpSimd by default). The DMAs carry no engine or dge_mode, as published, and take NKI's
// defaults as the builder resolves them (kernels/api/dma_mode.h): rhs loads by hardware DGE on SP, result
// stores by hardware DGE on ACT, the lhs transposes (1024-row sources, which the hardware DGE's transpose
// does not take) with precomputed descriptors on SP.
#include <fmt/format.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/api/package.h"
#include "sim/base/error.h"

namespace trnsim::kernels {
namespace {

constexpr int64_t kP = 128, kTileN = 512;

struct Params {
  int64_t M = 0, N = 0, K = 0, m_tiles = 8, k_tiles = 8, rhs_sets = 8;
  std::optional<int64_t> psum_bufs, bufs;
  Engine copy_engine = Engine::ACT;
  Engine memset_engine = Engine::POOL;
  std::optional<Engine> store_engine;

  static void describe(Schema<Params>& s) {
    s.dim(&Params::M, "M", "rows of lhs and the result");
    s.dim(&Params::N, "N", "columns of rhs and the result");
    s.dim(&Params::K, "K", "contraction");
    s.add(&Params::m_tiles, "m_tiles", "128-row M tiles per M block", 8).range(1, 16);
    s.add(&Params::k_tiles, "k_tiles", "128-row K tiles per K block", 8).range(1, 16);
    s.add(&Params::rhs_sets, "rhs_sets", "rhs tile sets one declaration holds, K block d1 uses d1 mod it (8)",
          8)
        .range(1, 16);
    s.add(&Params::psum_bufs, "psum_bufs",
          "PSUM banks the per-m-tile PSUM tiles rotate over; null: the compiler's allocation rule")
        .range(1, 8);
    s.add(&Params::bufs, "bufs",
          "SBUF buffers of the in-loop tiles (out, rhs sets, PSUM copies); null: the compiler's allocation "
          "rule")
        .range(1, 8);
    s.choice(&Params::copy_engine, "copy_engine", "engine of the PSUM -> SBUF tensor_copy",
             {{"scalar", Engine::ACT}, {"vector", Engine::DVE}}, Engine::ACT);
    s.choice(&Params::memset_engine, "memset_engine", "engine of the SBUF accumulator memsets",
             {{"gpsimd", Engine::POOL}, {"vector", Engine::DVE}}, Engine::POOL);
    s.choice(&Params::store_engine, "store_engine",
             "engine triggering the result stores; null: unset, as in the published kernel (the builder's "
             "default, kernels/api/dma_mode.h: ACT); a what-if for the DMA placement",
             {{"sync", Engine::SP}, {"scalar", Engine::ACT}, {"gpsimd", Engine::POOL}});
  }
};

void kernel(Kernel& k, const Params& p) {
  View lhs = k.input("lhs", DType::BF16, {p.M, p.K});
  View rhs = k.input("rhs", DType::BF16, {p.K, p.N});
  View res = k.output("result", DType::BF16, {p.M, p.N});
  const int64_t BM = p.m_tiles * kP, BK = p.k_tiles * kP;
  if (p.M % BM || p.N % kTileN || p.K % BK)
    throw InputError(fmt::format(
        "kernel 'matmul_lhs_dma_transpose': M, N, K = {}, {}, {} must be multiples of {}, 512, {}", p.M, p.N,
        p.K, BM, BK));
  const int64_t nbm = p.M / BM, nbn = p.N / kTileN, nbk = p.K / BK;
  // lhsT sets [128, k_tiles, BM]: one fixed buffer per (K block mod 4, M block mod 4) the loops touch.
  std::map<std::pair<int64_t, int64_t>, View> lhsT_sets;
  for (int64_t d0 = 0; d0 < nbm; ++d0)
    for (int64_t d1 = 0; d1 < nbk; ++d1) {
      View& v = lhsT_sets[{d1 % 4, d0 % 4}];
      if (!v.valid())
        v = k.sbuf({kP, p.k_tiles, BM}, DType::BF16, fmt::format("lhsT[{}][{}]", d1 % 4, d0 % 4));
    }
  const int64_t live_rhs = std::min(p.rhs_sets, nbk), per_tile = nbm * nbn * nbk * p.m_tiles;
  const int64_t acc_bytes = kTileN * 2;
  TilePool out_sets =
      k.sbuf_pool({kP, p.m_tiles, p.N}, DType::BF16, "output",
                  {.trip_count = nbm,
                   .reserve_bytes_per_partition = live_rhs * p.k_tiles * kTileN * 2 + acc_bytes,
                   .bufs = p.bufs});
  TilePool rhs_sets = k.sbuf_pool(
      {kP, p.k_tiles, kTileN}, DType::BF16, "rhs",
      {.trip_count = nbm * nbn, .tiles = live_rhs, .reserve_bytes_per_partition = acc_bytes, .bufs = p.bufs});
  TilePool psum =
      k.psum_pool({kP, kTileN}, DType::F32, "psum_tile", {.trip_count = per_tile, .bufs = p.psum_bufs});
  TilePool accs =
      k.sbuf_pool({kP, kTileN}, DType::BF16, "acc_tile", {.trip_count = per_tile, .bufs = p.bufs});
  for (int64_t d0 = 0; d0 < nbm; ++d0) {
    View out = out_sets.next();
    for (int64_t mt = 0; mt < p.m_tiles; ++mt) nki::memset(out(all, mt), 0.0, p.memset_engine);
    for (int64_t d2 = 0; d2 < nbn; ++d2) {
      const auto ncols = S(d2 * kTileN, (d2 + 1) * kTileN);
      for (int64_t d1 = 0; d1 < nbk; ++d1) {
        const View& lt = lhsT_sets.at({d1 % 4, d0 % 4});
        for (int64_t kt = 0; kt < p.k_tiles; ++kt)
          nki::dma_transpose(lt(all, kt),
                             lhs(S(d0 * BM, (d0 + 1) * BM), S(d1 * BK + kt * kP, d1 * BK + (kt + 1) * kP)));
        View r = rhs_sets.next();
        for (int64_t kt = 0; kt < p.k_tiles; ++kt)
          nki::dma_copy(r(all, kt), rhs(S(d1 * BK + kt * kP, d1 * BK + (kt + 1) * kP), ncols));
        for (int64_t mt = 0; mt < p.m_tiles; ++mt) {
          View ps = psum.next();
          View acc = accs.next();
          for (int64_t kt = 0; kt < p.k_tiles; ++kt)
            nki::nc_matmul(ps, lt(all, kt, S(mt * kP, (mt + 1) * kP)), r(all, kt), {.accumulate = kt > 0});
          nki::tensor_copy(acc, ps, p.copy_engine);
          View o = out(all, mt, ncols);
          nki::tensor_tensor(o, o, acc, nki::AluOp::Add);
        }
      }
      for (int64_t mt = 0; mt < p.m_tiles; ++mt)
        nki::dma_copy(res(S(d0 * BM + mt * kP, d0 * BM + (mt + 1) * kP), ncols), out(all, mt, ncols),
                      {.engine = p.store_engine});
    }
  }
}

}  // namespace

std::unique_ptr<KernelDef> matmul_lhs_dma_transpose_kernel() {
  KernelPackage<Params> k;
  k.name = "matmul_lhs_dma_transpose";
  k.doc =
      "result[M,N] = lhs[M,K] @ rhs[K,N] in BF16, lhs transposed by DMA per K block; loops M block, N tile, "
      "K block, drains per m-tile into BF16 SBUF accumulators (nki-autotune's 89.26 % MFU kernel); "
      "calibration port";
  k.kernel = kernel;
  k.useful_flops = [](const Params& p) { return 2.0 * p.M * p.N * p.K; };
  k.checks = [](const Params& p) {
    return std::vector{matmul_check("result", {"lhs", ref::Contract::Cols}, {"rhs", ref::Contract::Rows},
                                    std::nullopt, 2.0 * p.M * p.N * p.K)};
  };
  return make_kernel(std::move(k));
}

}  // namespace trnsim::kernels
