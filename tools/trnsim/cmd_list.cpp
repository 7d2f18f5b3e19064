// trnsim list: the registered kernels, their parameters (name, type, default, allowed values, doc; nested
// config objects indented) and the input recipes they offer; then the NKI Python kernels shipped as
// workloads (examples/nki/*.json of the source tree: what `trnsim run` runs as given), each with its
// function, inputs and parameters (the function's keyword arguments).
//   trnsim list [KERNEL] [--json]     (KERNEL: a registered kernel, a Python workload's name, or a workload
//                                      file: any, its kernel a registered one or a Python function)
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "kernels/api/input_order.h"
#include "kernels/api/registry.h"
#include "kernels/workload/workload.h"
#include "sim/base/error.h"
#include "sim/io/file_kind.h"
#include "sim/io/npy.h"
#include "tools/trnsim/commands.h"
#include "tools/trnsim/run_log.h"

namespace trnsim::cli {
namespace {

struct ListOptions {
  std::string kernel;
  bool json = false;
};

std::string bounds(const kernels::ParamSpec& p) {
  if (p.min && p.max) return fmt::format(" [{}, {}]", *p.min, *p.max);
  if (p.min) return fmt::format(" >= {}", *p.min);
  if (p.max) return fmt::format(" <= {}", *p.max);
  return "";
}

nlohmann::json spec_json(const kernels::ParamSpec& p) {
  nlohmann::json j = {{"name", p.name}, {"type", kernels::param_type_name(p.type)}, {"doc", p.doc}};
  j["required"] = p.default_value.is_null() && !p.nullable;
  if (p.nullable) j["nullable"] = true;
  if (!p.default_value.is_null()) j["default"] = p.default_value;
  if (!p.allowed.empty()) j["allowed"] = p.allowed;
  const bool integral = p.type == kernels::ParamType::Int || p.type == kernels::ParamType::Shape;
  const auto bound = [&](double v) {
    return integral ? nlohmann::json(static_cast<int64_t>(v)) : nlohmann::json(v);
  };
  if (p.min) j["min"] = bound(*p.min);
  if (p.max) j["max"] = bound(*p.max);
  if (!p.fields.empty()) {
    j["fields"] = nlohmann::json::array();
    for (const auto& f : p.fields) j["fields"].push_back(spec_json(f));
  }
  return j;
}

nlohmann::json to_json(const kernels::KernelDef& k) {
  nlohmann::json params = nlohmann::json::array(), recipes = nlohmann::json::array();
  for (const kernels::ParamSpec& p : k.params()) params.push_back(spec_json(p));
  for (const auto& r : k.recipes()) {
    nlohmann::json args = nlohmann::json::array();
    for (const auto& a : r.args) args.push_back(spec_json(a));
    recipes.push_back({{"name", r.name}, {"doc", r.doc}, {"args", args}});
  }
  nlohmann::json j = {{"name", k.name()}, {"doc", k.doc()}, {"params", params}};
  if (!k.cores_param().empty()) j["cores_param"] = k.cores_param();
  if (!recipes.empty()) j["recipes"] = recipes;
  return j;
}

void print_specs(const std::vector<kernels::ParamSpec>& specs, int indent) {
  for (const kernels::ParamSpec& p : specs) {
    std::string type = kernels::param_type_name(p.type);
    if (!p.allowed.empty()) type = fmt::format("{}", fmt::join(p.allowed, "|"));
    type += bounds(p);
    const std::string def = !p.default_value.is_null() && !p.default_value.is_object()
                                ? "default " + p.default_value.dump()
                            : p.nullable || p.default_value.is_object() ? "optional"
                                                                        : "required";
    const std::string name = std::string(static_cast<size_t>(indent), ' ') + p.name;
    // Long names or types get their own line so the columns stay aligned.
    if (name.size() > 20 || type.size() > 28)
      std::printf("  %s\n  %-20s %-28s %-16s %s\n", name.c_str(), "", type.c_str(), def.c_str(),
                  p.doc.c_str());
    else
      std::printf("  %-20s %-28s %-16s %s\n", name.c_str(), type.c_str(), def.c_str(), p.doc.c_str());
    if (!p.fields.empty()) print_specs(p.fields, indent + 2);
  }
}

void print_text(const kernels::KernelDef& k) {
  std::printf("%s\n  %s\n", k.name().c_str(), k.doc().c_str());
  if (!k.cores_param().empty())
    std::printf("  (physical cores: set by '%s'; a workload's \"lnc\" must agree)\n",
                k.cores_param().c_str());
  print_specs(k.params(), 0);
  for (const auto& r : k.recipes()) {
    std::printf("  recipe %s: %s\n", r.name.c_str(), r.doc.c_str());
    print_specs(r.args, 4);
  }
}

// A workload file: a Python (NKI) kernel shipped as a workload (examples/nki/<file>.json), or any workload
// `trnsim list FILE` names (its kernel a Python function or a registered one).
struct PythonEntry {
  std::string workload;  // relative to the source tree
  workload::Workload w;
  std::vector<kernels::ParamSpec> params;    // the function's keyword arguments
  bool open_params = false;                  // it takes **kwargs
  std::vector<workload::InputEntry> inputs;  // the workload's, in the order the function takes them
  std::string error;                         // why its parameters are unknown (e.g. a build without Python)
};

constexpr const char* kPythonDir = "examples/nki";

// The workload's input entries with the kernel's inputs first, in `order` (the function's parameter order, as
// a caller passes them positionally), then the rest (recipes) as the workload has them.
std::vector<workload::InputEntry> in_kernel_order(const std::vector<workload::InputEntry>& entries,
                                                  const std::vector<std::string>& order) {
  std::vector<workload::InputEntry> out;
  for (const std::string& name : order)
    for (const workload::InputEntry& e : entries)
      if (!e.is_recipe && e.key == name) out.push_back(e);
  for (const workload::InputEntry& e : entries)
    if (std::find_if(out.begin(), out.end(), [&](const auto& o) { return o.key == e.key; }) == out.end())
      out.push_back(e);
  return out;
}

// The workload file `f` (shown as `shown`) and, for a Python kernel, the function's parameters.
PythonEntry entry_of(const std::string& f, const std::string& shown) {
  PythonEntry p;
  p.workload = shown;
  p.w = workload::parse_workload(f);
  p.inputs = p.w.inputs;
  if (!p.w.kernel_source) return p;
  try {
    const auto bound = workload::bind_kernel(p.w);
    p.params = bound->def().params();
    p.open_params = bound->def().open_params();
    p.inputs = in_kernel_order(p.w.inputs, kernels::input_order_of(bound.get()));
  } catch (const Error& e) {
    p.error = e.what();
  }
  return p;
}

std::vector<PythonEntry> python_entries() {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(TRNSIM_SOURCE_DIR) / kPythonDir, ec))
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  std::vector<PythonEntry> out;
  for (const std::string& f : files) {
    if (!workload::is_workload_file(f)) continue;
    PythonEntry p = entry_of(f, std::string(kPythonDir) + "/" + fs::path(f).filename().string());
    if (p.w.kernel_source) out.push_back(std::move(p));
  }
  return out;
}

