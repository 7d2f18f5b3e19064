#include "kernels/ref/blas_threads.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

#include "sim/base/address_limit.h"

namespace trnsim::ref {

void park_blas_threads() {
  // Looked up at run time: the symbol is OpenBLAS's (its fork handler uses it), not part of CBLAS.
  using Shutdown = int (*)();
  if (auto* f = reinterpret_cast<Shutdown>(dlsym(RTLD_DEFAULT, "blas_thread_shutdown_"))) f();
}

void one_blas_thread_under_address_limit(char** argv) {
  if (!address_space_limit()) return;
  if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr && argv != nullptr) {
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    execv("/proc/self/exe", argv);  // returns only on failure
  }
  using SetThreads = void (*)(int);
  if (auto* f = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(1);
}

}  // namespace trnsim::ref
