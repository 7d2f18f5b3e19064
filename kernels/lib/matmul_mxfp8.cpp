// The MXFP8 matmul kernels' shared pieces on the MXFP8 pipeline (kernels/lib/mxfp8/). See matmul_mxfp8.h.
#include "kernels/lib/matmul_mxfp8.h"

#include <fmt/format.h>

#include "kernels/lib/mxfp8/layout.h"
#include "kernels/lib/mxfp8/lib_config.h"
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
        "already; the K-by-F layout is illegal for pre-swizzled inputs (set {}_is_swizzled=false for an "
        "unswizzled BF16 [K, {}])",
        kernel, names.param, names.param, names.f_name, names.param, names.f_name));
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

const char* const kMxScheduleDoc =
    "nki_library (default): nki-library's instruction stream (generic_matmul_mxfp8_api per block: K-by-F "
    "BF16 "
    "through the PE swizzle, DGT with vector offsets, quantize_mx per tile, no block reuse, DVE PSUM drains, "
    "BF16 PSUM for one K tile per block and BF16 output); tiling fields left null take the blocks of the "
    "library's auto_generate_default fallback heuristic (matmul_mxfp8_config.py; kernels/lib/mxfp8/"
    "lib_config.h), not its autotune table, which is library data and not copied (a shape the table lists "
    "gets the fallback's blocks here); quant_scheme 1x32 with a BF16 K-by-F operand, or with a BF16 F-by-K "
    "one whose K is no multiple of 512 (the library asserts both out: load_apis.py load_tile and "
    "load_tile_PE_Swizzle_1x32), is refused there. trnsim_optimized: this project's pipeline (K-by-F rows "
    "straight onto partitions, one quantize_mx per load, two-slot block reuse with prefetch, FP32 PSUM, "
    "drains alternating DVE and ACT; "
    "null tiling fields: this project's planner, the cheapest blocks that fit SBUF), which runs every "
    "parameter";

KernelBuild build_mx_kernel(std::vector<MxKernelMatmul> matmuls, MxSchedule schedule, bool fast_dma_transpose,
                            bool named_phases, const BuildOptions& options) {
  const bool library = schedule == MxSchedule::NkiLibrary;
  if (library)
    for (MxKernelMatmul& m : matmuls) {
      m.spec.tiling = mxfp8::lib::default_tiling(m.spec);  // the library's fallback for null fields
      if (const std::string why = mxfp8::lib::unsupported(m.spec); !why.empty())
        throw InputError(fmt::format(
            "{}: {} in the nki_library schedule; set \"schedule\": \"trnsim_optimized\" to run it",
            m.spec.kernel, why));
    }
  std::vector<mxfp8::Plan> plans;
  BuildOptions o = options;
  o.num_programs = 1;
  for (const MxKernelMatmul& m : matmuls) {
    plans.push_back(mxfp8::plan_matmul(m.spec, options.limits));
    if (plans.back().lnc2) o.num_programs = 2;
  }
  mxfp8::lib::SitePlan sites;
  const auto kernel = [&](Kernel& k) {
    mxfp8::lib::Tiles tiles(k, &sites);
    for (size_t i = 0; i < matmuls.size(); ++i) {
      std::optional<PhaseScope> phase;
      if (named_phases) phase.emplace(k, matmuls[i].output);
      if (library)
        emit_mx_kernel_matmul_lib(tiles, matmuls[i].spec, plans[i], matmuls[i].output, fast_dma_transpose);
      else
        emit_mx_kernel_matmul(k, matmuls[i].spec, plans[i], matmuls[i].output);
    }
  };
  if (library) {
    // The probe: every library tile one buffer, to learn what each must leave free (lib_api.h SitePlan).
    BuildOptions probe = o;
    probe.declare_only = true;
    build_program(kernel, probe);
    sites.finish();
  }
  return build_program(kernel, o);
}

}  // namespace trnsim::kernels
