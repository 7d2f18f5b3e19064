// Host references of whole chains (kernels/workload/chain.h): a pipeline file's "reference" names one, and
// after every stage ran with numerics it checks the chain's tensors against an FP64 computation of the whole
// chain from its first inputs, as the kernels' own checks do for one kernel (kernels/api/checks.h kinds).
//
//   lm_head_backward   a cross_entropy_bwd stage and a matmul_mxfp8_backward stage (the LM head's backward,
//                      M = rows, N = V): the FP64 gradient G [rows, V] of the cross entropy (ce_reference.h)
//                      from the logits, then dX = G W [M, K] and dW = G^T X [V, K] in FP64 (ref::gemm_f64);
//                      checked: the gradient the CE stage wrote (BF16 input_grad, or each MXFP8 orientation
//                      dequantized) against G, and the matmul's input_grad and weight_grad against dX and dW.
//                      Tolerance checks (nki-library's comparator against FP64; rel L2 <= 2^-8 for a BF16
//                      gradient, <= 2^-3 for what MXFP8 quantization touched: E4M3 rounds each value to 3
//                      significand bits, a relative error up to 2^-4, on both operands of the matmuls).
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "kernels/api/package.h"
#include "sim/tensor/check_result.h"

namespace trnsim::kernels {

// One stage as a chain reference sees it; inputs and outputs are null when checking the plan (before runs).
struct ChainStageData {
  std::string name, kernel;
  nlohmann::json params;
  const Tensors* inputs = nullptr;
  const Tensors* outputs = nullptr;
};

struct ChainReference {
  std::string name, doc;
  // InputError (the reason) when the stages do not fit the reference; runs before anything is simulated.
  std::function<void(const std::vector<ChainStageData>&)> check;
  std::function<std::vector<tensor::CheckResult>(const std::vector<ChainStageData>&)> run;
};

const std::vector<ChainReference>& chain_references();
// nullptr if there is none of that name.
const ChainReference* find_chain_reference(const std::string& name);

}  // namespace trnsim::kernels
