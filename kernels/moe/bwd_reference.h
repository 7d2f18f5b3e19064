// Host reference of the MoE backward (aws-neuron/nki-library blockwise_mm_backward_mxfp8_torch.py and the
// goldens of test_bwmm_bwd_common.py), per slot s of block b with expert e holding token t
// (x = hidden row t, dy = output_hidden_states_grad row t, a = affinity (t, e); zero for a -1 slot), with
// gate/up from the checkpoint (or recomputed as the forward computes them):
//
//   d_int   = dy W_down[e]^T                      [I]    (W_down[e] = down_proj_weight[e], [I, H])
//   sig     = sigmoid(gate), silu = gate sig (or the gate_act checkpoint), inter = silu up (or its
//   checkpoint) dEA     = sum_i d_int inter                   -> expert_affinities_masked_grad[t*E + e]
//   d_gate  = d_int a sig (1 + gate (1 - sig)) up [lo < gate < hi],  d_up = d_int a silu [lo < up < hi]
//   dX      = [d_gate, d_up] W_gu[e]^T            [H]    (W_gu[e] = gate_up_proj_weight[e] as [H, 2I]),
//                                                        added to hidden_states_grad row t in block order
//   dW_gu[e]   += x^T [d_gate, d_up],   dW_down[e] += S^T dy   (S = inter a, or its checkpoint)
//
// AFFINITY_ON_H (the forward multiplied the down output by a): Phase 1 and Phase 4 read dy' = a dy (kernel:
// rounded to bfloat16) in place of dy and no a elsewhere (d_int = dy' W_down[e]^T, d_gate and d_up without
// the factor a, S = inter), and dEA = sum_h down_proj_act[s, h] dy[h] (the checkpoint of slot s). Without
// bias both placements give the same gradients in exact arithmetic.
//
// Pre-quantized weights are dequantized (their MX values), and the kernel numerics use them as given.
//
// Two numerics, both FP64: exact (the inputs' values, no rounding) and kernel (each phase's GEMM operands
// MX-quantized along that phase's contraction with the phases' quant_scheme, wrapX or 1x32, which decides
// the 32 K-indices sharing a scale; pre-quantized weights are read in that interleave too: H in Phase 1 and
// the recompute, 2I in Phase 2, the block's tokens in Phases 3 and 4; d_gate, d_up and the scaled
// intermediate rounded to bfloat16; each block's dX rows and weight-gradient contributions rounded to
// bfloat16 and added to their bfloat16 destination in block order, as the kernel's read-modify-writes do).
//
// The forward's gate/up (the checkpoints' values) in the kernel numerics also serve the input recipe that
// makes the checkpoints on the host.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kernels/api/package.h"
#include "kernels/moe/bwd_params.h"
#include "kernels/moe/moe_common.h"

namespace trnsim::kernels::moe {

struct BwdInputs {
  const tensor::HostTensor *hidden_states = nullptr, *expert_affinities_masked = nullptr;
  const tensor::HostTensor* output_hidden_states_grad = nullptr;
  const tensor::HostTensor *gate_up_proj_weight = nullptr, *down_proj_weight = nullptr;
  const tensor::HostTensor *gate_up_weight_scales = nullptr, *down_weight_scales = nullptr;
  const tensor::HostTensor *token_position_to_id = nullptr, *block_to_expert = nullptr;
  const tensor::HostTensor* num_valid_tokens = nullptr;
  const tensor::HostTensor *gate_up_ckpt = nullptr, *scaled_ckpt = nullptr, *gate_act_ckpt = nullptr,
                           *inter_ckpt = nullptr, *down_act_ckpt = nullptr;
  // From a lookup by input name (null when absent; Error if one the parameters need is missing). With
  // `for_recipe` only what the checkpoint recipe reads.
  static BwdInputs from(const BwdParams& p,
                        const std::function<const tensor::HostTensor*(const std::string&)>& lookup,
                        bool for_recipe = false);
};

// Per slot, both numerics ([0] exact, [1] kernel).
struct SlotGrad {
  std::vector<double> dx;  // [H]: this slot's dX contribution (kernel: rounded to bfloat16), when asked for
  double dea = 0;
};

class BwdReference {
 public:
  BwdReference(const BwdParams& p, const BwdInputs& inputs);

