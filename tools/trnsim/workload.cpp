#include <sys/resource.h>

#include "tools/trnsim/workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "kernels/api/registry.h"
#include "sim/base/error.h"
#include "sim/io/generators.h"
#include "sim/isa/semantics.h"
#include "sim/model/run.h"
#include "sim/model/stats_observer.h"
#include "sim/model/trace_observer.h"
#include "sim/numerics/float_formats.h"
#include "sim/trace/open_trace.h"
#include "tools/trnsim/report.h"

namespace trnsim::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::vector<std::string> kTopKeys = {"name", "description", "hardware", "kernel",  "params",
                                           "lnc",  "inputs",      "outputs",  "numerics"};
const std::vector<std::string> kGenerators = {"normal", "uniform", "heavy_tailed",
                                              "activations_with_outliers"};

// Generator parameters and their defaults (besides "generator" and "seed").
const std::map<std::string, json>& generator_defaults(const std::string& g) {
  static const std::map<std::string, std::map<std::string, json>> d = {
      {"normal", {{"mean", 0.0}, {"std", 1.0}}},
      {"uniform", {{"low", -1.0}, {"high", 1.0}}},
      {"heavy_tailed", {{"nu", 4.0}, {"scale", 1.0}}},
      {"activations_with_outliers",
       {{"mean", 0.0}, {"std", 1.0}, {"outlier_channels", 0}, {"outlier_scale", 1.0}}},
  };
  return d.at(g);
}

class Checker {
 public:
  explicit Checker(std::string file) : file_(std::move(file)) {}
  [[noreturn]] void fail(const std::string& path, const std::string& msg) const {
    throw InputError(path.empty() ? fmt::format("{}: {}", file_, msg)
                                  : fmt::format("{}: {}: {}", file_, path, msg));
  }
  void keys(const json& obj, const std::string& path, const std::vector<std::string>& allowed) const {
    for (const auto& [k, v] : obj.items())
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end())
        fail(join(path, k), fmt::format("unknown key (expected {})", fmt::join(allowed, ", ")));
  }
  std::string string(const json& v, const std::string& path) const {
    if (!v.is_string()) fail(path, "expected a string, found " + v.dump());
    return v.get<std::string>();
  }
  static std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

// Applies one --set assignment to the workload document.
void apply_set(json& doc, const std::string& assignment) {
  auto [path, value] = config::parse_override(assignment);
  const auto bad = [&](const std::string& why) {
    throw InputError(fmt::format("--set {}: {}", assignment, why));
  };
  const std::string hw_prefix = "hardware.overrides.";
  if (path.rfind(hw_prefix, 0) == 0 || path == "hardware.name") {
    if (!doc.contains("hardware") || doc["hardware"].is_string())
      doc["hardware"] = doc.contains("hardware") ? json{{"name", doc["hardware"]}} : json::object();
    if (!doc["hardware"].is_object()) bad("hardware is not a name or an object");
    if (path == "hardware.name") {
      doc["hardware"]["name"] = value;
      return;
    }
    const std::string key = path.substr(hw_prefix.size());
    if (key.empty()) bad("empty override path after hardware.overrides.");
    json& ov = doc["hardware"]["overrides"];
    if (ov.is_null()) ov = json::object();
    if (!ov.is_object()) bad("hardware.overrides is not an object");
    ov[key] = value;
    return;
  }
  json* node = &doc;
  size_t pos = 0;
  std::string at;
  while (true) {
    const size_t dot = path.find('.', pos);
    const std::string key = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (key.empty()) bad("malformed path (empty component)");
    if (!node->is_object()) bad(fmt::format("{} is not an object", at));
    at = Checker::join(at, key);
    if (dot == std::string::npos) {
      (*node)[key] = value;
      return;
    }
    node = &(*node)[key];
    if (node->is_null()) *node = json::object();
    pos = dot + 1;
  }
}

