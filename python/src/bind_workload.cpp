// WorkloadRun for Python: a workload file, or a Python kernel with NumPy inputs (trnsim.nki.simulate_kernel
// and benchmark, trnsim/nki/_entry.py), through the same pipeline as `trnsim run`.
#include <pybind11/stl.h>

#include <fmt/format.h>

#include "kernels/api/params.h"
#include "kernels/workload/workload_run.h"
#include "python/src/bindings.h"
#include "python/src/py_kernel.h"
#include "python/src/py_util.h"
#include "python/src/run_turn.h"
#include "sim/isa/names.h"

namespace trnsim::py {
namespace pyb = pybind11;
using workload::WorkloadRun;

namespace {

workload::WorkloadRunOptions options(const std::string& trace, bool full_reference) {
  workload::WorkloadRunOptions o;
  o.trace_path = trace;
  o.full_reference = full_reference;
  return o;
}

void run(WorkloadRun& r, const std::string& trace, bool full_reference) {
  const auto o = options(trace, full_reference);
  {
    // The model runs without the GIL (a Python reference runs after it, with the GIL again).
    pyb::gil_scoped_release nogil;
    const RunTurn turn;
    r.simulate(o);
  }
  r.check(o);
}

pyb::dict check_dict(const run::CheckResult& c) {
  pyb::dict d;
  d["output"] = c.output;
  d["pass"] = c.pass;
  pyb::dict m;
  for (const auto& x : c.metrics) m[pyb::str(x.name)] = x.value;
  d["metrics"] = m;
  d["failures"] = c.failures;
  return d;
}

}  // namespace

void bind_workload(pyb::module_& m) {
  m.def("no_parameter_message", &kernels::no_parameter_message, pyb::arg("kernel"), pyb::arg("name"),
        pyb::arg("known"), pyb::arg("object") = "", pyb::arg("none") = "none");
  pyb::class_<WorkloadRun>(m, "WorkloadRun")
      .def_static(
          "from_file",
          [](const std::string& path, const std::vector<std::string>& sets, std::optional<bool> numerics) {
            workload::Workload w = workload::parse_workload(path, sets);
            if (numerics) w.numerics = *numerics;
            return WorkloadRun(std::move(w));
          },
          pyb::arg("path"), pyb::arg("sets") = std::vector<std::string>{}, pyb::arg("numerics") = pyb::none())
      .def_static(
          "of_python_kernel",
          [](pyb::object kernel, const std::vector<std::tuple<std::string, pyb::object, isa::DType>>& inputs,
             const pyb::dict& params, const config::HwConfig& hw, pyb::object reference,
             std::optional<int> lnc, bool numerics, const std::string& name) {
            PythonKernelSpec spec;
            spec.kernel = std::move(kernel);
            pyb::tuple fg = pyb::module_::import("trnsim._runner").attr("resolve_kernel")(spec.kernel);
            const std::string fname = pyb::getattr(fg[0], "__name__", pyb::str("kernel")).cast<std::string>();
            spec.name = name.empty() ? fname : name;
            // The kernel gets the objects as given; stats.json their description.
            spec.given_params = params;
            spec.params = to_json(pyb::module_::import("trnsim._runner").attr("describe_params")(params));
            spec.reference = std::move(reference);
            spec.lnc = lnc;
            spec.python_errors = true;
            std::vector<tensor::HostTensor> given;
            for (const auto& [n, array, dtype] : inputs) {
              given.push_back(to_host(array, dtype, {}, fmt::format("{}: input '{}'", spec.name, n)));
              spec.inputs.push_back({n, dtype, given.back().shape});
            }
            WorkloadRun r = WorkloadRun::of_kernel(make_python_kernel(std::move(spec)), hw, lnc.value_or(1),
                                                   name.empty() ? fname : name);
            r.prepared().w.numerics = numerics;
            for (size_t i = 0; i < inputs.size(); ++i)
              r.set_input(std::get<0>(inputs[i]), std::move(given[i]));
            return r;
          },
          pyb::arg("kernel"), pyb::arg("inputs"), pyb::arg("params"), pyb::arg("hw"),
          pyb::arg("reference") = pyb::none(), pyb::arg("lnc") = pyb::none(), pyb::arg("numerics") = true,
          pyb::arg("name") = "")
      .def_property_readonly("name", &WorkloadRun::name)
      .def_property_readonly("kernel", [](const WorkloadRun& r) { return r.prepared().w.kernel; })
      .def_property_readonly("cores", [](const WorkloadRun& r) { return r.prepared().cores; })
      .def_property_readonly("warnings", [](const WorkloadRun& r) { return r.prepared().build.warnings; })
      .def_property_readonly(
          "program", [](const WorkloadRun& r) -> const isa::Program& { return r.program(); },
          pyb::return_value_policy::reference_internal)
      .def_property_readonly("inputs",
                             [](const WorkloadRun& r) {
                               pyb::list l;
                               for (const auto& t : r.prepared().inputs)
                                 l.append(pyb::make_tuple(t.name, t.dtype, t.shape));
                               return l;
                             })
      .def_property_readonly("output_names",
                             [](const WorkloadRun& r) {
                               std::vector<std::string> n;
                               for (const auto& t : r.prepared().outputs) n.push_back(t.name);
                               return n;
                             })
      .def("run", &run, pyb::arg("trace") = "", pyb::arg("full_reference") = false,
           "makes the inputs, runs the model (and the trace), runs the checks")
      .def(
          "stats", [](const WorkloadRun& r) { return from_json(run::stats_json(r.report())); },
          "stats.json's content after run()")
      .def(
          "exit_code", [](const WorkloadRun& r) { return WorkloadRun::exit_code(r.report()); },
          "0; 3 a check failed; 4 the time is below the roofline (trnsim run's exit codes)")
      .def("checks",
           [](const WorkloadRun& r) {
             pyb::list l;
             for (const auto& c : r.checks()) l.append(check_dict(c));
             return l;
           })
      .def(
          "outputs",
          [](WorkloadRun& r, bool raw, bool native) {
            pyb::dict d;
            for (const auto& [n, t] : r.outputs()) d[pyb::str(n)] = to_numpy(t, raw, native);
            return d;
          },
          pyb::arg("raw") = false, pyb::arg("native") = false,
          "name -> NumPy array (float32 values or int64; the .npy bits with raw=True; with native=True the "
          "output's own dtype when NumPy has it, else float32 values)")
      .def(
          "input",
          [](WorkloadRun& r, const std::string& name, bool raw) {
            return to_numpy(r.make_inputs().at(name), raw);
          },
          pyb::arg("name"), pyb::arg("raw") = false);
}

}  // namespace trnsim::py
