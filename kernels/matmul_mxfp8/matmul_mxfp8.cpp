// matmul_mxfp8 (forward, Trn3): Y[M, N] = X[M, K] W[N, K]^T with on-chip MX quantization (kernels/lib/
// matmul_mxfp8.h). The nki-library kernel of the same name (matmul_mxfp8_generic_kernel.py at 092a49dc: its
// entry arguments, with the tiling config flattened into parameters). The `schedule` parameter picks the
// instruction stream as matmul_mxfp8_backward's does: by default the library's own (one
// generic_matmul_mxfp8_api pass over the core's blocks, mxfp8/lib_matmul.h; matmul_mxfp8_backward is two of
// these calls), or trnsim_optimized, this project's restructured pipeline (mxfp8/matmul.h).
#include <fmt/format.h>

#include "kernels/api/package.h"
#include "kernels/lib/matmul_mxfp8.h"
#include "kernels/lib/mxfp8_params.h"

namespace trnsim::kernels {
namespace {

struct Params {
  int64_t M = 0, K = 0, N = 0;
  MxTilingConfig tiling;
  bool x_is_f_by_k = true, w_is_f_by_k = true;
  bool x_is_swizzled = true, w_is_swizzled = true;
  std::optional<std::vector<int64_t>> x_scales, w_scales;
  MxSharedParams shared;
  std::optional<bool> lnc_2_shard_rhs;
  bool fast_dma_transpose = false;
  MxSchedule schedule = MxSchedule::NkiLibrary;

  static void describe(Schema<Params>& s) {
    s.dim(&Params::M, "M", "rows of X and Y");
    s.dim(&Params::K, "K", "contraction (a multiple of 128)");
    s.dim(&Params::N, "N", "rows of W, columns of Y");
    s.include(&Params::tiling);
    s.add(&Params::x_is_f_by_k, "x_is_f_by_k", "x is [M, K] (true) or [K, M] (false; needs M % 512 == 0)",
          true);
    s.add(&Params::w_is_f_by_k, "w_is_f_by_k", "w is [N, K] (true) or [K, N] (false; needs N % 512 == 0)",
          true);
    s.add(&Params::x_is_swizzled, "x_is_swizzled",
          "x is BF16 pre-swizzled [K/4, 4M] (quant_scheme interleave); default true as nki-library documents "
          "matmul_mxfp8 (lhs_is_swizzled, 092a49dc); false: x is [M, K] or [K, M] by x_is_f_by_k; ignored "
          "when x_scales is set",
          true);
    s.add(&Params::w_is_swizzled, "w_is_swizzled",
          "w is BF16 pre-swizzled [K/4, 4N]; default true as nki-library documents (rhs_is_swizzled); false: "
          "w is [N, K] or [K, N] by w_is_f_by_k",
          true);
    s.add(&Params::x_scales, "x_scales",
          "x is pre-quantized: x holds x4 data [K/4, M] and input 'x_scales' the E8M0 scales of this shape "
          "([K/4, M] "
          "unpacked, [ceil(K/2048)*128, M] packed); null: x is BF16")
        .at_least(1);
    s.add(&Params::w_scales, "w_scales",
          "w is pre-quantized: x4 data [K/4, N] plus input 'w_scales' of this shape; null: w is BF16")
        .at_least(1);
    s.include(&Params::shared);
    s.add(&Params::lnc_2_shard_rhs, "lnc_2_shard_rhs",
          "under LNC2 split N (true) or M (false); null: N if N >= M, and LNC2 is dropped when that dim is "
          "<= 128");
    s.add(&Params::fast_dma_transpose, "fast_dma_transpose",
          "nkilib matmul_mxfp8's fast_dma_transpose (default false): nki_library loads a DGT operand by one "
          "direct dma_transpose per tile instead of the vector-offset pattern (iota, DVE transposes, "
          "tensor_scalar and an indirect dma_transpose); trnsim_optimized always uses the direct pattern, so "
          "there it has no effect",
          false);
    describe_mx_schedule(s, &Params::schedule);
  }
};

mxfp8::MatmulSpec spec_of(const Params& p) {
  mxfp8::MatmulSpec spec;
  spec.kernel = "kernel 'matmul_mxfp8'";
  spec.scope = "mm";
  spec.M = p.M, spec.K = p.K, spec.N = p.N;
  spec.tiling = p.tiling.tiling();
  p.shared.apply(spec);
  spec.shard_rhs = p.lnc_2_shard_rhs;
  spec.lhs = mx_input_operand(spec.kernel, {"x", "x", "x_scales", "M"}, p.x_is_f_by_k, p.x_is_swizzled,
                              p.x_scales, false);
  spec.rhs = mx_input_operand(spec.kernel, {"w", "w", "w_scales", "N"}, p.w_is_f_by_k, p.w_is_swizzled,
                              p.w_scales, false);
  return spec;
}

}  // namespace

std::unique_ptr<KernelDef> matmul_mxfp8_kernel() {
  KernelPackage<Params> k;
  k.name = "matmul_mxfp8";
  k.doc =
      "Y[M,N] = X[M,K] W[N,K]^T on Trn3 with MXFP8: BF16 operands quantized on chip (quantize_mx, x4 "
      "interleave "
      "of K), nc_matmul_mx, PSUM accumulation over K tiles, FP32 SBUF accumulation over K blocks; LNC2 "
      "sharding "
      "of N or M (nkilib matmul_mxfp8)";
  k.cores = [](const Params& p) { return p.shared.run_with_lnc2 ? 2 : 1; };
  k.cores_param = "run_with_lnc2";
  k.build = [](const Params& p, const BuildOptions& options) {
    return build_mx_kernel({{spec_of(p), "y"}}, p.schedule, p.fast_dma_transpose, false, options);
  };
  k.input_hint = [](const Params& p, const std::string& input, const std::string& file,
                    const std::vector<int64_t>& shape) {
    return mx_input_hint({spec_of(p)}, input, file, shape);
  };
  k.useful_flops = [](const Params& p) { return 2.0 * p.M * p.N * p.K; };
  // Pre-swizzled operands are unswizzled and pre-quantized ones dequantized for the host reference.
  k.checks = [](const Params& p) {
    const MatmulOperand x{"x", p.x_is_f_by_k ? ref::Contract::Cols : ref::Contract::Rows,
                          p.x_scales ? "x_scales" : "", p.x_is_swizzled && !p.x_scales};
    const MatmulOperand w{"w", p.w_is_f_by_k ? ref::Contract::Cols : ref::Contract::Rows,
                          p.w_scales ? "w_scales" : "", p.w_is_swizzled && !p.w_scales};
    return std::vector<OutputCheck>{matmul_check("y", x, w, p.shared.quant(), 2.0 * p.M * p.N * p.K)};
  };
  return make_kernel(std::move(k));
}

}  // namespace trnsim::kernels
