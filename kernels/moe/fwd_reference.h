// Host reference of the MoE forward (aws-neuron/nki-library test_bwmm_bwd_common.py _generate_fwd_golden with
// AFFINITY_ON_I, and its MXFP8 torch wrapper), per slot of token_position_to_id: slot s = b*B + j of block b
// with expert e = block_to_expert[b] holds token t (or the padding):
//
//   gate, up   = x_t W_gate[e]^T + b_gate[e], x_t W_up[e]^T + b_up[e]   ([I]; x_t = 0 for a -1 slot)
//   clamped    gate to the non-linear limits, up to the linear limits
//   act        = SiLU(gate);  inter = act * up;  scaled = inter * a_t,e  (a = 0 for a -1 slot)
//   out        = scaled W_down[e]^T + a_t,e b_down[e]                    ([H], added to output row t)
//
// Two numerics, both in FP64:
//   exact      the inputs' values (BF16 as stored; pre-swizzled weights unswizzled; pre-quantized weights
//              dequantized), no rounding anywhere;
//   kernel     the kernel's numerics: each GEMM's operands MX-quantized along the contraction (trn3 scale
//              rule, wrapX groups, the FP8 format; pre-quantized weights as given), products summed in FP64;
//              the clamped gate/up, the activation products and the scaled intermediate rounded to
//              compute_dtype, the down GEMM's operand to bfloat16, each block's output rows to bfloat16 and
//              added to their slab in bfloat16 in block order (one slab per core; the slabs summed in
//              bfloat16). The remaining differences are FP32 vs FP64 sums and activation rounding.
//
// Weights are read expert by expert, a block of rows at a time (gemm_weight), so the host memory stays
// bounded.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kernels/api/package.h"
#include "kernels/moe/fwd_params.h"
#include "kernels/moe/moe_common.h"

namespace trnsim::kernels::moe {

struct SlotValues {
  std::vector<double> gate, up, act, inter, scaled;  // [I] each
  std::vector<double> out;                           // [H] when asked for, else empty
  std::vector<double> down;  // [H] with out under AFFINITY_ON_H: the down output before the affinity
};

// The kernel inputs the reference reads (null where the parameters have none).
struct FwdInputs {
  const tensor::HostTensor *hidden_states = nullptr, *expert_affinities_masked = nullptr;
  const tensor::HostTensor *gate_up_proj_weight = nullptr, *down_proj_weight = nullptr;
  const tensor::HostTensor *gate_up_weight_scales = nullptr, *down_weight_scales = nullptr;
  const tensor::HostTensor *token_position_to_id = nullptr, *block_to_expert = nullptr;
  const tensor::HostTensor *gate_and_up_proj_bias = nullptr, *down_proj_bias = nullptr;
  // From a lookup by input name (returns null when absent; Error if one the parameters need is missing).
  static FwdInputs from(const FwdParams& p,
                        const std::function<const tensor::HostTensor*(const std::string&)>& lookup);
};

class FwdReference {
 public:
  // Routing already validated (validate_routing).
  FwdReference(const FwdParams& p, const FwdInputs& inputs);

  int64_t slots() const { return N_ * B_; }
  int64_t token(int64_t slot) const { return token_[slot]; }  // -1 for a skipped padding slot
  int64_t expert(int64_t slot) const { return block_expert_[slot / B_]; }
  // The slots whose output goes to row r (r < rows), in block order.
  const std::vector<int64_t>& slots_of_row(int64_t r) const { return by_row_[r]; }

  // Values of `slots` in both numerics ([0] exact, [1] kernel); `with_out` slots also get their output row.
  std::map<int64_t, std::array<SlotValues, 2>> evaluate(const std::vector<int64_t>& slots,
                                                        const std::set<int64_t>& with_out) const;
  // Output row r from the values of its slots (evaluate()d with_out): exact sum, and the kernel's bfloat16
  // slab accumulation.
  void output_row(int64_t r, const std::map<int64_t, std::array<SlotValues, 2>>& v, double* exact,
                  double* kernel) const;
  // FP64 work of one slot (both numerics), for sampling budgets.
  double slot_flops(bool with_out) const;

 private:
  void expert_weights(int64_t e, ExpertWeight& gu, ExpertWeight& down) const;

  const FwdParams& p_;
  FwdInputs in_;
  int64_t N_ = 0, B_ = 0, I_ = 0, H_ = 0;
  std::vector<int64_t> token_;         // per slot: the row it reads (-1: skipped)
  std::vector<int32_t> block_expert_;  // per block
  std::vector<std::vector<int64_t>> by_row_;
};

}  // namespace trnsim::kernels::moe
