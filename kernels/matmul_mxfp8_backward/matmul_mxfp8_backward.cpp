// matmul_mxfp8_backward (Trn3): the gradients of Y = X W^T as two independent matmul_mxfp8 calls in one
// program (nki-library matmul_mxfp8_generic_backward_kernel.py):
//   phase 1, input_grad  dX[M, K] = dY W:    LHS dY [M, N] F-by-K, RHS W [N, K] K-by-F, contraction N;
//   phase 2, weight_grad dW[N, K] = dY^T X:  LHS dY [M, N] K-by-F, RHS X [M, K] K-by-F, contraction M.
// Every BF16 operand is quantized along its contraction axis inside its phase (dY twice: along N, then M).
// A pre-quantized dY: nki-library hands the one (data, scales) pair of output_grad_scales to both phases;
// phase 1 reads it as x4 data [N/4, M] quantized along N, as here. For phase 2 one set cannot serve (its
// contraction is M): trnsim takes a second, columnwise set (output_grad_columnwise x4 [M/4, N] with
// output_grad_columnwise_scales), an extension of the library's arguments, and refuses output_grad_scales
// without it (the library's phase 2 fails its K check unless M == N, and then multiplies dY X).
// Trn2: nki-library has no Trn2 path (its test marks the kernel TRN3-only; nc_matmul_mx and quantize_mx are
// NeuronCore-v4 instructions, NKI ISA docs), so a Trn2 hardware config is refused (mxfp8/plan.h).
#include <fmt/format.h>

#include "kernels/api/package.h"
#include "kernels/lib/matmul_mxfp8.h"
#include "kernels/lib/mxfp8_params.h"
#include "sim/base/error.h"

namespace trnsim::kernels {
namespace {

constexpr const char* kName = "kernel 'matmul_mxfp8_backward'";

struct Params {
  int64_t M = 0, K = 0, N = 0;
  std::optional<MxTilingConfig> input_grad_config, weight_grad_config;
  std::optional<std::vector<int64_t>> output_grad_scales, output_grad_columnwise_scales, weight_scales,
      input_scales;
  bool output_grad_is_swizzled = false, weights_is_swizzled = false, input_is_swizzled = false;
  bool weights_is_f_by_k = false, input_is_f_by_k = false;
  bool fast_dma_transpose = false, disable_dma_transpose = false;
  MxSharedParams shared;
  std::optional<bool> lnc_2_shard_rhs = true;
  MxSchedule schedule = MxSchedule::NkiLibrary;

