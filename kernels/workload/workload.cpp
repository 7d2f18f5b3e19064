#include "kernels/workload/workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>

#include "kernels/api/registry.h"
#include "sim/base/error.h"
#include "sim/base/json_excerpt.h"
#include "sim/config/json_document.h"
#include "sim/isa/element.h"
#include "sim/isa/names.h"
#include "sim/isa/semantics.h"

namespace trnsim::workload {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::vector<std::string> kTopKeys = {"name",     "description", "hardware",        "kernel",
                                           "params",   "lnc",         "inputs",          "outputs",
                                           "numerics", "reference",   "max_instructions"};

std::map<std::string, KernelLoader>& loaders() {
  static std::map<std::string, KernelLoader> m;
  return m;
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
    if (!v.is_string()) fail(path, "expected a string, found " + json_excerpt(v));
    return v.get<std::string>();
  }
  static std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

 private:
  std::string file_;
};

// Applies one --set assignment to the workload document. A hardware or .npy path set here is relative to the
// current directory: it is made absolute so the workload folder does not apply.
void apply_set(json& doc, const std::string& assignment) {
  auto [path, value] = config::parse_override(assignment);
  const auto bad = [&](const std::string& why) {
    throw InputError(fmt::format("--set {}: {}", text_excerpt(assignment), why));
  };
  const auto absolute_hw = [](json& v) {
    if (v.is_string()) {
      const std::string s = v.get<std::string>();
      if ((s.find('/') != std::string::npos || s.ends_with(".json")) && !fs::path(s).is_absolute())
        v = fs::absolute(s).string();
    }
  };
  // inputs.X = "x.npy" or {"npy": "x.npy"}, and inputs.X.npy = "x.npy".
  const auto absolute_npy = [](json& v) {
    if (v.is_string() && !v.get<std::string>().empty() && !fs::path(v.get<std::string>()).is_absolute())
      v = fs::absolute(v.get<std::string>()).string();
  };
  const auto absolute_entry = [&](json& v) {
    if (v.is_string()) absolute_npy(v);
    if (v.is_object() && v.contains("npy")) absolute_npy(v["npy"]);
    if (v.is_object() && v.contains("from")) absolute_npy(v["from"]);
  };
  if (path == "inputs" && value.is_object())
    for (auto& [key, entry] : value.items()) absolute_entry(entry);
  if (path.starts_with("inputs.")) {
    const std::string rest = path.substr(7);
    const size_t dot = rest.find('.');
    if (dot == std::string::npos) absolute_entry(value);
    if (dot != std::string::npos && (rest.substr(dot) == ".npy" || rest.substr(dot) == ".from"))
      absolute_npy(value);
  }
  // kernel.nki / reference.nki (Python kernels), alone or in a whole kernel/reference object.
  if ((path == "kernel" || path == "reference") && value.is_object() && value.contains("nki"))
    absolute_npy(value["nki"]);
  if (path == "kernel.nki" || path == "reference.nki") absolute_npy(value);
  if (path == "hardware" && value.is_object() && value.contains("name")) absolute_hw(value["name"]);
  const std::string hw_prefix = "hardware.overrides.";
  if (path == "hardware") absolute_hw(value);
  if (path.rfind(hw_prefix, 0) == 0 || path == "hardware.name" || path == "hardware.overrides") {
    if (!doc.contains("hardware") || doc["hardware"].is_string())
      doc["hardware"] = doc.contains("hardware") ? json{{"name", doc["hardware"]}} : json::object();
    if (!doc["hardware"].is_object()) bad("hardware is not a name or an object");
    if (path == "hardware.name") {
      absolute_hw(value);
      doc["hardware"]["name"] = value;
      return;
    }
    if (path == "hardware.overrides") {  // all of them at once
      if (!value.is_object()) bad("expected an object of \"path\": value, found " + json_excerpt(value));
      doc["hardware"]["overrides"] = value;
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
    if (!node->is_object()) bad(fmt::format("{} is not an object", at.empty() ? "the workload" : at));
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

// {"nki": "file.py", "function": "name"} at `path` (kernel, reference).
KernelSource parse_source(const Checker& c, const json& v, const std::string& path, const std::string& dir) {
  if (!v.is_object())
    c.fail(path, "expected {\"nki\": \"file.py\", \"function\": \"name\"}, found " + json_excerpt(v));
  c.keys(v, path, {"nki", "function"});
  KernelSource k;
  k.language = "nki";
  if (!v.contains("nki")) c.fail(path + ".nki", "missing (the Python file, relative to the workload)");
  k.written = c.string(v["nki"], path + ".nki");
  if (k.written.empty() || k.written.size() > 4096 || k.written.find('\0') != std::string::npos)
    c.fail(path + ".nki", fmt::format("'{}' is not a usable file path", text_excerpt(k.written)));
  k.file =
      fs::path(k.written).is_absolute() || dir.empty() ? k.written : (fs::path(dir) / k.written).string();
  std::error_code ec;
  const auto st = fs::status(k.file, ec);
  if (!fs::exists(st)) c.fail(path + ".nki", fmt::format("{}: no such file", k.file));
  if (!fs::is_regular_file(st)) c.fail(path + ".nki", fmt::format("{}: not a regular file", k.file));
  if (!v.contains("function")) c.fail(path + ".function", "missing (the function's name in the file)");
  k.function = c.string(v["function"], path + ".function");
  const bool ident = !k.function.empty() && !std::isdigit(static_cast<unsigned char>(k.function[0])) &&
                     std::all_of(k.function.begin(), k.function.end(), [](char ch) {
                       return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
                     });
  if (!ident) c.fail(path + ".function", fmt::format("'{}' is not a Python name", text_excerpt(k.function)));
  return k;
}

InputEntry parse_entry(const Checker& c, const std::string& key, json spec, const std::string& dir) {
  const std::string path = "inputs." + key;
  InputEntry e;
  e.key = key;
  if (spec.is_object() && !spec.contains("recipe")) {
    if (spec.contains("dtype")) {
      const std::string d = c.string(spec["dtype"], path + ".dtype");
      e.dtype = isa::parse_dtype(d);
      if (!e.dtype) c.fail(path + ".dtype", fmt::format("unknown dtype '{}'", text_excerpt(d)));
      spec.erase("dtype");
    }
    if (spec.contains("shape")) {
      const json& sh = spec["shape"];
      if (!sh.is_array() || sh.empty() || sh.size() > 8)
        c.fail(path + ".shape", "expected a list of 1 to 8 positive sizes, found " + json_excerpt(sh));
      std::vector<int64_t> shape;
      for (const json& d : sh) {
        if (!d.is_number_integer() || d.get<int64_t>() <= 0)
          c.fail(path + ".shape", "expected a list of 1 to 8 positive sizes, found " + json_excerpt(sh));
        shape.push_back(d.get<int64_t>());
      }
      try {
        tensor::elements_of(shape, path + ".shape");
      } catch (const InputError& err) {
        c.fail("", err.what());
      }
      e.shape = std::move(shape);
      spec.erase("shape");
    }
  }
  if (spec.is_object() && spec.contains("from")) {
    c.keys(spec, path, {"from", "output", "convert"});
    FromOutput f;
    f.written = c.string(spec["from"], path + ".from");
    if (f.written.empty() || f.written.size() > 4096 || f.written.find('\0') != std::string::npos)
      c.fail(path + ".from", fmt::format("'{}' is not a usable file path", text_excerpt(f.written)));
    f.file =
        fs::path(f.written).is_absolute() || dir.empty() ? f.written : (fs::path(dir) / f.written).string();
    if (!spec.contains("output"))
      c.fail(path + ".output", "missing (the output of " + f.written + " to read)");
    f.output = c.string(spec["output"], path + ".output");
    if (spec.contains("convert")) f.convert = c.string(spec["convert"], path + ".convert");
    e.from = std::move(f);
    e.given = true;
    return e;
  }
  if (spec.is_object() && spec.contains("recipe")) {
    e.is_recipe = true;
    e.recipe = c.string(spec["recipe"], path + ".recipe");
    e.recipe_args = spec;
    e.recipe_args.erase("recipe");
    return e;
  }
  try {
    e.source = tensor::parse_input_source(spec, path, dir);
  } catch (const InputError& err) {
    c.fail("", err.what());
  }
  return e;
}

}  // namespace

std::string TensorInfo::describe() const {
  return fmt::format("'{}' {} {}", name, isa::dtype_name(dtype), tensor::shape_str(shape));
}

const TensorInfo* PreparedWorkload::input(const std::string& name) const {
  for (const TensorInfo& t : inputs)
    if (t.name == name) return &t;
  return nullptr;
}

const TensorInfo* PreparedWorkload::output(const std::string& name) const {
  for (const TensorInfo& t : outputs)
    if (t.name == name) return &t;
  return nullptr;
}

bool is_workload_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw InputError(path + ": is a directory, expected a JSON file");
  const json doc = config::read_json_document(path);  // its errors are about this file, whatever it holds
  return doc.is_object() && doc.contains("kernel");
}

json workload_document(const std::string& path, const std::vector<std::string>& sets) {
  json doc = config::read_json_document(path);
  if (!doc.is_object()) Checker(path).fail("", "expected a JSON object at the top level");
  for (const std::string& s : sets) apply_set(doc, s);
  return doc;
}

Workload parse_workload(const std::string& path, const std::vector<std::string>& sets) {
  Checker c(path);
  json doc = workload_document(path, sets);
  c.keys(doc, "", kTopKeys);
  const std::string dir = fs::path(path).parent_path().string();

  Workload w;
  w.file = path;
  if (!doc.contains("name"))
    c.fail("name", "missing (the workload's name, used for the default output directory)");
  w.name = c.string(doc["name"], "name");
  const bool printable = std::all_of(w.name.begin(), w.name.end(), [](char ch) {
    return static_cast<unsigned char>(ch) >= 0x20 && ch != 0x7F;
  });
  if (w.name.empty() || w.name.size() > 200 || !printable || w.name.find('/') != std::string::npos ||
      w.name == "." || w.name == "..")
    c.fail("name",
           fmt::format("{} is not usable as a directory name (1-200 bytes of printable characters, no '/')",
                       json_excerpt(doc["name"])));
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
           "expected a config name, a .json path or {\"name\", \"overrides\"}, found " + json_excerpt(hw));
  }
  w.hardware = c.string(hw_name, hw.is_object() ? "hardware.name" : "hardware");
  if (w.hardware.find('/') != std::string::npos || w.hardware.ends_with(".json"))
    if (!fs::path(w.hardware).is_absolute()) w.hardware = (fs::path(dir) / w.hardware).string();

  if (!doc.contains("kernel")) c.fail("kernel", "missing");
  if (doc["kernel"].is_object()) {
    w.kernel_source = parse_source(c, doc["kernel"], "kernel", dir);
    w.kernel = fmt::format("{} ({})", w.kernel_source->function, w.kernel_source->written);
  } else {
    w.kernel = c.string(doc["kernel"], "kernel");
  }
  if (doc.contains("reference")) {
    if (!w.kernel_source)
      c.fail("reference", "only a Python kernel (\"kernel\": {\"nki\": ...}) takes a reference function");
    w.reference = parse_source(c, doc["reference"], "reference", dir);
  }
  if (doc.contains("params")) w.params = doc["params"];
  if (!w.params.is_object())
    c.fail("params", "expected an object of kernel parameters, found " + json_excerpt(w.params));
  if (doc.contains("lnc")) {
    const json& l = doc["lnc"];
    if (!l.is_number_integer() || (l.get<int64_t>() != 1 && l.get<int64_t>() != 2))
      c.fail("lnc", "expected 1 or 2, found " + json_excerpt(l));
    w.lnc = l.get<int>();
  }
  if (doc.contains("max_instructions")) {
    const json& m = doc["max_instructions"];
    if (!m.is_number_integer() || m.get<int64_t>() < 1)
      c.fail("max_instructions", "expected a positive integer, found " + json_excerpt(m));
    w.max_instructions = m.get<uint64_t>();
  }
  if (!doc.contains("inputs"))
    c.fail("inputs", "missing (a generator, .npy file or recipe per kernel input)");
  if (!doc["inputs"].is_object())
    c.fail("inputs", "expected an object, found " + json_excerpt(doc["inputs"]));
  for (const auto& [k, v] : doc["inputs"].items()) w.inputs.push_back(parse_entry(c, k, v, dir));
  if (doc.contains("outputs")) {
    const json& o = doc["outputs"];
    if (!o.is_array()) c.fail("outputs", "expected a list of kernel output names, found " + json_excerpt(o));
    if (o.empty()) c.fail("outputs", "empty list (leave \"outputs\" out to write every output)");
    for (size_t i = 0; i < o.size(); ++i) {
      const std::string n = c.string(o[i], fmt::format("outputs[{}]", i));
      if (std::find(w.outputs.begin(), w.outputs.end(), n) != w.outputs.end())
        c.fail(fmt::format("outputs[{}]", i), fmt::format("'{}' is listed twice", text_excerpt(n)));
      w.outputs.push_back(n);
    }
  }
  if (doc.contains("numerics")) {
    if (!doc["numerics"].is_boolean())
      c.fail("numerics", "expected true or false, found " + json_excerpt(doc["numerics"]));
    w.numerics = doc["numerics"].get<bool>();
  }
  return w;
}

