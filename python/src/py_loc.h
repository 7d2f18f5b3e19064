// Kernel source locations for calls made from Python: the Python file and line of the nki call a builder
// instruction comes from (kernels::Loc), so traces, stats and errors name the user's kernel line.
//
// An explicit `loc=(file, line)` wins; otherwise the innermost Python frame whose file is not under a
// registered internal directory (the trnsim package: the nki.language / nki.isa implementations call the
// builder on the user's behalf). File names are interned for the life of the process (Loc keeps a pointer).
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "kernels/api/kernel.h"

namespace trnsim::py {

// A stable C string equal to `file` (interned once).
const char* intern_file(const std::string& file);

// Files under `prefix` (a directory path ending in '/') are skipped when looking for the caller's frame.
void add_internal_path(const std::string& prefix);

// The location of a call: `loc` None -> the caller's frame; else a (file, line) tuple (TypeError otherwise).
kernels::Loc loc_of(pybind11::handle loc);

// The innermost frame outside the internal directories, or ("<python>", 0) with no Python frame.
kernels::Loc caller_loc();

}  // namespace trnsim::py
