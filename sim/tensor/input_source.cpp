#include "sim/tensor/input_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <thread>

#include "sim/base/error.h"
#include "sim/base/json_excerpt.h"
#include "sim/io/generators.h"
#include "sim/isa/element.h"
#include "sim/isa/semantics.h"
#include "sim/numerics/float_formats.h"
#include "sim/numerics/host_threads.h"

namespace trnsim::tensor {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

enum class Kind { Number, Integer, Count };  // finite number; integer; non-negative integer

struct Key {
  const char* name;
  Kind kind;
  json def;  // null: required
};

struct GenDef {
  const char* name;
  bool seeded;
  bool floats_only;
  std::vector<Key> keys;
};

const std::vector<GenDef>& defs() {
  static const std::vector<GenDef> d = {
      {"normal", true, true, {{"mean", Kind::Number, 0.0}, {"std", Kind::Number, 1.0}}},
      {"uniform", true, true, {{"low", Kind::Number, -1.0}, {"high", Kind::Number, 1.0}}},
      {"heavy_tailed", true, true, {{"nu", Kind::Number, 4.0}, {"scale", Kind::Number, 1.0}}},
      {"activations_with_outliers",
       true,
       true,
       {{"mean", Kind::Number, 0.0},
        {"std", Kind::Number, 1.0},
        {"outlier_channels", Kind::Count, 0},
        {"outlier_scale", Kind::Number, 1.0}}},
      {"randint", true, false, {{"low", Kind::Integer, 0}, {"high", Kind::Integer, nullptr}}},
      {"arange", false, false, {{"start", Kind::Number, 0.0}, {"step", Kind::Number, 1.0}}},
      {"constant", false, false, {{"value", Kind::Number, nullptr}}},
      {"zeros", false, false, {}},
  };
  return d;
}

const GenDef* find_def(const std::string& name) {
  for (const GenDef& d : defs())
    if (name == d.name) return &d;
  return nullptr;
}

bool non_negative_integer(const json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
}

[[noreturn]] void fail(const std::string& path, const std::string& msg) {
  throw InputError(fmt::format("{}: {}", path, msg));
}

// Tensor viewed as [dim 0, product of the other dims].
std::pair<int64_t, int64_t> rows_cols(const std::vector<int64_t>& shape) {
  const int64_t n = elements_of(shape);
  const int64_t rows = shape.empty() ? 1 : shape[0];
  return {rows, rows == 0 ? 0 : n / rows};
}

}  // namespace

const std::vector<std::string>& generator_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const GenDef& d : defs()) v.push_back(d.name);
    return v;
  }();
  return names;
}

int generator_threads() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 64u));
}

