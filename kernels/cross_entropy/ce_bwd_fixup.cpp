// cross_entropy_bwd's fix-up of the fused MXFP8 path: the two MXFP8 blocks holding each row's target (its
// rowwise block of 32 columns and columnwise block of 32 rows) recomputed from the gathered logits with the
// target's correction and written over the first result by indirect DMA.
#include <algorithm>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/cross_entropy/ce_bwd_state.h"

namespace trnsim::kernels::ce::bwd {

using isa::AluOp;
using nki::ActFunc;

void fixup(Ctx& c) {
  Kernel& k = c.k;
  const CommonParams& p = c.p;
  const QuantizeRule rule = c.bp.quantize_rule;
  const num::Fp8Format fmt = c.bp.fp8();
  const DType f8 = c.bp.fp8_dtype();
  const int64_t V = p.V, nb32 = V / 32;
  View in = target_in_range(c);
  const bool row = c.bp.rowwise_usage, col = c.bp.columnwise_usage;
  // Rowwise block of row r: index r * V/32 + y/32 into logits / rowwise data seen as [rows * V/32, 32].
  View ymod, ridx, rsidx;
  if (row) {
    View offs = row_offsets(k, c.nt, nb32);
    View blk = k.sbuf({kP, c.nt}, DType::I32, "fix_block");
    nki::tensor_scalar(blk, c.tgt, AluOp::ShiftRight, 5.0);
    ymod = k.sbuf({kP, c.nt}, DType::I32, "fix_ymod");
    nki::tensor_scalar(ymod, c.tgt, AluOp::BitwiseAnd, 31.0);
    ridx = k.sbuf({kP, c.nt}, DType::I32, "fix_row_index");
    add_i32(k, ridx, offs, blk);
    nki::select(ridx, in, ridx, -1.0);
    // Scale byte indices.
    rsidx = k.sbuf({kP, c.nt}, DType::I32, "fix_row_scale_index");
    View rowi = k.sbuf({kP, c.nt}, DType::I32, "fix_row");
    nki::iota(rowi, {static_cast<int32_t>(kP)}, 0.0, 1.0);
    if (c.geom.swizzled) {
      swizzled_index(k, rsidx, rowi, blk, c.geom.row_cols() / 4);
    } else {
      View ro = row_offsets(k, c.nt, c.geom.row_cols());
      add_i32(k, rsidx, ro, blk);
    }
    nki::select(rsidx, in, rsidx, -1.0);
  }
  // Columnwise scale byte indices: row r's block-row rb = r / 32 (element (p, t): rb = 4 t + p / 32, one iota
  // per 32-partition quadrant) at column y_r.
  View cidx, csidx;
  if (col) {
    cidx = k.sbuf({kP, c.nt}, DType::I32, "fix_col_index");
    nki::select(cidx, in, c.tgt, -1.0);
    csidx = k.sbuf({kP, c.nt}, DType::I32, "fix_col_scale_index");
    View rb = k.sbuf({kP, c.nt}, DType::I32, "fix_block_row");
    for (int64_t q = 0; q < 4; ++q) nki::iota(rb(S(32 * q, 32 * q + 32)), {4}, static_cast<double>(q));
    if (c.geom.swizzled) {
      swizzled_index(k, csidx, c.tgt, rb, c.geom.col_rows() / 4);
    } else {
      // rb * roundup(V, 128) may exceed 2^24: an integer iota step keeps it exact.
      View base = k.sbuf({kP, c.nt}, DType::I32, "fix_col_scale_base");
      for (int64_t q = 0; q < 4; ++q)
        nki::iota(base(S(32 * q, 32 * q + 32)), {static_cast<int32_t>(4 * c.geom.col_cols())},
                  static_cast<double>(q * c.geom.col_cols()));
      add_i32(k, csidx, base, c.tgt);
    }
    nki::select(csidx, in, csidx, -1.0);
  }

  const View xr_all = c.logits.reshape({p.rows * nb32, 32});
  const View rd_all = row ? c.rdata.reshape({p.rows * nb32, 32}) : View();
  const View rs_flat = row ? c.rscale.reshape({c.geom.row_rows() * c.geom.row_cols(), 1}) : View();
  const View cs_flat = col ? c.cscale.reshape({c.geom.col_rows() * c.geom.col_cols(), 1}) : View();
  View iota32;
  if (row) {
    iota32 = k.sbuf({kP, 32}, DType::F32, "fix_iota");
    nki::iota(iota32, {1});
  }
  const nki::DmaOpts gather_opts{.oob_mode = nki::OobMode::Skip};
  auto gather = [&](const View& dst, const View& src, const View& idx) {
    nki::DmaOpts o = gather_opts;
    o.vector_offset = idx;
    nki::dma_copy(dst, src, o);
  };
  auto scatter = [&](const View& dst, const View& src, const View& idx) {
    nki::DmaOpts o = gather_opts;
    o.vector_offset = idx;
    o.indirect_dst = true;
    nki::dma_copy(dst, src, o);
  };
  for (int64_t t = 0; t < c.nt; ++t) {
    const int64_t r0 = t * kP, rr = std::min(kP, p.rows - r0);
    auto vec = [&](const View& v) { return v(all, S(t, t + 1)); };
    // Rowwise block.
    if (row) {
      View xr = k.sbuf({kP, 32}, p.logits_dtype, "fix_x_row");
      nki::memset(xr, 0.0);
      gather(xr(S(0, rr)), xr_all(S(0, rr)), ridx(S(0, rr), S(t, t + 1)));
      View q = k.sbuf({kP, 32}, DType::F32, "fix_q_row");
      nki::activation(q, ActFunc::Exp, xr, vec(c.b));
      // Additive term: hy at the target column y % 32, h elsewhere.
      View mask = k.sbuf({kP, 32}, DType::F32, "fix_mask_row");
      nki::tensor_scalar(mask, iota32, AluOp::IsEqual, vec(ymod));
      View add = k.sbuf({kP, 32}, DType::F32, "fix_add_row");
      nki::select(add, mask, vec(c.hy).broadcast(1, 32), vec(c.h).broadcast(1, 32));
      nki::tensor_scalar(q, q, AluOp::Multiply, vec(c.gcd));
      View g = k.sbuf({kP, 1, 32}, DType::BF16, "fix_g_row");
      nki::tensor_tensor(g.reshape({kP, 32}), q, add, AluOp::Add);
      View q8 = k.sbuf({kP, 1, 32}, f8, "fix_q8_row");
      View byte = k.sbuf({kP, 1}, DType::U8, "fix_byte_row");
      mx_quantize_free(k, q8, byte, g, rule, fmt, Engine::DVE);
      scatter(rd_all(S(0, rr)), q8.reshape({kP, 32})(S(0, rr)), ridx(S(0, rr), S(t, t + 1)));
      scatter(rs_flat(S(0, rr)), byte.bitcast(DType::E8M0)(S(0, rr)), rsidx(S(0, rr), S(t, t + 1)));
    }
    // Columnwise block of row r: rows 32(r/32) .. +32 at column y_r, per 32-row quadrant.
    if (col) {
      View xc = k.sbuf({kP, 32}, p.logits_dtype, "fix_x_col");
      nki::memset(xc, 0.0);
      // Factors of the block's rows along the free dim: element (p, i) = factor of row 32(p/32) + i.
      View bT = k.sbuf({kP, 32}, DType::F32, "fix_b_t");
      View gcT = k.sbuf({kP, 32}, DType::F32, "fix_gcd_t");
      View hT = k.sbuf({kP, 32}, DType::F32, "fix_h_t");
      View hyT = k.sbuf({kP, 32}, DType::F32, "fix_hy_t");
      View tT = k.sbuf({kP, 32}, DType::I32, "fix_t_t");
      const int64_t nq = ceil_div(rr, 32);
      for (int64_t q = 0; q < nq; ++q) {
        const int64_t m = std::min<int64_t>(32, rr - 32 * q);
        const auto Q = S(32 * q, 32 * q + 32);
        gather(xc(S(32 * q, 32 * q + m)), c.logits(S(r0 + 32 * q, r0 + 32 * q + 32)).permute({1, 0})(S(0, m)),
               cidx(S(32 * q, 32 * q + m), S(t, t + 1)));
        nki::nc_transpose(bT(Q), c.b(Q, S(t, t + 1)).broadcast(1, 32), Engine::DVE);
        nki::nc_transpose(gcT(Q), c.gcd(Q, S(t, t + 1)).broadcast(1, 32), Engine::DVE);
        nki::nc_transpose(hT(Q), c.h(Q, S(t, t + 1)).broadcast(1, 32), Engine::DVE);
        nki::nc_transpose(hyT(Q), c.hy(Q, S(t, t + 1)).broadcast(1, 32), Engine::DVE);
        nki::nc_transpose(tT(Q), c.tgt(Q, S(t, t + 1)).broadcast(1, 32), Engine::DVE);
      }
      View q = k.sbuf({kP, 32}, DType::F32, "fix_q_col");
      nki::tensor_tensor(q, xc, bT, AluOp::Add);
      nki::activation(q, ActFunc::Exp, q);
      // Rows of the block whose target is this column take hy.
      View mask = k.sbuf({kP, 32}, DType::F32, "fix_mask_col");
      nki::tensor_scalar(mask, tT, AluOp::IsEqual, vec(c.tgt));
      nki::select(hT, mask, hyT, hT);
      nki::tensor_tensor(q, q, gcT, AluOp::Multiply);
      View g = k.sbuf({kP, 1, 32}, DType::BF16, "fix_g_col");
      nki::tensor_tensor(g.reshape({kP, 32}), q, hT, AluOp::Add);
      View q8 = k.sbuf({kP, 1, 32}, f8, "fix_q8_col");
      View byte = k.sbuf({kP, 1}, DType::U8, "fix_byte_col");
      mx_quantize_free(k, q8, byte, g, rule, fmt, Engine::DVE);
      for (int64_t q = 0; q < nq; ++q) {
        const int64_t m = std::min<int64_t>(32, rr - 32 * q);
        scatter(c.cdata(S(r0 + 32 * q, r0 + 32 * q + 32)).permute({1, 0})(S(0, m)),
                q8.reshape({kP, 32})(S(32 * q, 32 * q + m)), cidx(S(32 * q, 32 * q + m), S(t, t + 1)));
        scatter(cs_flat(S(0, m)), byte.bitcast(DType::E8M0)(S(32 * q, 32 * q + m)),
                csidx(S(32 * q, 32 * q + m), S(t, t + 1)));
      }
    }
  }
}

}  // namespace trnsim::kernels::ce::bwd
