// Filling a fresh file with a run's bytes: a header and the tensor data after it (an output's temporary).
#pragma once

#include <cstddef>
#include <cstdint>

namespace trnsim::io {

// Writes `head` then `tail` (head_bytes and tail_bytes long) at `fd`'s offset, which must be 0 (a file just
// created, empty). Large files go to the disk directly (O_DIRECT through an aligned buffer of its own, the
// last partial block written through the page cache): writing hundreds of MiB into freshly allocated
// page-cache pages is several times slower than the disk on a virtual machine, and their data reaches the
// disk at the fdatasync anyway. Where the file system refuses direct I/O the file is written as usual. The
// bytes are the same either way; `fd`'s flags are as given on return. Returns false with errno set on a
// failed write (a full disk).
bool write_head_and_tail(int fd, const uint8_t* head, size_t head_bytes, const uint8_t* tail,
                         size_t tail_bytes);

}  // namespace trnsim::io
