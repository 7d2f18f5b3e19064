// matmul_mxfp8_backward (Trn3): the gradients of Y = X W^T as two independent matmul_mxfp8 calls in one
// program (nkilib matmul_mxfp8_generic_backward_kernel.py):
//   phase 1, input_grad  dX[M, K] = dY W:    LHS dY [M, N] F-by-K, RHS W [N, K] K-by-F, contraction N;
//   phase 2, weight_grad dW[N, K] = dY^T X:  LHS dY [M, N] K-by-F, RHS X [M, K] K-by-F, contraction M.
// Every BF16 operand is quantized along its contraction axis inside its phase (dY twice: along N, then M).
// Pre-quantized or pre-swizzled dY is rejected: one quantized/swizzled copy can only serve one contraction
// axis.
#include <fmt/format.h>

#include "kernels/api/registry.h"
#include "kernels/lib/matmul_mxfp8.h"
#include "kernels/lib/mxfp8/plan.h"
#include "sim/base/error.h"

namespace trnsim::kernels {
namespace {

constexpr const char* kName = "kernel 'matmul_mxfp8_backward'";

KernelBuild build_backward(const nlohmann::json& j, const BuildOptions& options) {
  const int64_t M = j.at("M").get<int64_t>(), K = j.at("K").get<int64_t>(), N = j.at("N").get<int64_t>();
  if (!j.at("output_grad_scales").is_null())
    throw InputError(fmt::format(
        "{}: parameter 'output_grad_scales': a pre-quantized output_grad cannot be used: dY is the "
        "contraction "
        "operand along N in input_grad (dY W) and along M in weight_grad (dY^T X), so one set of MX scales "
        "serves only one of the two phases; pass output_grad as BF16",
        kName));
  if (j.at("output_grad_is_swizzled").get<bool>())
    throw InputError(fmt::format(
        "{}: parameter 'output_grad_is_swizzled': a pre-swizzled output_grad cannot be used: the x4 "
        "interleave "
        "runs along the contraction axis, which is N for input_grad and M for weight_grad; pass output_grad "
        "unswizzled",
        kName));
  const bool w_fk = j.at("weights_is_f_by_k").get<bool>(), x_fk = j.at("input_is_f_by_k").get<bool>();

  const bool pe = j.at("disable_dma_transpose").get<bool>();

  mxfp8::MatmulSpec dx;
  apply_mx_shared_params(j, dx);
  mxfp8::MatmulSpec dw = dx;
  dx.kernel = fmt::format("{} (input_grad phase, dX = dY W)", kName);
  dx.scope = "dx";
  dx.M = M, dx.K = N, dx.N = K;
  dx.lhs = mx_input_operand(dx.kernel, {"output_grad", "output_grad", "", "M"}, true, false, nullptr, pe);
  // A pre-swizzled W is [N/4, 4K] whatever its BF16 orientation.
  const bool w_sw = j.at("weights_is_swizzled").get<bool>();
  dx.rhs = mx_input_operand(dx.kernel, {"weights", "weights", "weight_scales", "K"}, w_fk || w_sw, w_sw,
                            j.at("weight_scales"), pe);
  dx.tiling = parse_mx_tiling(j.at("input_grad_config"), kName, "input_grad_config");

  dw.kernel = fmt::format("{} (weight_grad phase, dW = dY^T X)", kName);
  dw.scope = "dw";
  dw.M = N, dw.K = M, dw.N = K;
  dw.lhs = mx_input_operand(dw.kernel, {"output_grad", "output_grad", "", "N"}, false, false, nullptr, pe);
  const bool x_sw = j.at("input_is_swizzled").get<bool>();
  dw.rhs = mx_input_operand(dw.kernel, {"input_activation", "input", "input_scales", "K"}, x_fk || x_sw, x_sw,
                            j.at("input_scales"), pe);
  dw.tiling = parse_mx_tiling(j.at("weight_grad_config"), kName, "weight_grad_config");

  const mxfp8::Plan p1 = mxfp8::plan_matmul(dx, options.limits), p2 = mxfp8::plan_matmul(dw, options.limits);
  BuildOptions o = options;
  o.num_programs = p1.lnc2 || p2.lnc2 ? 2 : 1;
  return build_program(
      [&](Kernel& k) {
        emit_mx_kernel_matmul(k, dx, p1, "input_grad");
        emit_mx_kernel_matmul(k, dw, p2, "weight_grad");
      },
      o);
}

}  // namespace

void register_matmul_mxfp8_backward(Registry& r) {
  KernelInfo info;
  info.name = "matmul_mxfp8_backward";
  info.doc =
      "gradients of Y = X W^T on Trn3 with MXFP8 (nkilib matmul_mxfp8_backward): inputs output_grad dY "
      "[M,N], "
      "weights W [N,K], input_activation X [M,K] (BF16); outputs input_grad dX = dY W [M,K] and weight_grad "
      "dW = dY^T X [N,K], two independent matmul_mxfp8 calls, each operand quantized along its contraction";
  const auto dim = dim_param;
  const std::string fields = fmt::format("{}", fmt::join(kMxTilingFields, ", "));
  info.params = {
      dim("M", "tokens: rows of output_grad and input_activation"),
      dim("K", "in-features: columns of weights and input_activation"),
      dim("N", "out-features: columns of output_grad, rows of weights"),
      {.name = "input_grad_config",
       .type = ParamType::Object,
       .default_value = nullptr,
       .doc = "tiling of the input_grad phase (M = M, contraction N, N = K): object with any of " + fields +
              " (each an integer or null = auto); null: all auto",
       .nullable = true},
      {.name = "weight_grad_config",
       .type = ParamType::Object,
       .default_value = nullptr,
       .doc = "tiling of the weight_grad phase (M = N, contraction M, N = K): same fields; null: all auto",
       .nullable = true},
      {.name = "output_grad_scales",
       .type = ParamType::Shape,
       .default_value = nullptr,
       .min = 1,
       .doc = "pre-quantized output_grad scales: always rejected (one quantization cannot serve both "
              "contraction axes); null",
       .nullable = true},
      {.name = "weight_scales",
       .type = ParamType::Shape,
       .default_value = nullptr,
       .min = 1,
       .doc = "weights pre-quantized along N: 'weights' holds x4 data [N/4, K] and input 'weight_scales' the "
              "E8M0 "
              "scales of this shape ([N/4, K] or packed [ceil(N/2048)*128, K]); null: BF16 weights",
       .nullable = true},
      {.name = "input_scales",
       .type = ParamType::Shape,
       .default_value = nullptr,
       .min = 1,
       .doc =
           "input_activation pre-quantized along M: x4 data [M/4, K] plus input 'input_scales' of this shape "
           "([M/4, K] or packed [ceil(M/2048)*128, K]); null: BF16",
       .nullable = true},
      {.name = "output_grad_is_swizzled",
       .type = ParamType::Bool,
       .default_value = false,
       .doc = "true is rejected: a swizzle interleaves one contraction axis, dY needs two"},
      {.name = "weights_is_swizzled",
       .type = ParamType::Bool,
       .default_value = false,
       .doc = "weights are BF16 pre-swizzled along N: [N/4, 4K]"},
      {.name = "input_is_swizzled",
       .type = ParamType::Bool,
       .default_value = false,
       .doc = "input_activation is BF16 pre-swizzled along M: [M/4, 4K]"},
      {.name = "weights_is_f_by_k",
       .type = ParamType::Bool,
       .default_value = false,
       .doc = "weights given transposed as [K, N] (contraction N the fast axis; loaded with dma_transpose)"},
      {.name = "input_is_f_by_k",
       .type = ParamType::Bool,
       .default_value = false,
       .doc = "input_activation given transposed as [K, M] (loaded with dma_transpose)"},
      {.name = "fast_dma_transpose",
       .type = ParamType::Bool,
       .default_value = false,
       .doc = "nkilib: direct 4-D access patterns instead of vector offsets for DGT; trnsim's dma_transpose "
              "always uses direct access patterns, so both values build the same program (K % 128 still "
              "required)"},
      {.name = "disable_dma_transpose",
       .type = ParamType::Bool,
       .default_value = false,
       .doc = "load F-by-K BF16 operands (output_grad in input_grad; weights or input_activation given "
              "F-by-K) with the PE loader (row DMAs, nc_transpose into PSUM, copy to SBUF) instead of "
              "dma_transpose; the same quantized bytes"},
  };
  for (ParamSpec& s : mx_shared_params(true, "float8_e4m3fn")) info.params.push_back(std::move(s));
  info.build = build_backward;
  r.add(std::move(info));
}

}  // namespace trnsim::kernels