// What a .npy input's header says (its dtype and shape) for an entry that gives neither, as "uint16 (.npy)
// [128, 8]"-style text pieces; the reading error when the file cannot be read.
struct NpyHeader {
  std::string dtype, shape, error;
};
NpyHeader npy_header_of(const workload::InputEntry& e) {
  NpyHeader h;
  if (e.is_recipe || !e.source.is_npy || (e.dtype && e.shape)) return h;
  try {
    const io::NpyArray a = io::read_npy(e.source.npy);
    h.dtype = io::npy_dtype_name(a.dtype);
    h.shape = fmt::format("[{}]", fmt::join(a.shape.empty() ? std::vector<int64_t>{1} : a.shape, ", "));
  } catch (const InputError& err) {
    h.error = err.what();
  }
  return h;
}

nlohmann::json to_json(const PythonEntry& p) {
  const auto source = [](const workload::KernelSource& s) {
    return nlohmann::json{{s.language, s.written}, {"function", s.function}};
  };
  nlohmann::json params = nlohmann::json::array(), inputs = nlohmann::json::array();
  for (const kernels::ParamSpec& s : p.params) params.push_back(spec_json(s));
  for (const workload::InputEntry& e : p.inputs) {
    nlohmann::json i = {{"name", e.key}};
    const NpyHeader h = npy_header_of(e);
    if (e.dtype) i["dtype"] = kernels::dtype_str(*e.dtype);
    if (e.shape) i["shape"] = *e.shape;
    if (e.source.is_npy && !e.is_recipe) i["npy"] = e.source.npy;
    if (!h.dtype.empty()) i["npy_dtype"] = h.dtype;
    if (!h.shape.empty() && !e.shape) i["shape"] = nlohmann::json::parse(h.shape);
    if (!h.error.empty()) i["npy_error"] = h.error;
    inputs.push_back(std::move(i));
  }
  nlohmann::json j = {{"name", p.w.name},       {"doc", p.w.description},
                      {"workload", p.workload}, {"kernel", source(*p.w.kernel_source)},
                      {"params", params},       {"kwargs", p.open_params},
                      {"inputs", inputs},       {"workload_params", p.w.params}};
  if (p.w.reference) j["reference"] = source(*p.w.reference);
  if (!p.error.empty()) j["error"] = p.error;
  return j;
}

