// Mapping the pages of a memory range before they are written, in one call rather than one page fault per
// page (the instruction streams the builder fills: docs/architecture.md, "Host memory").
#pragma once

#include <cstddef>

namespace trnsim {

// Asks the OS to map [begin, begin + bytes) writable now (Linux MADV_POPULATE_WRITE, 5.14+); the range is
// widened to whole pages. A hint only: where the OS cannot (older kernels, other systems, an address-space
// limit), nothing happens and the pages fault in when written, as without it.
void prefault(void* begin, size_t bytes);

}  // namespace trnsim
