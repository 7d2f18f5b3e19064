#include "kernels/ref/blas_threads.h"

#include <dlfcn.h>

namespace trnsim::ref {

void park_blas_threads() {
  // Looked up at run time: the symbol is OpenBLAS's (its fork handler uses it), not part of CBLAS.
  using Shutdown = int (*)();
  if (auto* f = reinterpret_cast<Shutdown>(dlsym(RTLD_DEFAULT, "blas_thread_shutdown_"))) f();
}

}  // namespace trnsim::ref
