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
// OpenBLAS worker maps a 128 MiB buffer on its first call and, when that mmap fails, retries forever while
// the caller spins waiting for it (OpenBLAS 0.3.21, Debian 12), a hang instead of an error. Does nothing
// without a limit or when the loaded BLAS is not OpenBLAS (openblas_set_num_threads is looked up at run
// time).
void one_blas_thread_under_address_limit();

}  // namespace trnsim::ref
