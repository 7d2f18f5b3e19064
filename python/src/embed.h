// The Python interpreter inside the trnsim CLI: started on the first workload that names a Python kernel,
// with trnsim._core provided by the executable itself (the same builder and registry the CLI runs), and the
// package's Python files from the build tree (build/python) or $TRNSIM_PYTHONPATH.
#pragma once

namespace trnsim::py {

// Registers the "nki" workload kernel loader, which starts the interpreter when it is first used.
void register_embedded_loader();

}  // namespace trnsim::py
