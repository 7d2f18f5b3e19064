// plan_fwd_lib: the library schedule's checks and GEMM configs (fwd_lib.h).
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "kernels/lib/mxfp8/layout.h"
#include "kernels/moe/fwd_kernel.h"
#include "kernels/moe/fwd_lib.h"
#include "kernels/moe/moe_common.h"
#include "sim/base/error.h"

namespace trnsim::kernels::moe {
namespace {

using mxfp8::cdiv;

[[noreturn]] void fail(const std::string& msg) {
  throw InputError(fmt::format("{}: {}", kFwdName, msg));
}

void beyond(bool set, const std::string& what) {
  if (set)
    fail(fmt::format(
        "{}: not in nki-library's blockwise_mm_fwd_mxfp8, whose instruction stream the default schedule "
        "nki_library runs; set \"schedule\": \"trnsim_optimized\" to run it",
        what));
}

// _resolve_phase_tiles and the clamped TILES_IN_BLOCK / TILES_IN_LOAD (_resolve_tiles_in_load) of one GEMM
// M = B, K, N.
FwdLibGemm gemm(const std::optional<MxTilingConfig>& cfg, const char* name, int64_t B, int64_t K, int64_t N) {
  const MxTilingConfig c = cfg.value_or(MxTilingConfig{});
  FwdLibGemm f;
  mxfp8::lib::Geometry& g = f.g;
  g.tile_m = c.tile_m.value_or(128), g.tile_k = c.tile_k.value_or(512), g.tile_n = c.tile_n.value_or(512);
  if (g.tile_m != 128)
    fail(fmt::format("parameter '{}.tile_m' = {}: nki-library's MoE forward asserts tile_m == 128", name,
                     g.tile_m));
  if (g.tile_k != 512)
    fail(fmt::format("parameter '{}.tile_k' = {}: nki-library's MoE forward asserts tile_k == 512", name,
                     g.tile_k));
  if (g.tile_n % 32 != 0 || g.tile_n > 8192)
    fail(fmt::format("parameter '{}.tile_n' = {}: a multiple of 32, at most 8192 (nki-library)", name,
                     g.tile_n));
  f.mtiles = cdiv(B, g.tile_m), f.ntiles = cdiv(N, g.tile_n);
  const int64_t ktiles = cdiv(K, g.tile_k);
  g.bm = std::clamp<int64_t>(c.blocks_m.value_or(1), 1, f.mtiles);
  g.bn = std::clamp<int64_t>(c.blocks_n.value_or(1), 1, f.ntiles);
  g.bk = std::clamp<int64_t>(c.blocks_k.value_or(1), 1, ktiles);
  const auto load = [](std::optional<int64_t> want, int64_t block, int64_t fallback) {
    int64_t l = std::min(want.value_or(fallback), block);
    while (l > 1 && block % l != 0) --l;
    return std::max<int64_t>(1, l);
  };
  g.load_m = load(c.load_m, g.bm, std::min<int64_t>(g.bm, 8));
  g.load_n = load(c.load_n, g.bn, 1);
  f.mblocks = cdiv(f.mtiles, g.bm), f.nblocks = cdiv(f.ntiles, g.bn), f.kblocks = cdiv(ktiles, g.bk);
  return f;
}

}  // namespace

FwdLibPlan plan_fwd_lib(const FwdParams& p, const isa::Limits& limits) {
  check_fwd(p, limits);
  beyond(p.gate_up_weight_scales || p.down_weight_scales,
         "pre-quantized weights (its entry asserts them out: 'does not yet support pre-quantized weights')");
  beyond(p.gate_up_weight_is_swizzled || p.down_weight_is_swizzled, "pre-swizzled weights");
  beyond(p.bias, "parameter 'bias' (a reserved flag there: its forward adds no bias)");
  beyond(p.affinity_option == AffinityOption::OnH, "parameter 'affinity_option' = AFFINITY_ON_H");
  const CheckpointConfig& c = p.checkpoint_config;
  beyond(c.save_gate_act || c.save_intermediate || c.save_down_proj_act,
         "the gate_act / intermediate / down-output checkpoints");
  beyond(p.no_indirect_load, "parameter 'no_indirect_load' (its contiguous single-expert path)");
  beyond(p.compute_dtype != isa::DType::BF16, "compute_dtype float32 (its entry asserts bfloat16)");
  beyond(!p.run_with_lnc2, "parameter 'run_with_lnc2' = false (its entry asserts LNC2)");
  FwdLibPlan f;
  f.T = p.T, f.rows = p.rows(), f.H = p.H, f.I = p.I_TP, f.E = p.E, f.B = p.block_size, f.N = p.N();
  f.G = f.B / 128;
  f.cores = p.cores();
  if (f.N < f.cores)
    fail(fmt::format("SHARD_ON_BLOCK needs N >= num_shards = {} (each core owns a block), got N = {}",
                     f.cores, f.N));
  if (f.rows * p.E >= (int64_t{1} << 24))
    fail(
        fmt::format("T' * E = {} * {} must be below 2^24: the affinity offsets t * E + e are computed on the "
                    "FP32 ALU",
                    f.rows, p.E));
  f.gu = gemm(p.gate_up_config, "gate_up_config", f.B, p.H, f.I);
  f.down = gemm(p.down_config, "down_config", f.B, f.I, p.H);
  for (const auto& err :
       {dgt_expert_offset_error("gate_up_proj_weight", "E * (2 * I_TP) * H", p.E, 2 * f.I, p.H,
                                f.gu.g.tile_k),
        dgt_expert_offset_error("down_proj_weight", "E * H * I_TP", p.E, p.H, f.I, f.down.g.tile_k)})
    if (err) fail(*err);
  return f;
}

}  // namespace trnsim::kernels::moe