double number_arg(const Checker& c, const json& v, const std::string& path) {
  if (!v.is_number() || !std::isfinite(v.get<double>()))
    c.fail(path, "expected a finite number, found " + v.dump());
  return v.get<double>();
}

InputSpec parse_input(const Checker& c, const std::string& name, const json& spec, const fs::path& dir) {
  const std::string path = "inputs." + name;
  InputSpec in;
  in.name = name;
  if (!spec.is_object())
    c.fail(path, "expected an object with \"generator\" or \"npy\", found " + spec.dump());
  const bool has_gen = spec.contains("generator"), has_npy = spec.contains("npy");
  if (has_gen == has_npy) c.fail(path, "expected exactly one of \"generator\" or \"npy\"");
  if (has_npy) {
    c.keys(spec, path, {"npy"});
    const std::string p = c.string(spec["npy"], path + ".npy");
    in.npy = fs::path(p).is_absolute() ? p : (dir / p).string();
    return in;
  }
  in.generator = c.string(spec["generator"], path + ".generator");
  if (std::find(kGenerators.begin(), kGenerators.end(), in.generator) == kGenerators.end())
    c.fail(path + ".generator",
           fmt::format("unknown generator '{}' (expected {})", in.generator, fmt::join(kGenerators, ", ")));
  const auto& defaults = generator_defaults(in.generator);
  std::vector<std::string> allowed = {"generator", "seed"};
  for (const auto& [k, v] : defaults) allowed.push_back(k);
  c.keys(spec, path, allowed);
  if (!spec.contains("seed")) c.fail(path + ".seed", "missing (every generator needs a seed)");
  const json& seed = spec["seed"];
  if (!seed.is_number_integer() ||
      (seed.is_number_integer() && !seed.is_number_unsigned() && seed.get<int64_t>() < 0))
    c.fail(path + ".seed", "expected a non-negative integer, found " + seed.dump());
  in.seed = seed.get<uint64_t>();
  in.args = json::object();
  for (const auto& [k, def] : defaults) {
    const json& v = spec.contains(k) ? spec[k] : def;
    if (k == "outlier_channels") {
      if (!v.is_number_integer() || v.get<int64_t>() < 0)
        c.fail(path + "." + k, "expected a non-negative integer, found " + v.dump());
      in.args[k] = v.get<int64_t>();
    } else {
      in.args[k] = number_arg(c, v, path + "." + k);
    }
  }
  return in;
}

int generator_threads() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 64u));
}

// Values of one generator input with `shape` (FP32, before rounding to the tensor dtype). check_only:
// generate nothing, only check the parameters against the shape.
std::vector<float> generate(const InputSpec& in, const std::vector<int64_t>& shape, bool check_only) {
  const int64_t rows = shape.empty() ? 1 : shape[0];
  int64_t cols = 1;
  for (size_t i = 1; i < shape.size(); ++i) cols *= shape[i];
  const int64_t n = check_only ? 0 : rows * cols;
  const int th = generator_threads();
  const json& a = in.args;
  if (in.generator == "normal") return io::normal(n, a["mean"], a["std"], in.seed, th);
  if (in.generator == "uniform") return io::uniform(n, a["low"], a["high"], in.seed, th);
  if (in.generator == "heavy_tailed") return io::student_t(n, a["nu"], a["scale"], in.seed, th);
  io::OutlierActivations p;
  p.mean = a["mean"];
  p.std = a["std"];
  p.outlier_channels = a["outlier_channels"];
  p.outlier_scale = a["outlier_scale"];
  return io::activations_with_outliers(check_only ? 0 : rows, cols, p, in.seed, th);
}

const isa::TensorDecl* find_tensor(const isa::Program& prog, const std::string& name, int* index = nullptr) {
  for (size_t i = 0; i < prog.tensors.size(); ++i)
    if (prog.tensors[i].name == name) {
      if (index) *index = static_cast<int>(i);
      return &prog.tensors[i];
    }
  return nullptr;
}

}  // namespace

