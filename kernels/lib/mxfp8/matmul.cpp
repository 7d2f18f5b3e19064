#include "kernels/lib/mxfp8/matmul.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/lib/mxfp8/blocks.h"
#include "kernels/lib/mxfp8/layout.h"

namespace trnsim::kernels::mxfp8 {

void emit_matmul(Kernel& k, const MatmulSpec& spec, const Plan& p, Epilogue& epi) {
  const int c = k.program_id();
  if (spec.cores == Cores::Lnc && !p.lnc2 && c == 1) return;  // core 0 computes all of Y
  check_operand_views(spec, spec.lhs, spec.M, "lhs");
  if (spec.lhs2) check_operand_views(spec, *spec.lhs2, spec.M, "lhs2");
  check_operand_views(spec, spec.rhs, spec.N, "rhs");
  const int64_t TK = cdiv(spec.K, p.tile_k);
  const CoreShare share = core_share(spec, p, c);
  const int64_t Mc = share.M, Nc = share.N, m_lo = share.m_lo, n_lo = share.n_lo;
  const int64_t bmf = p.block_m * p.tile_m, bnf = p.block_n * p.tile_n;
  const int64_t nbm = cdiv(Mc, bmf), nbn = cdiv(Nc, bnf), nbk = cdiv(TK, p.block_k);

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
  OperandBlocks L(k, spec, spec.lhs, p, spec.M, m_lo, Mc, p.tile_m, p.block_m, p.load_m, nbl,
                  static_cast<int>(nbk), "lhs");
  OperandBlocks R(k, spec, spec.rhs, p, spec.N, n_lo, Nc, p.tile_n, p.block_n, p.load_n, nbr,
                  static_cast<int>(nbk), "rhs");
  // The paired stationary (lhs2) follows the LHS schedule exactly: same keys, same slots.
  std::optional<OperandBlocks> L2;
  if (spec.lhs2)
    L2.emplace(k, spec, *spec.lhs2, p, spec.M, m_lo, Mc, p.tile_m, p.block_m, p.load_m, nbl,
               static_cast<int>(nbk), "lhs2");
  const auto luse = L.schedule(lkeys), ruse = R.schedule(rkeys);

  const isa::DType acc_dtype = nbk > 1 ? isa::DType::F32 : spec.out_dtype;
  std::vector<View> acc, acc2;
  for (int i = 0; i < 2; ++i) {
    acc.push_back(k.sbuf({p.tile_m, p.block_m, bnf}, acc_dtype, spec.scope + "_acc"));
    if (L2) acc2.push_back(k.sbuf({p.tile_m, p.block_m, bnf}, acc_dtype, spec.scope + "_acc2"));
  }
  // PSUM tiles of whole banks, as wide as a moving tile (several banks for tile_n > 512).
  const int64_t bank_cols = k.limits().psum_bank_bytes / 4;
  const int64_t psum_cols = round_up(p.tile_n, bank_cols);
  const int banks_total = static_cast<int>(k.limits().psum_bytes_per_partition / k.limits().psum_bank_bytes);
  PsumBanks banks(k, banks_total / static_cast<int>(psum_cols / bank_cols), spec.scope + "_psum", psum_cols);
  EpilogueContext ctx{k, banks};
  size_t drain_rr = 0, acc_rr = 0;

  const auto prepare = [&](size_t s) {
    if (luse[s].miss) L.prepare(banks, steps[s].mb, steps[s].kb, luse[s]);
    if (luse[s].miss && L2) L2->prepare(banks, steps[s].mb, steps[s].kb, luse[s]);
    if (ruse[s].miss) R.prepare(banks, steps[s].nb, steps[s].kb, ruse[s]);
  };
  // A step's blocks are prepared before the previous step's matmuls when they go to the other slot.
  const auto early = [&](size_t s) { return (!luse[s].miss || nbl == 2) && (!ruse[s].miss || nbr == 2); };
  if (!steps.empty()) prepare(0);
  View out, out2;
  for (size_t s = 0; s < steps.size(); ++s) {
    const Step& st = steps[s];
    if (s + 1 < steps.size() && early(s + 1)) prepare(s + 1);
    const int64_t m0 = m_lo + st.mb * bmf, n0 = n_lo + st.nb * bnf;
    const int64_t bm = std::min(bmf, m_lo + Mc - m0), bn = std::min(bnf, n_lo + Nc - n0);
    const int64_t tms = cdiv(bm, p.tile_m), tns = cdiv(bn, p.tile_n);
    const int64_t kt0 = st.kb * p.block_k, kt1 = std::min(kt0 + p.block_k, TK);
    if (st.kb == 0) {
      if (L2) out2 = acc2[acc_rr % acc2.size()];
      out = acc[acc_rr++ % acc.size()];
    }
    const bool last_k = st.kb == nbk - 1;
    const auto finish_row = [&](int64_t mt) {
      const int64_t tm = std::min(p.tile_m, bm - mt * p.tile_m);
      epi.emit(ctx, OutTile{out(S(0, tm), mt, S(0, bn)), m0 + mt * p.tile_m, n0,
                            L2 ? out2(S(0, tm), mt, S(0, bn)) : View()});
    };
    const auto tile = [&](int64_t mt, int64_t nt) {
      const int64_t tm = std::min(p.tile_m, bm - mt * p.tile_m), tn = std::min(p.tile_n, bn - nt * p.tile_n);
      // One accumulation group per stationary operand (the pair shares each moving tile).
      const auto group = [&](const OperandBlocks& lb, const View& o) {
        View ps = banks.next()(S(0, tm), S(0, tn));
        for (int64_t kt = kt0; kt < kt1; ++kt) {
          const auto a = lb.tile(luse[s].slot, st.kb, kt, mt * p.tile_m, tm);
          const auto b = R.tile(ruse[s].slot, st.kb, kt, nt * p.tile_n, tn);
          nki::nc_matmul_mx(
              ps, a.data, b.data, a.scales, b.scales,
              {.accumulate = kt > kt0, .stationary_scale_offset = a.offset, .moving_scale_offset = b.offset});
        }
        View dst = o(S(0, tm), mt, S(nt * p.tile_n, nt * p.tile_n + tn));
        if (st.kb > 0) {
          nki::tensor_tensor(dst, dst, ps, nki::AluOp::Add);
        } else if (drain_rr++ % 2) {
          nki::activation(dst, nki::ActFunc::Copy, ps);
        } else {
          nki::tensor_copy(dst, ps);
        }
      };
      group(L, out);
      if (L2) group(*L2, out2);
    };
    if (!spec.nmk) {
      for (int64_t mt = 0; mt < tms; ++mt) {
        for (int64_t nt = 0; nt < tns; ++nt) tile(mt, nt);
        if (last_k) finish_row(mt);
      }
    } else {
      for (int64_t nt = 0; nt < tns; ++nt)
        for (int64_t mt = 0; mt < tms; ++mt) tile(mt, nt);
      if (last_k)
        for (int64_t mt = 0; mt < tms; ++mt) finish_row(mt);
    }
    if (s + 1 < steps.size() && !early(s + 1)) prepare(s + 1);
  }
}

}  // namespace trnsim::kernels::mxfp8
