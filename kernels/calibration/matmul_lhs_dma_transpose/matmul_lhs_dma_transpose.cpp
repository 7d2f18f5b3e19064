// matmul_lhs_dma_transpose (calibration kernel): result[M, N] = lhs[M, K] @ rhs[K, N] in BF16 on one core.
// lhs reaches the K-on-partitions layout by DMA transpose. Loop order M blocks (m_tiles x 128 rows), N tiles
// (512), K tiles (128): m_tiles PSUM banks accumulate one N tile of m_tiles M tiles and are drained together
// (cast to BF16 on DVE and ACT alternately) before the block is stored.
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

struct TransposeParams {
  int64_t M = 0, N = 0, K = 0, m_tiles = 8;

  static void describe(Schema<TransposeParams>& s) {
    s.dim(&TransposeParams::M, "M", "rows of lhs and the result");
    s.dim(&TransposeParams::N, "N", "columns of rhs and the result");
    s.dim(&TransposeParams::K, "K", "contraction");
    s.add(&TransposeParams::m_tiles, "m_tiles", "M tiles (PSUM banks) accumulated per drain", 8).range(1, 8);
  }
};

void dma_transpose_kernel(Kernel& k, const TransposeParams& p) {
  View lhs = k.input("lhs", DType::BF16, {p.M, p.K});
  View rhs = k.input("rhs", DType::BF16, {p.K, p.N});
  View res = k.output("result", DType::BF16, {p.M, p.N});
  const int64_t BM = p.m_tiles * kP;
  if (p.M % BM || p.N % kBank || p.K % kP)
    throw InputError(fmt::format(
        "kernel 'matmul_lhs_dma_transpose': M, N, K = {}, {}, {} must be multiples of {}, 512, 128", p.M, p.N,
        p.K, BM));
  const int64_t kts = p.K / kP;
  View lhsT_buf[2] = {k.sbuf({kP, kts, BM}, DType::BF16, "lhsT"), k.sbuf({kP, kts, BM}, DType::BF16, "lhsT")};
  View rhs_buf[2] = {k.sbuf({kP, kts, kBank}, DType::BF16, "rhs"),
                     k.sbuf({kP, kts, kBank}, DType::BF16, "rhs")};
  View out_buf[2] = {k.sbuf({kP, p.m_tiles, kBank}, DType::BF16, "out"),
                     k.sbuf({kP, p.m_tiles, kBank}, DType::BF16, "out")};
  std::vector<View> banks;
  for (int64_t i = 0; i < p.m_tiles; ++i) banks.push_back(k.psum({kP, kBank}, DType::F32, "psum"));
  int64_t rb = 0, ob = 0, drains = 0;
  for (int64_t m = 0; m < p.M / BM; ++m) {
    const View& lt = lhsT_buf[m % 2];
    for (int64_t n = 0; n < p.N / kBank; ++n) {
      // The lhsT k-tiles (first N tile of each M block) and rhs k-tiles are loaded in the order the
      // matmuls use them.
      const View& r = rhs_buf[rb++ % 2];
      for (int64_t kt = 0; kt < kts; ++kt) {
        if (n == 0) nki::dma_transpose(lt(all, kt), lhs(S(m * BM, (m + 1) * BM), S(kt * kP, (kt + 1) * kP)));
        nki::dma_copy(r(all, kt), rhs(S(kt * kP, (kt + 1) * kP), S(n * kBank, (n + 1) * kBank)));
      }
      for (int64_t kt = 0; kt < kts; ++kt)
        for (int64_t mt = 0; mt < p.m_tiles; ++mt)
          nki::nc_matmul(banks[mt], lt(all, kt, S(mt * kP, (mt + 1) * kP)), r(all, kt),
                         {.accumulate = kt > 0});
      const View& o = out_buf[ob++ % 2];
      for (int64_t mt = 0; mt < p.m_tiles; ++mt)
        nki::tensor_copy(o(all, mt), banks[mt], (drains++ % 2) ? Engine::ACT : Engine::DVE);
      for (int64_t mt = 0; mt < p.m_tiles; ++mt) {
        const int64_t r0 = m * BM + mt * kP;
        nki::dma_copy(res(S(r0, r0 + kP), S(n * kBank, (n + 1) * kBank)), o(all, mt),
                      {.engine = Engine::ACT});
      }
    }
  }
}

}  // namespace

std::unique_ptr<KernelDef> matmul_lhs_dma_transpose_kernel() {
  KernelPackage<TransposeParams> k;
  k.name = "matmul_lhs_dma_transpose";
  k.doc =
      "result[M,N] = lhs[M,K] @ rhs[K,N] in BF16, lhs transposed by DMA; loop order M, N, K with m_tiles "
      "M tiles x 1 N tile per PSUM drain (calibration kernel)";
  k.kernel = dma_transpose_kernel;
  k.useful_flops = [](const TransposeParams& p) { return 2.0 * p.M * p.N * p.K; };
  k.checks = [](const TransposeParams& p) {
    return std::vector{matmul_check("result", {"lhs", ref::Contract::Cols}, {"rhs", ref::Contract::Rows},
                                    std::nullopt, 2.0 * p.M * p.N * p.K)};
  };
  return make_kernel(std::move(k));
}

}  // namespace trnsim::kernels
