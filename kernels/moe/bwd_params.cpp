#include "kernels/moe/bwd_params.h"

#include "kernels/moe/routing.h"

namespace trnsim::kernels::moe {

void BwdPhaseConfig::describe(Schema<BwdPhaseConfig>& s) {
  s.include(&BwdPhaseConfig::tiling);
  s.add(&BwdPhaseConfig::spill_reload, "spill_reload",
        "this phase's spill_reload (nkilib Gen3 keeps it per phase); null: the top-level spill_reload");
  s.add(&BwdPhaseConfig::enable_scale_packing, "enable_scale_packing",
        "this phase's scale packing (nkilib Gen3 keeps it per phase; a pre-quantized weight's scales shape "
        "must agree: Phase 1 down_weight_scales, Phase 2 gate_up_weight_scales); null: the top-level "
        "use_scale_packing");
  s.choice(&BwdPhaseConfig::quant_scheme, "quant_scheme",
           "x4 interleave of this phase's contraction: wrapX (partition p of a 512-row tile holds rows "
           "p+128j) or 1x32 (rows 4p..4p+3: OCP 32-contiguous groups, so other K-indices share a scale and "
           "the gradients' bytes change); every phase must use the same (nkilib Gen3)",
           {{"wrapX", num::QuantScheme::WrapX}, {"1x32", num::QuantScheme::OneX32}}, num::QuantScheme::WrapX);
}

const std::optional<BwdPhaseConfig>& BwdParams::phase_config(int phase) const {
  switch (phase) {
    case 1:
      return phase1_config;
    case 2:
      return phase2_config;
    case 3:
      return phase3_config;
    default:
      return phase4_config;
  }
}

bool BwdParams::phase_spill_reload(int phase) const {
  const auto& c = phase_config(phase);
  return c && c->spill_reload ? *c->spill_reload : spill_reload;
}

bool BwdParams::phase_scale_packing(int phase) const {
  const auto& c = phase_config(phase);
  return c && c->enable_scale_packing ? *c->enable_scale_packing : use_scale_packing;
}

num::QuantScheme BwdParams::quant_scheme() const {
  return phase1_config ? phase1_config->quant_scheme : num::QuantScheme::WrapX;
}

void BwdParams::describe(Schema<BwdParams>& s) {
  // At least one 128-row tile: the gradient's rows are gathered and scattered with 128-row indirect DMAs
  // whose HBM pattern spans 128 rows of the tensor.
  describe_shape(
      s, {.T = "tokens (rows of hidden_states, plus the zero row T when padding is T); at least 128 "
               "(the kernel gathers and scatters rows 128 at a time)",
          .min_T = 128,
          .H = "hidden size (a multiple of 256 on two cores, of 128 on one)",
          .I_TP = "intermediate size per tensor-parallel rank (a multiple of 256 on two cores)",
          .num_blocks = "N, blocks in token_position_to_id; null: ceil((T*top_k - (E-1)) / B) + E - 1"});
  s.add(&BwdParams::gate_up_weight_scales, "gate_up_weight_scales",
        "gate/up weights pre-quantized along Phase 2's contraction 2*I_TP: gate_up_proj_weight holds x4 data "
        "[E, 2*I_TP/4, H] (the x4 interleave of each expert's [H, 2*I_TP] along 2*I_TP) and input "
        "gate_up_weight_scales the E8M0 scales of this shape ([E, 2*I_TP/4, H], or packed [E, "
        "ceil(2*I_TP/2048)*128, H] with use_scale_packing); null: BF16 weights quantized on chip")
      .at_least(1);
  s.add(&BwdParams::down_weight_scales, "down_weight_scales",
        "down weights pre-quantized along Phase 1's contraction H: down_proj_weight holds x4 data [E, H/4, "
        "I_TP] and input down_weight_scales the scales of this shape ([E, H/4, I_TP] or packed [E, "
        "ceil(H/2048)*128, I_TP]); null: BF16")
      .at_least(1);
  s.choice(&BwdParams::fp8, "fp8_x4_dtype",
           "MXFP8 element type of the quantized operands (nkilib: E5M2 works but is untested)",
           {{"float8_e4m3fn_x4", num::Fp8Format::E4M3FN}, {"float8_e5m2_x4", num::Fp8Format::E5M2}},
           num::Fp8Format::E4M3FN);
  s.choice(&BwdParams::compute_dtype, "compute_dtype",
           "dtype of the checkpoints and the gradient intermediates (nkilib asserts bfloat16: DGT does not "
           "transpose FP32)",
           {{"bfloat16", isa::DType::BF16}}, isa::DType::BF16);
  s.add(&BwdParams::run_with_lnc2, "run_with_lnc2",
        "both physical cores (SHARD_ON_FREE: each core takes half of every matmul's free dim); false: one "
        "core",
        true);
  s.choice(&BwdParams::shard_option, "shard_option",
           "LNC2 sharding: half of I in Phase 1, half of H in Phases 2-4, the affinity-gradient partials "
           "swapped by sendrecv (nkilib asserts SHARD_ON_HIDDEN out)",
           {{"SHARD_ON_FREE", BwdShard::OnFree}}, BwdShard::OnFree);
  s.choice(&BwdParams::affinity_option, "affinity_option",
           "where the forward multiplied the affinity: the intermediate (AFFINITY_ON_I, nkilib's MXFP8 "
           "kernels) or the down projection's output (AFFINITY_ON_H, nkilib's BF16 kernels' default; the "
           "MXFP8 library kernel asserts it out): Phases 1 and 4 then read affinity x dY and Phase 4 the "
           "unscaled intermediate, and the affinity gradient is the sum over H of down_proj_act_checkpoint x "
           "dY (needs checkpoint_config.save_down_proj_act)",
           {{"AFFINITY_ON_I", BwdAffinity::OnI}, {"AFFINITY_ON_H", BwdAffinity::OnH}}, BwdAffinity::OnI);
  s.object(&BwdParams::phase1_config, "phase1_config",
           "matmul config of Phase 1: nki_library M = block_size (dY rows), K = H, N = I_TP per core (down "
           "weight rows), null fields: tiles 128 / 512 / 512 capped at the dims, one tile per block and "
           "load (nki-library _resolve_phase_configs); trnsim_optimized computes it transposed (M = I_TP per "
           "core, N = block_size; also the gate/up recompute's), null fields auto");
  s.object(&BwdParams::phase2_config, "phase2_config",
           "matmul config of Phase 2: M = block_size (d_gate_up), K = 2*I_TP, N = H per core (gate/up "
           "weights)");
  s.object(
      &BwdParams::phase3_config, "phase3_config",
      "matmul config of Phase 3: nki_library M = I_TP (d_gate_up^T rows, gate then up in two calls), K = "
      "block_size, N = H per core (hidden^T rows); trnsim_optimized M = H per core (hidden rows), N = "
      "2*I_TP");
  s.object(&BwdParams::phase4_config, "phase4_config",
           "matmul config of Phase 4: nki_library M = H per core (dY^T rows), K = block_size, N = I_TP (the "
           "scaled intermediate^T); trnsim_optimized M = I_TP, N = H per core");
  s.add(&BwdParams::use_scale_packing, "use_scale_packing",
        "4 consecutive K tiles share one scale tile at offsets 0/4/8/12: the default of every phase whose "
        "config does not set enable_scale_packing (nkilib Gen3 default)",
        true);
  s.add(&BwdParams::spill_reload, "spill_reload",
        "write quantized blocks to an HBM scratch when first produced and reload them instead of "
        "re-quantizing: the default of every phase whose config does not set spill_reload (nkilib Gen3 "
        "default)",
        true);
  s.add(&BwdParams::accumulate_hidden_states_grad, "accumulate_hidden_states_grad",
        "Phase 2 adds each block's rows to hidden_states_grad (read-modify-write; needed for top_k > 1); "
        "false: overwrites",
        true);
  s.add(&BwdParams::skip_grad_initialization, "skip_grad_initialization",
        "do not zero the gradient outputs first: the caller does (trnsim run zeroes them before the run), "
        "and the kernel adds into them",
        false);
  s.add(&BwdParams::single_expert_dense, "single_expert_dense",
        "one expert (E = 1, top_k 1), contiguous token blocks (T % B == 0), no routing tensors (dummies [1] "
        "and "
        "[1, 1]); needs accumulate_hidden_states_grad = false",
        false);
  s.add(&BwdParams::num_valid_tokens, "num_valid_tokens",
        "input num_valid_tokens [1] int32 gives the tokens to process (single_expert_dense only): a dynamic "
        "block loop runs ceil(count / block_size) blocks, the slots from the count on are skipped and the "
        "gradient rows past it are left undefined; a count above T is clamped to T (nki-library API "
        "reference, blockwise_mm_bwd_mxfp8), a negative one refused",
        false);
  s.object(&BwdParams::clamp_limits, "clamp_limits",
           "the forward's gate/up clamps: the gradients are masked to the strict limits");
  describe_activation(s, &BwdParams::activation_type);
  s.object(&BwdParams::skip_dma, "skip_dma", "padding of token_position_to_id (nkilib SkipMode)");
  s.add(&BwdParams::bias, "bias",
        "the layer has biases: outputs gate_and_up_proj_bias_grad [E, 2, I_TP] (the sum of d_gate_up over an "
        "expert's tokens) and down_proj_bias_grad [E, H] (the sum of affinity x dY), in compute_dtype; needs "
        "the "
        "gate/up checkpoint (the bias values are not inputs)",
        false);
  s.choice(&BwdParams::phase3_transpose_mode, "phase3_transpose_mode",
           "how the block's gathered hidden rows become Phase 3's [H, block_size] scratch (nki_library): NC, "
           "per 128 x 128 tile an nc_transpose on the PE and an ACT copy out of PSUM, or DMA, one "
           "SBUF-to-SBUF dma_transpose (nki-library _gather_block_tokens_transposed); trnsim_optimized "
           "gathers the rows K-by-F, no transpose: no effect there",
           {{"NC", TransposeMode::NC}, {"DMA", TransposeMode::DMA}}, TransposeMode::NC);
  s.choice(&BwdParams::phase4_transpose_mode, "phase4_transpose_mode",
           "the same for Phase 4's transposes (nki_library): the gathered dY rows into [H, block_size] and "
           "Phase 1's scaled intermediate into [I_TP, block_size] (NC: its PSUM copies alternate ACT and "
           "DVE; nki-library _transpose_block_to_hbm); trnsim_optimized: no effect",
           {{"NC", TransposeMode::NC}, {"DMA", TransposeMode::DMA}}, TransposeMode::NC);
  const std::vector<std::pair<std::string, mxfp8::Swizzle>> modes = {{"DGT", mxfp8::Swizzle::Dgt},
                                                                     {"PE", mxfp8::Swizzle::Pe}};
  const auto mode = [&](mxfp8::Swizzle BwdParams::*m, const char* name, const char* doc) {
    s.choice(m, name, doc, modes, mxfp8::Swizzle::Dgt);
  };
  // The defaults are this kernel's loaders as they were before the modes existed: DGT (nkilib Gen2's
  // kernel-argument default; Gen3 defaults to PE).
  mode(&BwdParams::output_grad_swizzle, "output_grad_swizzle_mode",
       "how Phase 1 brings the block's dY rows [block_size, H] (F-by-K) into the x4 interleave: DGT "
       "(nki_library: vector offsets and an indirect dma_transpose per load; trnsim_optimized: a direct "
       "dma_transpose) or PE (rows by DMA, nc_transpose, PSUM copy); default DGT (nkilib Gen2's default; "
       "Gen3: PE)");
  mode(&BwdParams::down_weight_swizzle, "down_weight_swizzle_mode",
       "Phase 1's down weight rows [I_TP per core, H] (F-by-K): DGT or PE; PE needs E == 1 (nkilib: the "
       "PE loader ignores the per-expert scalar_offset); no effect on pre-quantized weights; default DGT");
  mode(&BwdParams::d_gate_up_swizzle, "d_gate_up_swizzle_mode",
       "Phase 2's d_gate_up [block_size, 2*I_TP] (F-by-K, the block's scratch; nki_library): DGT or PE; "
       "trnsim_optimized keeps d_gate_up^T [2*I_TP, block_size], K-by-F for Phase 2 (its rows go straight "
       "onto partitions, no transpose to choose): no effect there; default DGT");
  mode(&BwdParams::gate_up_weight_swizzle, "gate_up_weight_swizzle_mode",
       "Phase 2's gate/up weight rows [H per core, 2*I_TP] (F-by-K): DGT or PE; PE needs E == 1 (as "
       "down_weight_swizzle_mode); no effect on pre-quantized weights; default DGT");
  mode(&BwdParams::d_gate_up_t_swizzle, "d_gate_up_t_swizzle_mode",
       "Phase 3's d_gate_up^T [2*I_TP, block_size] (F-by-K, from the block's scratch): DGT or PE; default "
       "DGT");
  mode(&BwdParams::hidden_states_t_swizzle, "hidden_states_t_swizzle_mode",
       "the hidden rows where they are F-by-K: nki_library Phase 3's hidden^T [H, block_size] scratch; "
       "trnsim_optimized the gate/up recompute's [block_size, H] (without gate_up_proj_act_checkpoint_T; "
       "its Phase 3 gathers them K-by-F): DGT or PE; default DGT");
  mode(&BwdParams::output_grad_t_swizzle, "output_grad_t_swizzle_mode",
       "Phase 4's dY^T [H, block_size] scratch (F-by-K; nki_library): DGT or PE; trnsim_optimized gathers "
       "the dY rows K-by-F straight onto partitions (no transpose to choose): no effect there; default "
       "DGT");
  mode(&BwdParams::scaled_intermediate_t_swizzle, "scaled_intermediate_t_swizzle_mode",
       "Phase 4's scaled intermediate [I_TP, block_size] (F-by-K; AFFINITY_ON_H: the intermediate): DGT or "
       "PE; default DGT");
  s.add(&BwdParams::fast_dma_transpose, "fast_dma_transpose",
        "nkilib's direct 4-D DGT addressing (SwizzleMode DGT_FAST for the DGT operands): nki_library loads "
        "each DGT tile with one direct outer-axes dma_transpose instead of the vector offsets and the "
        "indirect transpose; trnsim_optimized's DGT is a direct pattern already (no effect); rejected with "
        "E > 1 and a BF16 weight in DGT mode (the direct pattern ignores the per-expert scalar_offset) and "
        "with pe_transpose_only",
        false);
  s.add(&BwdParams::pe_transpose_only, "pe_transpose_only",
        "nkilib: keep every transpose on the PE; needs single_expert_dense, NC transpose modes, every "
        "*_swizzle_mode PE and no fast_dma_transpose; those modes are its whole effect here (this kernel's "
        "Phase 1 reads the checkpoint in its own [I_TP, block_size] layout and Phases 3/4 gather K-by-F: "
        "no other transposes)",
        false);
  s.object(&BwdParams::checkpoint_config, "checkpoint_config",
           "which activation checkpoints the forward saved (inputs of the backward): save_gate_up_proj_act "
           "(gate_up_proj_act_checkpoint_T; absent: recomputed from hidden_states, trnsim_optimized only), "
           "save_scaled_intermediate (scaled_intermediate_checkpoint_T; absent: Phase 1's; nki_library never "
           "reads it: the documented entry asserts it absent and Phase 1 computes the scaled "
           "intermediate), save_gate_act, save_intermediate, save_down_proj_act (down_proj_act_checkpoint, "
           "AFFINITY_ON_H only; these three trnsim_optimized only)");
  describe_schedule(
      s, &BwdParams::schedule,
      "Phase 1 transposed so its tiles meet the checkpoint's layout, Phases 3 and 4 oriented so "
      "their results land in the gradients' own layout (no 128 x 128 PE transposes), the block's "
      "X and dY rows gathered straight into the K-by-F staging (no transposed scratch copies), "
      "d_gate_up resident in SBUF for Phase 2, the SwiGLU backward in FP32, each K block quantized "
      "per load, the next block's gathers ahead of this block's phases: Qwen3-30B-A3B's layer "
      "runs in about half the time (configs/workloads/moe/backward.md)");
}

int64_t BwdParams::N() const {
  if (num_blocks) return *num_blocks;
  if (single_expert_dense) return (T + block_size - 1) / block_size;
  return block_count(T, top_k, E, block_size);
}

}  // namespace trnsim::kernels::moe
