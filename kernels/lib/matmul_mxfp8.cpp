// matmul_mxfp8 (forward, Trn3): Y[M, N] = X[M, K] W[N, K]^T on the MXFP8 pipeline (kernels/lib/mxfp8/), and
// the registry helpers it shares with matmul_mxfp8_backward. See matmul_mxfp8.h.
#include "kernels/lib/matmul_mxfp8.h"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/api/registry.h"
#include "kernels/lib/mxfp8/layout.h"
#include "kernels/lib/mxfp8/matmul.h"
#include "sim/base/error.h"

namespace trnsim::kernels {

const std::vector<std::string> kMxTilingFields = {"tile_m",           "tile_k",           "tile_n",
                                                  "TILES_IN_BLOCK_M", "TILES_IN_BLOCK_N", "TILES_IN_BLOCK_K",
                                                  "TILES_IN_LOAD_M",  "TILES_IN_LOAD_N"};

mxfp8::Tiling parse_mx_tiling(const nlohmann::json& j, const std::string& kernel, const std::string& param) {
  mxfp8::Tiling t;
  if (j.is_null()) return t;
  int64_t* fields[] = {&t.tile_m,   &t.tile_k,   &t.tile_n, &t.blocks_m,
                       &t.blocks_n, &t.blocks_k, &t.load_m, &t.load_n};
  for (const auto& [key, value] : j.items()) {
    const auto it = std::find(kMxTilingFields.begin(), kMxTilingFields.end(), key);
    if (it == kMxTilingFields.end())
      throw InputError(fmt::format("{}: parameter '{}': unknown field '{}' (known: {})", kernel, param, key,
                                   fmt::join(kMxTilingFields, ", ")));
    if (value.is_null()) continue;
    if (!value.is_number_integer() || value.get<int64_t>() < 1)
      throw InputError(
          fmt::format("{}: parameter '{}': field '{}' must be null or a positive integer, got {}", kernel,
                      param, key, value.dump()));
    *fields[it - kMxTilingFields.begin()] = value.get<int64_t>();
  }
  return t;
}

std::vector<ParamSpec> mx_shared_params(const nlohmann::json& shard_default,
                                        const std::string& float8_default) {
  return {
      {.name = "tile_loop_order",
       .type = ParamType::Enum,
       .default_value = "mnk",
       .allowed = {"mnk", "nmk"},
       .doc =
           "tile order inside a block: M tiles outer ('mnk') or N tiles outer ('nmk'); K innermost in PSUM"},
      {.name = "float8_dtype",
       .type = ParamType::Enum,
       .default_value = float8_default,
       .allowed = {"float8_e4m3fn", "float8_e5m2"},
       .doc = "MXFP8 element type (x4-packed on chip)"},
      {.name = "output_dtype",
       .type = ParamType::Enum,
       .default_value = "bfloat16",
       .allowed = {"bfloat16", "float32"},
       .doc = "dtype of the outputs"},
      {.name = "run_with_lnc2",
       .type = ParamType::Bool,
       .default_value = true,
       .doc = "run on both physical cores (num_programs 2), splitting one free dim; false: one core"},
      {.name = "lnc_2_shard_rhs",
       .type = ParamType::Bool,
       .default_value = shard_default,
       .doc = "under LNC2 split N (true) or M (false); null: N if N >= M, and LNC2 is dropped when that dim "
              "is <= 128",
       .nullable = true},
      {.name = "use_scale_packing",
       .type = ParamType::Bool,
       .default_value = false,
       .doc = "4 consecutive K tiles share one 128-partition scale tile at offsets 0/4/8/12; pre-quantized "
              "scales are then [ceil(K/2048)*128, F]"},
      {.name = "spill_reload",
       .type = ParamType::Bool,
       .default_value = false,
       .doc = "write each quantized block to an HBM scratch when first produced and reload it later instead "
              "of re-loading and re-quantizing the BF16 data"},
      {.name = "quant_scheme",
       .type = ParamType::Enum,
       .default_value = "wrapX",
       .allowed = {"wrapX", "1x32"},
       .doc = "x4 interleave of K: wrapX (partition p of a 512-row tile holds rows p+128j) or 1x32 (rows "
              "4p..4p+3: OCP 32-contiguous groups)"},
  };
}

void apply_mx_shared_params(const nlohmann::json& j, mxfp8::MatmulSpec& spec) {
  spec.nmk = j.at("tile_loop_order") == "nmk";
  spec.fp8 = j.at("float8_dtype") == "float8_e5m2" ? num::Fp8Format::E5M2 : num::Fp8Format::E4M3FN;
  spec.out_dtype = j.at("output_dtype") == "float32" ? DType::F32 : DType::BF16;
  spec.run_with_lnc2 = j.at("run_with_lnc2").get<bool>();
  if (!j.at("lnc_2_shard_rhs").is_null()) spec.shard_rhs = j.at("lnc_2_shard_rhs").get<bool>();
  spec.use_scale_packing = j.at("use_scale_packing").get<bool>();
  spec.spill_reload = j.at("spill_reload").get<bool>();
  spec.scheme = j.at("quant_scheme") == "1x32" ? num::QuantScheme::OneX32 : num::QuantScheme::WrapX;
}

mxfp8::Operand mx_input_operand(const std::string& kernel, const MxInputNames& names, bool f_by_k,
                                bool swizzled, const nlohmann::json& scales_shape, bool pe_transpose) {
  if (swizzled && !f_by_k && scales_shape.is_null())
    throw InputError(fmt::format(
        "{}: {}_is_swizzled=true with {}_is_f_by_k=false: a pre-swizzled operand is [K/4, 4{}] (K on rows) "
        "already; the K-by-F layout is illegal for pre-swizzled inputs",
        kernel, names.param, names.param, names.f_name));
  mxfp8::Operand o;
  o.name = names.tensor, o.param = names.param, o.scales_name = names.scales, o.f_name = names.f_name;
  if (!scales_shape.is_null()) {
    o.layout = mxfp8::Layout::Quantized;
    o.scales_shape = scales_shape.get<std::vector<int64_t>>();
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

void emit_mx_kernel_matmul(Kernel& k, const mxfp8::MatmulSpec& spec, const mxfp8::Plan& plan,
                           const std::string& output) {
  mxfp8::MatmulSpec s = spec;
  mxfp8::StoreRows out(k.output(output, s.out_dtype, {s.M, s.N}));
  bind_mx_input(k, s.lhs, s.K, s.M, s.fp8);
  bind_mx_input(k, s.rhs, s.K, s.N, s.fp8);
  mxfp8::emit_matmul(k, s, plan, out);
}

void register_matmul_mxfp8(Registry& r) {
  KernelInfo info;
  info.name = "matmul_mxfp8";
  info.doc =
      "Y[M,N] = X[M,K] W[N,K]^T on Trn3 with MXFP8: BF16 operands quantized on chip (quantize_mx, x4 "
      "interleave "
      "of K), nc_matmul_mx, PSUM accumulation over K tiles, FP32 SBUF accumulation over K blocks; LNC2 "
      "sharding of N or M (nkilib matmul_mxfp8)";
  const auto dim = dim_param;
  const auto tiling = [](const char* n, const char* doc) {
    return ParamSpec{
        .name = n, .type = ParamType::Int, .min = 1, .max = 1 << 16, .doc = doc, .nullable = true};
  };
  info.params = {
      dim("M", "rows of X and Y"),
      dim("K", "contraction (a multiple of 128)"),
      dim("N", "rows of W, columns of Y"),
      tiling("tile_m", "stationary (LHS) tile free size, multiple of 32, <= 128; null: 128"),
      tiling("tile_k",
             "logical contraction per nc_matmul_mx: 128, 256 or 512; null: 512 (K if K is 128 or 256)"),
      tiling("tile_n",
             "moving (RHS) tile free size, multiple of 32, <= 512; null: largest of 512/256/128 "
             "dividing the per-core N"),
      tiling("TILES_IN_BLOCK_M", "M tiles per block; null: chosen to fit SBUF with the fewest reloads"),
      tiling("TILES_IN_BLOCK_N", "N tiles per block; null: auto"),
      tiling("TILES_IN_BLOCK_K", "K tiles per block; null: auto"),
      tiling("TILES_IN_LOAD_M",
             "M tiles per DMA load, divides TILES_IN_BLOCK_M; null: widest <= 1024 columns"),
      tiling("TILES_IN_LOAD_N", "N tiles per DMA load, divides TILES_IN_BLOCK_N; null: auto"),
      {.name = "x_is_f_by_k",
       .type = ParamType::Bool,
       .default_value = true,
       .doc = "x is [M, K] (true) or [K, M] (false; needs M % 512 == 0)"},
      {.name = "w_is_f_by_k",
       .type = ParamType::Bool,
       .default_value = true,
       .doc = "w is [N, K] (true) or [K, N] (false; needs N % 512 == 0)"},
      {.name = "x_is_swizzled",
       .type = ParamType::Bool,
       .default_value = false,
       .doc = "x is BF16 pre-swizzled [K/4, 4M] (quant_scheme interleave)"},
      {.name = "w_is_swizzled",
       .type = ParamType::Bool,
       .default_value = false,
       .doc = "w is BF16 pre-swizzled [K/4, 4N]"},
      {.name = "x_scales",
       .type = ParamType::Shape,
       .default_value = nullptr,
       .min = 1,
       .doc =
           "x is pre-quantized: x holds x4 data [K/4, M] and input 'x_scales' the E8M0 scales of this shape "
           "([K/4, M] unpacked, [ceil(K/2048)*128, M] packed); null: x is BF16",
       .nullable = true},
      {.name = "w_scales",
       .type = ParamType::Shape,
       .default_value = nullptr,
       .min = 1,
       .doc = "w is pre-quantized: x4 data [K/4, N] plus input 'w_scales' of this shape; null: w is BF16",
       .nullable = true},
  };
  for (ParamSpec& s : mx_shared_params(nullptr, "float8_e4m3fn")) info.params.push_back(std::move(s));
  info.build = [](const nlohmann::json& j, const BuildOptions& options) {
    mxfp8::MatmulSpec spec;
    spec.kernel = "kernel 'matmul_mxfp8'";
    spec.scope = "mm";
    spec.M = j.at("M").get<int64_t>();
    spec.K = j.at("K").get<int64_t>();
    spec.N = j.at("N").get<int64_t>();
    nlohmann::json tiles = nlohmann::json::object();
    for (const std::string& f : kMxTilingFields) tiles[f] = j.at(f);
    spec.tiling = parse_mx_tiling(tiles, spec.kernel, "tiling");
    apply_mx_shared_params(j, spec);
    spec.lhs = mx_input_operand(spec.kernel, {"x", "x", "x_scales", "M"}, j.at("x_is_f_by_k").get<bool>(),
                                j.at("x_is_swizzled").get<bool>(), j.at("x_scales"), false);
    spec.rhs = mx_input_operand(spec.kernel, {"w", "w", "w_scales", "N"}, j.at("w_is_f_by_k").get<bool>(),
                                j.at("w_is_swizzled").get<bool>(), j.at("w_scales"), false);
    const mxfp8::Plan plan = mxfp8::plan_matmul(spec, options.limits);
    BuildOptions o = options;
    o.num_programs = plan.lnc2 ? 2 : 1;
    return build_program([&](Kernel& k) { emit_mx_kernel_matmul(k, spec, plan, "y"); }, o);
  };
  r.add(std::move(info));
}

}  // namespace trnsim::kernels
