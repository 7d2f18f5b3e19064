// trnsim quantize: MXFP8-quantize a 2-D .npy array (float32, or raw BF16 bits as uint16), or lay it out as a
// kernel's BF16 pre-swizzled input.
//
// Input: 2-D [rows, cols]. The MX blocks of 32 run along the columns (--axis row) or the rows (--axis col).
// --layout te (default): TransformerEngine's MXFP8 tensors; both dims multiples of 32 (TE's rule, which its
//   scale layouts assume). Outputs (all written together or not at all):
//     --data     uint8 [rows, cols]: FP8 bytes (E4M3FN or E5M2), same layout as the input.
//     --scales   uint8 E8M0 scale bytes in TransformerEngine's layouts (docs/facts/mx-numerics.md §5):
//                  compact:  2-D, padded, row-major: axis row [roundup(rows, 128), roundup(cols/32, 4)],
//                            axis col [roundup(rows/32, 4), roundup(cols, 128)];
//                  swizzled: 1-D, the GEMM-swizzled (cuBLAS 128x4 tile) order of the same padded matrix.
//                Padding bytes are 0x00 in both.
// --layout x4: the pre-quantized form the Trainium kernels' inputs take (an operand [K, F] with a
//   *_scales parameter, e.g. matmul_mxfp8_backward's output_grad_scales / weight_scales, blockwise_mm_*'s
//   *_weight_scales): K is the blocked dim (cols with --axis row, the array read as [F = rows, K]; rows with
//   --axis col, [K, F = cols]), interleaved as --quant-scheme (the kernels' quant_scheme, wrapX or 1x32)
//   says.
//     --data     int32 [K/4, F]: the float8_*_x4 elements (four FP8 bytes each), as the workloads read x4.
//     --scales   uint8 E8M0 [K/4, F] (the unpacked scale tile), or with --use-scale-packing (the kernels'
//                use_scale_packing) the packed [ceil(K/2048)*128, F]; bytes that hold no scale are 0x7F.
//   K must be a multiple of 128 (wrapX) or 32 (1x32). With --rule trn3 the bytes are those quantize_mx makes
//   on chip from the same BF16 values, so a kernel run on them computes what it computes from the BF16 input.
//   --dequant     float32 [rows, cols] (optional): the dequantized values, in the input's layout.
// --layout bf16-swizzled: the BF16 pre-swizzled form the kernels' *_is_swizzled inputs take (matmul_mxfp8's x
// and
//   w by default, matmul_mxfp8_backward's weights / input_activation, blockwise_mm_fwd_mxfp8's weights): the
//   values rounded to BF16 (RNE, as a float32 .npy given to a BF16 input is) and interleaved as
//   --quant-scheme says, K and F as for x4; no quantization, so no --format, --rule, --scales or --dequant.
//     --data     uint16 [K/4, 4F]: BF16 bits, logical (k, f) at partition row P, column 4 f + j
//                (sim/numerics/scale_layout.h swizzle_pos).
// x4 and bf16-swizzled also take a 3-D [E, rows, cols] array: E operands side by side (an MoE layer's stacked
//   weights), each as above; the outputs are [E, ...].
// Prints one summary line; the time and rate cover the quantization only (no file I/O).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "sim/base/error.h"
#include "sim/io/npy.h"
#include "sim/io/output_files.h"
#include "sim/io/replace_check.h"
#include "sim/numerics/mx.h"
#include "sim/numerics/scale_layout.h"
#include "tools/trnsim/commands.h"
#include "tools/trnsim/run_log.h"