bool is_workload_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw InputError(path + ": is a directory, expected a JSON file");
  std::ifstream in(path);
  if (!in) return false;
  const json doc = json::parse(in, nullptr, false);
  return !doc.is_discarded() && doc.is_object() && doc.contains("kernel");
}

Workload parse_workload(const std::string& path, const std::vector<std::string>& sets) {
  Checker c(path);
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw InputError(path + ": is a directory, expected a JSON file");
  std::ifstream f(path);
  if (!f) throw InputError(path + ": cannot open workload file");
  json doc = json::parse(f, nullptr, false);
  if (doc.is_discarded()) c.fail("", "not valid JSON");
  if (!doc.is_object()) c.fail("", "expected a JSON object at the top level");
  for (const std::string& s : sets) apply_set(doc, s);
  c.keys(doc, "", kTopKeys);
  const fs::path dir = fs::path(path).parent_path();

  Workload w;
  w.file = path;
  if (!doc.contains("name"))
    c.fail("name", "missing (the workload's name, used for the default output directory)");
  w.name = c.string(doc["name"], "name");
  if (w.name.empty() || w.name.find('/') != std::string::npos || w.name == "." || w.name == "..")
    c.fail("name", fmt::format("'{}' is not usable as a directory name", w.name));
  if (doc.contains("description")) w.description = c.string(doc["description"], "description");

  if (!doc.contains("hardware")) c.fail("hardware", "missing (a config name such as trn3, or a .json path)");
  const json& hw = doc["hardware"];
  json hw_name = hw;
  if (hw.is_object()) {
    c.keys(hw, "hardware", {"name", "overrides"});
    if (!hw.contains("name")) c.fail("hardware.name", "missing");
    hw_name = hw["name"];
    if (hw.contains("overrides")) {
      if (!hw["overrides"].is_object()) c.fail("hardware.overrides", "expected an object of \"path\": value");
      for (const auto& [k, v] : hw["overrides"].items()) w.hw_overrides[k] = v;
    }
  } else if (!hw.is_string()) {
    c.fail("hardware",
           "expected a config name, a .json path or {\"name\", \"overrides\"}, found " + hw.dump());
  }
  w.hardware = c.string(hw_name, hw.is_object() ? "hardware.name" : "hardware");
  if (w.hardware.find('/') != std::string::npos || w.hardware.ends_with(".json"))
    if (!fs::path(w.hardware).is_absolute()) w.hardware = (dir / w.hardware).string();

  if (!doc.contains("kernel")) c.fail("kernel", "missing");
  w.kernel = c.string(doc["kernel"], "kernel");
  w.params = doc.contains("params") ? doc["params"] : json::object();
  if (!w.params.is_object())
    c.fail("params", "expected an object of kernel parameters, found " + w.params.dump());
  if (doc.contains("lnc")) {
    const json& l = doc["lnc"];
    if (!l.is_number_integer() || (l.get<int64_t>() != 1 && l.get<int64_t>() != 2))
      c.fail("lnc", "expected 1 or 2, found " + l.dump());
    w.lnc = l.get<int>();
  }
  if (!doc.contains("inputs")) c.fail("inputs", "missing (one generator or .npy per kernel input)");
  if (!doc["inputs"].is_object()) c.fail("inputs", "expected an object, found " + doc["inputs"].dump());
  for (const auto& [k, v] : doc["inputs"].items()) w.inputs.push_back(parse_input(c, k, v, dir));
  if (doc.contains("outputs")) {
    const json& o = doc["outputs"];
    if (!o.is_array()) c.fail("outputs", "expected a list of kernel output names, found " + o.dump());
    for (size_t i = 0; i < o.size(); ++i) w.outputs.push_back(c.string(o[i], fmt::format("outputs[{}]", i)));
  }
  if (doc.contains("numerics")) {
    if (!doc["numerics"].is_boolean())
      c.fail("numerics", "expected true or false, found " + doc["numerics"].dump());
    w.numerics = doc["numerics"].get<bool>();
  }
  return w;
}

