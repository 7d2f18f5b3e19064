// trnsim._core: the library's API for Python, with the C++ names (NKI_CONTRACT.md / docs/nki.md). One
// definition, used by the extension module (module.cpp) and by the module embedded in the trnsim CLI
// (embed.cpp), so a Python kernel run by either sees the same classes.
#pragma once

#include <pybind11/pybind11.h>

namespace trnsim::py {

// Every class, enum and function of trnsim._core, and the exception types (trnsim.Error, InputError,
// RuleError); registers the "nki" workload kernel loader.
void define_core(pybind11::module_& m);

void bind_enums(pybind11::module_& m);
void bind_builder(pybind11::module_& m);
void bind_nki(pybind11::module_& m);
void bind_run(pybind11::module_& m);
void bind_workload(pybind11::module_& m);
void bind_schedule(pybind11::module_& m);
void bind_emit(pybind11::module_& m);
void bind_trace(pybind11::module_& m);

}  // namespace trnsim::py