namespace trnsim::cli {
namespace {

struct QuantizeOptions {
  std::string input;
  std::string format;
  std::string rule;
  std::string axis;
  std::string layout = "te";
  std::string scale_layout;  // TE: compact (default) or swizzled
  std::string quant_scheme;  // x4: wrapX (default) or 1x32
  bool use_scale_packing = false;
  std::string data_out;
  std::string scales_out;
  std::string dequant_out;
  int threads = 1;
};

template <typename In>
float load(In v) {
  if constexpr (std::is_same_v<In, uint16_t>)
    return num::bf16_to_f32(v);
  else
    return v;
}

// Counts elements clipped to +-max (|x * 2^(127-scale)| above the largest finite value) and NaN outputs.
template <typename In>
void count_specials(const In* x, const std::vector<uint8_t>& data, const std::vector<uint8_t>& scales,
                    int64_t rows, int64_t cols, num::MxAxis axis, num::Fp8Format fmt, int64_t& saturated,
                    int64_t& nan) {
  const bool e4m3 = fmt == num::Fp8Format::E4M3FN;
  const uint8_t max_code = e4m3 ? 0x7E : 0x7B;
  const float max = num::fp8_max_finite(fmt);
  saturated = nan = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t m = data[r * cols + c] & 0x7F;
      if (e4m3 ? m == 0x7F : m > 0x7C) {
        ++nan;
      } else if (m == max_code) {
        const uint8_t s =
            axis == num::MxAxis::Row ? scales[r * (cols / 32) + c / 32] : scales[(r / 32) * cols + c];
        if (std::abs(load(x[r * cols + c]) * num::e8m0_rcp_f32(s)) > max) ++saturated;
      }
    }
}

// The operands of --layout x4 / bf16-swizzled: a 2-D [rows, cols] array is one operand, a 3-D [E, rows, cols]
// array E stacked operands (an MoE layer's per-expert weights), each read as [F = rows, K = cols] (--axis
// row) or [K = rows, F = cols] (--axis col).
struct OperandStack {
  int64_t E = 1, rows = 0, cols = 0, K = 0, F = 0;
  bool row_axis = true;
  num::QuantScheme scheme = num::QuantScheme::WrapX;
  // The output shape [K/4, cols_out] (with E in front for a stack).
  std::vector<int64_t> shape(int64_t a, int64_t b) const {
    return in_stack ? std::vector<int64_t>{E, a, b} : std::vector<int64_t>{a, b};
  }
  bool in_stack = false;
};

OperandStack operand_stack(const QuantizeOptions& o, const io::NpyArray& in) {
  OperandStack s;
  s.in_stack = in.shape.size() == 3;
  s.E = s.in_stack ? in.shape[0] : 1;
  s.rows = in.shape[in.shape.size() - 2], s.cols = in.shape.back();
  s.row_axis = o.axis == "row";
  s.K = s.row_axis ? s.cols : s.rows, s.F = s.row_axis ? s.rows : s.cols;
  s.scheme = o.quant_scheme == "1x32" ? num::QuantScheme::OneX32 : num::QuantScheme::WrapX;
  const int64_t align = s.scheme == num::QuantScheme::WrapX ? 128 : 32;
  if (s.K % align != 0)
    throw InputError(o.input + ": --layout " + o.layout + " --quant-scheme " + o.quant_scheme +
                     " interleaves K = " + std::to_string(s.K) + " (the " +
                     (s.row_axis ? "columns" : "rows") + " of shape " + io::shape_str(in.shape) +
                     ") in groups of " + std::to_string(align) + ": K must be a multiple of " +
                     std::to_string(align));
  return s;
}

// The logical [K, F] operand e of the stack.
template <typename In>
std::vector<In> logical_kf(const In* x, const OperandStack& s, int64_t e) {
  const In* m = x + e * s.rows * s.cols;
  std::vector<In> kf(static_cast<size_t>(s.K * s.F));
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t c = 0; c < s.cols; ++c) kf[s.row_axis ? c * s.F + r : r * s.F + c] = m[r * s.cols + c];
  return kf;
}

