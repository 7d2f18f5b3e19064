// emit_bwd_lib: the library schedule's setup, block loop, gathers and Phases 2-4 (bwd_lib.h); Phase 1 is in
// bwd_lib_phase1.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "kernels/api/nki.h"
#include "kernels/lib/mxfp8/layout.h"
#include "kernels/moe/bwd_lib_state.h"
#include "kernels/moe/bwd_weights.h"
#include "kernels/moe/moe_common.h"

namespace trnsim::kernels::moe {
namespace bwdlib {

using isa::DType;
using mxfp8::cdiv;
using mxfp8::lib::Td;

mxfp8::lib::Call api_call(const State& s, const BwdLibPhase& ph, const PhaseTds& tds, const char* what) {
  mxfp8::lib::Call c;
  c.kernel = what;
  c.lhs = &tds.lhs;
  c.rhs = &tds.rhs;
  c.g = ph.g;
  c.lhsq = ph.spill_lhs ? &tds.lhsq : nullptr;
  c.rhsq = ph.spill_rhs ? &tds.rhsq : nullptr;
  c.packing = ph.packing;
  c.fp8 = s.p.fp8;
  return c;
}

namespace {

Tensors declare(Kernel& k, const BwdParams& p, const BwdLibPlan& f) {
  Tensors t;
  const int64_t E = p.E, H = p.H, I = f.I, B = f.B, N = f.N;
  t.hidden = k.input("hidden_states", DType::BF16, {f.rows, H});
  t.ea = k.input("expert_affinities_masked", DType::F32, {f.rows * E, 1});
  const BwdWeights w = declare_bwd_weights(k, p, I);
  t.w_gu = w.w_gu;
  t.s_gu = w.s_gu;
  t.w_down = w.w_down;
  t.s_down = w.s_down;
  t.tokens = k.input("token_position_to_id", DType::I32, {N * B});
  t.b2e = k.input("block_to_expert", DType::I32, {N, 1});
  t.dy = k.input("output_hidden_states_grad", DType::BF16, {f.rows, H});
  t.ck_gu = k.input("gate_up_proj_act_checkpoint_T", p.compute_dtype, {N, 2, I, B});
  // Declared as the workload gives it, never read (bwd_lib.h).
  if (p.scaled_given()) k.input("scaled_intermediate_checkpoint_T", p.compute_dtype, {N, I, B});
  t.dx = k.output("hidden_states_grad", DType::BF16, {f.rows, H});
  t.dea = k.output("expert_affinities_masked_grad", DType::F32, {f.rows * E, 1});
  t.dw_gu = k.output("gate_up_proj_weight_grad", DType::BF16, {E, H, 2, I});
  t.dw_down = k.output("down_proj_weight_grad", DType::BF16, {E, I, H});
  // The library names a fresh shared_hbm tensor per block for each; two slots rotate here (bwd_lib.h).
  const auto scratch = [&](const char* name, int64_t rows, int64_t cols) {
    return k.scratch(name, DType::BF16, {2, rows, cols}, false);
  };
  t.dy_block = scratch("output_grad_block", B, H);
  t.hidden_t = scratch("hidden_states_block_T", H, B);
  t.dy_t = scratch("output_grad_block_T", H, B);
  t.dgu = scratch("d_gate_up", B, 2 * I);
  t.dgu_t = scratch("d_gate_up_T", 2 * I, B);
  t.scaled = scratch("scaled_intermediate", B, I);
  t.scaled_t = scratch("scaled_intermediate_T", I, B);
  return t;
}

View slot_of(const View& scratch, int slot) {
  return scratch(S(slot, slot + 1)).reshape({scratch.size(1), scratch.size(2)});
}

// _initialize_gradient_outputs_shard: each core zeroes its experts' share of the affinity gradient, its
// columns of H of the weight gradients and of hidden_states_grad, by 128-row DMAs from zeroed tiles.
void zero_gradients(State& s) {
  Kernel& k = s.k;
  const BwdLibPlan& f = s.f;
  const int core = s.core();
  const int64_t T = f.rows, E = f.E, I = f.I, Hc = f.Hc, h0 = core * Hc;
  const int64_t shard_e = E == 1 ? 1 : E / f.cores, e0 = E == 1 ? 0 : shard_e * core;
  {
    View z = k.sbuf({128, 1}, DType::F32, "zeros_affinity_grad");
    nki::memset(z, 0.0);
    for (int64_t e = 0; e < shard_e; ++e)
      for (int64_t r = 0; r < T; r += 128) {
        const int64_t n = std::min<int64_t>(128, T - r), row = (e0 + e) * T + r;
        nki::dma_copy(s.t.dea(S(row, row + n)), z(S(0, n)));
      }
  }
  {
    View z = k.sbuf({128, 2, I}, DType::BF16, "zeros_gate_up_grad");
    nki::memset(z, 0.0);
    for (int64_t e = 0; e < E; ++e)
      for (int64_t h = 0; h < Hc; h += 128) {
        const int64_t n = std::min<int64_t>(128, Hc - h);
        nki::dma_copy(s.t.dw_gu(S(e, e + 1), S(h0 + h, h0 + h + n)).reshape({n, 2, I}), z(S(0, n)));
      }
  }
  {
    View z = k.sbuf({128, Hc}, DType::BF16, "zeros_down_grad");
    nki::memset(z, 0.0);
    for (int64_t e = 0; e < E; ++e)
      for (int64_t i = 0; i < I; i += 128) {
        const int64_t n = std::min<int64_t>(128, I - i);
        nki::dma_copy(s.t.dw_down(S(e, e + 1), S(i, i + n), S(h0, h0 + Hc)).reshape({n, Hc}), z(S(0, n)));
      }
  }
  {
    View z = k.sbuf({128, Hc}, DType::BF16, "zeros_hidden_grad");
    nki::memset(z, 0.0);
    for (int64_t r = 0; r < T; r += 128) {
      const int64_t n = std::min<int64_t>(128, T - r);
      nki::dma_copy(s.t.dx(S(r, r + n), S(h0, h0 + Hc)), z(S(0, n)));
    }
  }
  nki::core_barrier(s.t.dx);
  nki::core_barrier(s.t.dw_gu);
  nki::core_barrier(s.t.dw_down);
}

// _load_token_indices_dgt: block b's token ids [B] into [128, B/128] by one dma_transpose.
void load_tokens(State& s, int64_t b, const View& dst) {
  const int64_t B = s.f.B;
  nki::dma_transpose(dst, s.t.tokens(S(b * B, (b + 1) * B)).reshape({s.f.G, 128}));
}

// _set_expert_offset_on_td: the block's expert offset of a weight descriptor, in vector units of
// `stride_vs` elements (BF16: the DGT's vector offsets) or, pre-quantized, the DMAs' row offsets of data
// and scales (trnsim's scalar_offset counts rows of the tensor's dim 0, one expert: a stride of 1).
void expert_offset(State& s, Td& td, const char* name, int64_t stride_vs) {
  View col = s.expert_bcast(all, S(s.b, s.b + 1));
  if (!td.quantized()) {
    td.expert_vs = s.tiles.sbuf(fmt::format("{}_expert_offset", name), {128, 1}, DType::F32);
    nki::tensor_scalar(td.expert_vs, col, nki::AluOp::Multiply, static_cast<double>(stride_vs));
    return;
  }
  td.expert_rows = s.tiles.sbuf(fmt::format("{}_expert_offset", name), {1, 1}, DType::U32);
  nki::tensor_scalar(td.expert_rows, col(S(0, 1)), nki::AluOp::Multiply, 1.0);
  td.expert_scale_rows = s.tiles.sbuf(fmt::format("{}_expert_offset_scales", name), {1, 1}, DType::U32);
  nki::tensor_scalar(td.expert_scale_rows, col(S(0, 1)), nki::AluOp::Multiply, 1.0);
}

// _gather_block_tokens_transposed: src's rows of the block into dst [H, B], per 128 tokens and 128 columns.
void gather_transposed(State& s, const View& src, const View& dst, TransposeMode mode) {
  const int64_t H = s.f.H;
  for (int64_t bt = 0; bt < s.f.G; ++bt) {
    const View vec = s.idx()(all, S(bt, bt + 1));
    for (int64_t h = 0; h < H; h += 128) {
      View tile = s.tiles.sbuf("gather_tile", {128, 128}, DType::BF16);
      if (s.p.skip()) nki::memset(tile, 0.0);
      nki::dma_copy(tile, src(S(0, 1), S(h, h + 128)).index_rows(128),
                    {.vector_offset = vec, .oob_mode = s.oob()});
      View tile_t = s.tiles.sbuf("gather_tile_t", {128, 128}, DType::BF16);
      if (mode == TransposeMode::DMA) {
        nki::dma_transpose(tile_t, tile);
      } else {
        View ps = s.tiles.psum(128, 128, DType::BF16);
        nki::nc_transpose(ps, tile);
        nki::tensor_copy(tile_t, ps, Engine::ACT);
      }
      nki::dma_copy(dst(S(h, h + 128), S(bt * 128, (bt + 1) * 128)), tile_t);
    }
  }
}

// _gather_block_tokens: dY's rows of the block into [B, H], per 128 tokens and 512 columns.
void gather_rows(State& s, const View& src, const View& dst) {
  const int64_t H = s.f.H;
  for (int64_t bt = 0; bt < s.f.G; ++bt)
    for (int64_t h = 0; h < H; h += 512) {
      const int64_t w = std::min<int64_t>(512, H - h);
      View tile = s.tiles.sbuf("gather_rows_tile", {128, w}, DType::BF16);
      if (s.p.skip()) nki::memset(tile, 0.0);
      nki::dma_copy(tile, src(S(0, 1), S(h, h + w)).index_rows(128),
                    {.vector_offset = s.idx()(all, S(bt, bt + 1)), .oob_mode = s.oob()});
      nki::dma_copy(dst(S(bt * 128, (bt + 1) * 128), S(h, h + w)), tile);
    }
}

// _transpose_accumulate_weight_grad_tile: acc [m, n] bfloat16, per m x m piece: nc_transpose, ACT copy,
// load the gradient at the expert (hwdge), add, store. dst(c, w) is the gradient's [w, m] view of piece
// columns [c, c + w).
template <class Dst>
void transpose_accumulate(State& s, const View& acc, const Dst& dst) {
  const int64_t m = acc.partitions(), n = acc.free_elements();
  for (int64_t c = 0; c < n; c += m) {
    const int64_t w = std::min(m, n - c);
    View ps = s.tiles.psum(w, m, DType::BF16);
    nki::nc_transpose(ps, acc(all, S(c, c + w)));
    View piece = s.tiles.sbuf("weight_grad_piece", {w, m}, DType::BF16);
    nki::tensor_copy(piece, ps, Engine::ACT);
    const View d = dst(c, w);
    View existing = s.tiles.sbuf("weight_grad_existing", {w, m}, DType::BF16);
    nki::dma_copy(existing, d, {.dge_mode = nki::DgeMode::Hwdge, .scalar_offset = s.expert});
    nki::tensor_tensor(piece, piece, existing, nki::AluOp::Add);
    nki::dma_copy(d, piece,
                  {.dge_mode = nki::DgeMode::Hwdge, .scalar_offset = s.expert, .scalar_offset_dst = true});
  }
}

void phase2(State& s) {
  const BwdLibPhase& ph = s.f.p2;
  const mxfp8::lib::Geometry& g = ph.g;
  const int64_t Hc = s.f.Hc, h0 = s.core() * Hc, B = s.f.B;
  for (int64_t mb = 0; mb < ph.mblocks; ++mb)
    for (int64_t nb = 0; nb < ph.nblocks; ++nb) {
      View acc = s.tiles.sbuf("p2_acc", {g.tile_m, g.bm * g.block_n()}, DType::F32);
      for (int64_t kb = 0; kb < ph.kblocks; ++kb) {
        mxfp8::lib::Call c = api_call(s, ph, s.p2, kBwdName);
        c.mb = mb, c.nb = nb, c.kb = kb, c.rhs_n_offset = h0, c.out = acc, c.initialize = kb == 0;
        mxfp8::lib::generic_matmul(s.tiles, c);
      }
      const int64_t an = std::min(g.block_n(), Hc - nb * g.block_n()), col = h0 + nb * g.block_n();
      for (int64_t tm = 0; tm < std::min(g.bm, ph.mtiles - mb * g.bm); ++tm) {
        const int64_t bt = mb * g.bm + tm, am = std::min(g.tile_m, B - bt * g.tile_m);
        View res = s.tiles.sbuf("p2_result", {am, an}, DType::BF16);
        nki::tensor_copy(res, acc(S(0, am), S(tm * g.block_n(), tm * g.block_n() + an)));
        const View rows = s.t.dx(S(0, 1), S(col, col + an)).index_rows(am);
        const View vec = s.idx()(S(0, am), S(bt, bt + 1));
        if (s.p.accumulate_hidden_states_grad) {
          View ex = s.tiles.sbuf("p2_existing", {am, an}, DType::BF16);
          if (s.p.skip()) nki::memset(ex, 0.0);
          nki::dma_copy(ex, rows, {.vector_offset = vec, .oob_mode = s.oob()});
          nki::tensor_tensor(res, res, ex, nki::AluOp::Add);
        }
        nki::dma_copy(rows, res, {.vector_offset = vec, .indirect_dst = true, .oob_mode = s.oob()});
      }
    }
}

void phase3(State& s) {
  const BwdLibPhase& ph = s.f.p3;
  const mxfp8::lib::Geometry& g = ph.g;
  const int64_t Hc = s.f.Hc, h0 = s.core() * Hc, I = s.f.I;
  for (int64_t mb = 0; mb < ph.mblocks; ++mb)
    for (int64_t nb = 0; nb < ph.nblocks; ++nb) {
      View acc[2];
      for (int h = 0; h < 2; ++h)
        acc[h] =
            s.tiles.sbuf(h == 0 ? "p3_gate_acc" : "p3_up_acc", {g.tile_m, g.bm * g.block_n()}, DType::F32);
      for (int64_t kb = 0; kb < ph.kblocks; ++kb)
        for (int h = 0; h < 2; ++h) {  // gate rows [0, I), then up rows [I, 2I) of d_gate_up^T
          mxfp8::lib::Call c = api_call(s, ph, s.p3, kBwdName);
          if (h == 1 && c.lhsq) c.lhsq = &s.p3.lhsq2;
          c.mb = mb, c.nb = nb, c.kb = kb, c.lhs_m_offset = h * I, c.rhs_n_offset = h0;
          c.out = acc[h], c.initialize = kb == 0;
          mxfp8::lib::generic_matmul(s.tiles, c);
        }
      for (int64_t tm = 0; tm < std::min(g.bm, ph.mtiles - mb * g.bm); ++tm) {
        const int64_t i0 = (mb * g.bm + tm) * g.tile_m, am = std::min(g.tile_m, I - i0);
        for (int64_t tn = 0; tn < std::min(g.bn, ph.ntiles - nb * g.bn); ++tn) {
          const int64_t hn = nb * g.block_n() + tn * g.tile_n, an = std::min(g.tile_n, Hc - hn);
          const int64_t off = tm * g.block_n() + tn * g.tile_n;
          for (int h = 0; h < 2; ++h) {
            View t = s.tiles.sbuf("p3_acc_tile", {am, an}, DType::BF16);
            nki::tensor_copy(t, acc[h](S(0, am), S(off, off + an)));
            transpose_accumulate(s, t, [&](int64_t c, int64_t w) {
              return s.t.dw_gu(S(0, 1), S(h0 + hn + c, h0 + hn + c + w), S(h, h + 1), S(i0, i0 + am))
                  .reshape({w, am});
            });
          }
        }
      }
    }
}

// _transpose_block_to_hbm: Phase 1's scaled intermediate [B, I] into [I, B].
void transpose_scaled(State& s) {
  const int64_t I = s.f.I;
  const View src = slot_of(s.t.scaled, s.slot), dst = slot_of(s.t.scaled_t, s.slot);
  const bool dma = s.p.phase4_transpose_mode == TransposeMode::DMA;
  for (int64_t bt = 0; bt < s.f.G; ++bt) {
    View rows = s.tiles.sbuf("p4_row_tile", {128, I}, DType::BF16);
    nki::dma_copy(rows, src(S(bt * 128, (bt + 1) * 128), all));
    for (int64_t ft = 0; ft < I / 128; ++ft) {
      View t = s.tiles.sbuf("p4_tile_t", {128, 128}, DType::BF16);
      const View sub = rows(all, S(ft * 128, (ft + 1) * 128));
      if (dma) {
        nki::dma_transpose(t, sub);
      } else {
        View ps = s.tiles.psum(128, 128, DType::BF16);
        nki::nc_transpose(ps, sub);
        nki::tensor_copy(t, ps, ft % 2 == 0 ? Engine::ACT : Engine::DVE);
      }
      nki::dma_copy(dst(S(ft * 128, (ft + 1) * 128), S(bt * 128, (bt + 1) * 128)), t);
    }
  }
}

void phase4(State& s) {
  const BwdLibPhase& ph = s.f.p4;
  const mxfp8::lib::Geometry& g = ph.g;
  const int64_t Hc = s.f.Hc, h0 = s.core() * Hc, I = s.f.I;
  for (int64_t mb = 0; mb < ph.mblocks; ++mb)
    for (int64_t nb = 0; nb < ph.nblocks; ++nb) {
      View acc = s.tiles.sbuf("p4_acc", {g.tile_m, g.bm * g.block_n()}, DType::F32);
      for (int64_t kb = 0; kb < ph.kblocks; ++kb) {
        mxfp8::lib::Call c = api_call(s, ph, s.p4, kBwdName);
        c.mb = mb, c.nb = nb, c.kb = kb, c.lhs_m_offset = h0, c.out = acc, c.initialize = kb == 0;
        mxfp8::lib::generic_matmul(s.tiles, c);
      }
      for (int64_t tm = 0; tm < std::min(g.bm, ph.mtiles - mb * g.bm); ++tm) {
        const int64_t hm = mb * g.block_m() + tm * g.tile_m, am = std::min(g.tile_m, Hc - hm);
        for (int64_t tn = 0; tn < std::min(g.bn, ph.ntiles - nb * g.bn); ++tn) {
          const int64_t i0 = nb * g.block_n() + tn * g.tile_n, an = std::min(g.tile_n, I - i0);
          const int64_t off = tm * g.block_n() + tn * g.tile_n;
          View t = s.tiles.sbuf("p4_acc_tile", {am, an}, DType::BF16);
          nki::tensor_copy(t, acc(S(0, am), S(off, off + an)));
          transpose_accumulate(s, t, [&](int64_t c, int64_t w) {
            return s.t.dw_down(S(0, 1), S(i0 + c, i0 + c + w), S(h0 + hm, h0 + hm + am)).reshape({w, am});
          });
        }
      }
    }
}

// The phases' descriptors (their scratch views follow the block's slot) and spill buffers.
void describe_operands(State& s) {
  const BwdParams& p = s.p;
  const BwdLibPlan& f = s.f;
  const int64_t E = p.E, H = p.H, I = f.I;
  const auto bf16 = [&](mxfp8::Swizzle sw) {
    Td td;
    td.swizzle = sw, td.fast_dma_transpose = p.fast_dma_transpose;
    return td;
  };
  const auto weight = [&](const View& w, const View& sc, int64_t K, int64_t F, int ph, mxfp8::Swizzle sw) {
    Td td = bf16(sw);
    if (sc.valid()) {
      td.form = Td::Form::Quantized;
      td.data = w(S(0, 1)).reshape({K / 4, F});
      td.scales = sc(S(0, 1)).reshape({sc.size(1), F});
      td.packed = p.phase_scale_packing(ph);
    } else {
      td.data = w.reshape({E * F, K});
      td.effective_f = F;
    }
    return td;
  };
  s.p1.lhs = bf16(p.output_grad_swizzle);
  s.p1.rhs = weight(s.t.w_down, s.t.s_down, H, I, 1, p.down_weight_swizzle);
  s.p2.lhs = bf16(p.d_gate_up_swizzle);
  s.p2.rhs = weight(s.t.w_gu, s.t.s_gu, 2 * I, H, 2, p.gate_up_weight_swizzle);
  s.p3.lhs = bf16(p.d_gate_up_t_swizzle);
  s.p3.rhs = bf16(p.hidden_states_t_swizzle);
  s.p4.lhs = bf16(p.output_grad_t_swizzle);
  s.p4.rhs = bf16(p.scaled_intermediate_t_swizzle);
  const auto spills = [&](PhaseTds& tds, const BwdLibPhase& ph, const char* name) {
    const mxfp8::lib::Geometry& g = ph.g;
    if (ph.spill_lhs)
      tds.lhsq = mxfp8::lib::spill_buffer(s.k, fmt::format("{}_lhs_spill", name), ph.kblocks, ph.mblocks,
                                          g.block_m(), g, ph.packing, p.fp8);
    if (ph.spill_rhs)
      tds.rhsq = mxfp8::lib::spill_buffer(s.k, fmt::format("{}_rhs_spill", name), ph.kblocks, ph.nblocks,
                                          g.block_n(), g, ph.packing, p.fp8);
  };
  spills(s.p1, f.p1, "p1");
  spills(s.p2, f.p2, "p2");
  spills(s.p3, f.p3, "p3_gate");
  if (f.p3.spill_lhs)
    s.p3.lhsq2 = mxfp8::lib::spill_buffer(s.k, "p3_up_lhs_spill", f.p3.kblocks, f.p3.mblocks,
                                          f.p3.g.block_m(), f.p3.g, f.p3.packing, p.fp8);
  spills(s.p4, f.p4, "p4");
}

void bind_slot(State& s) {
  const int sl = s.slot;
  s.p1.lhs.data = slot_of(s.t.dy_block, sl);
  s.p2.lhs.data = slot_of(s.t.dgu, sl);
  s.p3.lhs.data = slot_of(s.t.dgu_t, sl);
  s.p3.rhs.data = slot_of(s.t.hidden_t, sl);
  s.p4.lhs.data = slot_of(s.t.dy_t, sl);
  s.p4.rhs.data = slot_of(s.t.scaled_t, sl);
}

}  // namespace
}  // namespace bwdlib

void emit_bwd_lib(Kernel& k, const BwdParams& p, const BwdLibPlan& f) {
  using namespace bwdlib;
  State s(k, p, f);
  s.t = declare(k, p, f);
  k.track_rows_together(s.t.dw_gu);
  k.track_rows_together(s.t.dw_down);
  const int64_t N = f.N, H = p.H, I = f.I;
  {
    PhaseScope ph(k, "setup");
    if (!p.skip_grad_initialization) zero_gradients(s);
    s.expert_ids = k.sbuf({1, N}, DType::I32, "expert_idx_bufs");
    nki::dma_copy(s.expert_ids, s.t.b2e.reshape({1, N}));
    View iota = k.sbuf({128, 1}, DType::I32, "iota_vec");
    nki::iota(iota, {0}, 0.0, 1.0);
    // stream_shuffle_broadcast (nc_stream_shuffle is no trnsim instruction): the ids broadcast on the PE.
    s.expert_bcast = k.sbuf({128, N}, DType::F32, "expert_idx_broadcast");
    {
      View row = k.sbuf({1, N}, DType::F32, "expert_idx_row");
      View ones = k.sbuf({1, 128}, DType::F32, "ones");
      nki::memset(ones, 1.0);
      nki::tensor_copy(row, s.expert_ids);
      broadcast_rows(k, s.expert_bcast, row, ones);
    }
    for (int i = 0; i < 2; ++i)
      s.tokens[i] = k.sbuf({128, f.G}, DType::I32, fmt::format("token_indices_{}", i));
    load_tokens(s, 0, s.tokens[0]);
  }
  describe_operands(s);
  for (int64_t b = 0; b < N; ++b) {
    s.b = b, s.slot = static_cast<int>(b % 2);
    s.expert = element(s.expert_ids, b);
    bind_slot(s);
    {
      PhaseScope ph(k, "gather");
      mxfp8::lib::Tiles::Scope ts(s.tiles);
      expert_offset(s, s.p1.rhs, "down", I * H / 128);
      if (b + 1 < N) load_tokens(s, b + 1, s.tokens[(b + 1) % 2]);
      gather_transposed(s, s.t.hidden, slot_of(s.t.hidden_t, s.slot), p.phase3_transpose_mode);
      gather_transposed(s, s.t.dy, slot_of(s.t.dy_t, s.slot), p.phase4_transpose_mode);
      gather_rows(s, s.t.dy, slot_of(s.t.dy_block, s.slot));
    }
    {
      PhaseScope ph(k, "P1");
      mxfp8::lib::Tiles::Scope ts(s.tiles);
      phase1(s);
    }
    {
      PhaseScope ph(k, "P2");
      mxfp8::lib::Tiles::Scope ts(s.tiles);
      expert_offset(s, s.p2.rhs, "gate_up", H * 2 * I / 128);
      phase2(s);
    }
    {
      PhaseScope ph(k, "P3");
      mxfp8::lib::Tiles::Scope ts(s.tiles);
      phase3(s);
    }
    {
      PhaseScope ph(k, "P4");
      mxfp8::lib::Tiles::Scope ts(s.tiles);
      transpose_scaled(s);
      nki::core_barrier(slot_of(s.t.scaled_t, s.slot));
      nki::core_barrier(slot_of(s.t.dy_t, s.slot));
      phase4(s);
    }
  }
}

}  // namespace trnsim::kernels::moe
