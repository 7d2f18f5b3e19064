// The MXFP8 matmul kernels' shared pieces on the MXFP8 pipeline (kernels/lib/mxfp8/). See matmul_mxfp8.h.
#include "kernels/lib/matmul_mxfp8.h"

#include <fmt/format.h>

#include <algorithm>

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

namespace {

// The hint for operand `o` ([K, F] logically, K named `c`) of `spec`; see mx_input_hint.
std::string operand_hint(const mxfp8::MatmulSpec& spec, const mxfp8::Operand& o, int64_t K, int64_t F,
                         const std::string& c, const std::string& file, const std::vector<int64_t>& shape,
                         bool flags) {
  const bool f_by_k = shape == std::vector<int64_t>{F, K}, k_by_f = shape == std::vector<int64_t>{K, F};
  const bool swizzled = shape == std::vector<int64_t>{K / 4, 4 * F};
  if (!f_by_k && !k_by_f && !swizzled) return "";
  const std::string is_swizzled = o.param + "_is_swizzled", is_f_by_k = o.param + "_is_f_by_k";
  // A square array fits both orientations: the user's own knows which.
  const bool square = f_by_k && k_by_f;
  const std::string fk = fmt::format("[{}, {}]", o.f_name, c), kf = fmt::format("[{}, {}]", c, o.f_name);
  const std::string orientation =
      square ? fmt::format("\"{}\": true (if it is {}) or false (if {})", is_f_by_k, fk, kf)
             : fmt::format("\"{}\": {}", is_f_by_k, f_by_k ? "true" : "false");
  const std::string scheme = spec.scheme == num::QuantScheme::OneX32 ? " --quant-scheme 1x32" : "";
  const std::string axis = square ? "row|col" : f_by_k ? "row" : "col";
  const std::string form =
      swizzled ? fmt::format("BF16 pre-swizzled [{}/4, 4{}]", c, o.f_name)
      : square ? fmt::format(
                     "BF16 {} {} or {}, {} = {} the contraction (--axis row for the first, col for the "
                     "second)",
                     o.name, fk, kf, c, K)
               : fmt::format("BF16 {} {}, {} = {} the contraction", o.name, f_by_k ? fk : kf, c, K);
  switch (o.layout) {
    case mxfp8::Layout::Quantized:
      if (swizzled) return "";
      return fmt::format(
          "it has the shape of the {}; '{}' is set, so '{}' holds x4 data [{}/4, {}]: make it and the scales "
          "with `trnsim quantize {} --format {} --rule trn3 --axis {} --layout x4{}{} --data DATA.npy "
          "--scales "
          "SCALES.npy`, or leave '{}' unset to give BF16 (docs/kernels.md)",
          form, o.scales_name, o.name, c, o.f_name, file, spec.fp8 == num::Fp8Format::E5M2 ? "e5m2" : "e4m3",
          axis, scheme, spec.use_scale_packing ? " --use-scale-packing" : "", o.scales_name);
    case mxfp8::Layout::Swizzled:
      if (swizzled) return "";
      return fmt::format(
          "it has the shape of the {}; {}the kernel reads '{}' pre-swizzled [{}/4, 4{}] = [{}, {}]: make it "
          "with `trnsim quantize {} --axis {} --layout bf16-swizzled{} --data OUT.npy` (docs/kernels.md)",
          form,
          flags
              ? fmt::format("set \"{}\": false and {} to read it as it is, or, as ", is_swizzled, orientation)
              : "",
          o.name, c, o.f_name, K / 4, 4 * F, file, axis, scheme);
    case mxfp8::Layout::FByK:
    case mxfp8::Layout::KByF:
      if (!flags) return "";
      return fmt::format("it has the shape of the {}: set {} to read it as it is", form,
                         swizzled ? fmt::format("\"{}\": true", is_swizzled) : orientation);
  }
  return "";
}

}  // namespace

std::string mx_input_hint(const std::vector<mxfp8::MatmulSpec>& specs, const std::string& input,
                          const std::string& file, const std::vector<int64_t>& shape,
                          const std::map<std::string, std::string>& contraction,
                          const std::vector<std::string>& fixed) {
  const bool flags = std::find(fixed.begin(), fixed.end(), input) == fixed.end();
  const auto c = contraction.find(input);
  const std::string k_name = c == contraction.end() ? "K" : c->second;
  for (const mxfp8::MatmulSpec& s : specs) {
    if (s.lhs.name == input) return operand_hint(s, s.lhs, s.K, s.M, k_name, file, shape, flags);
    if (s.rhs.name == input) return operand_hint(s, s.rhs, s.K, s.N, k_name, file, shape, flags);
  }
  return "";
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
