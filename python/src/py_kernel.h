// A kernel written in Python (NKI) as a kernel package (kernels/api/package.h): its build runs the Python
// function once per core through trnsim/_runner.py (NKI_CONTRACT.md section 3: inputs declared from the
// workload's dtypes and shapes, "params" as keyword arguments, the returned tensors as outputs), and its
// checks compare each output with a NumPy reference function's, with the C++ kernels' tolerance metrics.
//
// Errors: a Python exception in the kernel or the reference becomes a PythonError (an InputError: exit 1)
// whose message is "<file>:<line>: <ExcType>: <message>" and the traceback, unless the kernel was made from
// Python (simulate_kernel / benchmark), where the Python exception propagates as it is. A trnsim.InputError
// or RuleError raised by a builder call inside the kernel is rethrown as that C++ error.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/api/package.h"
#include "kernels/workload/workload.h"

namespace trnsim::py {

class PythonError : public InputError {
 public:
  using InputError::InputError;
};

struct PythonKernelSpec {
  std::string name;                          // "<function> (<file>)"
  pybind11::object kernel;                   // the function or the nki.jit object
  std::vector<workload::TensorInfo> inputs;  // declared in the function's parameter order (see _runner.py)
  nlohmann::json params = nlohmann::json::object();  // keyword arguments
  pybind11::object reference = pybind11::none();     // NumPy reference function, or None
  std::optional<int> lnc;                            // the workload's "lnc"
  bool python_errors = false;                        // let Python exceptions propagate (calls from Python)
  // From Python (simulate_kernel / benchmark): the keyword arguments as the caller passed them (a dict),
  // which the kernel and the reference get as they are (an nl dtype, a function, a tuple, a NumPy scalar);
  // `params` is then only their description for stats.json (_runner.describe_params). None: a workload's JSON
  // `params` are the keyword arguments.
  pybind11::object given_params = pybind11::none();
  // Record the Python files the build ran with their SHA-256 (_runner.sources()) as stats.json
  // "nki"."sources": {absolute path: hex} (kernels loaded from a workload's files).
  bool track_sources = false;
};

std::unique_ptr<kernels::BoundKernel> make_python_kernel(PythonKernelSpec spec);

// Turns the Python exception being handled into the C++ error trnsim reports (see above); `what` prefixes
// a Python exception's message (e.g. "reference add_ref").
[[noreturn]] void rethrow_python(pybind11::error_already_set& e, const std::string& what = "");

// The "nki" workload kernel loader (workload::set_kernel_loader): loads the kernel and reference files.
std::unique_ptr<kernels::BoundKernel> load_nki_kernel(const workload::Workload& w,
                                                      const std::vector<workload::TensorInfo>& inputs);

// Called by define_core: the Python types of trnsim's errors, for rethrow_python.
void set_error_types(pybind11::handle error, pybind11::handle input_error, pybind11::handle rule_error);

}  // namespace trnsim::py
