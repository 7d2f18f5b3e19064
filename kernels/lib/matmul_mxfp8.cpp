// The MXFP8 matmul kernels' shared pieces on the MXFP8 pipeline (kernels/lib/mxfp8/). See matmul_mxfp8.h.
#include "kernels/lib/matmul_mxfp8.h"

#include <fmt/format.h>

#include "kernels/lib/mxfp8/layout.h"
#include "kernels/lib/mxfp8/lib_matmul.h"
#include "kernels/lib/mxfp8/matmul.h"
#include "sim/base/error.h"

namespace trnsim::kernels {

mxfp8::Operand mx_input_operand(const std::string& kernel, const MxInputNames& names, bool f_by_k,
                                bool swizzled, const std::optional<std::vector<int64_t>>& scales_shape,
                                bool pe_transpose) {
  if (swizzled && !f_by_k && !scales_shape)
    throw InputError(fmt::format(
        "{}: {}_is_swizzled=true with {}_is_f_by_k=false: a pre-swizzled operand is [K/4, 4{}] (K on rows) "
        "already; the K-by-F layout is illegal for pre-swizzled inputs",
        kernel, names.param, names.param, names.f_name));
  mxfp8::Operand o;
  o.name = names.tensor, o.param = names.param, o.scales_name = names.scales, o.f_name = names.f_name;
  if (scales_shape) {
    o.layout = mxfp8::Layout::Quantized;
    o.scales_shape = *scales_shape;
  } else if (swizzled) {
    o.layout = mxfp8::Layout::Swizzled;
  } else {
    o.layout = f_by_k ? mxfp8::Layout::FByK : mxfp8::Layout::KByF;
    o.swizzle = pe_transpose ? mxfp8::Swizzle::Pe : mxfp8::Swizzle::Dgt;
  }
  return o;
}

void bind_mx_input(Kernel& k, mxfp8::Operand& o, int64_t K, int64_t F, num::Fp8Format fp8) {
  switch (o.layout) {
    case mxfp8::Layout::Quantized:
      o.data = k.input(o.name, mxfp8::x4_dtype(fp8), {K / 4, F});
      o.scales = k.input(o.scales_name, DType::E8M0, o.scales_shape);
      return;
    case mxfp8::Layout::Swizzled:
      o.data = k.input(o.name, DType::BF16, {K / 4, 4 * F});
      return;
    case mxfp8::Layout::FByK:
      o.data = k.input(o.name, DType::BF16, {F, K});
      return;
    case mxfp8::Layout::KByF:
      o.data = k.input(o.name, DType::BF16, {K, F});
      return;
  }
}

namespace {

// The spec with its operands bound to this core's kernel inputs.
mxfp8::MatmulSpec bound(Kernel& k, const mxfp8::MatmulSpec& spec) {
  mxfp8::MatmulSpec s = spec;
  bind_mx_input(k, s.lhs, s.K, s.M, s.fp8);
  bind_mx_input(k, s.rhs, s.K, s.N, s.fp8);
  return s;
}

}  // namespace

void emit_mx_kernel_matmul(Kernel& k, const mxfp8::MatmulSpec& spec, const mxfp8::Plan& plan,
                           const std::string& output) {
  mxfp8::StoreRows out(k.output(output, spec.out_dtype, {spec.M, spec.N}));
  mxfp8::emit_matmul(k, bound(k, spec), plan, out);
}

void emit_mx_kernel_matmul_lib(mxfp8::lib::Tiles& t, const mxfp8::MatmulSpec& spec, const mxfp8::Plan& plan,
                               const std::string& output, bool fast_dma_transpose) {
  Kernel& k = t.kernel();
  const View out = k.output(output, spec.out_dtype, {spec.M, spec.N});
  mxfp8::lib::emit_matmul(t, bound(k, spec), plan, out, fast_dma_transpose);
}

}  // namespace trnsim::kernels