  static void describe(Schema<Params>& s) {
    s.dim(&Params::M, "M", "tokens: rows of output_grad and input_activation");
    s.dim(&Params::K, "K", "in-features: columns of weights and input_activation");
    s.dim(&Params::N, "N", "out-features: columns of output_grad, rows of weights");
    s.object(&Params::input_grad_config, "input_grad_config",
             "tiling of the input_grad phase (M = M, contraction N, N = K): the fields of a "
             "MatmulMxfp8KernelConfig "
             "(each an integer or null = auto); null: all auto");
    s.object(&Params::weight_grad_config, "weight_grad_config",
             "tiling of the weight_grad phase (M = N, contraction M, N = K): same fields; null: all auto");
    s.add(
         &Params::output_grad_scales, "output_grad_scales",
         "output_grad pre-quantized along N for input_grad (nki-library's output_grad_scales): "
         "'output_grad' holds x4 data [N/4, M] and input 'output_grad_scales' the E8M0 scales of this shape "
         "([N/4, M] or packed [ceil(N/2048)*128, M]); needs output_grad_columnwise_scales, since nki-library "
         "hands the same pair to weight_grad, whose contraction is M; null: BF16 output_grad")
        .at_least(1);
    s.add(
         &Params::output_grad_columnwise_scales, "output_grad_columnwise_scales",
         "trnsim extension: dY pre-quantized along M for weight_grad: input 'output_grad_columnwise' x4 data "
         "[M/4, N] and input 'output_grad_columnwise_scales' of this shape ([M/4, N] or packed "
         "[ceil(M/2048)*128, N]); without output_grad_scales, input_grad quantizes a BF16 output_grad; null: "
         "weight_grad quantizes output_grad itself")
        .at_least(1);
    s.add(
         &Params::weight_scales, "weight_scales",
         "weights pre-quantized along N: 'weights' holds x4 data [N/4, K] and input 'weight_scales' the E8M0 "
         "scales of this shape ([N/4, K] or packed [ceil(N/2048)*128, K]); null: BF16 weights")
        .at_least(1);
    s.add(&Params::input_scales, "input_scales",
          "input_activation pre-quantized along M: x4 data [M/4, K] plus input 'input_scales' of this shape "
          "([M/4, K] or packed [ceil(M/2048)*128, K]); null: BF16")
        .at_least(1);
    s.add(&Params::output_grad_is_swizzled, "output_grad_is_swizzled",
          "true is rejected, as nki-library does: it passes the flag to both phases and weight_grad reads dY "
          "K-by-F, which matmul_mxfp8 asserts out for pre-swizzled inputs (matmul_mxfp8_generic_kernel.py)",
          false);
    s.add(&Params::weights_is_swizzled, "weights_is_swizzled",
          "weights are BF16 pre-swizzled along N: [N/4, 4K]", false);
    s.add(&Params::input_is_swizzled, "input_is_swizzled",
          "input_activation is BF16 pre-swizzled along M: [M/4, 4K]", false);
    s.add(&Params::weights_is_f_by_k, "weights_is_f_by_k",
          "weights given transposed as [K, N] (contraction N the fast axis; loaded with dma_transpose)",
          false);
    s.add(&Params::input_is_f_by_k, "input_is_f_by_k",
          "input_activation given transposed as [K, M] (loaded with dma_transpose)", false);
    s.add(&Params::fast_dma_transpose, "fast_dma_transpose",
          "nkilib matmul_mxfp8's fast_dma_transpose (its backward passes the default, false): nki_library "
          "loads a DGT operand by one direct dma_transpose per tile instead of the vector-offset pattern "
          "(iota, DVE transposes, tensor_scalar and an indirect dma_transpose); trnsim_optimized always uses "
          "the direct pattern, so there it has no effect (K % 128 still required)",
          false);
    s.add(&Params::disable_dma_transpose, "disable_dma_transpose",
          "load F-by-K BF16 operands (output_grad in input_grad; weights or input_activation given F-by-K) "
          "with "
          "the PE loader (row DMAs, nc_transpose into PSUM, copy to SBUF) instead of dma_transpose; the same "
          "quantized bytes",
          false);
    s.include(&Params::shared);
    s.add(&Params::lnc_2_shard_rhs, "lnc_2_shard_rhs",
          "under LNC2 split N (true) or M (false) of both phases; null: per phase, N if N >= M, and LNC2 is "
          "dropped when that dim is <= 128",
          true);
    describe_mx_schedule(s, &Params::schedule);
  }
};

// The two matmuls (input_grad, weight_grad) of the parameters, operands not yet bound.
std::vector<MxKernelMatmul> backward_matmuls(const Params& p) {
  const int64_t M = p.M, K = p.K, N = p.N;
  if (p.output_grad_is_swizzled)
    throw InputError(fmt::format(
        "{}: parameter 'output_grad_is_swizzled': nki-library passes it to both phases, and weight_grad "
        "reads "
        "output_grad K-by-F (contraction M), which matmul_mxfp8 asserts out for pre-swizzled inputs "
        "('K-by-F layout (lhs_is_f_by_k=False) is not supported for pre-swizzled inputs', "
        "matmul_mxfp8_generic_kernel.py); pass output_grad unswizzled, or pre-quantized (output_grad_scales "
        "with output_grad_columnwise_scales)",
        kName));
  if (p.output_grad_scales && !p.output_grad_columnwise_scales)
    throw InputError(fmt::format(
        "{}: parameter 'output_grad_scales' without 'output_grad_columnwise_scales': the x4 data of "
        "output_grad is quantized along N, input_grad's contraction; nki-library hands the same pair to "
        "weight_grad, whose contraction is M (its K check fails unless M == N, and then it computes dY X); "
        "give the columnwise set too (inputs output_grad_columnwise [M/4, N] and its scales)",
        kName));
  const bool pe = p.disable_dma_transpose;
  mxfp8::MatmulSpec dx;
  p.shared.apply(dx);
  dx.shard_rhs = p.lnc_2_shard_rhs;
  mxfp8::MatmulSpec dw = dx;
  dx.kernel = fmt::format("{} (input_grad phase, dX = dY W)", kName);
  dx.scope = "dx";
  dx.M = M, dx.K = N, dx.N = K;
  dx.lhs = mx_input_operand(dx.kernel, {"output_grad", "output_grad", "output_grad_scales", "M"}, true, false,
                            p.output_grad_scales, pe);
  // A pre-swizzled W is [N/4, 4K] whatever its BF16 orientation.
  dx.rhs = mx_input_operand(dx.kernel, {"weights", "weights", "weight_scales", "K"},
                            p.weights_is_f_by_k || p.weights_is_swizzled, p.weights_is_swizzled,
                            p.weight_scales, pe);
  dx.tiling = p.input_grad_config.value_or(MxTilingConfig{}).tiling();

  dw.kernel = fmt::format("{} (weight_grad phase, dW = dY^T X)", kName);
  dw.scope = "dw";
  dw.M = N, dw.K = M, dw.N = K;
  dw.lhs = p.output_grad_columnwise_scales
               ? mx_input_operand(dw.kernel,
                                  {"output_grad_columnwise", "output_grad_columnwise",
                                   "output_grad_columnwise_scales", "N"},
                                  false, false, p.output_grad_columnwise_scales, pe)
               : mx_input_operand(dw.kernel, {"output_grad", "output_grad", "", "N"}, false, false,
                                  std::nullopt, pe);
  dw.rhs =
      mx_input_operand(dw.kernel, {"input_activation", "input", "input_scales", "K"},
                       p.input_is_f_by_k || p.input_is_swizzled, p.input_is_swizzled, p.input_scales, pe);
  dw.tiling = p.weight_grad_config.value_or(MxTilingConfig{}).tiling();
  return {{dx, "input_grad"}, {dw, "weight_grad"}};
}

KernelBuild build_backward(const Params& p, const BuildOptions& options) {
  return build_mx_kernel(backward_matmuls(p), p.schedule, p.fast_dma_transpose, true, options);
}

}  // namespace

std::unique_ptr<KernelDef> matmul_mxfp8_backward_kernel() {
  KernelPackage<Params> k;
  k.name = "matmul_mxfp8_backward";
  k.doc =
      "gradients of Y = X W^T on Trn3 with MXFP8 (nkilib matmul_mxfp8_backward): inputs output_grad dY "
      "[M,N], "
      "weights W [N,K], input_activation X [M,K] (BF16, pre-swizzled or pre-quantized; dY pre-quantized "
      "rowwise and columnwise); outputs input_grad dX = dY W [M,K] and weight_grad dW = dY^T X [N,K], two "
      "independent matmul_mxfp8 calls, each operand quantized along its contraction. Trn2 is refused: "
      "nki-library has no Trn2 path (TRN3-only tests; nc_matmul_mx and quantize_mx are NeuronCore-v4 "
      "instructions)";
  k.cores = [](const Params& p) { return p.shared.run_with_lnc2 ? 2 : 1; };
  k.cores_param = "run_with_lnc2";
  k.build = build_backward;
  // dY has no layout flags: a BF16 [M, N], or x4 data with its scales.
  k.input_hint = [](const Params& p, const std::string& input, const std::string& file,
                    const std::vector<int64_t>& shape) {
    std::vector<mxfp8::MatmulSpec> specs;
    for (const MxKernelMatmul& m : backward_matmuls(p)) specs.push_back(m.spec);
    return mx_input_hint(
        specs, input, file, shape,
        {{"output_grad", "N"}, {"weights", "N"}, {"output_grad_columnwise", "M"}, {"input_activation", "M"}},
        {"output_grad", "output_grad_columnwise"});
  };
  k.useful_flops = [](const Params& p) { return 4.0 * p.M * p.N * p.K; };
  // Pre-swizzled operands are unswizzled and pre-quantized ones dequantized for the host reference.
  k.checks = [](const Params& p) {
    const double f = 2.0 * p.M * p.N * p.K;
    const MatmulOperand dy_rows{"output_grad", ref::Contract::Cols,
                                p.output_grad_scales ? "output_grad_scales" : ""};
    const MatmulOperand dy_cols =
        p.output_grad_columnwise_scales
            ? MatmulOperand{"output_grad_columnwise", ref::Contract::Rows, "output_grad_columnwise_scales"}
            : MatmulOperand{"output_grad", ref::Contract::Rows};
    const MatmulOperand w{"weights", p.weights_is_f_by_k ? ref::Contract::Cols : ref::Contract::Rows,
                          p.weight_scales ? "weight_scales" : "", p.weights_is_swizzled && !p.weight_scales};
    const MatmulOperand x{"input_activation", p.input_is_f_by_k ? ref::Contract::Cols : ref::Contract::Rows,
                          p.input_scales ? "input_scales" : "", p.input_is_swizzled && !p.input_scales};
    return std::vector<OutputCheck>{matmul_check("input_grad", dy_rows, w, p.shared.quant(), f),
                                    matmul_check("weight_grad", dy_cols, x, p.shared.quant(), f)};
  };
  return make_kernel(std::move(k));
}

}  // namespace trnsim::kernels