void print_input(const workload::InputEntry& e) {
  const NpyHeader h = npy_header_of(e);
  const std::string dtype = e.dtype ? kernels::dtype_str(*e.dtype) : h.dtype;
  const std::string shape = e.shape ? fmt::format("[{}]", fmt::join(*e.shape, ", ")) : h.shape;
  std::string from;
  if (e.source.is_npy && !e.is_recipe)
    from = !h.error.empty() ? " (" + h.error + ")"
                            : " (" + std::filesystem::path(e.source.npy).filename().string() + ")";
  if (dtype.empty() && shape.empty() && from.empty()) {
    std::printf("  input %-14s (dtype and shape: the kernel's)\n", e.key.c_str());
    return;
  }
  std::printf("  input %-14s %s%s%s%s\n", e.key.c_str(), dtype.c_str(),
              dtype.empty() || shape.empty() ? "" : " ", shape.c_str(), from.c_str());
}

void print_text(const PythonEntry& p) {
  const workload::KernelSource& k = *p.w.kernel_source;
  std::printf("%s (%s)\n", p.w.name.c_str(), p.workload.c_str());
  if (!p.w.description.empty()) std::printf("  %s\n", p.w.description.c_str());
  std::printf("  kernel %s in %s", k.function.c_str(), k.written.c_str());
  if (p.w.reference)
    std::printf("; reference %s in %s", p.w.reference->function.c_str(), p.w.reference->written.c_str());
  std::printf("\n");
  for (const workload::InputEntry& e : p.inputs) print_input(e);
  if (!p.error.empty()) std::printf("  (parameters unknown: %s)\n", p.error.c_str());
  print_specs(p.params, 0);
  if (p.open_params)
    std::printf("  **kwargs: any other params.NAME is passed to %s as a keyword argument\n",
                k.function.c_str());
  if (!p.w.params.empty()) std::printf("  the workload sets: %s\n", p.w.params.dump().c_str());
}

// A workload file of a registered kernel: the workload, what it gives, then the kernel's listing.
void print_workload_text(const PythonEntry& p, const kernels::KernelDef& k) {
  std::printf("%s (%s)\n", p.w.name.c_str(), p.workload.c_str());
  if (!p.w.description.empty()) std::printf("  %s\n", p.w.description.c_str());
  std::printf("  kernel %s (registered; its parameters below)\n", k.name().c_str());
  for (const workload::InputEntry& e : p.inputs) print_input(e);
  if (!p.w.params.empty()) std::printf("  the workload sets: %s\n", p.w.params.dump().c_str());
  std::printf("\n");
  print_text(k);
}

void print_python_heading() {
  std::printf(
      "NKI Python kernels (%s: run one with `trnsim run %s/<file>.json`; its parameters are the function's "
      "keyword arguments, set with --set params.NAME=VALUE)\n",
      kPythonDir, kPythonDir);
}

