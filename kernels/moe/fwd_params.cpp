#include "kernels/moe/fwd_params.h"

#include "kernels/moe/routing.h"

namespace trnsim::kernels::moe {

void FwdParams::describe(Schema<FwdParams>& s) {
  describe_shape(
      s, {.T = "tokens (rows of hidden_states, plus the zero row T when padding is T)",
          .min_T = 1,
          .H = "hidden size (a multiple of 128)",
          .I_TP = "intermediate size per tensor-parallel rank (a multiple of 128)",
          .num_blocks = "N, blocks in token_position_to_id; null: ceil((T*top_k - (E-1)) / B) + E - 1 "
                        "(T/B with no_indirect_load)"});
  s.add(&FwdParams::gate_up_weight_scales, "gate_up_weight_scales",
        "gate/up weights pre-quantized: gate_up_proj_weight holds x4 data [E, H/4, 2*I_TP] and input "
        "gate_up_weight_scales the E8M0 scales of this shape ([E, H/4, 2*I_TP], or packed [E, "
        "ceil(H/2048)*128, 2*I_TP] with use_scale_packing); null: BF16 weights (nkilib rejects pre-quantized "
        "forward weights; we run them)")
      .at_least(1);
  s.add(&FwdParams::gate_up_weight_is_swizzled, "gate_up_weight_is_swizzled",
        "gate_up_proj_weight is BF16 pre-swizzled [E, H/4, 8*I_TP] (the x4 interleave of each expert's "
        "[2*I_TP, "
        "H])",
        false);
  s.add(&FwdParams::down_weight_scales, "down_weight_scales",
        "down weights pre-quantized: down_proj_weight holds x4 data [E, I_TP/4, H] and input "
        "down_weight_scales the scales of this shape ([E, I_TP/4, H] or packed [E, ceil(I_TP/2048)*128, H]); "
        "null: BF16")
      .at_least(1);
  s.add(&FwdParams::down_weight_is_swizzled, "down_weight_is_swizzled",
        "down_proj_weight is BF16 pre-swizzled [E, I_TP/4, 4*H]", false);
  s.object(&FwdParams::gate_up_config, "gate_up_config",
           "tiling of the gate/up GEMMs (the fields of a MatmulMxfp8KernelConfig): nki_library M = B (the "
           "block's tokens), K = H, N = I_TP (gate, then up), tile_m 128 and tile_k 512 (nki-library asserts "
           "them), null: tile_n 512 and one tile per block and load; trnsim_optimized computes them "
           "transposed (M = I_TP, N = B), null fields auto");
  s.object(&FwdParams::down_config, "down_config",
           "tiling of the down GEMM: M = B (tokens), K = I_TP, N = H; null fields as gate_up_config's");
  s.choice(&FwdParams::fp8, "fp8_x4_dtype", "MXFP8 element type of the quantized operands",
           {{"float8_e4m3fn_x4", num::Fp8Format::E4M3FN}, {"float8_e5m2_x4", num::Fp8Format::E5M2}},
           num::Fp8Format::E4M3FN);
  s.add(&FwdParams::spill_reload, "spill_reload",
        "write quantized blocks to an HBM scratch when first produced and reload them instead of "
        "re-quantizing (both GEMMs)",
        false);
  s.add(&FwdParams::use_scale_packing, "use_scale_packing",
        "4 consecutive K tiles share one scale tile at offsets 0/4/8/12 (both GEMMs)", true);
  s.add(&FwdParams::run_with_lnc2, "run_with_lnc2",
        "both physical cores (SHARD_ON_BLOCK: core s takes blocks s, s+2, ...); false: one core", true);
  s.choice(
      &FwdParams::shard_option, "shard_option",
      "LNC2 sharding: whole blocks per core, each core scattering into its own [T, H] slab, summed at the "
      "end",
      {{"SHARD_ON_BLOCK", ShardOption::ShardOnBlock}}, ShardOption::ShardOnBlock);
  s.choice(&FwdParams::affinity_option, "affinity_option",
           "where the expert affinity multiplies: the intermediate (nkilib's MXFP8 forward), or the down "
           "output (AFFINITY_ON_H, the BF16 kernels' default, which nkilib's MXFP8 forward asserts out; its "
           "checkpoint for the backward is checkpoint_config.save_down_proj_act)",
           {{"AFFINITY_ON_I", AffinityOption::OnI}, {"AFFINITY_ON_H", AffinityOption::OnH}},
           AffinityOption::OnI);
  s.choice(&FwdParams::compute_dtype, "compute_dtype",
           "dtype of the clamped gate/up, the intermediates and the checkpoints (the down GEMM always reads "
           "the scaled intermediate as bfloat16; nkilib supports bfloat16 only)",
           {{"bfloat16", isa::DType::BF16}, {"float32", isa::DType::F32}}, isa::DType::BF16);
  s.object(&FwdParams::skip_dma, "skip_dma", "padding of token_position_to_id (nkilib SkipMode)");
  s.add(&FwdParams::is_tensor_update_accumulating, "is_tensor_update_accumulating",
        "the output scatter adds to the rows (read-modify-write; needed for top_k > 1); false: overwrites",
        true);
  s.add(&FwdParams::no_indirect_load, "no_indirect_load",
        "one expert (E = 1), tokens already in block order (T % B == 0): contiguous loads and stores, no "
        "routing tensors (dummy [1] and [1, 1])",
        false);
  s.object(&FwdParams::clamp_limits, "clamp_limits", "gate/up clamps before the checkpoint and SiLU");
  describe_activation(s, &FwdParams::activation_type);
  s.add(
      &FwdParams::bias, "bias",
      "add gate_and_up_proj_bias [E, 2, I_TP] to gate/up (before the clamps) and down_proj_bias [E, H] times "
      "the affinity to the output (nkilib's BF16 MoE layer; its MXFP8 forward reserves the flag)",
      false);
  s.object(&FwdParams::checkpoint_config, "checkpoint_config", "which activation checkpoints to write");
  describe_schedule(
      s, &FwdParams::schedule,
      "the gate/up GEMMs transposed so their tiles leave PSUM in the checkpoints' layout (no "
      "128 x 128 PE transposes), gate and up sharing each quantized hidden tile in one pass, the "
      "scaled intermediate resident in SBUF for the down GEMM when it fits, the down tiles "
      "scattered from the accumulator (no per-block HBM round trip), the next block's gathers "
      "ahead of this block's GEMMs");
}

int64_t FwdParams::N() const {
  if (num_blocks) return *num_blocks;
  if (no_indirect_load) return (T + block_size - 1) / block_size;
  return block_count(T, top_k, E, block_size);
}

}  // namespace trnsim::kernels::moe
