// OpenBLAS's worker threads, which the host references' dgemm uses.
#pragma once

namespace trnsim::ref {

// Stops OpenBLAS's worker threads until the next threaded BLAS call, which starts them again with the same
// thread count (so the references' bytes do not change). Loading the library starts them, and each spins on
// sched_yield for about 2^28 cycles (OpenBLAS's default THREAD_TIMEOUT, some 0.1 s of CPU) before it
// sleeps: a run without references would pay that for nothing. Uses OpenBLAS's blas_thread_shutdown_ when
// the loaded library exports it; otherwise does nothing.
void park_blas_threads();

// Under an address-space limit (`ulimit -v`, RLIMIT_AS), runs OpenBLAS on the calling thread only: each
// OpenBLAS worker, started when the library loads, maps a 128 MiB buffer and, when that mmap fails, retries
// forever (OpenBLAS 0.3.21, Debian 12): even `--help` would hang joining it. The workers exist before main,
// so when OPENBLAS_NUM_THREADS is unset this re-executes the program (/proc/self/exe, the same `argv`) with
// OPENBLAS_NUM_THREADS=1; otherwise, and if that exec fails, it sets one thread at run time. Does nothing
// without a limit.
void one_blas_thread_under_address_limit(char** argv);

}  // namespace trnsim::ref