GeneratorSpec parse_generator(const json& spec, const std::string& path) {
  if (!spec.is_object() || !spec.contains("generator"))
    fail(path, "expected an object with a \"generator\" key");
  const json& g = spec["generator"];
  if (!g.is_string()) fail(path + ".generator", "expected a generator name, found " + json_excerpt(g));
  const GenDef* d = find_def(g.get<std::string>());
  if (d == nullptr)
    fail(path + ".generator",
         fmt::format("unknown generator '{}' (expected {})", text_excerpt(g.get<std::string>()),
                     fmt::join(generator_names(), ", ")));
  GeneratorSpec out;
  out.name = d->name;
  out.args = json::object();
  std::vector<std::string> allowed = {"generator"};
  if (d->seeded) allowed.push_back("seed");
  for (const Key& k : d->keys) allowed.push_back(k.name);
  for (const auto& [key, v] : spec.items())
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      fail(path + "." + key,
           fmt::format("unknown key for generator '{}' (expected {})", d->name, fmt::join(allowed, ", ")));
  if (d->seeded) {
    if (!spec.contains("seed")) fail(path + ".seed", "missing (every random generator needs a seed)");
    const json& s = spec["seed"];
    if (!non_negative_integer(s))
      fail(path + ".seed", "expected a non-negative integer, found " + json_excerpt(s));
    out.seed = s.get<uint64_t>();
  }
  for (const Key& k : d->keys) {
    const std::string kp = path + "." + k.name;
    if (!spec.contains(k.name)) {
      if (k.def.is_null()) fail(kp, fmt::format("missing (generator '{}' needs it)", d->name));
      out.args[k.name] = k.def;
      continue;
    }
    const json& v = spec[k.name];
    switch (k.kind) {
      case Kind::Number:
        if (!v.is_number() || !std::isfinite(v.get<double>()))
          fail(kp, "expected a finite number, found " + json_excerpt(v));
        // Generated values are computed in FP32: a parameter beyond its range would make every value Inf.
        if (std::abs(v.get<double>()) > std::numeric_limits<float>::max())
          fail(kp, fmt::format("{} is beyond FP32's range (largest {:.5g}): generated values are computed in "
                               "FP32",
                               v.get<double>(), std::numeric_limits<float>::max()));
        out.args[k.name] = v.get<double>();
        break;
      case Kind::Integer:
        if (!v.is_number_integer()) fail(kp, "expected an integer, found " + json_excerpt(v));
        out.args[k.name] = v.get<int64_t>();
        break;
      case Kind::Count:
        if (!non_negative_integer(v)) fail(kp, "expected a non-negative integer, found " + json_excerpt(v));
        out.args[k.name] = v.get<int64_t>();
        break;
    }
  }
  const json& a = out.args;
  const auto bad = [&](const char* key, const std::string& msg) { fail(path + "." + key, msg); };
  // > 0 in FP32, where the values are computed (1e-46 would be 0 there).
  const auto positive = [&](const char* key) {
    if (!(static_cast<float>(a[key].get<double>()) > 0))
      bad(key, a[key].get<double>() > 0 ? "must be > 0 in FP32 (the smallest is 1.4e-45)" : "must be > 0");
  };
  if (out.name == "normal") positive("std");
  if (out.name == "uniform" && !(a["low"].get<double>() < a["high"].get<double>()))
    bad("high", fmt::format("must be greater than low ({})", a["low"].get<double>()));
  if (out.name == "heavy_tailed") {
    positive("nu");
    positive("scale");
  }
  if (out.name == "activations_with_outliers") {
    positive("std");
    if (static_cast<float>(a["outlier_scale"].get<double>()) == 0) bad("outlier_scale", "must be non-zero");
  }
  if (out.name == "randint" && !(a["low"].get<int64_t>() < a["high"].get<int64_t>()))
    bad("high", fmt::format("must be greater than low ({})", a["low"].get<int64_t>()));
  return out;
}

InputSource parse_input_source(const json& spec, const std::string& path, const std::string& base_dir) {
  InputSource s;
  const auto resolve = [&](const std::string& p) {
    if (p.empty()) fail(path, "empty .npy path");
    // (a NUL would cut the path short and open another file)
    if (p.size() > 4096 || p.find('\0') != std::string::npos)
      fail(path, fmt::format("'{}' is not a usable .npy path ({} bytes)", text_excerpt(p), p.size()));
    return fs::path(p).is_absolute() || base_dir.empty() ? p : (fs::path(base_dir) / p).string();
  };
  if (spec.is_string()) {
    s.is_npy = true;
    s.npy = resolve(spec.get<std::string>());
    return s;
  }
  if (!spec.is_object())
    fail(path, "expected {\"generator\": ...}, {\"npy\": \"file.npy\"} or a .npy path, found " +
                   json_excerpt(spec));
  const bool gen = spec.contains("generator"), npy = spec.contains("npy");
  if (gen == npy) fail(path, "expected exactly one of \"generator\" or \"npy\"");
  if (npy) {
    for (const auto& [key, v] : spec.items())
      if (key != "npy") fail(path + "." + key, "unknown key (an .npy input has only \"npy\")");
    if (!spec["npy"].is_string())
      fail(path + ".npy", "expected a file path, found " + json_excerpt(spec["npy"]));
    s.is_npy = true;
    s.npy = resolve(spec["npy"].get<std::string>());
    return s;
  }
  s.generator = parse_generator(spec, path);
  return s;
}

