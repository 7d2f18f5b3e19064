// plan_bwd_lib: the library schedule's checks and its per-phase configs (bwd_lib.h).
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "kernels/lib/mxfp8/layout.h"
#include "kernels/moe/bwd_lib.h"
#include "kernels/moe/moe_common.h"

namespace trnsim::kernels::moe {
namespace {

using mxfp8::cdiv;

// A parameter the library's stream does not have: refused with the schedule that runs it.
void beyond(bool set, const std::string& what) {
  if (set)
    bwd_fail(fmt::format(
        "{}: not in nki-library's blockwise_mm_bwd_mxfp8, whose instruction stream the default schedule "
        "nki_library runs; set \"schedule\": \"trnsim_optimized\" to run it",
        what));
}

// One phase: tiles from its config, else get_tile_sizes(K, M, N) (128 / 512 / 512 capped at the dims; H =
// 384 keeps 512s), one tile per block and load (nkilib _resolve_phase_configs); K must be whole tiles.
BwdLibPhase phase(const BwdParams& p, int ph, int64_t M, int64_t K, int64_t N, bool clamp_k) {
  const auto& c = p.phase_config(ph);
  const MxTilingConfig t = c ? c->tiling : MxTilingConfig{};
  BwdLibPhase f;
  mxfp8::lib::Geometry& g = f.g;
  const bool h384 = p.H == 384;
  g.tile_m = t.tile_m.value_or(h384 ? 128 : std::min<int64_t>(128, M));
  g.tile_k = t.tile_k.value_or(h384 ? 512 : std::min<int64_t>(512, K));
  g.tile_n = t.tile_n.value_or(h384 ? 512 : std::min<int64_t>(512, N));
  g.bm = t.blocks_m.value_or(1), g.bn = t.blocks_n.value_or(1), g.bk = t.blocks_k.value_or(1);
  g.load_m = t.load_m.value_or(1), g.load_n = t.load_n.value_or(1);
  const std::string name = fmt::format("phase{}_config", ph);
  if (g.tile_k != 128 && g.tile_k != 256 && g.tile_k != 512)
    bwd_fail(
        fmt::format("parameter '{}.tile_k' = {}: must be 128, 256 or 512 (nki-library)", name, g.tile_k));
  if (g.tile_m > 128 || g.tile_m % 32 != 0 || g.tile_n % 32 != 0 || g.tile_n > 8192)
    bwd_fail(
        fmt::format("parameter '{}': tile_m {} (a multiple of 32, at most 128) or tile_n {} (a multiple "
                    "of 32, at most 8192) out of range",
                    name, g.tile_m, g.tile_n));
  for (auto [load, block, lname] :
       {std::tuple{g.load_m, g.bm, "TILES_IN_LOAD_M"}, std::tuple{g.load_n, g.bn, "TILES_IN_LOAD_N"}})
    if (load > block || block % load != 0)
      bwd_fail(
          fmt::format("parameter '{}.{}' = {}: must divide the block's {} tiles", name, lname, load, block));
  f.mtiles = cdiv(M, g.tile_m), f.ntiles = cdiv(N, g.tile_n);
  const int64_t ktiles = cdiv(K, g.tile_k);
  if (clamp_k) g.bk = std::min(g.bk, ktiles);
  f.mblocks = cdiv(f.mtiles, g.bm), f.nblocks = cdiv(f.ntiles, g.bn), f.kblocks = cdiv(ktiles, g.bk);
  f.spill = p.phase_spill_reload(ph);
  f.packing = p.phase_scale_packing(ph);
  return f;
}

}  // namespace

BwdLibPlan plan_bwd_lib(const BwdParams& p, const isa::Limits& limits) {
  check_bwd(p, limits);
  beyond(p.on_h(), "parameter 'affinity_option' = AFFINITY_ON_H (its entry asserts AFFINITY_ON_I)");
  beyond(!p.gate_up_given(),
         "parameter 'checkpoint_config.save_gate_up_proj_act' = false (its entry requires "
         "gate_up_proj_act_checkpoint_T; recomputing gate/up is a TODO there)");
  beyond(p.gate_act_given() || p.inter_given(),
         "the gate_act / intermediate checkpoints (its entry asserts them absent)");
  beyond(p.bias,
         "parameter 'bias' (the bias-gradient helpers of the version read, e9ef98fc, are not in the "
         "sources this port follows)");
  beyond(p.single_expert_dense || p.num_valid_tokens, "single_expert_dense / num_valid_tokens");
  beyond(p.quant_scheme() != num::QuantScheme::WrapX,
         "quant_scheme 1x32 (its _resolve_phase_configs asserts QuantScheme.WRAPX)");
  beyond(p.pe_transpose_only, "parameter 'pe_transpose_only' (a later version's)");
  beyond(!p.run_with_lnc2, "parameter 'run_with_lnc2' = false (its entry asserts LNC2)");
  BwdLibPlan f;
  f.T = p.T, f.rows = p.rows(), f.H = p.H, f.I = p.I_TP, f.E = p.E, f.B = p.block_size, f.N = p.N();
  f.G = f.B / 128;
  f.cores = p.cores();
  f.Hc = p.H / f.cores, f.Ic = p.I_TP / f.cores;
  const bool gu_q = p.gate_up_weight_scales.has_value(), down_q = p.down_weight_scales.has_value();
  // Phase shapes (nkilib _resolve_phase_configs): (B, H, I/2), (B, 2I, H/2), (I, B, H/2), (H/2, B, I).
  f.p1 = phase(p, 1, f.B, p.H, f.Ic, false);
  f.p1.spill_lhs = f.p1.spill && f.p1.nblocks > 1;
  f.p1.spill_rhs = f.p1.spill && !down_q && f.p1.mblocks > 1;
  f.p2 = phase(p, 2, f.B, 2 * p.I_TP, f.Hc, false);
  f.p2.spill_lhs = f.p2.spill && f.p2.nblocks > 1;
  f.p2.spill_rhs = f.p2.spill && !gu_q && f.p2.mblocks > 1;
  f.p3 = phase(p, 3, p.I_TP, f.B, f.Hc, true);
  f.p3.spill_lhs = f.p3.spill && f.p3.nblocks > 1;
  f.p3.spill_rhs = f.p3.spill && f.p3.mblocks > 1;
  f.p4 = phase(p, 4, f.Hc, f.B, p.I_TP, true);
  f.p4.spill_lhs = f.p4.spill_rhs = f.p4.spill;
  const auto pre_packing = [&](bool given, int ph, const char* tensor) {
    if (given && p.phase_scale_packing(ph) && p.phase_config(ph) && p.phase_config(ph)->tiling.tile_k &&
        *p.phase_config(ph)->tiling.tile_k != 512)
      bwd_fail(
          fmt::format("{} with packed scales needs phase{}_config.tile_k = 512 (nki-library)", tensor, ph));
  };
  pre_packing(down_q, 1, "down_weight_scales");
  pre_packing(gu_q, 2, "gate_up_weight_scales");
  // BF16 weights loaded by DGT with vector offsets (fast_dma_transpose and the PE loader have none).
  const auto dgt = [&](bool quantized, mxfp8::Swizzle sw) {
    return !quantized && sw == mxfp8::Swizzle::Dgt && !p.fast_dma_transpose;
  };
  if (dgt(down_q, p.down_weight_swizzle))
    if (auto err =
            dgt_expert_offset_error("down_proj_weight", "E * I_TP * H", p.E, p.I_TP, p.H, f.p1.g.tile_k))
      bwd_fail(*err);
  if (dgt(gu_q, p.gate_up_weight_swizzle))
    if (auto err = dgt_expert_offset_error("gate_up_proj_weight", "E * H * (2 * I_TP)", p.E, p.H, 2 * p.I_TP,
                                           f.p2.g.tile_k))
      bwd_fail(*err);
  return f;
}

}  // namespace trnsim::kernels::moe
