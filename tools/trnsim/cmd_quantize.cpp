// trnsim quantize: MXFP8-quantize a 2-D .npy array (float32, or raw BF16 bits as uint16).
//
// Input: 2-D [rows, cols], both multiples of 32 (TransformerEngine's MXFP8 tensor rule, which its scale
// layouts assume); other shapes, ranks and dtypes are an InputError naming the file.
// Outputs (all written together or not at all):
//   --data     uint8 [rows, cols]: FP8 bytes (E4M3FN or E5M2), same layout as the input.
//   --scales   uint8 E8M0 scale bytes in TransformerEngine's layouts (docs/facts/mx-numerics.md §5):
//                compact:  2-D, padded, row-major: axis row [roundup(rows, 128), roundup(cols/32, 4)],
//                          axis col [roundup(rows/32, 4), roundup(cols, 128)];
//                swizzled: 1-D, the GEMM-swizzled (cuBLAS 128x4 tile) order of the same padded matrix.
//              Padding bytes are 0x00 in both.
//   --dequant  float32 [rows, cols] (optional): the dequantized values.
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

#include "sim/base/error.h"
#include "sim/io/npy.h"
#include "sim/numerics/mx.h"
#include "sim/numerics/scale_layout.h"
#include "tools/trnsim/commands.h"

namespace trnsim::cli {
namespace {

struct QuantizeOptions {
  std::string input;
  std::string format;
  std::string rule;
  std::string axis;
  std::string layout = "compact";
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

void run_quantize(const QuantizeOptions& o) {
  // An output must not replace the input: the input would be gone if the user mistyped a flag.
  for (const std::string* out : {&o.data_out, &o.scales_out, &o.dequant_out}) {
    std::error_code ec;
    if (!out->empty() && std::filesystem::equivalent(o.input, *out, ec))
      throw InputError(*out + ": is the input file; choose another output path");
  }
  io::NpyArray in = io::read_npy(o.input);
  io::require_rank(in, 2, "quantize input");
  io::require_dtype(in, {io::NpyDType::F32, io::NpyDType::U16}, "quantize input");
  const int64_t rows = in.shape[0], cols = in.shape[1];
  if (rows == 0 || cols == 0)
    throw InputError(o.input + ": quantize input: the array is empty (shape " + io::shape_str(in.shape) +
                     ")");
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
  if (o.layout == "swizzled") {
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
      o.rule.c_str(), o.axis.c_str(), o.layout.c_str(), o.threads, seconds * 1e3,
      static_cast<double>(n) / std::max(seconds, 1e-9) / 1e6, static_cast<long long>(saturated),
      static_cast<long long>(nan));
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto opts = std::make_shared<QuantizeOptions>();
  CLI::App* sub = app.add_subcommand(
      "quantize",
      "MXFP8-quantize a 2-D .npy array (float32 or raw BF16 as uint16) into FP8 data and E8M0 scales");
  sub->add_option("input", opts->input, "input .npy, 2-D float32 or uint16 (raw BF16 bits)")->required();
  sub->add_option("--format", opts->format, "FP8 element format")
      ->required()
      ->check(CLI::IsMember({"e4m3", "e5m2"}));
  sub->add_option("--rule", opts->rule,
                  "scale rule: trn3 (quantize_mx), ocp (OCP MX v1.0), te (TransformerEngine)")
      ->required()
      ->check(CLI::IsMember({"trn3", "ocp", "te"}));
  sub->add_option("--axis", opts->axis, "row: 1x32 blocks along columns; col: 32x1 blocks along rows")
      ->required()
      ->check(CLI::IsMember({"row", "col"}));
  sub->add_option("--scale-layout", opts->layout, "scales as TE compact (2-D, padded) or GEMM-swizzled (1-D)")
      ->capture_default_str()
      ->check(CLI::IsMember({"compact", "swizzled"}));
  sub->add_option("--data", opts->data_out, "output .npy: FP8 bytes, uint8 [rows, cols]")->required();
  sub->add_option("--scales", opts->scales_out, "output .npy: E8M0 scale bytes, uint8")->required();
  sub->add_option("--dequant", opts->dequant_out, "optional output .npy: dequantized float32 [rows, cols]");
  sub->add_option("--threads", opts->threads, "host threads for the quantization")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  sub->callback([opts] { on_file(opts->input, [&] { run_quantize(*opts); }); });
}

}  // namespace trnsim::cli
