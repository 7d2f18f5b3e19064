// matmul_lhsT_blocked (calibration kernel): result[M, N] = lhsT[K, M]^T @ rhs[K, N] in BF16 on one core.
// N blocks of block_n (outer), K blocks of block_k, M blocks of block_m (inner); PSUM tiles 128 x 512 FP32.
// The rhs block [block_k, block_n] and the lhsT block [block_k, block_m] are double-buffered in SBUF. Each M
// block's PSUM tiles are drained as a block: the first K block copies into an FP32 SBUF accumulator, later
// ones add (DVE tensor_tensor), the last adds into a BF16 tile that is stored. psum_bufs banks rotate over
// the M tiles; psum_zero "memset" clears each bank (DVE memset, emitted right after the bank's previous
// drain) and accumulates every matmul into it instead of letting the first matmul overwrite it.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/api/package.h"
#include "sim/base/error.h"

namespace trnsim::kernels {
namespace {

constexpr int64_t kP = 128, kBank = 512;

struct BlockedParams {
  int64_t M = 0, N = 0, K = 0, block_m = 512, block_n = 512, block_k = 1024, psum_bufs = 8;
  bool memset_zero = false;

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
          "PSUM banks the accumulation groups rotate over (1: all share one bank)", 8)
        .range(1, 8);
    s.choice(&BlockedParams::memset_zero, "psum_zero",
             "how a bank starts: the first matmul overwrites it, or a DVE memset then accumulating matmuls",
             {{"matmul", false}, {"memset", true}}, false);
  }
};

void blocked_kernel(Kernel& k, const BlockedParams& p) {
  View lhsT = k.input("lhsT", DType::BF16, {p.K, p.M});
  View rhs = k.input("rhs", DType::BF16, {p.K, p.N});
  View res = k.output("result", DType::BF16, {p.M, p.N});
  if (p.M % p.block_m || p.N % p.block_n || p.K % p.block_k || p.block_m % kP || p.block_n % kBank ||
      p.block_k % kP)
    throw InputError(fmt::format(
        "kernel 'matmul_lhsT_blocked': blocks ({}, {}, {}) must divide M, N, K = {}, {}, {} and be multiples "
        "of 128, 512, 128",
        p.block_m, p.block_n, p.block_k, p.M, p.N, p.K));
  const int64_t kts = p.block_k / kP, mts = p.block_m / kP, nts = p.block_n / kBank;
  const int64_t nbk = p.K / p.block_k, nbm = p.M / p.block_m, mt_all = p.M / kP;
  View rhs_buf[2] = {k.sbuf({kP, kts, p.block_n}, DType::BF16, "rhs_blk"),
                     k.sbuf({kP, kts, p.block_n}, DType::BF16, "rhs_blk")};
  View lhsT_buf[2] = {k.sbuf({kP, kts, p.block_m}, DType::BF16, "lhsT_blk"),
                      k.sbuf({kP, kts, p.block_m}, DType::BF16, "lhsT_blk")};
  std::vector<View> banks;
  for (int64_t i = 0; i < p.psum_bufs; ++i) banks.push_back(k.psum({kP, kBank}, DType::F32, "psum"));
  View acc = nbk > 1 ? k.sbuf({kP, mt_all, p.block_n}, DType::F32, "acc") : View();
  View out[2] = {k.sbuf({kP, mts, p.block_n}, DType::BF16, "out_blk"),
                 k.sbuf({kP, mts, p.block_n}, DType::BF16, "out_blk")};
  int64_t rb = 0, lb = 0, bank = 0, ob = 0;
  const int64_t groups = (p.N / p.block_n) * nbk * nbm * mts * nts;
  if (p.memset_zero)
    for (int64_t i = 0; i < std::min(groups, p.psum_bufs); ++i) nki::memset(banks[i], 0.0);
  for (int64_t n = 0; n < p.N / p.block_n; ++n)
    for (int64_t kb = 0; kb < nbk; ++kb) {
      const View& r = rhs_buf[rb++ % 2];
      for (int64_t kt = 0; kt < kts; ++kt) {
        const int64_t k0 = kb * p.block_k + kt * kP;
        nki::dma_copy(r(all, kt), rhs(S(k0, k0 + kP), S(n * p.block_n, (n + 1) * p.block_n)));
      }
      const bool first = kb == 0, last = kb == nbk - 1;
      for (int64_t mb = 0; mb < nbm; ++mb) {
        const View& l = lhsT_buf[lb++ % 2];
        for (int64_t kt = 0; kt < kts; ++kt) {
          const int64_t k0 = kb * p.block_k + kt * kP;
          nki::dma_copy(l(all, kt), lhsT(S(k0, k0 + kP), S(mb * p.block_m, (mb + 1) * p.block_m)));
        }
        const View& o = out[ob % 2];
        if (last) ++ob;
        for (int64_t mt = 0; mt < mts; ++mt)
          for (int64_t nt = 0; nt < nts; ++nt) {
            const View& ps = banks[bank % banks.size()];
            for (int64_t kt = 0; kt < kts; ++kt)
              nki::nc_matmul(ps, l(all, kt, S(mt * kP, (mt + 1) * kP)),
                             r(all, kt, S(nt * kBank, (nt + 1) * kBank)),
                             {.accumulate = p.memset_zero || kt > 0});
            View a = nbk > 1 ? acc(all, mb * mts + mt, S(nt * kBank, (nt + 1) * kBank)) : View();
            View dst = o(all, mt, S(nt * kBank, (nt + 1) * kBank));
            if (first && last)
              nki::tensor_copy(dst, ps);
            else if (first)
              nki::tensor_copy(a, ps);
            else
              nki::tensor_tensor(last ? dst : a, a, ps, nki::AluOp::Add);
            // Clear the bank for its next group as soon as it is drained.
            if (p.memset_zero && bank + p.psum_bufs < groups) nki::memset(ps, 0.0);
            ++bank;
          }
        if (last)
          for (int64_t mt = 0; mt < mts; ++mt) {
            const int64_t r0 = mb * p.block_m + mt * kP;
            nki::dma_copy(res(S(r0, r0 + kP), S(n * p.block_n, (n + 1) * p.block_n)), o(all, mt),
                          {.engine = Engine::ACT});
          }
      }
    }
}

}  // namespace

std::unique_ptr<KernelDef> matmul_lhsT_blocked_kernel() {
  KernelPackage<BlockedParams> k;
  k.name = "matmul_lhsT_blocked";
  k.doc =
      "result[M,N] = lhsT[K,M]^T @ rhs[K,N] in BF16; N, K, M blocks with double-buffered operands, PSUM "
      "drained per M block (calibration kernel)";
  k.kernel = blocked_kernel;
  k.useful_flops = [](const BlockedParams& p) { return 2.0 * p.M * p.N * p.K; };
  k.checks = [](const BlockedParams& p) {
    return std::vector{matmul_check("result", {"lhsT", ref::Contract::Rows}, {"rhs", ref::Contract::Rows},
                                    std::nullopt, 2.0 * p.M * p.N * p.K)};
  };
  return make_kernel(std::move(k));
}

}  // namespace trnsim::kernels