PreparedWorkload prepare_workload(Workload w) {
  Checker c(w.file);
  PreparedWorkload p;
  try {
    p.hw = config::load_hw_config(w.hardware, w.hw_overrides);
  } catch (const InputError& e) {
    c.fail("hardware", e.what());
  }
  kernels::register_all_kernels();
  const kernels::Registry& reg = kernels::registry();
  if (reg.find(w.kernel) == nullptr) {
    std::vector<std::string> names;
    for (const auto& k : reg.kernels()) names.push_back(k.name);
    c.fail("kernel", fmt::format("unknown kernel '{}' (known: {})", w.kernel, fmt::join(names, ", ")));
  }
  try {
    p.params = reg.validate(w.kernel, w.params);
    p.reference = ref::kernel_reference(w.kernel, p.params);
    kernels::BuildOptions bo;
    bo.limits = p.hw.limits();
    bo.num_programs = w.lnc;
    p.build = reg.build(w.kernel, p.params, bo);
  } catch (const Error& e) {
    c.fail("params", e.what());
  }
  const isa::Program& prog = p.build.program;

  // Inputs: exactly the kernel's, each with a usable generator or a matching .npy.
  for (const InputSpec& in : w.inputs)
    if (std::find(p.build.inputs.begin(), p.build.inputs.end(), in.name) == p.build.inputs.end())
      c.fail("inputs." + in.name, fmt::format("kernel '{}' has no input '{}' (inputs: {})", w.kernel, in.name,
                                              fmt::join(p.build.inputs, ", ")));
  for (const std::string& name : p.build.inputs)
    if (std::none_of(w.inputs.begin(), w.inputs.end(), [&](const InputSpec& s) { return s.name == name; }))
      c.fail("inputs", fmt::format("missing input '{}' (kernel '{}' needs {})", name, w.kernel,
                                   fmt::join(p.build.inputs, ", ")));
  p.npy.resize(w.inputs.size());
  for (size_t i = 0; i < w.inputs.size(); ++i) {
    const InputSpec& in = w.inputs[i];
    const isa::TensorDecl* t = find_tensor(prog, in.name);
    if (t == nullptr)
      throw Error(fmt::format("kernel '{}' lists input '{}' but declares no such tensor", w.kernel, in.name));
    const std::string path = "inputs." + in.name;
    const std::string what =
        fmt::format("kernel input '{}' {} {}", in.name, isa::dtype_name(t->dtype), io::shape_str(t->shape));
    const bool floaty = t->dtype == isa::DType::BF16 || t->dtype == isa::DType::F32;
    if (!in.generator.empty()) {
      if (!floaty)
        c.fail(path + ".generator", fmt::format("generators fill float32 or bfloat16 tensors, not {}", what));
      try {
        generate(in, t->shape, true);  // checks the parameters against the shape
      } catch (const InputError& e) {
        c.fail(path, e.what());
      }
      continue;
    }
    io::NpyArray a;
    try {
      a = io::read_npy(in.npy);
    } catch (const InputError& e) {
      c.fail(path + ".npy", e.what());
    }
    if (a.shape != t->shape)
      c.fail(path + ".npy",
             fmt::format("{}: shape {} does not match {}", in.npy, io::shape_str(a.shape), what));
    const bool ok = (a.dtype == io::NpyDType::F32 && floaty) ||
                    (a.dtype == io::NpyDType::U16 && t->dtype == isa::DType::BF16);
    if (!ok)
      c.fail(
          path + ".npy",
          fmt::format("{}: dtype {} does not fit {} (expected {})", in.npy, io::npy_dtype_name(a.dtype), what,
                      t->dtype == isa::DType::BF16 ? "float32 or uint16 raw bfloat16 bits" : "float32"));
    p.npy[i] = std::move(a);
  }
  for (size_t i = 0; i < w.outputs.size(); ++i)
    if (std::find(p.build.outputs.begin(), p.build.outputs.end(), w.outputs[i]) == p.build.outputs.end())
      c.fail(fmt::format("outputs[{}]", i),
             fmt::format("kernel '{}' has no output '{}' (outputs: {})", w.kernel, w.outputs[i],
                         fmt::join(p.build.outputs, ", ")));
  p.w = std::move(w);
  return p;
}