namespace {

// The values an integer generator makes must be whole numbers the integer dtype holds (they would otherwise
// round or wrap silently).
void check_int_values(const GeneratorSpec& g, isa::DType dtype, int64_t n, const std::string& path) {
  const auto [lo, hi] = [&]() -> std::pair<double, double> {
    switch (dtype) {
      case isa::DType::I8:
        return {-128.0, 127.0};
      case isa::DType::U8:
        return {0.0, 255.0};
      case isa::DType::I16:
        return {-32768.0, 32767.0};
      case isa::DType::U16:
        return {0.0, 65535.0};
      case isa::DType::U32:
        return {0.0, 4294967295.0};
      default:
        return {-2147483648.0, 2147483647.0};
    }
  }();
  const auto check = [&](double v, const std::string& key, const char* what) {
    if (v != std::floor(v) || v < lo || v > hi)
      fail(path + "." + key, fmt::format("{} {} is not a whole number in {}'s range [{}, {}]", what, v,
                                         isa::dtype_name(dtype), lo, hi));
  };
  const json& a = g.args;
  if (g.name == "constant") {
    check(a["value"].get<double>(), "value", "the value");
  } else if (g.name == "randint") {
    check(a["low"].get<double>(), "low", "the lowest value");
    check(a["high"].get<double>() - 1, "high", "the highest value (high - 1)");
  } else if (g.name == "arange") {
    const double start = a["start"].get<double>(), step = a["step"].get<double>();
    check(start, "start", "the first value");
    check(step, "step", "the step");
    if (n > 1) check(start + step * static_cast<double>(n - 1), "step", "the last value");
  }
}

}  // namespace

void check_generator_fits(const GeneratorSpec& g, isa::DType dtype, const std::vector<int64_t>& shape,
                          const std::string& path) {
  const GenDef* d = find_def(g.name);
  if (isa::is_x4(dtype))
    fail(path, fmt::format("generator '{}' cannot fill a {} tensor (packed FP8: use an .npy file)", g.name,
                           isa::dtype_name(dtype)));
  if (d->floats_only && isa::is_int(dtype))
    fail(path, fmt::format("generator '{}' makes floats; the tensor is {} (use randint, arange, constant or "
                           "zeros)",
                           g.name, isa::dtype_name(dtype)));
  const int64_t n = elements_of(shape, path);
  if (isa::is_int(dtype)) check_int_values(g, dtype, n, path);
  if (g.name == "activations_with_outliers") {
    const int64_t cols = rows_cols(shape).second;
    if (g.args["outlier_channels"].get<int64_t>() > cols)
      fail(path + ".outlier_channels", fmt::format("{} is more than the tensor's {} columns",
                                                   g.args["outlier_channels"].get<int64_t>(), cols));
  }
}

namespace {

// b[i] = FP32 v[i] as BF16 bits (store_element's rounding). With threads > 1, split over the host threads in
// parts of 256 Ki elements: the conversion and the first writes into a scratch mapping's pages (their page
// faults) on both cores. Each element is converted alone: the same bits.
void to_bf16(const float* v, uint16_t* b, int64_t n, int threads) {
  constexpr int64_t kPart = int64_t{1} << 18;
  const int parts = threads > 1 ? static_cast<int>((n + kPart - 1) / kPart) : 1;
  num::host_for(parts, [&](int p) {
    const int64_t i0 = parts == 1 ? 0 : p * kPart, i1 = parts == 1 ? n : std::min(n, i0 + kPart);
    for (int64_t i = i0; i < i1; ++i) b[i] = num::f32_to_bf16(v[i]);
  });
}

}  // namespace

