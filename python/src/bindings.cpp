#include "python/src/bindings.h"

#include <pybind11/stl.h>

#include "kernels/workload/workload.h"
#include "python/src/py_kernel.h"
#include "python/src/py_loc.h"
#include "sim/base/available_memory.h"
#include "sim/base/error.h"
#include "sim/io/replace_check.h"

namespace trnsim::py {
namespace pyb = pybind11;

void define_core(pyb::module_& m) {
  m.doc() = "trnsim's C++ API: the builder, the ISA calls, hardware configs, runs (NKI_CONTRACT.md)";
  // trnsim.Error (a RuntimeError) and its two kinds; C++ errors cross into Python as these.
  static pyb::exception<Error> error(m, "Error", PyExc_RuntimeError);
  static pyb::exception<InputError> input_error(m, "InputError", error.ptr());
  static pyb::exception<RuleError> rule_error(m, "RuleError", error.ptr());
  pyb::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const RuleError& e) {
      PyErr_SetString(rule_error.ptr(), e.what());
    } catch (const InputError& e) {
      PyErr_SetString(input_error.ptr(), e.what());
    } catch (const Error& e) {
      PyErr_SetString(error.ptr(), e.what());
    }
  });
  set_error_types(error, input_error, rule_error);
  m.def("add_internal_path", &add_internal_path, pyb::arg("prefix"),
        "calls from files under prefix record their caller's line (py_loc.h)");
  m.def(
      "caller_loc",
      []() {
        const kernels::Loc l = caller_loc();
        return pyb::make_tuple(pyb::str(l.file_name()), l.line());
      },
      "(file, line) of the innermost Python frame outside the internal directories: what a builder call "
      "without loc records");
  m.def("available_host_bytes", &available_host_bytes,
        "bytes this process may still allocate (MemAvailable + SwapFree, capped by cgroup and ulimit -v "
        "limits; $TRNSIM_HOST_MEMORY_BYTES replaces it), or None (sim/base/available_memory.h)");
  m.def("set_overwrite_allowed", &io::set_overwrite_allowed, pyb::arg("allowed"),
        "whether outputs may replace files no trnsim record lists (the CLI's --overwrite; "
        "sim/io/replace_check.h)");
  bind_enums(m);
  bind_builder(m);
  bind_nki(m);
  bind_run(m);
  bind_workload(m);
  bind_schedule(m);
  bind_emit(m);
  bind_trace(m);
  workload::set_kernel_loader("nki", &load_nki_kernel);
}

}  // namespace trnsim::py