// `trnsim list FILE`: the workload file, whatever its kernel (a registered one, or a Python function).
bool list_file(const ListOptions& o) {
  // A path (a '/' or a .json name) is named as run and validate name it when it is no file: a typo in a path
  // is likelier than a kernel of that name.
  const io::FileKind kind = io::file_kind(o.kernel);
  const bool path_like = o.kernel.find('/') != std::string::npos || o.kernel.ends_with(".json");
  if (path_like && kind == io::FileKind::kMissing)
    throw InputError(fmt::format("{}: {}", o.kernel, io::missing_reason(o.kernel)));
  if (path_like && kind == io::FileKind::kDirectory)
    throw InputError(fmt::format("{}: is a directory, expected a workload file", o.kernel));
  if (path_like && kind == io::FileKind::kSpecial)
    throw InputError(fmt::format("{}: {}, expected a workload file", o.kernel, io::kNotARegularFile));
  if (o.kernel.find_first_of("/.") == std::string::npos || kind != io::FileKind::kRegular) return false;
  bool is_workload = false;
  try {
    is_workload = workload::is_workload_file(o.kernel);
  } catch (const InputError& e) {  // not JSON (a kernel's .py file, ...)
    throw InputError(fmt::format("not a workload file: {}", e.what()));
  }
  if (!is_workload) throw InputError(fmt::format("{}: not a workload file (it has no \"kernel\")", o.kernel));
  const PythonEntry p = entry_of(o.kernel, o.kernel);
  // A workload named on the command line whose kernel cannot be loaded (a missing function, a module that
  // raises on import): its error, exit 1 (the listing of every kernel shows it as a note instead).
  if (!p.error.empty()) throw InputError(p.error);
  if (p.w.kernel_source) {
    if (o.json)
      std::printf("%s\n", to_json(p).dump(2).c_str());
    else
      print_text(p);
    return true;
  }
  const kernels::KernelDef& k = kernels::registry().get(p.w.kernel);
  if (o.json) {
    nlohmann::json inputs = nlohmann::json::array();
    for (const workload::InputEntry& e : p.inputs) inputs.push_back(e.key);
    std::printf("%s\n", nlohmann::json{{"name", p.w.name},
                                       {"doc", p.w.description},
                                       {"workload", p.workload},
                                       {"kernel", to_json(k)},
                                       {"inputs", inputs},
                                       {"workload_params", p.w.params}}
                            .dump(2)
                            .c_str());
  } else {
    print_workload_text(p, k);
  }
  return true;
}

void run_list(const ListOptions& o) {
  const kernels::Registry& r = kernels::registry();
  if (!o.kernel.empty() && r.find(o.kernel) == nullptr && list_file(o)) return;
  if (!o.kernel.empty() && r.find(o.kernel) == nullptr) {
    const std::vector<PythonEntry> python = python_entries();
    for (const PythonEntry& p : python)
      if (p.w.name == o.kernel || p.w.kernel_source->function == o.kernel) {
        if (o.json)
          std::printf("%s\n", to_json(p).dump(2).c_str());
        else
          print_text(p);
        return;
      }
    std::vector<std::string> names;
    for (const kernels::KernelDef* k : r.kernels()) names.push_back(k->name());
    for (const PythonEntry& p : python) names.push_back(p.w.name);
    throw InputError(fmt::format("unknown kernel '{}' (known: {})", o.kernel, fmt::join(names, ", ")));
  }
  if (!o.kernel.empty()) {
    const kernels::KernelDef& k = r.get(o.kernel);  // InputError for an unknown name
    if (o.json)
      std::printf("%s\n", to_json(k).dump(2).c_str());
    else
      print_text(k);
    return;
  }
  const std::vector<PythonEntry> python = python_entries();
  if (o.json) {
    nlohmann::json all = nlohmann::json::array();
    for (const kernels::KernelDef* k : r.kernels()) all.push_back(to_json(*k));
    for (const PythonEntry& p : python) all.push_back(to_json(p));
    std::printf("%s\n", all.dump(2).c_str());
    return;
  }
  bool first = true;
  for (const kernels::KernelDef* k : r.kernels()) {
    if (!first) std::printf("\n");
    first = false;
    print_text(*k);
  }
  if (python.empty()) return;
  std::printf("\n");
  print_python_heading();
  for (const PythonEntry& p : python) {
    std::printf("\n");
    print_text(p);
  }
}

}  // namespace

void add_list_command(CLI::App& app) {
  auto opts = std::make_shared<ListOptions>();
  CLI::App* cmd = app.add_subcommand(
      "list",
      "List the kernels, their parameters and input recipes, and the NKI Python kernels of examples/nki");
  cmd->add_option("kernel", opts->kernel,
                  "Only this kernel (a registered kernel or an NKI Python workload's name), or a workload "
                  "file (its kernel, inputs and params)");
  cmd->add_flag("--json", opts->json, "Print JSON instead of a table");
  add_log_options(cmd);
  cmd->callback([opts] { run_list(*opts); });
}

}  // namespace trnsim::cli