  int64_t slots() const { return N_ * B_; }
  int64_t token(int64_t slot) const { return token_[slot]; }
  // Dense mode: a slot from num_valid_tokens on, whose checkpoint values are undefined (read as 0).
  bool undefined(int64_t slot) const { return p_.single_expert_dense && token_[slot] < 0; }
  int64_t expert(int64_t slot) const { return block_expert_[slot / B_]; }
  const std::vector<int64_t>& slots_of_row(int64_t r) const { return by_row_[r]; }
  const std::vector<int64_t>& blocks_of_expert(int64_t e) const { return by_expert_[e]; }

  // The sampled slots' dEA and (with_dx) dX contributions.
  std::map<int64_t, std::array<SlotGrad, 2>> evaluate(const std::vector<int64_t>& slots, bool with_dx) const;
  // hidden_states_grad row r from its slots' contributions: exact sum and the kernel's bfloat16 chain.
  void dx_row(int64_t r, const std::map<int64_t, std::array<SlotGrad, 2>>& v, double* exact,
              double* kernel) const;
  // Expert e's weight gradients [H, 2I] and [I, H] in both numerics.
  // With bias, also the bias gradients [2I] (sum over the block's slots of d_gate_up) and [H] (sum of a dy),
  // added per block (kernel: in bfloat16).
  void expert_grads(int64_t e, std::array<std::vector<double>, 2>& dw_gu,
                    std::array<std::vector<double>, 2>& dw_down,
                    std::array<std::vector<double>, 2>* db_gu = nullptr,
                    std::array<std::vector<double>, 2>* db_down = nullptr) const;
  // The same in numerics q alone (0 exact, 1 kernel): half the memory, for checks that fold one at a time.
  void expert_grads(int64_t e, int q, std::vector<double>& dw_gu, std::vector<double>& dw_down,
                    std::vector<double>* db_gu = nullptr, std::vector<double>* db_down = nullptr) const;

  double slot_flops(bool with_dx) const;  // FP64 work of one slot (both numerics)
  double expert_flops(int64_t e) const;   // FP64 work of expert_grads(e)

  // The forward's clamped gate and up of `slots` ([n, 2I] row-major, gate then up) in the kernel's numerics
  // rounded to compute_dtype (the recipe), or both numerics (q = 0 exact, 1 kernel).
  void forward_gate_up(int64_t e, const std::vector<int64_t>& slots, int q, std::vector<double>& gu) const;
  // The forward's down projection of rows `inter` [n, I] of expert e (no affinity, no bias) in the kernel's
  // numerics: both operands MX-quantized along I, the result rounded to compute_dtype: [n, H].
  void forward_down(int64_t e, const std::vector<float>& inter, int64_t n, std::vector<double>& out) const;

 private:
  struct Weights {
    ExpertWeight gu;    // [H, 2I]
    ExpertWeight down;  // [I, H]
  };
  void weights(int64_t e, Weights& w) const;
  // gate/up of the slots (from the checkpoint or recomputed) in numerics q: [n, 2I].
  // `scheme`: the x4 interleave of the recompute's quantization (the forward kernel's wrapX for the recipe).
  void gate_up(int64_t e, const std::vector<int64_t>& slots, int q, const Weights& w, std::vector<double>& gu,
               num::QuantScheme scheme) const;
  // Phase 1 of `slots` of expert e in numerics q: d_gate_up [n, 2I] (kernel: bf16), scaled [n, I], dEA [n].
  void phase1(int64_t e, const std::vector<int64_t>& slots, int q, const Weights& w, std::vector<double>& dgu,
              std::vector<double>& scaled, std::vector<double>& dea) const;
  std::vector<float> rows_of(const tensor::HostTensor& t, const std::vector<int64_t>& slots) const;
  // dY rows of the slots as Phases 1 and 4 read them in numerics q: dy, or AFFINITY_ON_H a dy (kernel: bf16).
  std::vector<double> dy_rows(int64_t e, const std::vector<int64_t>& slots, int q) const;
  double affinity(int64_t e, int64_t slot) const;  // 0 for a slot without a token

  const BwdParams& p_;
  BwdInputs in_;
  int64_t N_ = 0, B_ = 0, I_ = 0, H_ = 0;
  std::vector<int64_t> token_;
  std::vector<int32_t> block_expert_;
  std::vector<std::vector<int64_t>> by_row_, by_expert_;
};

}  // namespace trnsim::kernels::moe
