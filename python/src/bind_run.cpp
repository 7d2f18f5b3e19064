// The run side for Python: run::Session (one program on the simulated machine) and the stats report.
#include <pybind11/stl.h>

#include "python/src/bindings.h"
#include "python/src/py_util.h"
#include "sim/run/report.h"
#include "sim/run/session.h"

namespace trnsim::py {
namespace pyb = pybind11;

void bind_run(pyb::module_& m) {
  pyb::class_<run::Session>(m, "Session")
      .def(pyb::init<const isa::Program&, const config::HwConfig&>(), pyb::arg("program"), pyb::arg("hw"),
           pyb::keep_alive<1, 2>(), pyb::keep_alive<1, 3>())
      .def(
          "set_input",
          [](run::Session& s, const std::string& name, pyb::handle array) {
            // the program's declaration gives the dtype and shape; the array is converted as a .npy input
            const isa::TensorDecl& d = s.program().tensors.at(s.tensor_index(name));
            s.set_input(name, to_host(array, d.dtype, d.shape, "input '" + name + "'"));
          },
          pyb::arg("name"), pyb::arg("array"))
      .def(
          "run",
          [](run::Session& s, bool numerics, const std::string& trace_path) {
            run::SessionResult r;
            {
              pyb::gil_scoped_release nogil;
              r = s.run({.numerics = numerics, .trace_path = trace_path});
            }
            const run::RunReport rep =
                run::make_report(s.program(), s.hw(), r, -1, run::program_compulsory_bytes(s.program()));
            return from_json(run::stats_json(rep));
          },
          pyb::arg("numerics") = true, pyb::arg("trace_path") = "",
          "runs the program; returns the stats (stats.json's content as a dict)")
      .def(
          "read",
          [](const run::Session& s, const std::string& name, bool raw) {
            return to_numpy(s.read(name), raw);
          },
          pyb::arg("name"), pyb::arg("raw") = false);
}

}  // namespace trnsim::py
