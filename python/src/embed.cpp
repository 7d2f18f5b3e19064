#include "python/src/embed.h"

#include <pybind11/embed.h>

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

#include "kernels/workload/workload.h"
#include "python/src/bindings.h"
#include "python/src/py_kernel.h"
#include "sim/base/error.h"

PYBIND11_EMBEDDED_MODULE(_trnsim_core_embedded, m) {
  trnsim::py::define_core(m);
}

namespace trnsim::py {
namespace pyb = pybind11;
namespace fs = std::filesystem;

namespace {

// $TRNSIM_PYTHONPATH when set, else the build tree's python folder recorded when trnsim was built. Never a
// folder found relative to the executable: a binary copied under a folder other users can write must not
// import code someone planted there (the hardware configs' rule, sim/config/hw_config.h).
std::string python_dir() {
  if (const char* env = std::getenv("TRNSIM_PYTHONPATH"); env != nullptr && *env) return env;
  return TRNSIM_PYTHON_DIR;
}

// $PYTHONHOME (the embedded interpreter reads it as python3 does): an InputError naming it when it does not
// hold this Python's standard library, before the interpreter would fail to start without saying why.
void check_python_home() {
  const char* home = std::getenv("PYTHONHOME");
  if (home == nullptr || *home == 0) return;
  const std::string prefix = std::string(home).substr(0, std::string(home).find(':'));
  const fs::path lib =
      fs::path(prefix) / "lib" / fmt::format("python{}.{}", PY_MAJOR_VERSION, PY_MINOR_VERSION);
  std::error_code ec;
  if (!fs::is_regular_file(lib / "os.py", ec))
    throw InputError(fmt::format(
        "PYTHONHOME={}: no Python {}.{} standard library there ({} is missing): the embedded Python "
        "interpreter that runs Python kernels cannot start; unset PYTHONHOME or point it at a Python {}.{} "
        "installation",
        home, PY_MAJOR_VERSION, PY_MINOR_VERSION, (lib / "os.py").string(), PY_MAJOR_VERSION,
        PY_MINOR_VERSION));
}

void start_interpreter() {
  if (Py_IsInitialized()) return;
  check_python_home();
  // No Python signal handlers: trnsim's own (Ctrl-C, SIGTERM) stay in place. No program folder on sys.path
  // either: with no argv pybind11 would put '' there, and a json.py in the working folder would be imported.
  // UTF-8 mode, as `python3` is in a UTF-8 locale: otherwise the interpreter (embedded, so left in the "C"
  // locale) decodes file names, source-adjacent text files and print() output as ASCII, and a kernel under
  // /home/josé or printing "✓" fails under `trnsim run` only (tester23ab F8, F9).
  PyPreConfig pre;
  PyPreConfig_InitIsolatedConfig(&pre);
  pre.utf8_mode = 1;
  if (const PyStatus st = Py_PreInitialize(&pre); PyStatus_Exception(st))
    throw InputError(fmt::format("the embedded Python interpreter that runs Python kernels cannot start: {}",
                                 st.err_msg != nullptr ? st.err_msg : "pre-initialization failed"));
  try {
    pyb::initialize_interpreter(/*init_signal_handlers=*/false, 0, nullptr,
                                /*add_program_dir_to_path=*/false);
  } catch (const std::exception& e) {
    const char* home = std::getenv("PYTHONHOME");
    throw InputError(
        fmt::format("the embedded Python interpreter that runs Python kernels cannot start: {}{}", e.what(),
                    home != nullptr ? fmt::format(" (PYTHONHOME={}: unset it?)", home) : ""));
  }
  // Never finalized: Python objects held by kernels live until the process exits.
  pyb::module_ sys = pyb::module_::import("sys");
  sys.attr("path").attr("insert")(0, python_dir());
  // The Python trnsim was built with (it has NumPy), not the first `python3` on PATH that an embedded
  // interpreter guesses: a kernel helper starting sys.executable (subprocess, multiprocessing) runs this one.
  std::error_code ec;
  if (fs::is_regular_file(TRNSIM_PYTHON_EXECUTABLE, ec)) sys.attr("executable") = TRNSIM_PYTHON_EXECUTABLE;
  sys.attr("modules")["trnsim._core"] = pyb::module_::import("_trnsim_core_embedded");
  try {
    pyb::module_::import("trnsim");
  } catch (pyb::error_already_set& e) {
    throw InputError(std::string("cannot import the trnsim Python package from ") + python_dir() + ": " +
                     e.what());
  }
}

}  // namespace

void register_embedded_loader() {
  workload::set_kernel_loader("nki",
                              [](const workload::Workload& w, const std::vector<workload::TensorInfo>& in) {
                                start_interpreter();
                                return load_nki_kernel(w, in);
                              });
}

}  // namespace trnsim::py
