// Parameter objects the blockwise MoE kernels share (aws-neuron/nki-library experimental/moe/bwd/
// moe_bwd_parameters.py SkipMode and ClampLimits; experimental/moe_mxfp8/moe_mxfp8_checkpoint_config.py), as
// typed parameters (kernels/api/params.h). The forward and the backward read the same JSON objects.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>

#include "kernels/api/params.h"

namespace trnsim::kernels::moe {

// The shape parameters both MoE kernels take (nkilib's T, H, I_TP, E, top_k and block_size, and N as
// num_blocks), a base of FwdParams and BwdParams so each field is declared once. Their JSON names are the
// kernels' top-level parameters; describe_shape declares them with the per-kernel texts of ShapeDocs.
struct MoeShape {
  int64_t T = 0, H = 0, I_TP = 0, E = 0;
  int64_t top_k = 1;
  std::optional<int64_t> num_blocks;
  int64_t block_size = 0;
};

// What the two kernels say differently of the shape: the doc texts and T's lower bound (the backward
// gathers and scatters rows 128 at a time).
struct ShapeDocs {
  const char* T;
  int64_t min_T;
  const char* H;
  const char* I_TP;
  const char* num_blocks;
};

template <class P>
void describe_shape(Schema<P>& s, const ShapeDocs& d) {
  s.dim(&P::T, "T", d.T).range(static_cast<double>(d.min_T), 1 << 20);
  s.dim(&P::H, "H", d.H);
  s.dim(&P::I_TP, "I_TP", d.I_TP);
  s.dim(&P::E, "E", "experts");
  s.add(&P::top_k, "top_k",
        "experts per token: sets N (unless num_blocks is given) and the routing recipe's top-k", 1)
      .range(1, 1 << 16);
  s.add(&P::num_blocks, "num_blocks", d.num_blocks).range(1, 1 << 20);
  s.add(&P::block_size, "block_size", "B, tokens per block: 128, 256, 512, 1024, 2048 or 4096")
      .range(1, 1 << 20);
}

// nkilib SkipMode: skip_token turns on -1 padding in token_position_to_id, whose slots the indirect DMAs skip
// (oob_mode skip; the gathered rows read as zero and their writes are dropped); without it the padding is T
// and the caller supplies an extra zero row T of hidden_states and the affinities. skip_weight is accepted
// and has no effect (nkilib: unused by these kernels).
struct SkipMode {
  bool skip_token = false;
  bool skip_weight = false;
  static void describe(Schema<SkipMode>& s) {
    s.add(&SkipMode::skip_token, "skip_token",
          "padding slots hold -1 and the DMAs skip them (oob_mode skip); false: they hold T and the inputs "
          "carry an extra zero row T",
          false);
    s.add(&SkipMode::skip_weight, "skip_weight",
          "accepted, no effect (unused by the MoE kernels, as in nkilib)", false);
  }
};

// nkilib ClampLimits (null = no limit): the forward clamps gate to the non-linear limits and up to the linear
// ones before the checkpoint and the activation; the backward masks the gradients with the strict limits.
struct ClampLimits {
  std::optional<double> linear_clamp_upper_limit, linear_clamp_lower_limit;
  std::optional<double> non_linear_clamp_upper_limit, non_linear_clamp_lower_limit;
  static void describe(Schema<ClampLimits>& s) {
    s.add(&ClampLimits::linear_clamp_upper_limit, "linear_clamp_upper_limit",
          "upper clamp of up; null: none");
    s.add(&ClampLimits::linear_clamp_lower_limit, "linear_clamp_lower_limit",
          "lower clamp of up; null: none");
    s.add(&ClampLimits::non_linear_clamp_upper_limit, "non_linear_clamp_upper_limit",
          "upper clamp of gate (the activation's input); null: none");
    s.add(&ClampLimits::non_linear_clamp_lower_limit, "non_linear_clamp_lower_limit",
          "lower clamp of gate; null: none");
  }
  bool any() const {
    return linear_clamp_upper_limit || linear_clamp_lower_limit || non_linear_clamp_upper_limit ||
           non_linear_clamp_lower_limit;
  }
  // Why these limits cannot work (a lower limit above its upper one: every value would clamp to the upper
  // limit whatever its sign, and the strict gradient masks would be empty), or "" when they can.
  std::string problem() const {
    const auto pair = [](const std::optional<double>& lo, const std::optional<double>& hi,
                         const char* lo_name, const char* hi_name) -> std::string {
      if (lo && hi && *lo > *hi)
        return fmt::format("parameter 'clamp_limits': {} = {} is above {} = {}", lo_name, *lo, hi_name, *hi);
      return "";
    };
    std::string why = pair(linear_clamp_lower_limit, linear_clamp_upper_limit, "linear_clamp_lower_limit",
                           "linear_clamp_upper_limit");
    if (why.empty())
      why = pair(non_linear_clamp_lower_limit, non_linear_clamp_upper_limit, "non_linear_clamp_lower_limit",
                 "non_linear_clamp_upper_limit");
    return why;
  }
};

// nkilib ActFnType (moe/bwd/moe_bwd_parameters.py). The MXFP8 MoE kernels implement SiLU only: both entries
// assert it ("only ActFnType.SiLU is implemented in blockwise_mm_fwd_mxfp8" / "... blockwise_mm_bwd_mxfp8",
// blockwise_mm_forward_mxfp8.py and blockwise_mm_backward_mxfp8.py), and so does trnsim (activation_problem).
// gpt-oss's gate (x sigmoid(1.702 x) (up + 1)) is none of these; its clamps are clamp_limits.
enum class ActFn { SiLU, GELU, GELU_Tanh_Approx, Swish };

template <class P>
void describe_activation(Schema<P>& s, ActFn P::*m) {
  s.choice(m, "activation_type",
           "gate activation, nkilib ActFnType: SiLU only; GELU, GELU_Tanh_Approx and Swish are refused as "
           "nki-library's MXFP8 MoE entries assert them out (blockwise_mm_forward_mxfp8.py, "
           "blockwise_mm_backward_mxfp8.py)",
           {{"SiLU", ActFn::SiLU},
            {"GELU", ActFn::GELU},
            {"GELU_Tanh_Approx", ActFn::GELU_Tanh_Approx},
            {"Swish", ActFn::Swish}},
           ActFn::SiLU);
}

// Why `a` cannot run in the MXFP8 MoE kernel `kernel` ("blockwise_mm_fwd_mxfp8"), or "" for SiLU.
inline std::string activation_problem(ActFn a, const char* kernel) {
  if (a == ActFn::SiLU) return "";
  static const char* names[] = {"SiLU", "GELU", "GELU_Tanh_Approx", "Swish"};
  return fmt::format(
      "parameter 'activation_type' = {}: only ActFnType.SiLU is implemented in {} (nki-library's entry "
      "asserts it; the library's MXFP8 MoE kernels accept no other activation)",
      names[static_cast<int>(a)], kernel);
}

// Which instruction stream the MoE kernels emit: nki-library's own (the default: a port of a library kernel
// runs the library's stream) or this project's faster restructuring of it.
enum class Schedule { NkiLibrary, TrnsimOptimized };

template <class P>
void describe_schedule(Schema<P>& s, Schedule P::*m, const char* optimized_effect) {
  s.choice(
      m, "schedule",
      fmt::format("nki_library (default): nki-library's instruction stream, call for call and engine for "
                  "engine, with its per-phase config defaults (every TILES_IN_BLOCK / TILES_IN_LOAD 1); "
                  "the parameters beyond the library's feature set are refused there and run on "
                  "trnsim_optimized: {}",
                  optimized_effect)
          .c_str(),
      {{"nki_library", Schedule::NkiLibrary}, {"trnsim_optimized", Schedule::TrnsimOptimized}},
      Schedule::NkiLibrary);
}

// Which activation checkpoints the forward writes for the backward (nkilib MXFP8MOECheckpointConfig, plus the
// ones the backward accepts and the library's forward cannot emit yet). Each [N, ..., B] with B contiguous
// (down_proj_act_checkpoint: [N, B, H], H contiguous), in the compute dtype.
struct CheckpointConfig {
  bool save_gate_up_proj_act = true;
  bool save_scaled_intermediate = true;
  bool save_gate_act = false;
  bool save_intermediate = false;
  bool save_down_proj_act = false;
  static void describe(Schema<CheckpointConfig>& s) {
    s.add(&CheckpointConfig::save_gate_up_proj_act, "save_gate_up_proj_act",
          "write gate_up_proj_act_checkpoint_T [N, 2, I_TP, B]: the clamped gate (slot 0) and up (slot 1)",
          true);
    s.add(&CheckpointConfig::save_scaled_intermediate, "save_scaled_intermediate",
          "write scaled_intermediate_checkpoint_T [N, I_TP, B]: SiLU(gate) * up * affinity", true);
    s.add(&CheckpointConfig::save_gate_act, "save_gate_act",
          "write gate_act_checkpoint_T [N, I_TP, B]: SiLU(gate) (beyond nkilib's forward)", false);
    s.add(&CheckpointConfig::save_intermediate, "save_intermediate",
          "write intermediate_checkpoint_T [N, I_TP, B]: SiLU(gate) * up (beyond nkilib's forward)", false);
    s.add(&CheckpointConfig::save_down_proj_act, "save_down_proj_act",
          "write down_proj_act_checkpoint [N, B, H]: each slot's down projection output before the affinity "
          "multiplies it (AFFINITY_ON_H only: the backward's affinity gradient)",
          false);
  }
};

}  // namespace trnsim::kernels::moe