std::unique_ptr<kernels::BoundKernel> bind_kernel(const Workload& w,
                                                  std::map<std::string, io::NpyArray>* npy) {
  Checker c(w.file);
  if (w.kernel_source) {
    // The kernel declares the inputs the workload gives it: their dtypes and shapes come from the workload
    // (a .npy file's shape when "shape" is left out).
    std::vector<TensorInfo> declared;
    for (const InputEntry& e : w.inputs) {
      const std::string path = "inputs." + e.key;
      if (e.is_recipe)
        c.fail(path + ".recipe", "a Python kernel has no recipes: give a generator or a .npy file");
      if (e.from)
        c.fail(path + ".from",
               "a Python kernel's inputs come from generators or .npy files, not from chains");
      if (!e.dtype)
        c.fail(path + ".dtype", "missing (a Python kernel's input needs its dtype, e.g. \"bfloat16\")");
      TensorInfo t{e.key, *e.dtype, e.shape.value_or(std::vector<int64_t>{})};
      if (!e.shape) {
        if (!e.source.is_npy)
          c.fail(path + ".shape",
                 "missing (a Python kernel's generated input needs its shape, e.g. [128, 512])");
        try {
          io::NpyArray a = io::read_npy(e.source.npy);
          t.shape = a.shape.empty() ? std::vector<int64_t>{1} : a.shape;
          if (npy != nullptr) npy->emplace(e.key, std::move(a));
        } catch (const InputError& err) {
          c.fail(path + ".npy", err.what());
        }
      }
      declared.push_back(std::move(t));
    }
    const auto it = loaders().find(w.kernel_source->language);
    if (it == loaders().end())
      c.fail("kernel", fmt::format("this trnsim was built without Python support (TRNSIM_PYTHON=OFF): it "
                                   "cannot run the {} kernel {}",
                                   w.kernel_source->language, w.kernel_source->written));
    return it->second(w, declared);
  } else {
    const kernels::Registry& reg = kernels::registry();
    if (reg.find(w.kernel) == nullptr) {
      std::vector<std::string> names;
      for (const kernels::KernelDef* k : reg.kernels()) names.push_back(k->name());
      c.fail("kernel",
             fmt::format("unknown kernel '{}' (known: {})", text_excerpt(w.kernel), fmt::join(names, ", ")));
    }
    try {
      return reg.bind(w.kernel, w.params);
    } catch (const InputError& e) {
      c.fail("params", e.what());
    }
  }
}