HostTensor generate(const GeneratorSpec& g, isa::DType dtype, const std::vector<int64_t>& shape,
                    int threads) {
  HostTensor t = HostTensor::zeros(dtype, shape);
  const int64_t n = t.elements();
  const json& a = g.args;
  std::vector<float> v;
  io::OutlierActivations outliers;
  if (g.name == "activations_with_outliers") {
    outliers.mean = a["mean"];
    outliers.std = a["std"];
    outliers.outlier_channels = a["outlier_channels"];
    outliers.outlier_scale = a["outlier_scale"];
  }
  if (dtype == isa::DType::BF16 &&
      (g.name == "normal" || g.name == "uniform" || g.name == "activations_with_outliers")) {
    // The common weight and activation cases: chunks of the stream converted as they come, no FP32 copy of
    // the whole tensor (2.4 GB for the expert weights of a Qwen3-30B-A3B MoE layer, 235 MB for the
    // activations of the README's main job). The same values.
    constexpr int64_t kChunk = int64_t{1} << 22;  // even, as normal_chunk needs
    v.resize(static_cast<size_t>(std::min(n, kChunk)));
    auto* b = reinterpret_cast<uint16_t*>(t.bytes.data());
    const auto [rows, cols] = rows_cols(shape);
    for (int64_t first = 0; first < n; first += kChunk) {
      const int64_t c = std::min(kChunk, n - first);
      if (g.name == "normal")
        io::normal_chunk(v.data(), first, c, a["mean"], a["std"], g.seed, threads);
      else if (g.name == "uniform")
        io::uniform_chunk(v.data(), first, c, a["low"], a["high"], g.seed, threads);
      else
        io::activations_with_outliers_chunk(v.data(), first, c, rows, cols, outliers, g.seed, threads);
      to_bf16(v.data(), b + first, c, threads);
    }
    return t;
  }
  if (g.name == "normal") {
    v = io::normal(n, a["mean"], a["std"], g.seed, threads);
  } else if (g.name == "uniform") {
    v = io::uniform(n, a["low"], a["high"], g.seed, threads);
  } else if (g.name == "heavy_tailed") {
    v = io::student_t(n, a["nu"], a["scale"], g.seed, threads);
  } else if (g.name == "activations_with_outliers") {
    const auto [rows, cols] = rows_cols(shape);
    v = io::activations_with_outliers(rows, cols, outliers, g.seed, threads);
  } else if (g.name == "randint") {
    const std::vector<int64_t> r = io::randint(n, a["low"], a["high"], g.seed, threads);
    for (int64_t i = 0; i < n; ++i) t.set_int(i, r[i]);
    return t;
  } else if (g.name == "arange") {
    const double start = a["start"], step = a["step"];
    if (isa::is_int(dtype)) {
      for (int64_t i = 0; i < n; ++i) t.set_int(i, std::llround(start + step * static_cast<double>(i)));
      return t;
    }
    v.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(start + step * static_cast<double>(i));
  } else if (g.name == "constant") {
    const double c = a["value"];
    if (isa::is_int(dtype)) {
      for (int64_t i = 0; i < n; ++i) t.set_int(i, std::llround(c));
      return t;
    }
    v.assign(static_cast<size_t>(n), static_cast<float>(c));
  } else {
    return t;  // zeros
  }
  if (dtype == isa::DType::BF16) {  // the common weight dtype: store_element's conversion, inlined
    to_bf16(v.data(), reinterpret_cast<uint16_t*>(t.bytes.data()), n, threads);
    return t;
  }
  for (int64_t i = 0; i < n; ++i) t.set(i, v[i]);
  return t;
}

HostTensor make_input(const InputSource& s, isa::DType dtype, const std::vector<int64_t>& shape,
                      const std::string& what, int threads) {
  if (s.is_npy) return from_npy(io::read_npy(s.npy), dtype, shape, what);
  return generate(s.generator, dtype, shape, threads);
}

}  // namespace trnsim::tensor
