// Hand-written BF16 matmuls on one core, for calibration against published Trainium2 measurements.
//
// matmul_lhsT_blocked: result[M, N] = lhsT[K, M]^T @ rhs[K, N]. N blocks of block_n (outer), K blocks of
//   block_k, M blocks of block_m (inner); PSUM tiles 128 x 512 FP32. The rhs block [block_k, block_n] and
//   the lhsT block [block_k, block_m] are double-buffered in SBUF. Each M block's PSUM tiles are drained as a
//   block: the first K block copies into an FP32 SBUF accumulator, later ones add (DVE tensor_tensor), the
//   last adds into a BF16 tile that is stored. psum_bufs banks rotate over the M tiles; psum_zero "memset"
//   clears each bank (DVE memset, emitted right after the bank's previous drain) and accumulates every
//   matmul into it instead of letting the first matmul overwrite it.
// matmul_lhs_dma_transpose: result[M, N] = lhs[M, K] @ rhs[K, N]. lhs reaches the K-on-partitions layout by
//   DMA transpose. Loop order M blocks (m_tiles x 128 rows), N tiles (512), K tiles (128): m_tiles PSUM banks
//   accumulate one N tile of m_tiles M tiles and are drained together (cast to BF16 on DVE and ACT
//   alternately) before the block is stored.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/api/registry.h"
#include "sim/base/error.h"

namespace trnsim::kernels {
namespace {

constexpr int64_t kP = 128, kBank = 512;

struct BlockedParams {
  int64_t M, N, K, block_m, block_n, block_k, psum_bufs;
  bool memset_zero;
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

struct TransposeParams {
  int64_t M, N, K, m_tiles;
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

constexpr auto dim = dim_param;

ParamSpec int_param(const char* name, int64_t def, int64_t max, const char* doc) {
  return ParamSpec{.name = name,
                   .type = ParamType::Int,
                   .default_value = def,
                   .min = 1,
                   .max = static_cast<double>(max),
                   .doc = doc};
}

}  // namespace

void register_matmul_lhsT_blocked(Registry& r) {
  KernelInfo info;
  info.name = "matmul_lhsT_blocked";
  info.doc =
      "result[M,N] = lhsT[K,M]^T @ rhs[K,N] in BF16; N, K, M blocks with double-buffered operands, PSUM "
      "drained per M block (calibration kernel)";
  info.params = {
      dim("M", "rows of the result"),
      dim("N", "columns of the result"),
      dim("K", "contraction"),
      int_param("block_m", 512, 1 << 16, "M block (multiple of 128), innermost block loop"),
      int_param("block_n", 512, 1 << 16, "N block (multiple of 512), outermost block loop"),
      int_param("block_k", 1024, 1 << 16, "K block (multiple of 128)"),
      int_param("psum_bufs", 8, 8, "PSUM banks the accumulation groups rotate over (1: all share one bank)"),
      {.name = "psum_zero",
       .type = ParamType::Enum,
       .default_value = "matmul",
       .allowed = {"matmul", "memset"},
       .doc = "how a bank starts: the first matmul overwrites it, or a DVE memset then accumulating matmuls"},
  };
  info.build = [](const nlohmann::json& j, const BuildOptions& options) {
    BlockedParams p{j.at("M").get<int64_t>(),         j.at("N").get<int64_t>(),
                    j.at("K").get<int64_t>(),         j.at("block_m").get<int64_t>(),
                    j.at("block_n").get<int64_t>(),   j.at("block_k").get<int64_t>(),
                    j.at("psum_bufs").get<int64_t>(), j.at("psum_zero") == "memset"};
    return build_program([&p](Kernel& k) { blocked_kernel(k, p); }, options);
  };
  r.add(std::move(info));
}

void register_matmul_lhs_dma_transpose(Registry& r) {
  KernelInfo info;
  info.name = "matmul_lhs_dma_transpose";
  info.doc =
      "result[M,N] = lhs[M,K] @ rhs[K,N] in BF16, lhs transposed by DMA; loop order M, N, K with m_tiles "
      "M tiles x 1 N tile per PSUM drain (calibration kernel)";
  info.params = {
      dim("M", "rows of lhs and the result"),
      dim("N", "columns of rhs and the result"),
      dim("K", "contraction"),
      int_param("m_tiles", 8, 8, "M tiles (PSUM banks) accumulated per drain"),
  };
  info.build = [](const nlohmann::json& j, const BuildOptions& options) {
    TransposeParams p{j.at("M").get<int64_t>(), j.at("N").get<int64_t>(), j.at("K").get<int64_t>(),
                      j.at("m_tiles").get<int64_t>()};
    return build_program([&p](Kernel& k) { dma_transpose_kernel(k, p); }, options);
  };
  r.add(std::move(info));
}

}  // namespace trnsim::kernels
