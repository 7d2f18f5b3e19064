// Phase 1 of the library schedule (bwd_lib.h; nki-library _compute_phase1_down_proj_output_grad_mxfp8 in
// routed mode): the affinities, d_int = dY_b W_down[e]^T by generic_matmul_mxfp8_api calls, the SwiGLU
// backward in bfloat16 per (128 tokens x tile_n) tile, and the affinity gradient across the cores.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/moe/bwd_lib_state.h"

namespace trnsim::kernels::moe::bwdlib {
namespace {

using isa::DType;
using nki::AluOp;

View slot_view(const View& scratch, int slot) {
  return scratch(S(slot, slot + 1)).reshape({scratch.size(1), scratch.size(2)});
}

// apply_gradient_clamp: grad *= (act < upper) && (act > lower), in bfloat16 masks.
void clamp(State& s, const View& grad, const View& act, std::optional<double> upper,
           std::optional<double> lower) {
  if (!upper && !lower) return;
  const std::vector<int64_t> shape{grad.partitions(), grad.free_elements()};
  View m1 = s.tiles.sbuf("p1_clamp_mask1", shape, DType::BF16);
  View m2 = s.tiles.sbuf("p1_clamp_mask2", shape, DType::BF16);
  nki::memset(m1, 1.0);
  nki::memset(m2, 1.0);
  if (upper) nki::tensor_scalar(m1, act, AluOp::IsLt, *upper);
  if (lower) nki::tensor_scalar(m2, act, AluOp::IsGt, *lower);
  nki::tensor_tensor(m1, m1, m2, AluOp::LogicalAnd);
  nki::tensor_tensor(grad, grad, m1, AluOp::Multiply);
}

// _transpose_tile_to_scratch: src [m, n] into d_gate_up^T rows [row0, row0 + n), columns [s0, s0 + m).
void transpose_to_scratch(State& s, const View& src, int64_t row0, int64_t s0) {
  const int64_t m = src.partitions(), n = src.free_elements();
  const View dst = slot_view(s.t.dgu_t, s.slot);
  for (int64_t c = 0; c < n; c += m) {
    const int64_t w = std::min(m, n - c);
    View ps = s.tiles.psum(w, m, DType::BF16);
    nki::nc_transpose(ps, src(all, S(c, c + w)));
    View t = s.tiles.sbuf("p1_tile_t", {w, m}, DType::BF16);
    nki::tensor_copy(t, ps, Engine::ACT);
    nki::dma_copy(dst(S(row0 + c, row0 + c + w), S(s0, s0 + m)), t);
  }
}

}  // namespace

void phase1(State& s) {
  const BwdLibPlan& f = s.f;
  const BwdLibPhase& ph = f.p1;
  const mxfp8::lib::Geometry& g = ph.g;
  const int64_t G = f.G, B = f.B, I = f.I, Ic = f.Ic, E = f.E, b = s.b;
  const int core = s.core();
  const ClampLimits& cl = s.p.clamp_limits;
  // The affinities of the block's 128-token tiles and their dEA accumulators (one tile each: the library
  // allocates them in an unrolled loop).
  View ea_all = s.tiles.sbuf("p1_ea_tiles_all", {128, G}, DType::F32);
  std::vector<View> offs(G), dea(G), dea_bf16(G);
  for (int64_t bt = 0; bt < G; ++bt) {
    View ea = s.tiles.sbuf(fmt::format("p1_ea_load_{}", bt), {128, 1}, DType::F32);
    offs[bt] = s.tiles.sbuf(fmt::format("p1_ea_off_{}", bt), {128, 1}, DType::I32);
    View addr = s.tiles.sbuf(fmt::format("p1_ea_addr_{}", bt), {128, 1}, DType::I32);
    // _generate_dynamic_offsets: token id x E + expert (kept >= -1 under skip_token).
    nki::tensor_scalar(addr, s.idx()(all, S(bt, bt + 1)), AluOp::Multiply, static_cast<double>(E));
    nki::tensor_tensor(offs[bt], addr, s.expert_bcast(all, S(b, b + 1)), AluOp::Add);
    if (s.p.skip()) nki::tensor_scalar(offs[bt], offs[bt], AluOp::Max, -1.0);
    if (s.p.skip()) nki::memset(ea, 0.0);
    nki::dma_copy(ea, s.t.ea(S(0, 1), all).index_rows(128), {.vector_offset = offs[bt], .oob_mode = s.oob()});
    nki::tensor_copy(ea_all(all, S(bt, bt + 1)), ea);
    dea[bt] = s.tiles.sbuf(fmt::format("p1_ea_grad_acc_{}", bt), {128, 1}, DType::F32);
    nki::memset(dea[bt], 0.0);
    dea_bf16[bt] = s.tiles.sbuf(fmt::format("p1_ea_grad_reduced_{}", bt), {128, 1}, DType::BF16);
  }
  const View ck = s.t.ck_gu;
  const View dgu = slot_view(s.t.dgu, s.slot), scaled = slot_view(s.t.scaled, s.slot);
  for (int64_t mb = 0; mb < ph.mblocks; ++mb)
    for (int64_t nb = 0; nb < ph.nblocks; ++nb) {
      View acc = s.tiles.sbuf("p1_acc", {g.tile_m, g.bm * g.block_n()}, DType::F32);
      for (int64_t kb = 0; kb < ph.kblocks; ++kb) {
        mxfp8::lib::Call c = api_call(s, ph, s.p1, kBwdName);
        c.mb = mb, c.nb = nb, c.kb = kb, c.rhs_n_offset = core * Ic, c.out = acc, c.initialize = kb == 0;
        mxfp8::lib::generic_matmul(s.tiles, c);
      }
      // SwiGLU backward per tile, in bfloat16.
      for (int64_t tm = 0; tm < std::min(g.bm, ph.mtiles - mb * g.bm); ++tm) {
        const int64_t mi = mb * g.bm + tm, s0 = mi * g.tile_m, am = std::min(g.tile_m, B - s0);
        for (int64_t tn = 0; tn < std::min(g.bn, ph.ntiles - nb * g.bn); ++tn) {
          const int64_t ni = nb * g.bn + tn, an = std::min(g.tile_n, Ic - ni * g.tile_n);
          const int64_t i0 = core * Ic + ni * g.tile_n;
          const std::vector<int64_t> shape{am, an};
          const auto tile = [&](const char* name, DType dt = DType::BF16) {
            return s.tiles.sbuf(name, shape, dt);
          };
          View gate = tile("p1_gate_pre"), up = tile("p1_up");
          for (int h = 0; h < 2; ++h)
            nki::dma_transpose(
                h == 0 ? gate : up,
                ck(S(b, b + 1), S(h, h + 1), S(i0, i0 + an), S(s0, s0 + am)).reshape({an, am}));
          View sdx = tile("p1_silu_dx"), act = tile("p1_gate_act"), dact = tile("p1_d_gate_act");
          nki::activation(sdx, nki::ActFunc::SiluDx, gate);
          nki::activation(act, nki::ActFunc::Silu, gate);
          nki::tensor_tensor(dact, sdx, up, AluOp::Multiply);
          const int64_t off = tm * g.block_n() + tn * g.tile_n;
          View d = acc(S(0, am), S(off, off + an));
          View inter = tile("p1_intermediate");
          nki::tensor_tensor(inter, act, up, AluOp::Multiply);
          // AFFINITY_ON_I: dEA from the unscaled d_int, then inter x a and d_int x a.
          const View a = ea_all(S(0, am), S(mi, mi + 1));
          View prod = tile("p1_ea_product", DType::F32);
          nki::tensor_tensor(prod, d, inter, AluOp::Multiply);
          View red = s.tiles.sbuf("p1_ea_reduce", {am, 1}, DType::F32);
          nki::tensor_reduce(red, AluOp::Add, prod, {1});
          nki::tensor_tensor(dea[mi](S(0, am)), dea[mi](S(0, am)), red, AluOp::Add);
          View sc = tile("p1_scaled");
          nki::tensor_scalar(sc, inter, AluOp::Multiply, nki::Operand(a));
          nki::tensor_scalar(d, d, AluOp::Multiply, nki::Operand(a));
          View dg = tile("p1_d_gate");
          nki::tensor_tensor(dg, d, dact, AluOp::Multiply);
          clamp(s, dg, gate, cl.non_linear_clamp_upper_limit, cl.non_linear_clamp_lower_limit);
          View du = tile("p1_d_up");
          nki::tensor_tensor(du, d, act, AluOp::Multiply);
          clamp(s, du, up, cl.linear_clamp_upper_limit, cl.linear_clamp_lower_limit);
          const View dgu3 = dgu.reshape({B, 2, I});
          nki::dma_copy(dgu3(S(s0, s0 + am), S(0, 1), S(i0, i0 + an)).reshape({am, an}), dg);
          nki::dma_copy(dgu3(S(s0, s0 + am), S(1, 2), S(i0, i0 + an)).reshape({am, an}), du);
          nki::dma_copy(scaled(S(s0, s0 + am), S(i0, i0 + an)), sc);
          transpose_to_scratch(s, dg, i0, s0);
          transpose_to_scratch(s, du, I + i0, s0);
        }
      }
    }
  // The cores' dEA partials (each over its half of I): swapped and added; each core scatters its tiles.
  for (int64_t bt = 0; bt < G; ++bt) {
    View recv = s.tiles.sbuf(fmt::format("p1_ea_recv_{}", bt), {128, 1}, DType::F32);
    nki::sendrecv(dea[bt], recv);
    nki::tensor_tensor(dea[bt], dea[bt], recv, AluOp::Add);
  }
  const int64_t per = G >= f.cores ? G / f.cores : G, first = G >= f.cores ? per * core : 0;
  for (int64_t i = 0; i < per; ++i) {
    const int64_t bt = first + i;
    nki::tensor_copy(dea_bf16[bt], dea[bt], Engine::ACT);
    nki::dma_copy(s.t.dea(S(0, 1), all).index_rows(128), dea_bf16[bt],
                  {.vector_offset = offs[bt], .indirect_dst = true, .oob_mode = s.oob()});
  }
  nki::core_barrier(dgu);
  nki::core_barrier(scaled);
  nki::core_barrier(slot_view(s.t.dgu_t, s.slot));
}

}  // namespace trnsim::kernels::moe::bwdlib
