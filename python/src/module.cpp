// The extension module trnsim._core (build/python/trnsim/_core.*.so).
#include "python/src/bindings.h"

PYBIND11_MODULE(_core, m) {
  trnsim::py::define_core(m);
}