PreparedWorkload prepare_workload(Workload w) {
  Checker c(w.file);
  PreparedWorkload p;
  try {
    p.hw = config::load_hw_config(w.hardware, w.hw_overrides);
  } catch (const InputError& e) {
    c.fail("hardware", e.what());
  }
  p.kernel = bind_kernel(w, &p.npy);

  // One source of truth for the core count: the kernel's core parameter, else "lnc" (default 2).
  const std::optional<int> kc = p.kernel->cores();
  const std::string& cores_param = p.kernel->def().cores_param();
  if (kc && w.lnc && *kc != *w.lnc)
    c.fail("lnc",
           fmt::format("{} conflicts with kernel parameter '{}' = {}, which runs the kernel on {} core{}; "
                       "remove \"lnc\" or change '{}'",
                       *w.lnc, cores_param, json_excerpt(p.kernel->params()[cores_param]), *kc,
                       *kc == 1 ? "" : "s", cores_param));
  // (a Python kernel runs once, on one core, unless it asks for two: NKI's default launch)
  p.cores = kc.value_or(w.lnc.value_or(w.kernel_source ? 1 : 2));
  // Inputs the build reads (e.g. a dynamic loop's count): their values are made below from the declarations
  // of a first, declaration-only build (no instructions); the program is the second build's.
  const std::vector<std::string> build_reads = p.kernel->build_reads();
  kernels::BuildOptions bo;
  try {
    bo.limits = p.hw.limits();
    bo.num_programs = p.cores;
    bo.declare_only = !build_reads.empty();
    if (w.max_instructions) bo.max_instructions = *w.max_instructions;
    p.build = p.kernel->build(bo);
  } catch (const Error& e) {
    c.fail(w.kernel_source ? "kernel" : "params", e.what());
  }
  const isa::Program& prog = p.build.program;
  const auto info = [&](const std::string& name) {
    for (const isa::TensorDecl& t : prog.tensors)
      if (t.name == name) return TensorInfo{name, t.dtype, t.shape};
    throw Error(fmt::format("kernel '{}' lists tensor '{}' but declares no such tensor", w.kernel, name));
  };
  for (const std::string& n : p.build.inputs) p.inputs.push_back(info(n));
  for (const std::string& n : p.build.outputs) p.outputs.push_back(info(n));
  const auto names = [](const std::vector<TensorInfo>& v) {
    std::vector<std::string> s;
    for (const TensorInfo& t : v) s.push_back(t.name);
    return fmt::format("{}", fmt::join(s, ", "));
  };

  // Who makes each kernel input.
  std::map<std::string, std::string> maker;  // input -> entry key
  const auto claim = [&](const std::string& input, const std::string& entry) {
    const auto [it, fresh] = maker.emplace(input, entry);
    if (!fresh)
      c.fail("inputs." + entry, fmt::format("input '{}' is already made by inputs.{}", input, it->second));
  };
  std::map<std::string, std::vector<std::string>> reads;
  for (const InputEntry& e : w.inputs) {
    const std::string path = "inputs." + e.key;
    if (!e.is_recipe) {
      const TensorInfo* t = p.input(e.key);
      if (t == nullptr)
        c.fail(path,
               fmt::format("kernel '{}' has no input '{}' (inputs: {}{})", w.kernel, e.key, names(p.inputs),
                           p.kernel->def().recipes().empty() ? "" : "; recipes use a \"recipe\" key"));
      claim(e.key, e.key);
      if (e.dtype && *e.dtype != t->dtype)
        c.fail(path + ".dtype",
               fmt::format("{}, but the kernel declares {}", isa::dtype_name(*e.dtype), t->describe()));
      if (e.shape && *e.shape != t->shape)
        c.fail(path + ".shape",
               fmt::format("{}, but the kernel declares {}", tensor::shape_str(*e.shape), t->describe()));
      if (e.given) continue;
      if (e.source.is_npy && p.npy.count(e.key)) {
        try {
          tensor::check_npy_fits(p.npy.at(e.key), t->dtype, t->shape, "kernel input " + t->describe());
        } catch (const InputError& err) {
          c.fail(path + ".npy", err.what());
        }
      } else if (e.source.is_npy) {
        try {
          io::NpyArray a = io::read_npy(e.source.npy);
          tensor::check_npy_fits(a, t->dtype, t->shape, "kernel input " + t->describe());
          p.npy.emplace(e.key, std::move(a));
        } catch (const InputError& err) {
          c.fail(path + ".npy", err.what());
        }
      } else {
        try {
          tensor::check_generator_fits(e.source.generator, t->dtype, t->shape, path);
        } catch (const InputError& err) {
          c.fail("", err.what());
        }
      }
      continue;
    }
    const auto plan = p.kernel->recipe_plan(e.recipe);
    if (!plan) {
      std::vector<std::string> rs;
      for (const auto& r : p.kernel->def().recipes()) rs.push_back(r.name);
      c.fail(path + ".recipe",
             fmt::format("kernel '{}' has no recipe '{}' ({})", w.kernel, text_excerpt(e.recipe),
                         rs.empty() ? std::string("it offers none")
                                    : fmt::format("recipes: {}", fmt::join(rs, ", "))));
    }
    try {
      p.recipe_args[e.key] = p.kernel->check_recipe_args(e.recipe, e.recipe_args, path);
    } catch (const InputError& err) {
      c.fail("", err.what());
    }
    for (const std::string& out : plan->produces) {
      if (p.input(out) == nullptr)
        throw Error(fmt::format("recipe '{}' makes '{}', which kernel '{}' does not declare", e.recipe, out,
                                w.kernel));
      claim(out, e.key);
    }
    p.recipe_outputs[e.key] = plan->produces;
    reads[e.key] = plan->reads;
  }
  for (const TensorInfo& t : p.inputs)
    if (!maker.count(t.name))
      c.fail("inputs",
             fmt::format("missing input {} (kernel '{}' needs {})", t.describe(), w.kernel, names(p.inputs)));

  // Production order: plain sources first, then recipes once what they read exists.
  std::set<std::string> made;
  std::vector<bool> done(w.inputs.size(), false);
  for (size_t i = 0; i < w.inputs.size(); ++i)
    if (!w.inputs[i].is_recipe) {
      p.order.push_back(i);
      made.insert(w.inputs[i].key);
      done[i] = true;
    }
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t i = 0; i < w.inputs.size(); ++i) {
      if (done[i]) continue;
      const auto& rd = reads[w.inputs[i].key];
      if (std::all_of(rd.begin(), rd.end(), [&](const std::string& r) { return made.count(r) > 0; })) {
        p.order.push_back(i);
        for (const std::string& o : p.recipe_outputs[w.inputs[i].key]) made.insert(o);
        done[i] = progress = true;
      }
    }
  }
  for (size_t i = 0; i < w.inputs.size(); ++i)
    if (!done[i])
      c.fail("inputs." + w.inputs[i].key,
             fmt::format("recipe '{}' reads {}, which cannot be made first (missing or circular)",
                         w.inputs[i].recipe, fmt::join(reads[w.inputs[i].key], ", ")));

  for (size_t i = 0; i < w.outputs.size(); ++i)
    if (p.output(w.outputs[i]) == nullptr)
      c.fail(fmt::format("outputs[{}]", i),
             fmt::format("kernel '{}' has no output '{}' (outputs: {})", w.kernel, text_excerpt(w.outputs[i]),
                         names(p.outputs)));
  // Integer inputs read from .npy files (routing tensors, counts) get the kernel's value checks now, so
  // validate and a timing-only run reject what a run with numerics would.
  kernels::Tensors ints;
  for (const auto& [key, a] : p.npy)
    if (const TensorInfo* t = p.input(key); t != nullptr && isa::is_int(t->dtype))
      ints.emplace(key, tensor::from_npy(a, t->dtype, t->shape, "kernel input " + t->describe()));
  try {
    p.kernel->check_inputs(ints);
  } catch (const InputError& err) {
    c.fail("inputs", err.what());
  }
  // Inputs the build reads: made now from their generator or .npy, checked, and the program built with their
  // values.
  if (!build_reads.empty()) {
    kernels::Tensors vals;
    for (const std::string& n : build_reads) {
      const TensorInfo* t = p.input(n);
      if (t == nullptr)
        throw Error(fmt::format("kernel '{}' reads input '{}' at build time but declares no such input",
                                w.kernel, n));
      const auto e = std::find_if(w.inputs.begin(), w.inputs.end(),
                                  [&](const InputEntry& x) { return !x.is_recipe && x.key == n; });
      if (e == w.inputs.end())
        c.fail("inputs." + maker.at(n),
               fmt::format("input '{}' sets the kernel's loop count when the program is built: give it as a "
                           "generator or .npy, not by a recipe",
                           n));
      const int threads = tensor::generator_threads();
      vals.emplace(n, e->source.is_npy
                          ? tensor::from_npy(p.npy.at(n), t->dtype, t->shape, "kernel input " + t->describe())
                          : tensor::generate(e->source.generator, t->dtype, t->shape, threads));
    }
    try {
      p.kernel->check_inputs(vals);
    } catch (const InputError& err) {
      c.fail("inputs", err.what());
    }
    for (const auto& [n, t] : vals) {
      std::vector<int64_t>& v = bo.input_values[n];
      for (int64_t i = 0; i < t.elements(); ++i) v.push_back(t.int_value(i));
    }
    p.input_values = bo.input_values;
    bo.declare_only = false;
    try {
      p.build = p.kernel->build(bo);
    } catch (const Error& e) {
      c.fail("params", e.what());
    }
  }
  p.written = w.outputs;
  if (p.written.empty())
    for (const TensorInfo& t : p.outputs) p.written.push_back(t.name);
  p.w = std::move(w);
  return p;
}