// --layout x4: the kernels' pre-quantized operand layout (see the top of this file).
template <typename In>
void quantize_x4_layout(const QuantizeOptions& o, const io::NpyArray& in, const In* x) {
  const OperandStack s = operand_stack(o, in);
  const int64_t K = s.K, F = s.F;
  const auto fmt = o.format == "e4m3" ? num::Fp8Format::E4M3FN : num::Fp8Format::E5M2;
  const num::ScaleRule rule = num::parse_scale_rule(o.rule);
  const num::ScaleShape ts = num::trainium_scale_shape(K, F, o.use_scale_packing);
  std::vector<uint8_t> data(static_cast<size_t>(s.E * K * F));
  std::vector<uint8_t> tile(static_cast<size_t>(s.E * ts.size()));
  std::vector<float> dequant(o.dequant_out.empty() ? 0 : static_cast<size_t>(s.E * K * F));
  const bool e4m3 = fmt == num::Fp8Format::E4M3FN;
  const uint8_t max_code = e4m3 ? 0x7E : 0x7B;
  const float max = num::fp8_max_finite(fmt);
  int64_t saturated = 0, nan = 0;
  double seconds = 0;
  for (int64_t e = 0; e < s.E; ++e) {
    const std::vector<In> kf = logical_kf(x, s, e);
    uint8_t* d = data.data() + e * K * F;
    uint8_t* t = tile.data() + e * ts.size();
    const auto t0 = std::chrono::steady_clock::now();
    num::quantize_operand_x4(kf.data(), K, F, s.scheme, fmt, rule, o.use_scale_packing, d, t);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Dequantized values (in the input's layout), and the elements clipped to +-max or NaN.
    std::vector<uint8_t> compact(static_cast<size_t>(K / 32 * F));
    num::scales_from_trainium(t, K, F, o.use_scale_packing, 0, compact.data());
    for (int64_t k = 0; k < K; ++k) {
      const num::SwizzlePos sp = num::swizzle_pos(k, 0, K, F, s.scheme);
      const int64_t g = num::mx_group_row(k, K, s.scheme);
      for (int64_t f = 0; f < F; ++f) {
        const uint8_t b = d[sp.partition * 4 * F + sp.free + 4 * f], m = b & 0x7F, sc = compact[g * F + f];
        const int64_t i = e * K * F + (s.row_axis ? f * s.cols + k : k * s.cols + f);
        if (e4m3 ? m == 0x7F : m > 0x7C)
          ++nan;
        else if (m == max_code && std::abs(load(x[i]) * num::e8m0_rcp_f32(sc)) > max)
          ++saturated;
        if (!dequant.empty()) dequant[i] = num::fp8_to_f32(b, fmt) * num::e8m0_to_f32(sc);
      }
    }
  }
  const std::vector<int64_t> data_shape = s.shape(K / 4, F), scale_shape = s.shape(ts.rows, ts.cols);
  std::vector<io::NpyOutput> outs = {{o.data_out, io::NpyDType::I32, data_shape, data.data()},
                                     {o.scales_out, io::NpyDType::U8, scale_shape, tile.data()}};
  if (!o.dequant_out.empty()) outs.push_back({o.dequant_out, io::NpyDType::F32, in.shape, dequant.data()});
  io::write_npy_all(outs);
  std::printf(
      "quantize: shape %s %s -> %s rule=%s axis=%s layout=x4 quant_scheme=%s scales=%s: data %s x4, %.3f ms, "
      "%.1f M elements/s, saturated %lld, nan %lld\n",
      io::shape_str(in.shape).c_str(), std::is_same_v<In, uint16_t> ? "bf16" : "float32", o.format.c_str(),
      o.rule.c_str(), o.axis.c_str(), o.quant_scheme.c_str(), o.use_scale_packing ? "packed" : "unpacked",
      io::shape_str(data_shape).c_str(), seconds * 1e3,
      static_cast<double>(s.E * K * F) / std::max(seconds, 1e-9) / 1e6, static_cast<long long>(saturated),
      static_cast<long long>(nan));
}

// --layout bf16-swizzled: the kernels' BF16 pre-swizzled operand [K/4, 4F] (see the top of this file).
template <typename In>
void swizzle_layout(const QuantizeOptions& o, const io::NpyArray& in, const In* x) {
  const OperandStack s = operand_stack(o, in);
  const int64_t K = s.K, F = s.F;
  std::vector<uint16_t> out(static_cast<size_t>(s.E * K * F));
  int64_t rounded = 0;
  for (int64_t e = 0; e < s.E; ++e) {
    const std::vector<In> kf = logical_kf(x, s, e);
    std::vector<uint16_t> bf16(kf.size());
    for (size_t i = 0; i < kf.size(); ++i) {
      if constexpr (std::is_same_v<In, uint16_t>) {
        bf16[i] = kf[i];
      } else {
        bf16[i] = num::f32_to_bf16(kf[i]);
        rounded += num::bf16_to_f32(bf16[i]) != kf[i] && !std::isnan(kf[i]);
      }
    }
    num::swizzle(bf16.data(), K, F, s.scheme, out.data() + e * K * F);
  }
  const std::vector<int64_t> data_shape = s.shape(K / 4, 4 * F);
  io::write_npy_all({{o.data_out, io::NpyDType::U16, data_shape, out.data()}});
  std::printf(
      "quantize: shape %s %s -> bf16 axis=%s layout=bf16-swizzled quant_scheme=%s: data %s (BF16 bits), "
      "rounded to BF16 %lld\n",
      io::shape_str(in.shape).c_str(), std::is_same_v<In, uint16_t> ? "bf16" : "float32", o.axis.c_str(),
      o.quant_scheme.c_str(), io::shape_str(data_shape).c_str(), static_cast<long long>(rounded));
}

// The options each layout takes: InputError naming a missing or misplaced one, before any file is touched.
void check_layout_options(const QuantizeOptions& o) {
  const bool quantized = o.layout != "bf16-swizzled";
  if (quantized) {
    for (const auto& [value, flag] : {std::pair{&o.format, "--format"}, std::pair{&o.rule, "--rule"},
                                      std::pair{&o.scales_out, "--scales"}})
      if (value->empty())
        throw InputError(std::string(flag) + " is required with --layout " + o.layout +
                         " (only --layout bf16-swizzled, which writes BF16, takes none)");
    return;
  }
  for (const auto& [set, flag] :
       {std::pair{!o.format.empty(), "--format"}, std::pair{!o.rule.empty(), "--rule"},
        std::pair{!o.scales_out.empty(), "--scales"}, std::pair{!o.dequant_out.empty(), "--dequant"},
        std::pair{!o.scale_layout.empty(), "--scale-layout"},
        std::pair{o.use_scale_packing, "--use-scale-packing"}})
    if (set)
      throw InputError(
          std::string(flag) +
          " does not apply to --layout bf16-swizzled: it writes the BF16 values pre-swizzled, not "
          "quantized (use --layout x4 for pre-quantized inputs)");
}

void run_quantize(const QuantizeOptions& o) {
  check_layout_options(o);
  // An output must not replace the input: the input would be gone if the user mistyped a flag.
  for (const std::string* out : {&o.data_out, &o.scales_out, &o.dequant_out}) {
    std::error_code ec;
    if (!out->empty() && std::filesystem::equivalent(o.input, *out, ec))
      throw InputError(*out + ": is the input file; choose another output path");
  }
  // No two outputs on one file (also one folder under two names: a bind mount), refused before the work.
  {
    std::vector<io::NamedPath> paths{{o.input, "the input", true}, {o.data_out, "--data"}};
    if (!o.scales_out.empty()) paths.push_back({o.scales_out, "--scales"});
    if (!o.dequant_out.empty()) paths.push_back({o.dequant_out, "--dequant"});
    io::check_distinct_files(paths);
  }
  // No output through a symlink (sim/io/output_files.h), refused before the work.
  io::check_no_links(o.data_out, "--data");
  if (!o.scales_out.empty()) io::check_no_links(o.scales_out, "--scales");
  if (!o.dequant_out.empty()) io::check_no_links(o.dequant_out, "--dequant");
  // No file the user had is replaced (sim/io/replace_check.h), refused before the work.
  io::check_may_replace(o.data_out, "--data");
  if (!o.scales_out.empty()) io::check_may_replace(o.scales_out, "--scales");
  if (!o.dequant_out.empty()) io::check_may_replace(o.dequant_out, "--dequant");
  io::NpyArray in = io::read_npy(o.input);
  // A 3-D array is a stack of operands for the kernels' layouts (an MoE layer's [E, ...] weights).
  const bool stacks = o.layout == "x4" || o.layout == "bf16-swizzled";
  if (in.shape.size() != 2 && !(stacks && in.shape.size() == 3))
    throw InputError(
        fmt::format("{}: quantize input: expected a 2-D [rows, cols] array{}, found shape {}", o.input,
                    stacks ? " or a 3-D [E, rows, cols] stack"
                           : " (a 3-D [E, rows, cols] stack only with --layout x4 or bf16-swizzled)",
                    io::shape_str(in.shape)));
  io::require_dtype(in, {io::NpyDType::F32, io::NpyDType::U16}, "quantize input");
  if (std::find(in.shape.begin(), in.shape.end(), 0) != in.shape.end())
    throw InputError(o.input + ": quantize input: the array is empty (shape " + io::shape_str(in.shape) +
                     ")");
  if (o.layout == "x4") {
    if (!o.scale_layout.empty())
      throw InputError("--scale-layout " + o.scale_layout +
                       " is a TransformerEngine layout; --layout x4 takes --use-scale-packing instead");
    if (in.dtype == io::NpyDType::U16)
      quantize_x4_layout(o, in, in.data<uint16_t>());
    else
      quantize_x4_layout(o, in, in.data<float>());
    return;
  }
  if (o.layout == "bf16-swizzled") {
    if (in.dtype == io::NpyDType::U16)
      swizzle_layout(o, in, in.data<uint16_t>());
    else
      swizzle_layout(o, in, in.data<float>());
    return;
  }
  const int64_t rows = in.shape[0], cols = in.shape[1];
  if (!o.quant_scheme.empty() || o.use_scale_packing)
    throw InputError(
        std::string(o.quant_scheme.empty() ? "--use-scale-packing" : "--quant-scheme") +
        " applies to --layout x4 or bf16-swizzled (the Trainium kernels' layouts), not to --layout te");
  const auto axis = o.axis == "row" ? num::MxAxis::Row : num::MxAxis::Col;
  const bool row_axis = axis == num::MxAxis::Row;
  const int64_t blocked = row_axis ? cols : rows, other = row_axis ? rows : cols;
  if (blocked % 32 != 0) {
    const char* dim = row_axis ? "columns" : "rows";
    throw InputError(o.input + ": --axis " + o.axis + " puts MX blocks of 32 along the " + dim +
                     ", but shape " + io::shape_str(in.shape) + " has " + std::to_string(blocked) + " " +
                     dim + " (not a multiple of 32)");
  }
  if (other % 32 != 0) {
    const char* dim = row_axis ? "rows" : "columns";
    throw InputError(
        o.input +
        ": the TE scale layouts need both dims to be multiples of 32 (as TransformerEngine's MXFP8 "
        "tensors), but shape " +
        io::shape_str(in.shape) + " has " + std::to_string(other) + " " + dim);
  }
  const auto fmt = o.format == "e4m3" ? num::Fp8Format::E4M3FN : num::Fp8Format::E5M2;
  const num::ScaleRule rule = num::parse_scale_rule(o.rule);
  const bool bf16 = in.dtype == io::NpyDType::U16;

  const int64_t n = rows * cols;
  std::vector<uint8_t> data(static_cast<size_t>(n));
  std::vector<uint8_t> scales(static_cast<size_t>(n / 32));
  const auto t0 = std::chrono::steady_clock::now();
  if (bf16)
    num::quantize(in.data<uint16_t>(), rows, cols, axis, fmt, rule, data.data(), scales.data(), o.threads);
  else
    num::quantize(in.data<float>(), rows, cols, axis, fmt, rule, data.data(), scales.data(), o.threads);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  int64_t saturated = 0, nan = 0;
  if (bf16)
    count_specials(in.data<uint16_t>(), data, scales, rows, cols, axis, fmt, saturated, nan);
  else
    count_specials(in.data<float>(), data, scales, rows, cols, axis, fmt, saturated, nan);

  std::vector<float> dequant;
  if (!o.dequant_out.empty()) {
    dequant.resize(static_cast<size_t>(n));
    num::dequantize(data.data(), scales.data(), rows, cols, axis, fmt, dequant.data(), o.threads);
  }
  const num::ScaleShape te = num::te_scale_shape(rows, cols, axis);
  std::vector<uint8_t> scales_out(static_cast<size_t>(te.size()));
  std::vector<int64_t> scale_shape = {te.rows, te.cols};
  if (o.scale_layout == "swizzled") {
    num::to_te_swizzled(scales.data(), rows, cols, axis, scales_out.data());
    scale_shape = {te.size()};
  } else {
    num::to_te_compact(scales.data(), rows, cols, axis, scales_out.data());
  }

  std::vector<io::NpyOutput> outs = {{o.data_out, io::NpyDType::U8, in.shape, data.data()},
                                     {o.scales_out, io::NpyDType::U8, scale_shape, scales_out.data()}};
  if (!o.dequant_out.empty()) outs.push_back({o.dequant_out, io::NpyDType::F32, in.shape, dequant.data()});
  io::write_npy_all(outs);

  std::printf(
      "quantize: shape (%lld, %lld) %s -> %s rule=%s axis=%s layout=%s threads=%d: %.3f ms, %.1f M "
      "elements/s, "
      "saturated %lld, nan %lld\n",
      static_cast<long long>(rows), static_cast<long long>(cols), bf16 ? "bf16" : "float32", o.format.c_str(),
      o.rule.c_str(), o.axis.c_str(), o.scale_layout.empty() ? "compact" : o.scale_layout.c_str(), o.threads,
      seconds * 1e3, static_cast<double>(n) / std::max(seconds, 1e-9) / 1e6,
      static_cast<long long>(saturated), static_cast<long long>(nan));
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto opts = std::make_shared<QuantizeOptions>();
  CLI::App* sub = app.add_subcommand(
      "quantize",
      "MXFP8-quantize a 2-D .npy array (float32 or raw BF16 as uint16) into FP8 data and E8M0 scales; "
      "--layout x4 and bf16-swizzled also take a 3-D [E, rows, cols] stack");
  sub->add_option("input", opts->input,
                  "input .npy, float32 or uint16 (raw BF16 bits): 2-D [rows, cols], or 3-D [E, rows, cols] "
                  "with --layout x4 / bf16-swizzled")
      ->required();
  sub->add_option("--format", opts->format, "FP8 element format (te, x4)")
      ->check(CLI::IsMember({"e4m3", "e5m2"}));
  sub->add_option("--rule", opts->rule,
                  "scale rule (te, x4): trn3 (quantize_mx), ocp (OCP MX v1.0), te (TransformerEngine)")
      ->check(CLI::IsMember({"trn3", "ocp", "te"}));
  sub->add_option("--axis", opts->axis,
                  "row: 1x32 blocks along columns; col: 32x1 blocks along rows (x4, bf16-swizzled: K is the "
                  "columns or the rows)")
      ->required()
      ->check(CLI::IsMember({"row", "col"}));
  sub->add_option(
         "--layout", opts->layout,
         "te: TransformerEngine's MXFP8 tensors; x4: the Trainium kernels' pre-quantized inputs "
         "(x4 data [K/4, F] and the E8M0 scale tile, K the blocked dim); bf16-swizzled: their BF16 "
         "pre-swizzled inputs [K/4, 4F] (no quantization); x4 and bf16-swizzled take a 3-D [E, rows, "
         "cols] stack too")
      ->capture_default_str()
      ->check(CLI::IsMember({"te", "x4", "bf16-swizzled"}));
  sub->add_option("--scale-layout", opts->scale_layout,
                  "te: scales as TE compact (2-D, padded; the default) or GEMM-swizzled (1-D)")
      ->check(CLI::IsMember({"compact", "swizzled"}));
  sub->add_option("--quant-scheme", opts->quant_scheme,
                  "x4, bf16-swizzled: the kernels' quant_scheme, wrapX (default; partition p of a 512-row "
                  "tile holds rows "
                  "p + 128 j) or 1x32 (rows 4p..4p+3)")
      ->check(CLI::IsMember({"wrapX", "1x32"}));
  sub->add_flag("--use-scale-packing", opts->use_scale_packing,
                "x4: packed scales [ceil(K/2048)*128, F] as the kernels' use_scale_packing reads them");
  sub->add_option("--data", opts->data_out,
                  "output .npy: te FP8 bytes, uint8 [rows, cols]; x4 elements, int32 [K/4, F]; bf16-swizzled "
                  "BF16 bits, uint16 [K/4, 4F]")
      ->required();
  sub->add_option("--scales", opts->scales_out, "output .npy: E8M0 scale bytes, uint8 (te, x4: required)");
  sub->add_option("--dequant", opts->dequant_out, "optional output .npy: dequantized float32 [rows, cols]");
  add_overwrite_option(sub);
  add_log_options(sub);
  sub->add_option("--threads", opts->threads, "host threads for the quantization")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  sub->callback([opts] {
    if (opts->layout != "te" && opts->quant_scheme.empty()) opts->quant_scheme = "wrapX";
    on_file(opts->input, [&] { run_quantize(*opts); });
  });
}

}  // namespace trnsim::cli
