#include "python/src/py_kernel.h"

#include <fmt/format.h>
#include <pybind11/stl.h>
#include <set>

#include "kernels/api/checks.h"
#include "kernels/api/constant_inputs.h"
#include "kernels/api/input_order.h"
#include "python/src/kernel_handle.h"
#include "python/src/py_util.h"
#include "sim/base/json_excerpt.h"
#include "sim/isa/names.h"
#include "sim/isa/semantics.h"

namespace trnsim::py {
namespace pyb = pybind11;
using nlohmann::json;

namespace {

PyObject* g_input_error = nullptr;
PyObject* g_rule_error = nullptr;

pyb::module_ runner() {
  return pyb::module_::import("trnsim._runner");
}

class PythonKernelDef final : public kernels::KernelDef {
 public:
  explicit PythonKernelDef(std::string name) : name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  const std::string& doc() const override { return doc_; }
  // The function's parameters that are not inputs (_runner.kernel_params): what "params" can set.
  std::vector<kernels::ParamSpec> params() const override { return params_; }
  void set_params(std::vector<kernels::ParamSpec> p) { params_ = std::move(p); }
  bool open_params() const override { return open_params_; }
  void set_open_params(bool open) { open_params_ = open; }
  const std::string& cores_param() const override { return cores_param_; }
  std::vector<RecipeInfo> recipes() const override { return {}; }
  std::unique_ptr<kernels::BoundKernel> bind(const json&) const override {
    throw Error("a Python kernel is bound by its loader");
  }