kernels::Tensors make_inputs(const PreparedWorkload& p) {
  kernels::Tensors made;
  const int threads = tensor::generator_threads();
  for (size_t i : p.order) {
    const InputEntry& e = p.w.inputs[i];
    if (e.given) continue;  // WorkloadRun::set_input
    if (!e.is_recipe) {
      const TensorInfo& t = *p.input(e.key);
      if (e.source.is_npy)
        made.emplace(e.key,
                     tensor::from_npy(p.npy.at(e.key), t.dtype, t.shape, "kernel input " + t.describe()));
      else
        made.emplace(e.key, tensor::generate(e.source.generator, t.dtype, t.shape, threads));
      continue;
    }
    kernels::Tensors out;
    for (const std::string& o : p.recipe_outputs.at(e.key)) {
      const TensorInfo& t = *p.input(o);
      out.emplace(o, tensor::HostTensor::zeros(t.dtype, t.shape));
    }
    kernels::RecipeIO io(made, out, threads);
    try {
      // What the recipe reads must pass the kernel's input checks first (e.g. routing from .npy files).
      p.kernel->check_inputs(made);
    } catch (const InputError& err) {
      throw InputError(fmt::format("{}: inputs: {}", p.w.file, err.what()));
    }
    try {
      p.kernel->run_recipe(e.recipe, p.recipe_args.at(e.key), io);
    } catch (const InputError& err) {
      throw InputError(fmt::format("{}: inputs.{} (recipe '{}'): {}", p.w.file, e.key, e.recipe, err.what()));
    }
    for (auto& [name, t] : out) made.emplace(name, std::move(t));
  }
  try {
    p.kernel->check_inputs(made);
  } catch (const InputError& err) {
    throw InputError(fmt::format("{}: inputs: {}", p.w.file, err.what()));
  }
  return made;
}

