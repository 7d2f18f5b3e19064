#include "kernels/ref/kernel_refs.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>

#include "sim/base/error.h"

namespace trnsim::ref {
namespace {

std::string str_param(const nlohmann::json& p, const char* key, const char* fallback) {
  if (!p.contains(key) || p.at(key).is_null()) return fallback;
  if (!p.at(key).is_string()) throw InputError(fmt::format("parameter '{}': expected a string", key));
  return p.at(key).get<std::string>();
}

double dim(const nlohmann::json& p, const char* key) {
  if (!p.contains(key) || !p.at(key).is_number_integer())
    throw InputError(fmt::format("parameter '{}': expected an integer", key));
  return p.at(key).get<double>();
}

MxQuant mx_quant_of(const std::string& kernel, const nlohmann::json& p) {
  MxQuant q;
  const std::string fmt8 = str_param(p, "float8_dtype", "float8_e4m3fn");
  if (fmt8 == "float8_e4m3fn" || fmt8 == "e4m3")
    q.format = num::Fp8Format::E4M3FN;
  else if (fmt8 == "float8_e5m2" || fmt8 == "e5m2")
    q.format = num::Fp8Format::E5M2;
  else
    throw InputError(
        fmt::format("kernel '{}': parameter 'float8_dtype': no host reference for '{}'", kernel, fmt8));
  const std::string scheme = str_param(p, "quant_scheme", "wrapX");
  if (scheme == "wrapX")
    q.scheme = num::QuantScheme::WrapX;
  else if (scheme == "1x32")
    q.scheme = num::QuantScheme::OneX32;
  else
    throw InputError(
        fmt::format("kernel '{}': parameter 'quant_scheme': no host reference for '{}'", kernel, scheme));
  q.rule = num::parse_scale_rule(str_param(p, "scale_rule", "trn3"));
  return q;
}

bool flag(const nlohmann::json& p, const char* key, bool fallback) {
  if (!p.contains(key) || p.at(key).is_null()) return fallback;
  if (!p.at(key).is_boolean()) throw InputError(fmt::format("parameter '{}': expected true or false", key));
  return p.at(key).get<bool>();
}

bool non_null(const nlohmann::json& p, const char* key) {
  return p.contains(key) && !p.at(key).is_null();
}

}  // namespace

std::optional<KernelReference> kernel_reference(const std::string& kernel, const nlohmann::json& p) {
  KernelReference k;
  if (kernel == "matmul_bf16") {
    const double M = dim(p, "M"), N = dim(p, "N"), K = dim(p, "K");
    k.outputs.push_back({"y", "x", "w", Contract::Cols, Contract::Cols, std::nullopt, 2 * M * N * K});
  } else if (kernel == "matmul_mxfp8") {
    // x [M, K] (x_is_f_by_k) or [K, M]; w [N, K] (w_is_f_by_k) or [K, N]. Pre-swizzled or pre-quantized
    // operands have no reference here.
    if (flag(p, "x_is_swizzled", false) || flag(p, "w_is_swizzled", false) || non_null(p, "x_scales") ||
        non_null(p, "w_scales"))
      return std::nullopt;
    const double M = dim(p, "M"), N = dim(p, "N"), K = dim(p, "K");
    k.outputs.push_back({"y", "x", "w", flag(p, "x_is_f_by_k", true) ? Contract::Cols : Contract::Rows,
                         flag(p, "w_is_f_by_k", true) ? Contract::Cols : Contract::Rows,
                         mx_quant_of(kernel, p), 2 * M * N * K});
  } else if (kernel == "matmul_mxfp8_backward") {
    // weights [N, K] or, with weights_is_f_by_k, [K, N]; input_activation [M, K] or [K, M].
    if (flag(p, "weights_is_swizzled", false) || flag(p, "input_is_swizzled", false) ||
        flag(p, "output_grad_is_swizzled", false) || non_null(p, "weight_scales") ||
        non_null(p, "input_scales") || non_null(p, "output_grad_scales"))
      return std::nullopt;
    const double M = dim(p, "M"), N = dim(p, "N"), K = dim(p, "K");
    const MxQuant q = mx_quant_of(kernel, p);
    k.outputs.push_back({"input_grad", "output_grad", "weights", Contract::Cols,
                         flag(p, "weights_is_f_by_k", false) ? Contract::Cols : Contract::Rows, q,
                         2 * M * N * K});
    k.outputs.push_back({"weight_grad", "output_grad", "input_activation", Contract::Rows,
                         flag(p, "input_is_f_by_k", false) ? Contract::Cols : Contract::Rows, q,
                         2 * M * N * K});
  } else if (kernel == "nki_tutorial_matmul" || kernel == "matmul_lhsT_blocked") {
    // Calibration kernels (kernels/lib/calibration): result [M, N] = lhsT [K, M]^T . rhs [K, N].
    const double M = dim(p, "M"), N = dim(p, "N"), K = dim(p, "K");
    k.outputs.push_back(
        {"result", "lhsT", "rhs", Contract::Rows, Contract::Rows, std::nullopt, 2 * M * N * K});
  } else if (kernel == "matmul_lhs_dma_transpose") {
    const double M = dim(p, "M"), N = dim(p, "N"), K = dim(p, "K");
    k.outputs.push_back(
        {"result", "lhs", "rhs", Contract::Cols, Contract::Rows, std::nullopt, 2 * M * N * K});
  } else if (kernel == "cs149_vector_add") {
    k.outputs.push_back({"out", "a", "b", Contract::Cols, Contract::Rows, std::nullopt, 0, RefOp::Add});
  } else if (kernel == "transpose_2d") {
    k.outputs.push_back(
        {"out", "in", "in", Contract::Cols, Contract::Rows, std::nullopt, 0, RefOp::Transpose});
  } else {
    return std::nullopt;
  }
  for (const auto& o : k.outputs) k.useful_flops += o.flops;
  return k;
}

int64_t reference_block_stride(const OutputReference& ref, int64_t rows, bool full) {
  if (full || ref.flops <= kReferenceFlopBudget) return 1;
  const int64_t blocks = (rows + kSampleBlockRows - 1) / kSampleBlockRows;
  const auto stride = static_cast<int64_t>(std::ceil(ref.flops / kReferenceFlopBudget));
  return std::clamp<int64_t>(stride, 1, std::max<int64_t>(1, blocks));
}

OutputNumerics evaluate_elementwise(const OutputReference& ref, const std::vector<float>& lhs,
                                    const std::vector<int64_t>& lhs_shape, const std::vector<float>& rhs,
                                    const float* out, int64_t n_out, bool bf16_output) {
  const int64_t n = static_cast<int64_t>(lhs.size());
  std::vector<double> golden(lhs.size());
  if (ref.op == RefOp::Add) {
    if (rhs.size() != lhs.size() || n_out != n)
      throw InputError(fmt::format("output '{}': add of {} and {} values into {}", ref.output, lhs.size(),
                                   rhs.size(), n_out));
    for (int64_t i = 0; i < n; ++i) golden[i] = static_cast<double>(lhs[i]) + static_cast<double>(rhs[i]);
  } else {
    if (lhs_shape.size() != 2 || n_out != n)
      throw InputError(
          fmt::format("output '{}': transpose needs a 2-D input of {} values", ref.output, n_out));
    const int64_t R = lhs_shape[0], C = lhs_shape[1];
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) golden[c * R + r] = lhs[r * C + c];
  }
  OutputNumerics num;
  num.output = ref.output;
  num.bf16_output = bf16_output;
  num.rel_l2_bound = bf16_output ? kRelL2BoundBf16 : kRelL2BoundF32;
  num.vs_exact = compare(out, golden.data(), n);
  num.vs_quantized = num.vs_exact;
  const ErrorMetrics& e = num.vs_exact;
  if (e.nonfinite > 0)
    num.failures.push_back(fmt::format("{} of {} values are NaN or Inf", e.nonfinite, e.count));
  if (e.nonfinite == 0 && !nkilib_pass(e))
    num.failures.push_back(
        fmt::format("nkilib check vs exact failed: allclose {}, cosine {:.6g}, norm_euclidean {:.6g}",
                    e.allclose, e.cosine, e.norm_euclidean));
  if (e.nonfinite == 0 && !(e.rel_l2 <= num.rel_l2_bound))
    num.failures.push_back(fmt::format("rel_l2_vs_exact {:.6g} > {:.6g}", e.rel_l2, num.rel_l2_bound));
  num.pass = num.failures.empty();
  return num;
}

