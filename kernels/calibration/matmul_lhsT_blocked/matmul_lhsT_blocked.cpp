// matmul_lhsT_blocked (calibration port): result[M, N] = lhsT[K, M]^T @ rhs[K, N] in BF16 on one core, a port
// of nki-autotune's hand-written lhsT @ rhs kernel, github.com/awslabs/nki-autotune @d57bcc3,
// kernel_library/matmul/lhsT_rhs/kernel_hand_90.92mfu.py (file unchanged since dcc23bb). Loops, in the
// published order (for 2048^3: block_n 512, block_k 1024, block_m 512):
//   output sets [128, M / 128, block_n] BF16: 4 declared before the loops, N block d2 uses set d2 mod 4
//   for N block (block_n columns):
//     lhsT sets (2 x 4: K block mod 2, M block mod 4) and rhs sets (2: K block mod 2) allocated in this loop
//     memset the output set
//     for K block (block_k rows):
//       rhs set: block_k / 128 loads rhs[k-tile, N block] [128, block_n]
//       for M block (block_m columns):
//         lhsT set: block_k / 128 loads lhsT[k-tile, M block] [128, block_m]
//         for each m-tile of the block: PSUM tile [128, 512] FP32 memset to 0, block_k / 128 accumulating
//           matmuls, copied to an SBUF tile [128, 512] BF16, added (tensor_tensor) into the output tile
//           (the PSUM memset becomes the first matmul's overwrite, as in matmul_lhs_dma_transpose)
//     M / 128 stores of the output set's tiles -> result[m-tile, N block]
// Compiled with enable-instruction-scheduling=false (the library README): program order is what the
// hardware runs. Buffer counts as published where the kernel states them (output 4 sets declared before the
// loops; lhsT 8 and rhs 2 sets per declaration); the lhsT and rhs sets are declared inside the N loop, so
// each N block's sets are fresh tiles and the compiler's allocation rule (kernels/api/alloc_rule.h) says how
// many copies of a declaration's sets the N blocks rotate over. The PSUM tile and its SBUF copy are declared
// per m-tile: the rule's buffers (every free PSUM bank; 2 SBUF tiles), or `psum_bufs` / `bufs` as what-ifs
// (1 or 2 banks for the bank-pressure variants).
// Engines as in matmul_lhs_dma_transpose: the add on Vector, PSUM copy on `copy_engine`
// (Scalar), output memsets on `memset_engine` (GpSimd); the DMAs carry no engine or dge_mode, as published,
// and take NKI's defaults as the builder resolves them (kernels/api/dma_mode.h: hardware DGE, loads on SP,
// stores on ACT).
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/api/package.h"
#include "sim/base/error.h"

namespace trnsim::kernels {
namespace {

constexpr int64_t kP = 128, kTileN = 512;

struct BlockedParams {
  int64_t M = 0, N = 0, K = 0, block_m = 512, block_n = 512, block_k = 1024;
  std::optional<int64_t> psum_bufs, bufs;
  Engine copy_engine = Engine::ACT;
  Engine memset_engine = Engine::POOL;
  std::optional<Engine> store_engine;

