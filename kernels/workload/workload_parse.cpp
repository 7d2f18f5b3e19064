// Reading a workload file (workload.h): the JSON document with the --set assignments applied, its keys, the
// kernel, hardware and parameters, and every input entry (a generator, a .npy file, another workload's
// output or a recipe).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "kernels/workload/workload.h"
#include "kernels/workload/workload_checker.h"
#include "sim/base/error.h"
#include "sim/base/json_excerpt.h"
#include "sim/config/hw_names.h"
#include "sim/config/json_document.h"
#include "sim/io/file_kind.h"
#include "sim/io/output_name.h"
#include "sim/isa/names.h"

namespace trnsim::workload {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::vector<std::string> kTopKeys = {"name",     "description", "hardware",        "kernel",
                                           "params",   "lnc",         "inputs",          "outputs",
                                           "numerics", "reference",   "max_instructions"};

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
    // A key of an input the workload does not have: say so (the entry it would make holds only that key).
    if (const std::string name = rest.substr(0, dot); dot != std::string::npos && doc.contains("inputs") &&
                                                      doc["inputs"].is_object() &&
                                                      !doc["inputs"].contains(name)) {
      std::vector<std::string> have;
      for (const auto& [k, v] : doc["inputs"].items()) have.push_back(k);
      bad(
          fmt::format("the workload has no input '{}' ({}); a new input is set whole: --set "
                      "inputs.{}={{\"generator\": ...}} or inputs.{}=file.npy",
                      text_excerpt(name),
                      have.empty() ? "it has none" : fmt::format("its inputs: {}", fmt::join(have, ", ")),
                      text_excerpt(name), text_excerpt(name)));
    }
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
  if (path.rfind("hardware.", 0) == 0) {
    // A hardware parameter without overrides. (hardware.dma.queue_sets): the form that sets it.
    const std::string rest = path.substr(std::string("hardware.").size());
    const std::string first = rest.substr(0, rest.find('.'));
    if (first != "name" && first != "overrides")
      bad(fmt::format(
          "hardware has no key '{}' (it takes name and overrides): a hardware parameter is set as "
          "--set hardware.overrides.{}={}",
          text_excerpt(first), text_excerpt(rest),
          text_excerpt(assignment.substr(assignment.find('=') + 1))));
    // hardware.name is a string: it has no keys to set (before, "hardware.name is not an object").
    if (first == "name" && rest != "name")
      bad(fmt::format(
          "hardware.name has no key '{}': it is the hardware config's name ({}) or a .json file's path, set "
          "whole (--set hardware.name=trn3); a hardware parameter is set as --set "
          "hardware.overrides.PATH=VALUE",
          text_excerpt(rest.substr(5)), fmt::join(config::known_hw_configs(), ", ")));
  }
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
  const auto st = fs::status(k.file, ec);  // a symlink loop or an unsearchable folder: not "missing", say why
  if (!fs::exists(st)) c.fail(path + ".nki", fmt::format("{}: {}", k.file, io::missing_reason(k.file)));
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
      for (size_t i = 0; i < sh.size(); ++i) {
        const json& d = sh[i];
        if (!d.is_number_integer() || d.get<int64_t>() <= 0)
          c.fail(fmt::format("{}.shape[{}]", path, i),
                 fmt::format("expected a positive integer size, found {} (in shape {})", json_excerpt(d),
                             short_json(sh)));
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
  if (const std::string problem = io::folder_name_problem(w.name); !problem.empty())
    c.fail("name", fmt::format("{} {}", json_excerpt(doc["name"]), problem));
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

}  // namespace trnsim::workload
