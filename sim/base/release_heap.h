// Returning the heap's free pages to the OS, so that memory a run has finished with does not stay counted
// against the host (docs/architecture.md, "Host memory").
#pragma once

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace trnsim {

// glibc's malloc_trim(0) (nothing elsewhere): each thread's malloc arena keeps what its thread freed (the
// input recipes' per-expert buffers on their worker threads, the references' on theirs) as anonymous memory
// for the rest of the run unless it is trimmed.
inline void release_free_heap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace trnsim