 private:
  std::string name_, doc_ = "a kernel written in Python with NKI", cores_param_ = "grid";
  std::vector<kernels::ParamSpec> params_;
  bool open_params_ = false;
};

kernels::ParamType param_type(const std::string& t) {
  if (t == "bool") return kernels::ParamType::Bool;
  if (t == "int") return kernels::ParamType::Int;
  if (t == "float") return kernels::ParamType::Float;
  return kernels::ParamType::String;
}

class PythonKernel final : public kernels::BoundKernel,
                           public kernels::ConstantInputs,
                           public kernels::InputOrder {
 public:
  explicit PythonKernel(PythonKernelSpec spec) : spec_(std::move(spec)), def_(spec_.name) {
    pyb::tuple fg = runner().attr("resolve_kernel")(spec_.kernel);
    func_ = fg[0];
    if (!fg[1].is_none()) grid_ = fg[1].cast<int>();
    pyb::list inputs;
    for (const auto& t : spec_.inputs) inputs.append(t.name);
    const std::string where = pyb::str(pyb::getattr(func_, "__qualname__", pyb::str("the kernel")));
    std::vector<kernels::ParamSpec> params;
    for (pyb::handle h : runner().attr("kernel_params")(func_, inputs)) {
      const json d = to_json(h);
      kernels::ParamSpec p;
      p.name = d["name"].get<std::string>();
      p.type = param_type(d["type"].get<std::string>());
      if (d.contains("default")) p.default_value = d["default"];
      p.nullable = d["nullable"].get<bool>();
      p.doc = fmt::format("keyword argument of {}", where);
      if (d.contains("default_shown"))  // a default no JSON value can give: null or absent keeps it
        p.doc += fmt::format(" (default {})", d["default_shown"].get<std::string>());
      if (d.value("any", false))  // no default, so no known type (listed as a string): any JSON value goes
        p.doc += " (no default, so any JSON value)";
      params.push_back(std::move(p));
    }
    def_.set_params(std::move(params));
    def_.set_open_params(runner().attr("takes_kwargs")(func_).cast<bool>());
  }
  ~PythonKernel() override {
    pyb::gil_scoped_acquire gil;
    func_ = pyb::object();
    spec_.given_params = pyb::object();
    spec_.kernel = pyb::object();
    spec_.reference = pyb::object();
  }

  const kernels::KernelDef& def() const override { return def_; }
  json params() const override { return spec_.params; }
  std::optional<int> cores() const override { return grid_; }

  kernels::KernelBuild build(const kernels::BuildOptions& options) const override {
    pyb::gil_scoped_acquire gil;
    pyb::list decls;
    for (const workload::TensorInfo& t : spec_.inputs)
      decls.append(pyb::make_tuple(t.name, t.dtype, t.shape));
    std::vector<pyb::object> returned;
    try {
      pyb::object core = runner().attr("CoreRunner")(func_, decls, kwargs(), !spec_.given_params.is_none());
      kernels::BuildOptions o = options;
      o.warn_unwritten_outputs = true;  // a launch grid or loop that misses rows of an output
      kernels::KernelBuild b =
          kernels::build_program([&](kernels::Kernel& k) { returned.push_back(core(KernelHandle(k))); }, o);
      const pyb::module_ hooks = pyb::module_::import("trnsim.nki._hooks");
      b.warnings = hooks.attr("warnings")(b.warnings).cast<std::vector<std::string>>();
      const auto debug = hooks.attr("debug_outputs")().cast<std::vector<std::string>>();
      debug_outputs_ = std::set<std::string>(debug.begin(), debug.end());
      written_inputs_ = hooks.attr("written_inputs")().cast<std::vector<std::string>>();
      const pyb::object moved = hooks.attr("moved_bytes")();
      moved_bytes_ = moved.is_none() ? std::nullopt : std::optional<double>(moved.cast<double>());
      frontend_stats_ = to_json(hooks.attr("stats")());
      // nl.shared_constant's values, converted as a given input's (to_host), for WorkloadRun to bind.
      constants_.clear();
      for (pyb::handle c : hooks.attr("constants")()) {
        const auto t = c.cast<pyb::tuple>();
        constants_[t[0].cast<std::string>()] =
            to_host(t[1], t[2].cast<isa::DType>(), {}, t[3].cast<std::string>());
      }
      if (spec_.track_sources) {
        if (!frontend_stats_.is_object()) frontend_stats_ = json::object();
        frontend_stats_["sources"] = to_json(runner().attr("sources")());
      }
      if (frontend_stats_.is_object() && frontend_stats_.empty()) frontend_stats_ = nullptr;
      return with_outputs(std::move(b), returned);
    } catch (pyb::error_already_set& e) {
      if (spec_.python_errors && !is_trnsim_error(e)) throw;
      rethrow_python(e);
    }
  }

  std::vector<std::string> build_reads() const override { return {}; }
  std::vector<std::string> zeroed_outputs() const override { return {}; }

  std::vector<kernels::OutputCheck> checks() const override {
    if (spec_.reference.is_none()) return {};
    // One call of the reference for every output's check.
    auto golden = std::make_shared<std::optional<std::vector<std::vector<double>>>>();
    std::vector<kernels::OutputCheck> checks;
    const std::vector<std::string> checked = checked_outputs();
    for (size_t i = 0; i < checked.size(); ++i) {
      checks.push_back(
          kernels::elementwise_check(checked[i], [this, golden, i](const kernels::CheckContext& ctx) {
            if (!*golden) *golden = call_reference(ctx);
            return (**golden)[i];
          }));
    }
    return checks;
  }
  std::optional<double> useful_flops() const override { return std::nullopt; }
  // An nki.jit kernel's compulsory bytes are those of the inputs its instructions touch and of the outputs they
  // write (_hooks.moved_bytes): an input it never reads, or one it returns unwritten, is no byte it must move,
  // and counting it made a valid kernel's run "below the roofline: a simulator bug" (tester23ab F4).
  std::optional<kernels::RooflineWork> roofline_work(const std::map<std::string, std::vector<int64_t>>&,
                                                     const std::map<std::string, double>&) const override {
    if (!moved_bytes_) return std::nullopt;
    return kernels::RooflineWork{-1, *moved_bytes_};
  }
  std::optional<RecipePlan> recipe_plan(const std::string&) const override { return std::nullopt; }
  json check_recipe_args(const std::string&, const json&, const std::string& path) const override {
    throw InputError(path + ": a Python kernel has no recipes");
  }
  void run_recipe(const std::string&, const json&, kernels::RecipeIO&) const override {
    throw InputError("a Python kernel has no recipes");
  }
  std::vector<kernels::KernelStat> input_stats(const kernels::Tensors&) const override { return {}; }
  void check_inputs(const kernels::Tensors&) const override {}
  json frontend_stats() const override { return frontend_stats_; }
  kernels::Tensors constant_inputs() const override { return constants_; }
  // spec_.inputs are in the function's parameter order (load_nki_kernel).
  std::vector<std::string> input_order() const override {
    std::vector<std::string> names;
    for (const workload::TensorInfo& t : spec_.inputs) names.push_back(t.name);
    return names;
  }

 private:
  // The keyword arguments the kernel and the reference are called with.
  pyb::object kwargs() const {
    return spec_.given_params.is_none() ? from_json(spec_.params) : spec_.given_params;
  }

  static bool is_trnsim_error(pyb::error_already_set& e) {
    return (g_input_error && e.matches(g_input_error)) || (g_rule_error && e.matches(g_rule_error));
  }

  // The run's outputs: the tensors the kernel returned (both cores must agree), else every output it
  // declared. A returned input is an in-place output: the input tensor as the kernel left it.
  kernels::KernelBuild with_outputs(kernels::KernelBuild b, const std::vector<pyb::object>& returned) const {
    std::optional<std::vector<std::string>> names;
    for (size_t core = 0; core < returned.size(); ++core) {
      if (returned[core].is_none()) continue;
      auto n = returned[core].cast<std::vector<std::string>>();
      if (names && *names != n)
        throw InputError(fmt::format("{}: the two cores return different tensors ({} and {})", spec_.name,
                                     fmt::join(*names, ", "), fmt::join(n, ", ")));
      names = std::move(n);
    }
    if (names) {
      for (const std::string& n : *names)
        if (std::find(b.outputs.begin(), b.outputs.end(), n) == b.outputs.end() &&
            std::find(b.inputs.begin(), b.inputs.end(), n) == b.inputs.end())  // (an in-place output)
          throw InputError(fmt::format(
              "{}: the kernel returns '{}', which is not an output tensor (allocate it in nl.shared_hbm)",
              spec_.name, n));
      b.outputs = *names;
    }
    // The inputs it writes without returning them: given back too (for the caller's arrays), unchecked.
    for (const std::string& n : written_inputs_)
      if (std::find(b.outputs.begin(), b.outputs.end(), n) == b.outputs.end()) {
        b.outputs.push_back(n);
        debug_outputs_.insert(n);
      }
    outputs_ = b.outputs;
    return b;
  }

  // The outputs the reference gives, in return order: all but the debug copies (nl.device_print), so a print
  // added to a kernel does not change what its reference returns.
  std::vector<std::string> checked_outputs() const {
    std::vector<std::string> out;
    for (const std::string& n : outputs_)
      if (!debug_outputs_.count(n)) out.push_back(n);
    return out;
  }

  std::vector<std::vector<double>> call_reference(const kernels::CheckContext& ctx) const {
    pyb::gil_scoped_acquire gil;
    const std::vector<std::string> checked = checked_outputs();
    pyb::list arrays;
    for (const workload::TensorInfo& t : spec_.inputs) arrays.append(to_numpy(ctx.input(t.name)));
    pyb::list outputs;  // (name, shape) of each output, in return order: what the reference must give
    for (const std::string& n : checked) outputs.append(pyb::make_tuple(n, ctx.output(n).shape));
    pyb::list result;
    try {
      result = runner().attr("call_reference")(spec_.reference, arrays, kwargs(), outputs,
                                               !spec_.given_params.is_none());
    } catch (pyb::error_already_set& e) {
      if (spec_.python_errors) throw;
      rethrow_python(e, "reference");
    }
    std::vector<std::vector<double>> out;
    for (size_t i = 0; i < checked.size(); ++i) {
      const tensor::HostTensor& o = ctx.output(checked[i]);
      pyb::array_t<double, pyb::array::c_style | pyb::array::forcecast> a(result[i]);
      std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
      if (tensor::elements_of(shape) != o.elements() ||
          (shape != o.shape && a.ndim() == static_cast<pyb::ssize_t>(o.shape.size())))
        throw InputError(fmt::format("reference: output {} ('{}') has shape {}; the kernel's is {}", i,
                                     checked[i], tensor::shape_str(shape), tensor::shape_str(o.shape)));
      out.emplace_back(a.data(), a.data() + a.size());
    }
    return out;
  }

  PythonKernelSpec spec_;
  PythonKernelDef def_;
  pyb::object func_;
  std::optional<int> grid_;
  mutable std::vector<std::string> outputs_;
  mutable std::set<std::string>
      debug_outputs_;  // nl.device_print's copies among outputs_, and written_inputs_
  mutable std::vector<std::string> written_inputs_;  // inputs the kernel writes but does not return
  mutable std::optional<double> moved_bytes_;         // the roofline's compulsory bytes (an nki.jit kernel's)
  mutable json frontend_stats_ = nullptr;
  mutable kernels::Tensors constants_;
};

}  // namespace

void set_error_types(pyb::handle, pyb::handle input_error, pyb::handle rule_error) {
  g_input_error = input_error.ptr();
  g_rule_error = rule_error.ptr();
}

void rethrow_python(pyb::error_already_set& e, const std::string& what) {
  if (g_rule_error && e.matches(g_rule_error)) throw RuleError(pyb::str(e.value()).cast<std::string>());
  if (g_input_error && e.matches(g_input_error)) throw InputError(pyb::str(e.value()).cast<std::string>());
  // Any other exception is the user's: its text comes from the runner, which formats even one whose str()
  // raises or holds a lone surrogate, so it stays a PythonError (exit 1) naming the kernel line.
  std::string text;
  try {
    text = runner().attr("format_exception")(e.type(), e.value(), e.trace()).cast<std::string>();
  } catch (pyb::error_already_set&) {
    text = "an exception whose text could not be formatted";
  }
  throw PythonError(what.empty() ? text : what + ": " + text);
}

std::unique_ptr<kernels::BoundKernel> make_python_kernel(PythonKernelSpec spec) {
  return std::make_unique<PythonKernel>(std::move(spec));
}

std::unique_ptr<kernels::BoundKernel> load_nki_kernel(const workload::Workload& w,
                                                      const std::vector<workload::TensorInfo>& inputs) {
  pyb::gil_scoped_acquire gil;
  const auto load = [&](const workload::KernelSource& s, const std::string& key) -> pyb::object {
    try {
      return runner().attr("load_function")(s.file, s.function);
    } catch (pyb::error_already_set& e) {
      if (e.matches(PyExc_LookupError))
        throw InputError(
            fmt::format("{}: {}.function: {}", w.file, key, pyb::str(e.value()).cast<std::string>()));
      try {
        rethrow_python(e);
      } catch (const Error& err) {
        throw InputError(fmt::format("{}: {}: {}", w.file, key, err.what()));
      }
    }
  };
  runner().attr("begin_load")();
  PythonKernelSpec spec;
  spec.name = w.kernel;
  spec.track_sources = true;
  spec.kernel = load(*w.kernel_source, "kernel");
  if (w.reference) spec.reference = load(*w.reference, "reference");
  spec.params = w.params;
  spec.lnc = w.lnc;
  pyb::list names;
  for (const auto& t : inputs) names.append(t.name);
  // The inputs and params bind to the function's signature (and the reference's), checked before any call.
  const pyb::object problem = runner().attr("binding_problem")(spec.kernel, names, from_json(spec.params));
  if (!problem.is_none()) {
    const auto [key, msg] = problem.cast<std::pair<std::string, std::string>>();
    throw InputError(fmt::format("{}: {}: {}", w.file, key, msg));
  }
  if (!spec.reference.is_none()) {
    const pyb::object bad = runner().attr("reference_problem")(spec.reference, names, from_json(spec.params));
    if (!bad.is_none())
      throw InputError(fmt::format("{}: reference.function: {}", w.file, bad.cast<std::string>()));
  }
  try {
    // Inputs in the function's parameter order; each must be one of its parameters.
    pyb::list order = runner().attr("input_order")(spec.kernel, names);
    for (pyb::handle h : order) {
      const std::string n = h.cast<std::string>();
      for (const auto& t : inputs)
        if (t.name == n) spec.inputs.push_back(t);
    }
  } catch (pyb::error_already_set& e) {
    throw InputError(fmt::format("{}: inputs: {}", w.file, pyb::str(e.value()).cast<std::string>()));
  }
  auto k = std::make_unique<PythonKernel>(std::move(spec));
  if (k->cores() && w.lnc && *k->cores() != *w.lnc)
    throw InputError(
        fmt::format("{}: lnc: {} conflicts with the kernel's launch grid [{}]", w.file, *w.lnc, *k->cores()));
  return k;
}

}  // namespace trnsim::py