std::vector<kernels::OutputCheck> make_checks(const PreparedWorkload& p) {
  return p.kernel->checks();
}

bool has_prepare_step(const std::vector<kernels::OutputCheck>& checks) {
  return std::any_of(checks.begin(), checks.end(),
                     [](const kernels::OutputCheck& c) { return static_cast<bool>(c.prepare); });
}

void prepare_checks(const PreparedWorkload& p, const std::vector<kernels::OutputCheck>& checks,
                    const kernels::Tensors& inputs, bool full_reference) {
  const kernels::CheckContext ctx(inputs, full_reference);
  for (const kernels::OutputCheck& c : checks) {
    if (!c.prepare) continue;
    try {
      c.prepare(ctx);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", p.w.file, e.what()));
    }
  }
}

std::vector<tensor::CheckResult> evaluate_checks(const PreparedWorkload& p,
                                                 const std::vector<kernels::OutputCheck>& checks,
                                                 const kernels::Tensors& inputs,
                                                 const kernels::Tensors& outputs, bool full_reference) {
  std::vector<tensor::CheckResult> results;
  const kernels::CheckContext ctx(inputs, outputs, full_reference);
  for (const kernels::OutputCheck& c : checks) {
    try {
      results.push_back(c.run(ctx));
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", p.w.file, e.what()));
    }
  }
  return results;
}

