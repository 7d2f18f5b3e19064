// Validation and planning of blockwise_mm_bwd_mxfp8's trnsim_optimized schedule (bwd_kernel.h): the
// per-core shares, the SBUF budget and the five phases' matmul specs and plans.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>

#include "kernels/lib/mxfp8/layout.h"
#include "kernels/moe/bwd_emit_state.h"
#include "kernels/moe/bwd_kernel.h"
#include "kernels/moe/moe_common.h"
#include "sim/base/error.h"

namespace trnsim::kernels::moe {
namespace {

using isa::DType;
using mxfp8::cdiv;

[[noreturn]] void fail(const std::string& msg) {
  throw InputError(fmt::format("{}: {}", kBwdName, msg));
}

// d_gate_up^T stays in SBUF for Phase 2 up to this many bytes per partition.
constexpr int64_t kResidentBudget = 48 * 1024;
// Columns per weight-gradient read-modify-write step (the widest output tile of Phases 3 and 4, up to this).
constexpr int64_t kWeightChunk = 4096;

mxfp8::Tiling phase_tiling(const std::optional<BwdPhaseConfig>& c) {
  return c ? c->tiling.tiling() : MxTilingConfig{}.tiling();
}

// An HBM operand (BF16, the layout given), bound per block.
mxfp8::Operand hbm_operand(mxfp8::Layout layout, const char* name, const char* f_name) {
  mxfp8::Operand o;
  o.source = mxfp8::Source::Hbm;
  o.layout = layout;
  o.name = o.param = name;
  o.f_name = f_name;
  return o;
}

// Rows of an HBM tensor gathered by the block's token indices, K-by-F (the contraction on the rows).
mxfp8::Operand gathered_rows(const char* name, const char* f_name) {
  mxfp8::Operand o;
  o.source = mxfp8::Source::Gather;
  o.layout = mxfp8::Layout::KByF;
  o.name = o.param = name;
  o.f_name = f_name;
  return o;
}

// The parameter that decides phase n's scale packing: its own enable_scale_packing, else the top-level one.
std::string packing_key(const BwdParams& p, int phase) {
  const auto& c = p.phase_config(phase);
  return c && c->enable_scale_packing ? fmt::format("phase{}_config.enable_scale_packing", phase)
                                      : std::string("use_scale_packing");
}

}  // namespace

BwdPlan plan_bwd(const BwdParams& p, const isa::Limits& limits, std::optional<int64_t> num_valid_tokens) {
  BwdPlan f;
  check_bwd(p, limits);
  const int64_t B = p.block_size;
  const int cores = p.cores();
  f.T = p.T, f.rows = p.rows(), f.H = p.H, f.I = p.I_TP, f.E = p.E, f.B = B, f.N = p.N();
  f.run_blocks = f.N;
  if (p.num_valid_tokens && num_valid_tokens)
    f.run_blocks = std::min(f.N, cdiv(std::clamp<int64_t>(*num_valid_tokens, 0, p.T), B));
  f.cores = cores;
  f.Hc = p.H / cores, f.Ic = p.I_TP / cores;
  f.recompute = !p.gate_up_given();
  f.dense = p.single_expert_dense;
  f.scheme = p.quant_scheme();
  const bool x32 = f.scheme == num::QuantScheme::OneX32;
  // The resident d_gate_up^T: [128, groups, B], 1x32 in its interleave order (4 groups per 512 rows).
  f.dgu_groups = x32 ? 4 * cdiv(2 * f.I, 512) : 2 * f.I / 128;
  const int64_t dgu_bytes = tile_bytes(f.dgu_groups * B, DType::BF16);
  f.dgu_resident = dgu_bytes <= kResidentBudget;
  if (!f.dgu_resident && B % 512 != 0)
    fail(fmt::format(
        "d_gate_up [2*I_TP, block_size] = [{}, {}] does not fit in SBUF ({} bytes per partition, at most "
        "{}), and read from HBM as Phase 2's K-by-F operand it needs block_size % 512 == 0",
        2 * f.I, B, dgu_bytes, kResidentBudget));
  f.chunk = std::min<int64_t>(B, 512);

  // SBUF the kernel holds besides the pipeline's blocks (emit_bwd allocates exactly these).
  const int64_t G = B / 128, C = f.chunk;
  int64_t r = 0;
  r += tile_bytes(f.N, DType::I32) + tile_bytes(f.N, DType::F32);  // block_to_expert, broadcast
  r += 2 * tile_bytes(G, DType::I32);                              // token indices
  if (x32) r += 2 * tile_bytes(4 * cdiv(B, 512), DType::I32);      // in 1x32 order
  if (x32 && p.num_valid_tokens) r += tile_bytes(4 * cdiv(B, 512), DType::F32);
  r += 2 * tile_bytes(f.N * G, DType::I32);                          // affinity offsets (+ spare)
  r += 2 * tile_bytes(f.N * G, DType::F32);                          // dEA of every tile, the peer's
  r += 2 * (tile_bytes(G, DType::F32) + tile_bytes(B, DType::F32));  // affinities, broadcast
  r += tile_bytes(B, DType::F32);                                    // dEA partial
  r += tile_bytes(128, DType::F32) + tile_bytes(512, DType::F32) + tile_bytes(1, DType::F32);
  r += tile_bytes(128, DType::BF16) + tile_bytes(2048, DType::BF16);  // zeros
  if (f.dgu_resident) r += dgu_bytes;
  const int64_t set =
      2 * tile_bytes(C, DType::BF16) + 6 * tile_bytes(C, DType::F32) + 3 * tile_bytes(C, DType::BF16);
  r += kEpilogueSets * set;
  f.wchunk = std::min(kWeightChunk, std::max(2 * f.I, f.Hc));
  r += 2 * (tile_bytes(f.wchunk, DType::BF16) * 2);  // weight read-modify-write (P3, P4)
  r += mxfp8::AccumulateRows::kSbufBytes;            // P2 read-modify-write
  if (f.recompute) r += 2 * tile_bytes(C, DType::BF16);
  if (p.bias)
    r += 2 * tile_bytes(2 * (f.Ic / 128), DType::F32) + tile_bytes(2 * (f.Ic / 128), DType::BF16) +
         tile_bytes(1, DType::F32) + tile_bytes(f.Hc, DType::F32) + tile_bytes(f.Hc, DType::BF16) +
         tile_bytes(512, DType::BF16) + tile_bytes(512, DType::F32);
  f.dy_chunk = std::min<int64_t>(p.H, 512);
  if (p.on_h())
    r += kEpilogueSets * (2 * tile_bytes(f.dy_chunk, DType::BF16) + tile_bytes(f.dy_chunk, DType::F32)) +
         tile_bytes(1, DType::F32) + 2 * tile_bytes(x32 ? 4 * cdiv(B, 512) : G, DType::I32);
  f.reserved_sbuf = r;

  const auto common = [&](mxfp8::MatmulSpec& s, const char* what, const char* scope, int phase) {
    s.kernel = fmt::format("{} ({})", kBwdName, what);
    s.scope = scope;
    s.out_dtype = DType::F32;
    s.fp8 = p.fp8;
    s.scheme = f.scheme;
    s.cores = mxfp8::Cores::CallingCore;
    s.use_scale_packing = p.phase_scale_packing(phase);
    s.spill_reload = p.phase_spill_reload(phase);
    s.reserved_sbuf_bytes = f.reserved_sbuf;
    s.tiling = phase_tiling(p.phase_config(phase));
  };
  const auto hbm = [](mxfp8::Layout layout, const char* name, const char* f_name, mxfp8::Swizzle sw) {
    mxfp8::Operand o = hbm_operand(layout, name, f_name);
    o.swizzle = sw;
    return o;
  };
  // P0 (recompute): M = I per core (gate rows; up paired), K = H, N = B.
  if (f.recompute) {
    mxfp8::MatmulSpec& s = f.p0;
    s.M = f.Ic, s.K = p.H, s.N = B;
    if (f.Ic % 512 != 0)
      fail(fmt::format(
          "checkpoint_config.save_gate_up_proj_act = false: recomputing gate/up reads the [H, I_TP] weight "
          "slices K-by-F, which needs I_TP per core % 512 == 0, got I_TP / {} = {} (give the checkpoint)",
          cores, f.Ic));
    s.lhs = hbm_operand(mxfp8::Layout::KByF, "gate_up_proj_weight", "I_TP");
    s.lhs2 = s.lhs;
    s.rhs = hbm(mxfp8::Layout::FByK, "hidden_states", "block_size", p.hidden_states_t_swizzle);
    common(s, "Phase 0, gate/up recompute: M = I_TP per core, K = H, N = block_size", "p0", 1);
    f.p0_plan = mxfp8::plan_matmul(s, limits);
  }
  {
    mxfp8::MatmulSpec& s = f.p1;
    s.M = f.Ic, s.K = p.H, s.N = B;
    s.lhs = p.down_weight_scales
                ? weight_operand(kBwdName, {.tensor = "down_proj_weight",
                                            .param = "down_weight",
                                            .scales = &p.down_weight_scales,
                                            .E = p.E,
                                            .K = p.H,
                                            .cols = f.I,
                                            .F = f.Ic,
                                            .k_name = "H",
                                            .cols_name = "I_TP",
                                            .f_name = "I_TP",
                                            .packing = p.phase_scale_packing(1),
                                            .packing_key = packing_key(p, 1)})
                : hbm(mxfp8::Layout::FByK, "down_proj_weight", "I_TP", p.down_weight_swizzle);
    s.rhs = hbm(mxfp8::Layout::FByK, "output_hidden_states_grad", "block_size", p.output_grad_swizzle);
    common(s, "Phase 1: M = I_TP per core, K = H, N = block_size", "p1", 1);
    f.p1_plan = mxfp8::plan_matmul(s, limits);
  }
  {
    mxfp8::MatmulSpec& s = f.p2;
    s.M = B, s.K = 2 * f.I, s.N = f.Hc;
    s.lhs = hbm_operand(mxfp8::Layout::KByF, "d_gate_up", "block_size");
    if (f.dgu_resident) s.lhs.source = mxfp8::Source::Sbuf, s.lhs.interleaved_rows = x32;
    s.rhs = p.gate_up_weight_scales
                ? weight_operand(kBwdName, {.tensor = "gate_up_proj_weight",
                                            .param = "gate_up_weight",
                                            .scales = &p.gate_up_weight_scales,
                                            .E = p.E,
                                            .K = 2 * f.I,
                                            .cols = p.H,
                                            .F = f.Hc,
                                            .k_name = "2*I_TP",
                                            .cols_name = "H",
                                            .f_name = "H",
                                            .packing = p.phase_scale_packing(2),
                                            .packing_key = packing_key(p, 2)})
                : hbm(mxfp8::Layout::FByK, "gate_up_proj_weight", "H", p.gate_up_weight_swizzle);
    common(s, "Phase 2: M = block_size, K = 2*I_TP, N = H per core", "p2", 2);
    f.p2_plan = mxfp8::plan_matmul(s, limits);
  }
  {
    mxfp8::MatmulSpec& s = f.p3;
    s.M = f.Hc, s.K = B, s.N = 2 * f.I;
    s.lhs = gathered_rows("hidden_states", "H");
    s.lhs.interleaved_rows = x32;
    s.rhs = hbm(mxfp8::Layout::FByK, "d_gate_up", "2*I_TP", p.d_gate_up_t_swizzle);
    common(s, "Phase 3: M = H per core, K = block_size, N = 2*I_TP", "p3", 3);
    f.p3_plan = mxfp8::plan_matmul(s, limits);
  }
  {
    mxfp8::MatmulSpec& s = f.p4;
    s.M = f.I, s.K = B, s.N = f.Hc;
    // AFFINITY_ON_H: the unscaled intermediate, and the block's affinity-scaled dY rows gathered from its
    // scratch (rows [ring B, (ring + 1) B), no padding left: the padding rows hold zeros).
    s.lhs = hbm(mxfp8::Layout::FByK, p.on_h() ? "intermediate" : "scaled_intermediate", "I_TP",
                p.scaled_intermediate_t_swizzle);
    s.rhs = gathered_rows("output_hidden_states_grad", "H");
    s.rhs.interleaved_rows = x32;
    common(s, "Phase 4: M = I_TP, K = block_size, N = H per core", "p4", 4);
    f.p4_plan = mxfp8::plan_matmul(s, limits);
  }
  const mxfp8::Padding pad = p.skip() || p.num_valid_tokens ? mxfp8::Padding::Skip : mxfp8::Padding::ZeroRow;
  f.p3.lhs.rows.padding = pad;
  f.p4.rhs.rows.padding = p.on_h() ? mxfp8::Padding::ZeroRow : pad;
  return f;
}

}  // namespace trnsim::kernels::moe