OutputNumerics evaluate_output(const OutputReference& ref, const Operand& lhs, const Operand& rhs,
                               const float* out, bool bf16_output, int64_t block_stride) {
  OutputNumerics n;
  n.output = ref.output;
  n.bf16_output = bf16_output;
  n.quantized = ref.quant.has_value();
  n.rel_l2_bound = bf16_output ? kRelL2BoundBf16 : kRelL2BoundF32;
  const int64_t rows = matmul_dims(lhs, rhs).R;
  const int64_t block_rows = block_stride > 1 ? kSampleBlockRows : 256;
  n.rows_total = rows;
  for (int64_t r0 = 0; r0 < rows; r0 += block_rows * block_stride)
    n.rows_compared += std::min(block_rows, rows - r0);
  n.vs_exact = compare_matmul(out, lhs, rhs, std::nullopt, block_rows, block_stride);
  n.vs_quantized =
      ref.quant ? compare_matmul(out, lhs, rhs, ref.quant, block_rows, block_stride) : n.vs_exact;
  const ErrorMetrics& e = n.vs_exact;
  if (e.nonfinite > 0)
    n.failures.push_back(fmt::format("{} of {} values are NaN or Inf", e.nonfinite, e.count));
  if (e.nonfinite == 0) {
    if (!e.allclose)
      n.failures.push_back(fmt::format("allclose_vs_exact: max(|k-g| - rtol|g|) = {:.6g} > atol = {:.6g}",
                                       e.allclose_excess, e.atol));
    if (!(e.cosine >= kNkilibMinCosine))
      n.failures.push_back(fmt::format("cosine_vs_exact {:.6g} < {}", e.cosine, kNkilibMinCosine));
    if (!(e.norm_euclidean <= kNkilibMaxNormEuclidean))
      n.failures.push_back(fmt::format("normalized_euclidean_vs_exact {:.6g} > {}", e.norm_euclidean,
                                       kNkilibMaxNormEuclidean));
    if (!(n.vs_quantized.rel_l2 <= n.rel_l2_bound))
      n.failures.push_back(fmt::format("rel_l2_vs_quantized {:.6g} > {:.6g} ({} output)",
                                       n.vs_quantized.rel_l2, n.rel_l2_bound,
                                       bf16_output ? "bfloat16" : "float32"));
  }
  n.pass = n.failures.empty();
  return n;
}

}  // namespace trnsim::ref