  static void describe(Schema<BlockedParams>& s) {
    s.dim(&BlockedParams::M, "M", "rows of the result");
    s.dim(&BlockedParams::N, "N", "columns of the result");
    s.dim(&BlockedParams::K, "K", "contraction");
    s.add(&BlockedParams::block_m, "block_m", "M block (multiple of 128), innermost block loop", 512)
        .range(1, 1 << 16);
    s.add(&BlockedParams::block_n, "block_n", "N block (multiple of 512), outermost block loop", 512)
        .range(1, 1 << 16);
    s.add(&BlockedParams::block_k, "block_k", "K block (multiple of 128)", 1024).range(1, 1 << 16);
    s.add(&BlockedParams::psum_bufs, "psum_bufs",
          "PSUM banks the per-m-tile PSUM tiles rotate over; null: the compiler's allocation rule")
        .range(1, 8);
    s.add(&BlockedParams::bufs, "bufs",
          "SBUF tiles the per-m-tile PSUM copies rotate over; null: the compiler's allocation rule")
        .range(1, 8);
    s.choice(&BlockedParams::copy_engine, "copy_engine", "engine of the PSUM -> SBUF tensor_copy",
             {{"scalar", Engine::ACT}, {"vector", Engine::DVE}}, Engine::ACT);
    s.choice(&BlockedParams::memset_engine, "memset_engine", "engine of the output memsets",
             {{"gpsimd", Engine::POOL}, {"vector", Engine::DVE}}, Engine::POOL);
    s.choice(&BlockedParams::store_engine, "store_engine",
             "engine triggering the result stores; null: unset, as in the published kernel (the builder's "
             "default, kernels/api/dma_mode.h: ACT); a what-if for the DMA placement",
             {{"sync", Engine::SP}, {"scalar", Engine::ACT}, {"gpsimd", Engine::POOL}});
  }
};

void blocked_kernel(Kernel& k, const BlockedParams& p) {
  View lhsT = k.input("lhsT", DType::BF16, {p.K, p.M});
  View rhs = k.input("rhs", DType::BF16, {p.K, p.N});
  View res = k.output("result", DType::BF16, {p.M, p.N});
  if (p.M % p.block_m || p.N % p.block_n || p.K % p.block_k || p.block_m % kP || p.block_n % kTileN ||
      p.block_k % kP)
    throw InputError(fmt::format(
        "kernel 'matmul_lhsT_blocked': blocks ({}, {}, {}) must divide M, N, K = {}, {}, {} and be multiples "
        "of 128, 512, 128",
        p.block_m, p.block_n, p.block_k, p.M, p.N, p.K));
  const int64_t kts = p.block_k / kP, mts = p.block_m / kP, nts = p.block_n / kTileN;
  const int64_t nbn = p.N / p.block_n, nbk = p.K / p.block_k, nbm = p.M / p.block_m;
  std::vector<View> outputs;  // [d2 mod 4], declared before the loops
  for (int64_t i = 0; i < std::min<int64_t>(4, nbn); ++i)
    outputs.push_back(k.sbuf({kP, p.M / kP, p.block_n}, DType::BF16, fmt::format("output[{}]", i)));
  // Declared in the N loop: lhsT [K block mod 2][M block mod 4], rhs [K block mod 2]; the declaration's sets
  // are one buffer of the rule, N block d2 uses copy d2 mod (its buffers).
  const int64_t lhsT_count = std::min<int64_t>(2, nbk) * std::min<int64_t>(4, nbm),
                rhs_count = std::min<int64_t>(2, nbk);
  const int64_t per_tile = nbn * nbk * nbm * mts * nts;  // declarations of the per-m-tile tiles
  const int64_t acc_bytes = kTileN * 2;
  TilePool lhsT_sets =
      k.sbuf_pool({kP, kts, p.block_m}, DType::BF16, "lhs_T",
                  {.trip_count = nbn,
                   .tiles = lhsT_count,
                   .reserve_bytes_per_partition = rhs_count * kts * p.block_n * 2 + acc_bytes});
  TilePool rhs_sets =
      k.sbuf_pool({kP, kts, p.block_n}, DType::BF16, "rhs",
                  {.trip_count = nbn, .tiles = rhs_count, .reserve_bytes_per_partition = acc_bytes});
  TilePool psum =
      k.psum_pool({kP, kTileN}, DType::F32, "psum_tile", {.trip_count = per_tile, .bufs = p.psum_bufs});
  TilePool accs =
      k.sbuf_pool({kP, kTileN}, DType::BF16, "acc_tile", {.trip_count = per_tile, .bufs = p.bufs});
  for (int64_t d2 = 0; d2 < nbn; ++d2) {
    const int64_t lhsT_copy = d2 % (lhsT_sets.bufs() / lhsT_count),
                  rhs_copy = d2 % (rhs_sets.bufs() / rhs_count);
    const View& out = outputs[d2 % 4];
    for (int64_t mt = 0; mt < p.M / kP; ++mt) nki::memset(out(all, mt), 0.0, p.memset_engine);
    const int64_t n0 = d2 * p.block_n;
    for (int64_t d0 = 0; d0 < nbk; ++d0) {
      const View& r = rhs_sets.buffer(rhs_copy * rhs_count + d0 % rhs_count);
      for (int64_t kt = 0; kt < kts; ++kt) {
        const int64_t k0 = d0 * p.block_k + kt * kP;
        nki::dma_copy(r(all, kt), rhs(S(k0, k0 + kP), S(n0, n0 + p.block_n)));
      }
      for (int64_t d1 = 0; d1 < nbm; ++d1) {
        const View& l = lhsT_sets.buffer(lhsT_copy * lhsT_count +
                                         ((d0 % 2) * std::min<int64_t>(4, nbm) + d1 % 4) % lhsT_count);
        for (int64_t kt = 0; kt < kts; ++kt) {
          const int64_t k0 = d0 * p.block_k + kt * kP;
          nki::dma_copy(l(all, kt), lhsT(S(k0, k0 + kP), S(d1 * p.block_m, (d1 + 1) * p.block_m)));
        }
        for (int64_t mt = 0; mt < mts; ++mt)
          for (int64_t nt = 0; nt < nts; ++nt) {
            View ps = psum.next();
            View acc = accs.next();
            for (int64_t kt = 0; kt < kts; ++kt)
              nki::nc_matmul(ps, l(all, kt, S(mt * kP, (mt + 1) * kP)),
                             r(all, kt, S(nt * kTileN, (nt + 1) * kTileN)), {.accumulate = kt > 0});
            nki::tensor_copy(acc, ps, p.copy_engine);
            View o = out(all, d1 * mts + mt, S(nt * kTileN, (nt + 1) * kTileN));
            nki::tensor_tensor(o, o, acc, nki::AluOp::Add);
          }
      }
    }
    for (int64_t mt = 0; mt < p.M / kP; ++mt)
      nki::dma_copy(res(S(mt * kP, (mt + 1) * kP), S(n0, n0 + p.block_n)), out(all, mt),
                    {.engine = p.store_engine});
  }
}

}  // namespace

std::unique_ptr<KernelDef> matmul_lhsT_blocked_kernel() {
  KernelPackage<BlockedParams> k;
  k.name = "matmul_lhsT_blocked";
  k.doc =
      "result[M,N] = lhsT[K,M]^T @ rhs[K,N] in BF16; N, K, M blocks, drains per m-tile into BF16 SBUF "
      "accumulators (nki-autotune's 90.92 % MFU hand kernel); calibration port";
  k.kernel = blocked_kernel;
  k.useful_flops = [](const BlockedParams& p) { return 2.0 * p.M * p.N * p.K; };
  k.checks = [](const BlockedParams& p) {
    return std::vector{matmul_check("result", {"lhsT", ref::Contract::Rows}, {"rhs", ref::Contract::Rows},
                                    std::nullopt, 2.0 * p.M * p.N * p.K)};
  };
  return make_kernel(std::move(k));
}

}  // namespace trnsim::kernels
