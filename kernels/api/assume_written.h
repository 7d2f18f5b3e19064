// For a kernel that reads SBUF/PSUM bytes it knows no instruction wrote and discards what it computes from
// them (a library port that quantizes whole blocks whose tail no load fills, as the library does): it says
// so, and the builder's unwritten-read warning (written.h, Kernel::emit) stays for mistakes.
#pragma once

#include "kernels/api/view.h"

namespace trnsim::kernels {

// Counts `v`'s bytes (SBUF or PSUM; anything else is ignored) as written for the unwritten-read check of its
// kernel's core, from the kernel's next instruction on. Emits nothing.
void assume_written(const View& v);

}  // namespace trnsim::kernels
