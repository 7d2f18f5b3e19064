// The run side for Python: run::Session (one program on the simulated machine) and the stats report.
#include <pybind11/stl.h>

#include "python/src/bindings.h"
#include "python/src/py_util.h"
#include "python/src/run_turn.h"
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
          [](run::Session& s, bool numerics, const std::string& trace_path, pyb::object progress,
             uint64_t progress_every) {
            run::SessionOptions o{.numerics = numerics, .trace_path = trace_path};
            if (!progress.is_none()) {
              // A borrowed pointer (the argument keeps it alive during the call): the options are copied
              // without the GIL. An exception in the callback is reported as unraisable, not thrown into
              // the model.
              PyObject* cb = progress.ptr();
              o.progress = [cb](Picoseconds t, uint64_t done, uint64_t total) {
                pyb::gil_scoped_acquire gil;
                try {
                  const pyb::handle f(cb);
                  f(t.ns(), done, total);
                } catch (pyb::error_already_set& e) {
                  e.discard_as_unraisable("trnsim Session.run progress callback");
                }
              };
              o.progress_every = progress_every;
            }
            run::SessionResult r;
            {
              pyb::gil_scoped_release nogil;
              const RunTurn turn;
              r = s.run(o);
            }
            const run::RunReport rep =
                run::make_report(s.program(), s.hw(), r, -1, run::program_compulsory_bytes(s.program()));
            return from_json(run::stats_json(rep));
          },
          pyb::arg("numerics") = true, pyb::arg("trace_path") = "", pyb::arg("progress") = pyb::none(),
          pyb::arg("progress_every") = 20000,
          "runs the program (a trace when trace_path is set; progress(simulated_ns, done, total) every "
          "progress_every instructions); returns the stats (stats.json's content as a dict)")
      .def(
          "read",
          [](const run::Session& s, const std::string& name, bool raw) {
            return to_numpy(s.read(name), raw);
          },
          pyb::arg("name"), pyb::arg("raw") = false);
}

}  // namespace trnsim::py
