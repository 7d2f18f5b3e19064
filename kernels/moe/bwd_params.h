// Parameters of blockwise_mm_bwd_mxfp8 (aws-neuron/nki-library experimental/moe_mxfp8/bwd/
// blockwise_mm_backward_mxfp8.py: the entry's arguments, and bwd/config.py MXFP8MOEBwdConfig with its Gen3
// defaults for routed callers), and the shapes of the kernel's tensors they imply.
//
// Tensors (T tokens, H hidden, I = I_TP, E experts, B = block_size, N blocks; T' = T, or T + 1 when the
// padding value is T: the extra row T holds zeros):
//   hidden_states [T', H] bf16, expert_affinities_masked [T' * E, 1] f32, output_hidden_states_grad [T', H]
//   bf16 (dY), gate_up_proj_weight [E, H, 2, I] bf16 (the backward's layout: gate columns then up columns),
//   down_proj_weight [E, I, H] bf16, token_position_to_id [N * B] int32, block_to_expert [N, 1] int32
//   (single_expert_dense: unused dummies [1] and [1, 1]), with num_valid_tokens: num_valid_tokens [1] int32,
//   the checkpoints the forward wrote ([N, 2, I, B] and [N, I, B], compute_dtype, as checkpoint_config says
//   which are given; AFFINITY_ON_H: down_proj_act_checkpoint [N, B, H], the down projection's output of
//   each slot before the affinity multiplies it);
//   outputs hidden_states_grad [T', H] bf16, expert_affinities_masked_grad [T' * E, 1] f32,
//   gate_up_proj_weight_grad [E, H, 2, I] bf16, down_proj_weight_grad [E, I, H] bf16, and with bias
//   gate_and_up_proj_bias_grad [E, 2, I] and down_proj_bias_grad [E, H] in compute_dtype.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/api/params.h"
#include "kernels/lib/mxfp8_params.h"
#include "kernels/moe/moe_params.h"
#include "sim/isa/instruction.h"
#include "sim/numerics/float_formats.h"

namespace trnsim::kernels::moe {

// One phase's matmul config (nkilib Gen3 MXFP8MOEBwdConfig.phaseN_config, a MatmulMxfp8KernelConfig): the
// tiling, and spill_reload / enable_scale_packing (null: the top-level spill_reload / use_scale_packing) and
// quant_scheme (every phase the same).
struct BwdPhaseConfig {
  MxTilingConfig tiling;
  std::optional<bool> spill_reload, enable_scale_packing;
  num::QuantScheme quant_scheme = num::QuantScheme::WrapX;

  static void describe(Schema<BwdPhaseConfig>& s);
};

enum class BwdShard { OnFree };
enum class BwdAffinity { OnI, OnH };
enum class TransposeMode { NC, DMA };

struct BwdParams : MoeShape {
  std::optional<std::vector<int64_t>> gate_up_weight_scales, down_weight_scales;
  num::Fp8Format fp8 = num::Fp8Format::E4M3FN;
  isa::DType compute_dtype = isa::DType::BF16;
  bool run_with_lnc2 = true;
  BwdShard shard_option = BwdShard::OnFree;
  BwdAffinity affinity_option = BwdAffinity::OnI;
  std::optional<BwdPhaseConfig> phase1_config, phase2_config, phase3_config, phase4_config;
  bool use_scale_packing = true;
  bool spill_reload = true;
  bool accumulate_hidden_states_grad = true;
  bool skip_grad_initialization = false;
  bool single_expert_dense = false;
  bool num_valid_tokens = false;
  ClampLimits clamp_limits;
  ActFn activation_type = ActFn::SiLU;
  SkipMode skip_dma;
  bool bias = false;
  TransposeMode phase3_transpose_mode = TransposeMode::NC, phase4_transpose_mode = TransposeMode::NC;
  // nkilib's eight per-operand *_swizzle_mode fields (SwizzleMode DGT or PE).
  mxfp8::Swizzle output_grad_swizzle = mxfp8::Swizzle::Dgt, down_weight_swizzle = mxfp8::Swizzle::Dgt,
                 d_gate_up_swizzle = mxfp8::Swizzle::Dgt, gate_up_weight_swizzle = mxfp8::Swizzle::Dgt,
                 d_gate_up_t_swizzle = mxfp8::Swizzle::Dgt, hidden_states_t_swizzle = mxfp8::Swizzle::Dgt,
                 output_grad_t_swizzle = mxfp8::Swizzle::Dgt,
                 scaled_intermediate_t_swizzle = mxfp8::Swizzle::Dgt;
  bool fast_dma_transpose = false;
  bool pe_transpose_only = false;
  CheckpointConfig checkpoint_config;
  Schedule schedule = Schedule::NkiLibrary;

  static void describe(Schema<BwdParams>& s);
  bool library() const { return schedule == Schedule::NkiLibrary; }

  bool skip() const { return skip_dma.skip_token; }
  // Rows of hidden_states and the gradients: T, plus the zero row T when padding is T (dense mode has none).
  int64_t rows() const { return skip() || single_expert_dense ? T : T + 1; }
  int32_t pad() const { return skip() ? -1 : static_cast<int32_t>(T); }
  int64_t N() const;
  int cores() const { return run_with_lnc2 ? 2 : 1; }
  bool gate_up_given() const { return checkpoint_config.save_gate_up_proj_act; }
  bool scaled_given() const { return checkpoint_config.save_scaled_intermediate; }
  bool gate_act_given() const { return checkpoint_config.save_gate_act; }
  bool inter_given() const { return checkpoint_config.save_intermediate; }
  bool down_act_given() const { return checkpoint_config.save_down_proj_act; }
  bool on_h() const { return affinity_option == BwdAffinity::OnH; }
  // The phase's config (1..4) and what it resolves to.
  const std::optional<BwdPhaseConfig>& phase_config(int phase) const;
  bool phase_spill_reload(int phase) const;
  bool phase_scale_packing(int phase) const;
  num::QuantScheme quant_scheme() const;  // phase 1's (plan_bwd checks that every phase has it)
};

}  // namespace trnsim::kernels::moe