std::vector<tensor::CheckResult> evaluate_checks(const PreparedWorkload& p, const kernels::Tensors& inputs,
                                                 const kernels::Tensors& outputs, bool full_reference) {
  return evaluate_checks(p, make_checks(p), inputs, outputs, full_reference);
}

std::vector<std::string> input_notes(const PreparedWorkload& p, const kernels::Tensors& inputs) {
  std::vector<std::string> notes;
  // The recipe that made an input, or "" (a generator or an .npy file).
  const auto recipe_of = [&](const std::string& name) -> std::string {
    for (const InputEntry& e : p.w.inputs)
      if (e.is_recipe) {
        const auto& outs = p.recipe_outputs.at(e.key);
        if (std::find(outs.begin(), outs.end(), name) != outs.end()) return e.recipe;
      }
    return "";
  };
  for (const TensorInfo& t : p.inputs) {
    const auto it = inputs.find(t.name);
    if (it == inputs.end()) continue;
    const tensor::HostTensor& h = it->second;
    const int64_t n = h.elements();
    if (t.dtype == isa::DType::E8M0) {  // 0xFF is E8M0's NaN: every value scaled by it is NaN
      int64_t nan = 0;
      for (int64_t i = 0; i < n; ++i) nan += h.bytes[static_cast<size_t>(i)] == 0xFF;
      if (nan > 0)
        notes.push_back(fmt::format(
            "inputs.{}: {} of {} E8M0 scales are 0xFF (NaN): the values they scale are NaN", t.name, nan, n));
      continue;
    }
    if (isa::is_int(t.dtype) || isa::is_x4(t.dtype)) continue;
    int64_t bad = 0;
    // NaN or Inf: an all-ones exponent; BF16 and FP32 straight from their bits (weights run to 10^9 values).
    if (t.dtype == isa::DType::BF16) {
      const auto* b = reinterpret_cast<const uint16_t*>(h.bytes.data());
      for (int64_t i = 0; i < n; ++i) bad += (b[i] & 0x7F80u) == 0x7F80u;
    } else if (t.dtype == isa::DType::F32) {
      const auto* b = reinterpret_cast<const uint32_t*>(h.bytes.data());
      for (int64_t i = 0; i < n; ++i) bad += (b[i] & 0x7F800000u) == 0x7F800000u;
    } else {
      for (int64_t i = 0; i < n; ++i) bad += !std::isfinite(h.value(i));
    }
    if (bad == 0) continue;
    std::string why;
    const auto npy = p.npy.find(t.name);
    if (npy != p.npy.end() &&
        (npy->second.dtype == io::NpyDType::F32 || npy->second.dtype == io::NpyDType::F64)) {
      const io::NpyArray& a = npy->second;
      int64_t src_bad = 0;
      for (int64_t i = 0; i < a.elements(); ++i)
        src_bad += !std::isfinite(a.dtype == io::NpyDType::F32 ? static_cast<double>(a.data<float>()[i])
                                                               : a.data<double>()[i]);
      if (bad > src_bad)
        why = fmt::format(" ({} finite values of the .npy overflowed {})", bad - src_bad,
                          isa::dtype_name(t.dtype));
    } else if (const std::string r = recipe_of(t.name); !r.empty()) {
      why = fmt::format(" (made by recipe '{}' from the other inputs)", r);
    } else if (npy == p.npy.end()) {
      why = fmt::format(" (generated values overflowed {})", isa::dtype_name(t.dtype));
    }
    notes.push_back(
        fmt::format("inputs.{}: {} of {} values are NaN or Inf{}", t.name, bad, h.elements(), why));
  }
  return notes;
}

