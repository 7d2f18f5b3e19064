// Parameters of blockwise_mm_fwd_mxfp8 (aws-neuron/nki-library experimental/moe_mxfp8/fwd/
// blockwise_mm_forward_mxfp8.py: the entry's keyword arguments and defaults, MXFP8MOEFwdConfig), and the
// shapes of the kernel's tensors they imply.
//
// Tensors (T tokens, H hidden, I = I_TP, E experts, B = block_size, N blocks; T' = T, or T + 1 when the
// padding value is T (skip_dma.skip_token false with indirection): the extra row T holds zeros):
//   hidden_states [T', H] bf16, expert_affinities_masked [T' * E, 1] f32,
//   gate_up_proj_weight [E, 2, I, H] bf16 (forward-natural [out, in]: gate rows then up rows; pre-swizzled
//     [E, H/4, 8 I] = the x4 interleave of the [2 I, H] rows; pre-quantized x4 [E, H/4, 2 I] with E8M0
//     gate_up_weight_scales [E, H/4, 2 I] or packed [E, ceil(H/2048)*128, 2 I]),
//   down_proj_weight [E, H, I] bf16 (pre-swizzled [E, I/4, 4 H]; pre-quantized x4 [E, I/4, H] with
//     down_weight_scales [E, I/4, H] or packed [E, ceil(I/2048)*128, H]),
//   token_position_to_id [N * B] int32, block_to_expert [N, 1] int32 (no_indirect_load: [1] and [1, 1]),
//   with bias: gate_and_up_proj_bias [E, 2, I] bf16 and down_proj_bias [E, H] bf16;
//   outputs output_hidden_states [T', H] bf16 and the checkpoints of CheckpointConfig ([N, 2, I, B] and
//   [N, I, B] in compute_dtype; AFFINITY_ON_H: down_proj_act_checkpoint [N, B, H]).
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

enum class ShardOption { ShardOnBlock };
// Where the affinity multiplies: the intermediate (nkilib's MXFP8 forward) or the down output (the BF16
// kernels' default; the backward then needs down_proj_act_checkpoint).
enum class AffinityOption { OnI, OnH };

struct FwdParams : MoeShape {
  std::optional<std::vector<int64_t>> gate_up_weight_scales, down_weight_scales;
  bool gate_up_weight_is_swizzled = false, down_weight_is_swizzled = false;
  std::optional<MxTilingConfig> gate_up_config, down_config;
  num::Fp8Format fp8 = num::Fp8Format::E4M3FN;
  bool spill_reload = false;
  bool use_scale_packing = true;
  bool run_with_lnc2 = true;
  ShardOption shard_option = ShardOption::ShardOnBlock;
  AffinityOption affinity_option = AffinityOption::OnI;
  isa::DType compute_dtype = isa::DType::BF16;
  SkipMode skip_dma;
  bool is_tensor_update_accumulating = true;
  bool no_indirect_load = false;
  ClampLimits clamp_limits;
  ActFn activation_type = ActFn::SiLU;
  bool bias = false;
  CheckpointConfig checkpoint_config;
  Schedule schedule = Schedule::NkiLibrary;

  static void describe(Schema<FwdParams>& s);
  bool library() const { return schedule == Schedule::NkiLibrary; }

  // Derived facts.
  bool skip() const { return skip_dma.skip_token; }
  // Rows of hidden_states and the output: T, plus the zero row T when the padding is T (no padding without
  // indirection).
  int64_t rows() const { return skip() || no_indirect_load ? T : T + 1; }
  int32_t pad() const { return skip() ? -1 : static_cast<int32_t>(T); }
  int64_t N() const;  // blocks: num_blocks, T/B without indirection, else the tight bound of top_k
  int cores() const { return run_with_lnc2 ? 2 : 1; }
};

}  // namespace trnsim::kernels::moe
