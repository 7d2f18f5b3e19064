// emit_fwd_lib: the library schedule of blockwise_mm_fwd_mxfp8 (fwd_lib.h).
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/lib/mxfp8/layout.h"
#include "kernels/moe/fwd_kernel.h"
#include "kernels/moe/fwd_lib.h"
#include "kernels/moe/moe_common.h"

namespace trnsim::kernels::moe {
namespace {

using isa::DType;
using mxfp8::lib::Td;
using nki::AluOp;

struct Fwd {
  Kernel& k;
  const FwdParams& p;
  const FwdLibPlan& f;
  mxfp8::lib::Tiles tiles;
  View hidden, ea, w_gu, w_down, tokens, b2e, out, ck_gu, ck_scaled, slab;
  std::vector<View> slabs;
  View hidden_block, scaled_block, out_block;  // private [2, rows, cols] scratches
  View expert_ids, expert_bcast, tok[2];
  Td hidden_td, gu_td, scaled_td, down_td;
  Td hiddenq, gate_wq, up_wq, intq, downq;
  int64_t b = 0;
  int ring = 0;

  Fwd(Kernel& kernel, const FwdParams& params, const FwdLibPlan& plan)
      : k(kernel), p(params), f(plan), tiles(kernel) {}
  nki::OobMode oob() const { return p.skip() ? nki::OobMode::Skip : nki::OobMode::Error; }
  const View& idx() const { return tok[ring]; }
};

View slot_of(const View& scratch, int slot) {
  return scratch(S(slot, slot + 1)).reshape({scratch.size(1), scratch.size(2)});
}

void declare(Fwd& w) {
  Kernel& k = w.k;
  const FwdParams& p = w.p;
  const FwdLibPlan& f = w.f;
  const int64_t E = p.E, H = p.H, I = f.I, B = f.B, N = f.N;
  w.hidden = k.input("hidden_states", DType::BF16, {f.rows, H});
  w.ea = k.input("expert_affinities_masked", DType::F32, {f.rows * E, 1});
  w.w_gu = k.input("gate_up_proj_weight", DType::BF16, {E, 2, I, H});
  w.w_down = k.input("down_proj_weight", DType::BF16, {E, H, I});
  w.tokens = k.input("token_position_to_id", DType::I32, {N * B});
  w.b2e = k.input("block_to_expert", DType::I32, {N, 1});
  w.out = k.output("output_hidden_states", DType::BF16, {f.rows, H});
  const CheckpointConfig& c = p.checkpoint_config;
  if (c.save_gate_up_proj_act)
    w.ck_gu = k.output("gate_up_proj_act_checkpoint_T", p.compute_dtype, {N, 2, I, B});
  if (c.save_scaled_intermediate)
    w.ck_scaled = k.output("scaled_intermediate_checkpoint_T", p.compute_dtype, {N, I, B});
  for (int s = 0; s < f.cores; ++s)
    w.slabs.push_back(k.scratch(fmt::format("output_slab_{}", s), DType::BF16, {f.rows, H}, false));
  w.slab = w.slabs[k.program_id()];
  // The library names a fresh shared_hbm tensor per block; two private slots per core rotate here.
  w.hidden_block = k.scratch("fwd_hidden_block", DType::BF16, {2, B, H}, true);
  w.scaled_block = k.scratch("fwd_scaled_intermediate", DType::BF16, {2, B, I}, true);
  w.out_block = k.scratch("fwd_out_block", DType::BF16, {2, B, H}, true);
}

void setup(Fwd& w) {
  Kernel& k = w.k;
  const FwdLibPlan& f = w.f;
  const int core = k.program_id();
  w.expert_ids = k.sbuf({1, f.N}, DType::I32, "expert_idx_bufs");
  nki::dma_copy(w.expert_ids, w.b2e.reshape({1, f.N}));
  // stream_shuffle_broadcast (nc_stream_shuffle is no trnsim instruction): the ids broadcast on the PE.
  w.expert_bcast = k.sbuf({128, f.N}, DType::F32, "fwd_expert_idx_broadcast");
  {
    View row = k.sbuf({1, f.N}, DType::F32, "expert_idx_row");
    View ones = k.sbuf({1, 128}, DType::F32, "ones");
    nki::memset(ones, 1.0);
    nki::tensor_copy(row, w.expert_ids);
    broadcast_rows(k, w.expert_bcast, row, ones);
  }
  for (int i = 0; i < 2; ++i) w.tok[i] = k.sbuf({128, f.G}, DType::I32, fmt::format("token_indices_{}", i));
  if (core < f.N) nki::dma_transpose(w.tok[0], w.tokens(S(core * f.B, (core + 1) * f.B)).reshape({f.G, 128}));
  // _zero_init_output of this core's slab.
  for (int64_t r = 0; r < f.rows; r += 128)
    for (int64_t h = 0; h < f.H; h += 512) {
      const int64_t n = std::min<int64_t>(128, f.rows - r), c = std::min<int64_t>(512, f.H - h);
      View z = w.tiles.sbuf("fwd_zero_tile", {n, c}, DType::BF16);
      nki::memset(z, 0.0);
      nki::dma_copy(w.slab(S(r, r + n), S(h, h + c)), z);
    }
  nki::core_barrier(w.slab);
}

// _store_tile_transposed_chunked: src [m, n] into ck's rows [i0, i0 + n), columns [s0, s0 + m) of `dst`
// ([rows, B]), per 128 columns of n: nc_transpose, ACT copy, store.
void store_transposed(Fwd& w, const View& src, const View& dst, int64_t i0, int64_t s0) {
  const int64_t m = src.partitions(), n = src.free_elements();
  for (int64_t c = 0; c < n; c += 128) {
    const int64_t cn = std::min<int64_t>(128, n - c);
    View ps = w.tiles.psum(cn, m, src.dtype());
    nki::nc_transpose(ps, src(all, S(c, c + cn)));
    View t = w.tiles.sbuf("fwd_ckpt_t", {cn, m}, src.dtype());
    nki::tensor_copy(t, ps, Engine::ACT);
    nki::dma_copy(dst(S(i0 + c, i0 + c + cn), S(s0, s0 + m)), t);
  }
}

void apply_clamp(const View& t, std::optional<double> upper, std::optional<double> lower) {
  if (upper && lower)
    nki::tensor_scalar(t, t, AluOp::Min, *upper, false, AluOp::Max, *lower);
  else if (upper)
    nki::tensor_scalar(t, t, AluOp::Min, *upper);
  else if (lower)
    nki::tensor_scalar(t, t, AluOp::Max, *lower);
}

mxfp8::lib::Call call_of(const Fwd& w, const FwdLibGemm& gm, const Td& lhs, const Td& rhs) {
  mxfp8::lib::Call c;
  c.kernel = kFwdName;
  c.lhs = &lhs, c.rhs = &rhs, c.g = gm.g;
  c.packing = w.p.use_scale_packing;
  c.fp8 = w.p.fp8;
  return c;
}

// The block's gather of its hidden rows, its affinities and the gate/up GEMMs with their epilogue.
void gate_up(Fwd& w, const View& ea_all) {
  const FwdLibPlan& f = w.f;
  const FwdLibGemm& gm = f.gu;
  const mxfp8::lib::Geometry& g = gm.g;
  const int64_t I = f.I, B = f.B;
  const ClampLimits& cl = w.p.clamp_limits;
  View expert = w.tiles.sbuf("fwd_gate_up_expert_offset", {128, 1}, DType::F32);
  nki::tensor_scalar(expert, w.expert_bcast(all, S(w.b, w.b + 1)), AluOp::Multiply,
                     static_cast<double>(2 * I * f.H / 128));
  w.gu_td.expert_vs = expert;
  const View scaled = slot_of(w.scaled_block, w.ring);
  for (int64_t mb = 0; mb < gm.mblocks; ++mb)
    for (int64_t nb = 0; nb < gm.nblocks; ++nb) {
      View acc[2];
      for (int h = 0; h < 2; ++h)
        acc[h] =
            w.tiles.sbuf(h == 0 ? "fwd_gate_acc" : "fwd_up_acc", {g.tile_m, g.bm * g.block_n()}, DType::F32);
      for (int64_t kb = 0; kb < gm.kblocks; ++kb) {
        mxfp8::lib::SharedLhs shared;  // the gate call quantizes the hidden tile, the up call reuses it
        for (int h = 0; h < 2; ++h) {
          mxfp8::lib::Call c = call_of(w, gm, w.hidden_td, w.gu_td);
          if (w.p.spill_reload) c.lhsq = &w.hiddenq, c.rhsq = h == 0 ? &w.gate_wq : &w.up_wq;
          c.mb = mb, c.nb = nb, c.kb = kb, c.rhs_n_offset = h * I, c.out = acc[h], c.initialize = kb == 0;
          c.lhs_sbuf = &shared;
          mxfp8::lib::generic_matmul(w.tiles, c);
        }
      }
      for (int64_t tm = 0; tm < std::min(g.bm, gm.mtiles - mb * g.bm); ++tm)
        for (int64_t tn = 0; tn < std::min(g.bn, gm.ntiles - nb * g.bn); ++tn) {
          const int64_t s0 = (mb * g.bm + tm) * g.tile_m, i0 = (nb * g.bn + tn) * g.tile_n;
          const int64_t am = std::min(g.tile_m, B - s0), an = std::min(g.tile_n, I - i0);
          const int64_t off = tm * g.block_n() + tn * g.tile_n;
          const std::vector<int64_t> shape{am, an};
          View gate = w.tiles.sbuf("fwd_gate_c", shape, DType::BF16),
               up = w.tiles.sbuf("fwd_up_c", shape, DType::BF16);
          nki::tensor_copy(gate, acc[0](S(0, am), S(off, off + an)));
          nki::tensor_copy(up, acc[1](S(0, am), S(off, off + an)));
          apply_clamp(gate, cl.non_linear_clamp_upper_limit, cl.non_linear_clamp_lower_limit);
          apply_clamp(up, cl.linear_clamp_upper_limit, cl.linear_clamp_lower_limit);
          if (w.ck_gu.valid())
            for (int h = 0; h < 2; ++h)
              store_transposed(w, h == 0 ? gate : up, w.ck_gu(S(w.b, w.b + 1), S(h, h + 1)).reshape({I, B}),
                               i0, s0);
          View silu = w.tiles.sbuf("fwd_silu", shape, DType::F32);
          nki::activation(silu, nki::ActFunc::Silu, gate);
          View inter = w.tiles.sbuf("fwd_inter", shape, DType::BF16);
          nki::tensor_tensor(inter, silu, up, AluOp::Multiply);
          View sc = w.tiles.sbuf("fwd_scaled", shape, DType::BF16);
          const int64_t bt = s0 / 128;
          nki::tensor_scalar(sc, inter, AluOp::Multiply, nki::Operand(ea_all(S(0, am), S(bt, bt + 1))));
          nki::dma_copy(scaled(S(s0, s0 + am), S(i0, i0 + an)), sc);
          if (w.ck_scaled.valid())
            store_transposed(w, sc, w.ck_scaled(S(w.b, w.b + 1)).reshape({I, B}), i0, s0);
        }
    }
}

void down(Fwd& w) {
  const FwdLibPlan& f = w.f;
  const FwdLibGemm& gm = f.down;
  const mxfp8::lib::Geometry& g = gm.g;
  const int64_t H = f.H, B = f.B;
  View expert = w.tiles.sbuf("fwd_down_expert_offset", {128, 1}, DType::F32);
  nki::tensor_scalar(expert, w.expert_bcast(all, S(w.b, w.b + 1)), AluOp::Multiply,
                     static_cast<double>(H * f.I / 128));
  w.down_td.expert_vs = expert;
  const View out_block = slot_of(w.out_block, w.ring);
  for (int64_t mb = 0; mb < gm.mblocks; ++mb)
    for (int64_t nb = 0; nb < gm.nblocks; ++nb) {
      View acc = w.tiles.sbuf("fwd_down_acc", {g.tile_m, g.bm * g.block_n()}, DType::F32);
      for (int64_t kb = 0; kb < gm.kblocks; ++kb) {
        mxfp8::lib::Call c = call_of(w, gm, w.scaled_td, w.down_td);
        if (w.p.spill_reload) c.lhsq = &w.intq, c.rhsq = &w.downq;
        c.mb = mb, c.nb = nb, c.kb = kb, c.out = acc, c.initialize = kb == 0;
        mxfp8::lib::generic_matmul(w.tiles, c);
      }
      const int64_t n0 = nb * g.block_n(), an = std::min(g.block_n(), H - n0);
      for (int64_t tm = 0; tm < std::min(g.bm, gm.mtiles - mb * g.bm); ++tm) {
        const int64_t m0 = (mb * g.bm + tm) * g.tile_m, am = std::min(g.tile_m, B - m0);
        View res = w.tiles.sbuf("fwd_down_res", {am, an}, DType::BF16);
        nki::tensor_copy(res, acc(S(0, am), S(tm * g.block_n(), tm * g.block_n() + an)));
        nki::dma_copy(out_block(S(m0, m0 + am), S(n0, n0 + an)), res);
      }
    }
}

// _scatter_output_block: the block's [B, H] result into this core's slab, per 128 tokens and 512 columns.
void scatter(Fwd& w) {
  const View out_block = slot_of(w.out_block, w.ring);
  for (int64_t bt = 0; bt < w.f.G; ++bt) {
    const View vec = w.idx()(all, S(bt, bt + 1));
    for (int64_t h = 0; h < w.f.H; h += 512) {
      const int64_t c = std::min<int64_t>(512, w.f.H - h);
      View res = w.tiles.sbuf("fwd_result_tile", {128, c}, DType::BF16);
      nki::dma_copy(res, out_block(S(bt * 128, (bt + 1) * 128), S(h, h + c)));
      const View rows = w.slab(S(0, 1), S(h, h + c)).index_rows(128);
      if (w.p.is_tensor_update_accumulating) {
        View ex = w.tiles.sbuf("fwd_existing_tile", {128, c}, DType::BF16);
        if (w.p.skip()) nki::memset(ex, 0.0);
        nki::dma_copy(ex, rows, {.vector_offset = vec, .oob_mode = w.oob()});
        nki::tensor_tensor(res, res, ex, AluOp::Add);
      }
      nki::dma_copy(rows, res, {.vector_offset = vec, .indirect_dst = true, .oob_mode = w.oob()});
    }
  }
}

// _reduce_output_shards: the slabs summed over this core's 128-row tiles.
void reduce(Fwd& w) {
  for (const View& s : w.slabs) nki::core_barrier(s);
  const int core = w.k.program_id();
  for (int64_t t = 0, r = 0; r < w.f.rows; ++t, r += 128) {
    if (w.f.cores > 1 && t % w.f.cores != core) continue;
    const int64_t n = std::min<int64_t>(128, w.f.rows - r);
    for (int64_t h = 0; h < w.f.H; h += 512) {
      const int64_t c = std::min<int64_t>(512, w.f.H - h);
      View acc = w.tiles.sbuf("fwd_reduce_acc", {n, c}, DType::BF16);
      nki::dma_copy(acc, w.slabs[0](S(r, r + n), S(h, h + c)));
      for (size_t s = 1; s < w.slabs.size(); ++s) {
        View other = w.tiles.sbuf("fwd_reduce_other", {n, c}, DType::BF16);
        nki::dma_copy(other, w.slabs[s](S(r, r + n), S(h, h + c)));
        nki::tensor_tensor(acc, acc, other, AluOp::Add);
      }
      nki::dma_copy(w.out(S(r, r + n), S(h, h + c)), acc);
    }
  }
}

}  // namespace

void emit_fwd_lib(Kernel& k, const FwdParams& p, const FwdLibPlan& f) {
  Fwd w(k, p, f);
  declare(w);
  const int core = k.program_id();
  const int64_t E = p.E, I = f.I, H = f.H, B = f.B, G = f.G;
  {
    PhaseScope ph(k, "setup");
    setup(w);
  }
  const auto bf16 = [](const View& data, int64_t eff = 0) {
    Td td;
    td.data = data, td.effective_f = eff;
    return td;
  };
  w.gu_td = bf16(w.w_gu.reshape({E * 2 * I, H}), 2 * I);
  w.down_td = bf16(w.w_down.reshape({E * H, I}), H);
  if (p.spill_reload) {
    const auto spill = [&](const char* name, const FwdLibGemm& gm, int64_t fblocks, int64_t block_f) {
      return mxfp8::lib::spill_buffer(k, name, gm.kblocks, fblocks, block_f, gm.g, p.use_scale_packing,
                                      p.fp8);
    };
    w.hiddenq = spill("fwd_hidden_spill", f.gu, f.gu.mblocks, f.gu.g.block_m());
    w.gate_wq = spill("fwd_gate_w_spill", f.gu, f.gu.nblocks, f.gu.g.block_n());
    w.up_wq = spill("fwd_up_w_spill", f.gu, f.gu.nblocks, f.gu.g.block_n());
    w.intq = spill("fwd_inter_spill", f.down, f.down.mblocks, f.down.g.block_m());
    w.downq = spill("fwd_down_w_spill", f.down, f.down.nblocks, f.down.g.block_n());
  }
  for (int64_t b = core; b < f.N; b += f.cores) {
    w.b = b;
    {
      PhaseScope ph(k, "gather");
      mxfp8::lib::Tiles::Scope ts(w.tiles);
      if (b + f.cores < f.N)
        nki::dma_transpose(w.tok[1 - w.ring],
                           w.tokens(S((b + f.cores) * B, (b + f.cores + 1) * B)).reshape({G, 128}));
      const View hb = slot_of(w.hidden_block, w.ring);
      for (int64_t bt = 0; bt < G; ++bt)
        for (int64_t h = 0; h < H; h += 512) {
          const int64_t c = std::min<int64_t>(512, H - h);
          View tile = w.tiles.sbuf("fwd_gather_tile", {128, c}, DType::BF16);
          if (p.skip()) nki::memset(tile, 0.0);
          nki::dma_copy(tile, w.hidden(S(0, 1), S(h, h + c)).index_rows(128),
                        {.vector_offset = w.idx()(all, S(bt, bt + 1)), .oob_mode = w.oob()});
          nki::dma_copy(hb(S(bt * 128, (bt + 1) * 128), S(h, h + c)), tile);
        }
      w.hidden_td = bf16(hb);
      w.scaled_td = bf16(slot_of(w.scaled_block, w.ring));
    }
    View ea_all;
    {
      PhaseScope ph(k, "affinities");
      ea_all = w.tiles.sbuf("fwd_ea", {128, G}, DType::F32);
      for (int64_t bt = 0; bt < G; ++bt) {
        View off = w.tiles.sbuf(fmt::format("fwd_ea_off_{}", bt), {128, 1}, DType::I32);
        View addr = w.tiles.sbuf(fmt::format("fwd_ea_addr_{}", bt), {128, 1}, DType::I32);
        nki::tensor_scalar(addr, w.idx()(all, S(bt, bt + 1)), AluOp::Multiply, static_cast<double>(E));
        nki::tensor_tensor(off, addr, w.expert_bcast(all, S(b, b + 1)), AluOp::Add);
        if (p.skip()) nki::tensor_scalar(off, off, AluOp::Max, -1.0);
        View ea = w.tiles.sbuf(fmt::format("fwd_ea_load_{}", bt), {128, 1}, DType::F32);
        if (p.skip()) nki::memset(ea, 0.0);
        nki::dma_copy(ea, w.ea(S(0, 1), all).index_rows(128), {.vector_offset = off, .oob_mode = w.oob()});
        nki::tensor_copy(ea_all(all, S(bt, bt + 1)), ea);
      }
    }
    {
      PhaseScope ph(k, "gate_up");
      mxfp8::lib::Tiles::Scope ts(w.tiles);
      gate_up(w, ea_all);
    }
    {
      PhaseScope ph(k, "down");
      mxfp8::lib::Tiles::Scope ts(w.tiles);
      down(w);
    }
    {
      PhaseScope ph(k, "scatter");
      mxfp8::lib::Tiles::Scope ts(w.tiles);
      scatter(w);
    }
    w.ring = 1 - w.ring;
  }
  PhaseScope ph(k, "reduce");
  reduce(w);
}

}  // namespace trnsim::kernels::moe