std::vector<InputTensor> make_inputs(const PreparedWorkload& p) {
  std::vector<InputTensor> out;
  for (const std::string& name : p.build.inputs) {
    const auto it = std::find_if(p.w.inputs.begin(), p.w.inputs.end(),
                                 [&](const InputSpec& s) { return s.name == name; });
    const InputSpec& in = *it;
    const size_t idx = static_cast<size_t>(it - p.w.inputs.begin());
    InputTensor t;
    t.name = name;
    const isa::TensorDecl* d = find_tensor(p.build.program, name, &t.tensor);
    if (!in.generator.empty()) {
      t.values = generate(in, d->shape, false);
    } else {
      const io::NpyArray& a = p.npy[idx];
      const int64_t n = a.elements();
      t.values.resize(static_cast<size_t>(n));
      if (a.dtype == io::NpyDType::U16)
        for (int64_t i = 0; i < n; ++i) t.values[i] = num::bf16_to_f32(a.data<uint16_t>()[i]);
      else
        std::copy(a.data<float>(), a.data<float>() + n, t.values.begin());
    }
    if (d->dtype == isa::DType::BF16) {
      t.bytes.resize(t.values.size() * 2);
      auto* bits = reinterpret_cast<uint16_t*>(t.bytes.data());
      for (size_t i = 0; i < t.values.size(); ++i) {
        bits[i] = num::f32_to_bf16(t.values[i]);
        t.values[i] = num::bf16_to_f32(bits[i]);
      }
    } else {
      t.bytes.resize(t.values.size() * 4);
      std::memcpy(t.bytes.data(), t.values.data(), t.bytes.size());
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace trnsim::cli

namespace trnsim::cli {
namespace {

int64_t elements_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

io::NpyDType npy_dtype_of(isa::DType t) {
  switch (t) {
    case isa::DType::F32:
      return io::NpyDType::F32;
    case isa::DType::BF16:
    case isa::DType::FP16:
    case isa::DType::U16:
    case isa::DType::I16:
      return io::NpyDType::U16;
    case isa::DType::I32:
    case isa::DType::U32:
    case isa::DType::FP8_E4M3FN_X4:
    case isa::DType::FP8_E5M2_X4:
      return io::NpyDType::I32;
    default:
      return io::NpyDType::U8;
  }
}

std::vector<float> decode_output(const std::vector<uint8_t>& bytes, isa::DType t) {
  std::vector<float> v;
  if (t == isa::DType::BF16) {
    v.resize(bytes.size() / 2);
    const auto* b = reinterpret_cast<const uint16_t*>(bytes.data());
    for (size_t i = 0; i < v.size(); ++i) v[i] = num::bf16_to_f32(b[i]);
  } else if (t == isa::DType::F32) {
    v.resize(bytes.size() / 4);
    std::memcpy(v.data(), bytes.data(), v.size() * 4);
  }
  return v;
}

// Numerics report of every output the kernel's host reference covers.
void run_references(const PreparedWorkload& p, const std::vector<InputTensor>& inputs,
                    const isa::MachineState& state, RunSummary& s, bool full_reference) {
  const isa::Program& prog = p.build.program;
  const auto input = [&](const std::string& name) -> const InputTensor* {
    for (const auto& t : inputs)
      if (t.name == name) return &t;
    return nullptr;
  };
  for (const ref::OutputReference& r : p.reference->outputs) {
    int oi = -1;
    const isa::TensorDecl* od = find_tensor(prog, r.output, &oi);
    const InputTensor *l = input(r.lhs), *rr = input(r.rhs);
    if (!od || !l || !rr) {
      s.numerics_note = fmt::format(
          "the host reference of '{}' expects tensors {}, {} -> {}, which the kernel "
          "does not declare; no numerics report",
          p.w.kernel, r.lhs, r.rhs, r.output);
      s.numerics.clear();
      return;
    }
    const auto& ls = prog.tensors[l->tensor].shape;
    const auto& rs = prog.tensors[rr->tensor].shape;
    if (r.op != ref::RefOp::Matmul) {  // elementwise references of the calibration kernels
      const std::vector<float> out = decode_output(state.hbm[oi], od->dtype);
      s.numerics.push_back(ref::evaluate_elementwise(r, l->values, ls, rr->values, out.data(),
                                                     static_cast<int64_t>(out.size()),
                                                     od->dtype == isa::DType::BF16));
      continue;
    }
    if (ls.size() != 2 || rs.size() != 2 || (od->dtype != isa::DType::BF16 && od->dtype != isa::DType::F32))
      throw Error(fmt::format("host reference of '{}': output '{}' needs 2-D inputs and a float output",
                              p.w.kernel, r.output));
    const std::vector<float> out = decode_output(state.hbm[oi], od->dtype);
    const ref::Operand lo{l->values.data(), ls[0], ls[1], r.lhs_axis},
        ro{rr->values.data(), rs[0], rs[1], r.rhs_axis};
    const ref::MatmulDims d = ref::matmul_dims(lo, ro);
    if (od->shape != std::vector<int64_t>{d.R, d.C})
      throw Error(
          fmt::format("host reference of '{}': output '{}' has shape {}, the reference gives ({}, {})",
                      p.w.kernel, r.output, io::shape_str(od->shape), d.R, d.C));
    try {
      s.numerics.push_back(ref::evaluate_output(r, lo, ro, out.data(), od->dtype == isa::DType::BF16,
                                                ref::reference_block_stride(r, d.R, full_reference)));
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: host reference of output '{}': {} (an input holds NaN or Inf)",
                                   p.w.file, r.output, e.what()));
    }
  }
  s.numerics_run = true;
}

void write_all(const std::string& dir, const std::string& stats_text,
               const std::vector<io::NpyOutput>& npys) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw InputError(fmt::format("{}: cannot create the output directory", dir));
  const fs::path stats = fs::path(dir) / "stats.json";
  const fs::path tmp = fs::path(dir) / ".stats.json.partial";
  {
    std::ofstream f(tmp);
    f << stats_text;
    f.close();
    if (!f) {
      fs::remove(tmp, ec);
      throw InputError(fmt::format("{}: cannot write", stats.string()));
    }
  }
  try {
    io::write_npy_all(npys);
  } catch (...) {
    fs::remove(tmp, ec);
    throw;
  }
  fs::rename(tmp, stats, ec);
  if (ec) throw InputError(fmt::format("{}: cannot write ({})", stats.string(), ec.message()));
}

}  // namespace

int run_workload(const RunWorkloadOptions& o) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  Workload w = parse_workload(o.path, o.sets);
  if (o.no_numerics) w.numerics = false;
  PreparedWorkload p = prepare_workload(std::move(w));
  const isa::Program& prog = p.build.program;
  const std::string out_dir = o.out_dir.empty() ? (fs::path("out") / p.w.name).string() : o.out_dir;
  if (fs::exists(out_dir) && !fs::is_directory(out_dir))
    throw InputError(fmt::format("--out {}: exists and is not a directory", out_dir));

  std::vector<InputTensor> inputs;
  if (p.w.numerics || o.dump_inputs) inputs = make_inputs(p);
  std::optional<isa::MachineState> state;
  if (p.w.numerics) {
    state = isa::make_machine_state(prog, p.hw.limits());
    for (const InputTensor& in : inputs) {
      if (state->hbm[in.tensor].size() != in.bytes.size())
        throw Error(fmt::format("input '{}': {} bytes for a {}-byte tensor", in.name, in.bytes.size(),
                                state->hbm[in.tensor].size()));
      state->hbm[in.tensor] = in.bytes;
    }
  }

  model::RunOptions ro;
  ro.numerics = p.w.numerics;
  ro.progress_every = 20000;
  auto last = t0;
  ro.progress = [&](Picoseconds sim, uint64_t done, uint64_t total) {
    const auto now = clock::now();
    if (now - t0 < std::chrono::seconds(3) || now - last < std::chrono::seconds(2)) return;
    last = now;
    std::fprintf(stderr, "trnsim: %s: %.0f %% (%llu of %llu instructions), simulated %.3f us, %.0f s\n",
                 p.w.name.c_str(),
                 total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 0.0,
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total),
                 sim.ns() / 1e3, std::chrono::duration<double>(now - t0).count());
  };
  // --trace: streamed while the model runs; removed again if the run fails (no partial outputs).
  std::unique_ptr<trace::TraceSink> sink;
  std::unique_ptr<model::TraceObserver> observer;
  bool keep_trace = false;
  struct TraceGuard {
    const std::string& path;
    const bool& keep;
    ~TraceGuard() {
      std::error_code ec;
      if (!path.empty() && !keep) fs::remove(path, ec);
    }
  };
  model::StatsObserver profile(prog, p.hw);  // stats.json's summary, opcodes and source lines
  std::unique_ptr<model::TeeObserver> tee;
  ro.observer = &profile;
  if (!o.trace.empty()) {
    sink = trace::open_trace_file(o.trace);
    observer = std::make_unique<model::TraceObserver>(*sink, prog, p.hw);
    tee = std::make_unique<model::TeeObserver>(std::vector<model::ModelObserver*>{observer.get(), &profile});
    ro.observer = tee.get();
  }
  const TraceGuard guard{o.trace, keep_trace};
  const auto t_sim = clock::now();
  const model::RunResult result = model::run_program(prog, p.hw, ro, state ? &*state : nullptr);
  const auto t_ref = clock::now();
  if (sink) sink->close();

  RunSummary s;
  s.workload = p.w.name;
  s.kernel = p.w.kernel;
  s.hardware = p.hw.name;
  s.params = p.params;
  s.stats = result.stats;
  s.profile = profile.stats();
  s.files = prog.files;
  if (p.reference) {
    s.useful_flops = p.reference->useful_flops;
    s.flops_from_reference = true;
  }
  for (const auto* names : {&p.build.inputs, &p.build.outputs})
    for (const std::string& n : *names) {
      const isa::TensorDecl* d = find_tensor(prog, n);
      s.compulsory_hbm_bytes += static_cast<double>(elements_of(d->shape)) * isa::dtype_size(d->dtype);
    }
  compute_roofline(s, prog, p.hw);

  if (!p.w.numerics) {
    s.numerics_note = "off (--no-numerics or \"numerics\": false): timing only, no outputs computed";
  } else if (!p.reference) {
    s.numerics_note = fmt::format("no host reference for kernel '{}' with these parameters", p.w.kernel);
  } else {
    const double macs = p.reference->useful_flops / 2;
    if (macs > 1e10)
      std::fprintf(stderr, "trnsim: %s: computing the FP64 host references\n", p.w.name.c_str());
    run_references(p, inputs, *state, s, o.full_reference);
  }
  const auto t_write = clock::now();
  s.wall_seconds = std::chrono::duration<double>(clock::now() - t0).count();

  // Outputs: stats.json, the outputs (when computed), the inputs (--dump-inputs); all or nothing.
  std::vector<io::NpyOutput> npys;
  if (p.w.numerics) {
    const std::vector<std::string>& names = p.w.outputs.empty() ? p.build.outputs : p.w.outputs;
    for (const std::string& n : names) {
      int idx = -1;
      const isa::TensorDecl* d = find_tensor(prog, n, &idx);
      npys.push_back({(fs::path(out_dir) / (n + ".npy")).string(), npy_dtype_of(d->dtype), d->shape,
                      state->hbm[idx].data()});
    }
  }
  if (o.dump_inputs) {
    for (const InputTensor& in : inputs) {
      const isa::TensorDecl& d = prog.tensors[in.tensor];
      npys.push_back({(fs::path(out_dir) / "inputs" / (in.name + ".npy")).string(), npy_dtype_of(d.dtype),
                      d.shape, in.bytes.data()});
    }
    std::error_code ec;
    fs::create_directories(fs::path(out_dir) / "inputs", ec);
  }
  const std::string stats_text = stats_json(s).dump(2) + "\n";
  write_all(out_dir, stats_text, npys);
  // Without numerics no outputs are written: output files of an earlier run in the same directory would no
  // longer match its stats.json, so they go.
  std::vector<std::string> stale;
  if (!p.w.numerics) {
    const std::vector<std::string>& names = p.w.outputs.empty() ? p.build.outputs : p.w.outputs;
    for (const std::string& n : names) {
      std::error_code ec;
      const fs::path f = fs::path(out_dir) / (n + ".npy");
      if (fs::is_regular_file(f, ec) && fs::remove(f, ec)) stale.push_back(f.string());
    }
  }
  keep_trace = true;

  std::fputs(format_summary(s).c_str(), stdout);
  std::printf("wrote %s/stats.json", out_dir.c_str());
  for (const auto& n : npys) std::printf(", %s", fs::path(n.path).lexically_relative(out_dir).c_str());
  if (!o.trace.empty()) {
    std::error_code ec;
    const auto size = fs::file_size(o.trace, ec);
    const auto& n = observer->counts();
    // Trace events: each slice is a begin and an end in .pftrace (one "X" in JSON), each flow two ends.
    std::printf("; trace %s (%llu slices, %llu flows, %llu counter samples, %.1f MB)", o.trace.c_str(),
                static_cast<unsigned long long>(n.slices), static_cast<unsigned long long>(n.flows),
                static_cast<unsigned long long>(n.counter_samples),
                ec ? 0.0 : static_cast<double>(size) / 1e6);
  }
  std::printf(" (%.1f s)\n", s.wall_seconds);
  for (const auto& f : stale)
    std::printf("removed %s: an earlier run's output (no outputs without numerics)\n", f.c_str());
  std::fflush(stdout);
  // Where the host time went (the workload benchmark reads this line): setup = parse, build, inputs.
  const auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::fprintf(stderr,
               "trnsim: %s: host time %.3f s (setup %.3f, simulation %.3f, references %.3f, write %.3f), "
               "peak memory %.0f MiB\n",
               p.w.name.c_str(), secs(t0, clock::now()), secs(t0, t_sim), secs(t_sim, t_ref),
               secs(t_ref, t_write), secs(t_write, clock::now()), static_cast<double>(ru.ru_maxrss) / 1024.0);

  const double t = s.stats.total_time.ns();
  if (t < s.roofline_ns * (1 - 1e-9)) {
    std::fprintf(stderr,
                 "trnsim: error: simulated time %.1f ns is below the roofline lower bound %.1f ns "
                 "(max(useful FLOPs / peak, compulsory HBM bytes / HBM bandwidth)): a simulator bug\n",
                 t, s.roofline_ns);
    return kExitBelowRoofline;
  }
  for (const auto& n : s.numerics)
    if (!n.pass) return kExitNumericsFail;
  return kExitOk;
}

}  // namespace trnsim::cli