double reference_flops(const PreparedWorkload& p) {
  double f = 0;
  for (const kernels::OutputCheck& c : p.kernel->checks()) f += c.reference_flops;
  return f;
}

double reference_host_bytes(const PreparedWorkload& p) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto* list : {&p.inputs, &p.outputs})
    for (const TensorInfo& t : *list) shapes[t.name] = t.shape;
  double most = 0;
  for (const kernels::OutputCheck& c : p.kernel->checks()) {
    double b = 0;
    if (c.reference_bytes) {
      b = c.reference_bytes(shapes);
    } else if (const TensorInfo* t = p.output(c.output)) {
      b = 12.0 * static_cast<double>(tensor::elements_of(t->shape));
    }
    most = std::max(most, b);
  }
  return most;
}

double compulsory_hbm_bytes(const PreparedWorkload& p) {
  double b = 0;
  for (const auto* list : {&p.inputs, &p.outputs})
    for (const TensorInfo& t : *list)
      b += static_cast<double>(tensor::elements_of(t.shape)) * isa::dtype_size(t.dtype);
  return b;
}

kernels::RooflineWork roofline_work(const PreparedWorkload& p) {
  std::map<std::string, double> bytes;
  for (const auto* list : {&p.inputs, &p.outputs})
    for (const TensorInfo& t : *list)
      bytes[t.name] += static_cast<double>(tensor::elements_of(t.shape)) * isa::dtype_size(t.dtype);
  if (!p.input_values.empty())
    if (const std::optional<kernels::RooflineWork> w = p.kernel->roofline_work(p.input_values, bytes))
      return *w;
  return {p.kernel->useful_flops().value_or(-1), compulsory_hbm_bytes(p)};
}

void set_kernel_loader(const std::string& language, KernelLoader loader) {
  loaders()[language] = std::move(loader);
}

bool has_kernel_loader(const std::string& language) {
  return loaders().count(language) > 0;
}

}  // namespace trnsim::workload
