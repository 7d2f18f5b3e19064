// Which host reference checks each output of a library kernel, and the numerics pass line.
//
// kernel_reference() maps a kernel name and its validated parameters (Registry::validate output) to one
// matmul reference per checked output, naming the kernel's HBM input and output tensors:
//   matmul_bf16            y [M, N] = x [M, K] . w [N, K]^T       (BF16 inputs; no MX quantization)
//   matmul_mxfp8_backward  input_grad [M, K]  = output_grad [M, N] . weights [N, K]
//                          weight_grad [N, K] = output_grad^T . input_activation [M, K]
//                          MX: trn3 scale rule, params float8_dtype and quant_scheme (nkilib-kernels.md §1.1,
//                          §1.2)
// Kernels without an entry have no reference (the numerics report is skipped).
//
// Pass line of one output (evaluate_output):
//   nkilib §3 against the EXACT (unquantized) reference: allclose (atol = 0.2 max|golden|, rtol = 1e-3),
//   cosine >= 0.995, normalized Euclidean <= 0.10; AND relative L2 against the QUANTIZED reference (for a
//   kernel without MX quantization, the exact one) <= 1e-5 for FP32 outputs, <= 2^-8 for BF16 outputs:
//   rounding to BF16 alone moves each element by up to 2^-9 of its value (rel L2 up to 2^-9, about 1e-3 in
//   practice), and 2^-8 leaves as much again for the FP32 accumulation order.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "kernels/ref/matmul_ref.h"
#include "kernels/ref/metrics.h"

namespace trnsim::ref {

inline constexpr double kRelL2BoundF32 = 1e-5;
inline constexpr double kRelL2BoundBf16 = 1.0 / 256.0;

// What an output reference computes: a matmul (the default), or, for the calibration kernels,
// out = lhs + rhs elementwise (same shapes) or out = lhs^T (2-D; rhs names lhs again).
enum class RefOp : uint8_t { Matmul, Add, Transpose };

struct OutputReference {
  std::string output;    // kernel output tensor
  std::string lhs, rhs;  // kernel input tensors
  Contract lhs_axis = Contract::Cols, rhs_axis = Contract::Rows;
  std::optional<MxQuant> quant;  // the kernel's MX quantization; empty: none
  double flops = 0;              // 2 R T C
  RefOp op = RefOp::Matmul;
};

struct KernelReference {
  std::vector<OutputReference> outputs;
  double useful_flops = 0;  // sum over outputs
};

// Empty if the kernel has no host reference. Throws InputError for a parameter value it cannot interpret.
std::optional<KernelReference> kernel_reference(const std::string& kernel, const nlohmann::json& params);

struct OutputNumerics {
  std::string output;
  bool bf16_output = false;
  bool quantized = false;  // the reference applies MX quantization
  ErrorMetrics vs_exact;
  ErrorMetrics vs_quantized;
  double rel_l2_bound = kRelL2BoundF32;
  bool pass = false;
  std::vector<std::string> failures;  // one line per failed criterion, e.g. "cosine_vs_exact 0.98 < 0.995"
  int64_t rows_compared = 0;          // output rows the references were computed for
  int64_t rows_total = 0;
};

// Row sampling for large outputs: blocks of kSampleBlockRows rows, every stride-th one, so that each of the
// two FP64 reference matmuls of an output costs at most about kReferenceFlopBudget (stride 1: all rows).
inline constexpr int64_t kSampleBlockRows = 32;
inline constexpr double kReferenceFlopBudget = 32e9;
int64_t reference_block_stride(const OutputReference& ref, int64_t rows, bool full);

// Checks an Add or Transpose output: `lhs` (shape lhs_shape) and `rhs` values in FP32, `out` the kernel's
// output (n_out values). FP64 golden values, exact; pass line as for a matmul output without quantization.
// InputError if the sizes do not match the op.
OutputNumerics evaluate_elementwise(const OutputReference& ref, const std::vector<float>& lhs,
                                    const std::vector<int64_t>& lhs_shape, const std::vector<float>& rhs,
                                    const float* out, int64_t n_out, bool bf16_output);

// Checks kernel output `out` ([R, C] values; bf16_output says it was stored as BF16) against both references.
// block_stride > 1 compares every block_stride-th block of kSampleBlockRows rows (reference_block_stride).
OutputNumerics evaluate_output(const OutputReference& ref, const Operand& lhs, const Operand& rhs,
                               const float* out, bool bf16_output, int64_t block_stride = 1);

}  // namespace trnsim::ref
