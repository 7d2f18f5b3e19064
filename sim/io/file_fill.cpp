#include "sim/io/file_fill.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace trnsim::io {
namespace {

// Files from this size on are written directly; smaller ones are not worth the buffer.
constexpr size_t kDirectMin = size_t{16} << 20;
// Direct writes' alignment of memory, offset and length (the largest logical block in common use), and the
// size of one write (a multiple of it).
constexpr size_t kAlign = 4096;
constexpr size_t kChunk = size_t{8} << 20;

bool write_all(int fd, const uint8_t* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = EIO;
      return false;
    }
    data += w, n -= static_cast<size_t>(w);
  }
  return true;
}

struct FreeAligned {
  void operator()(uint8_t* p) const { std::free(p); }
};

}  // namespace

bool write_head_and_tail(int fd, const uint8_t* head, size_t head_bytes, const uint8_t* tail,
                         size_t tail_bytes) {
  const size_t total = head_bytes + tail_bytes;
  const int flags = ::fcntl(fd, F_GETFL);
  std::unique_ptr<uint8_t, FreeAligned> buffer;
  if (total >= kDirectMin && flags >= 0 && (flags & O_DIRECT) == 0 &&
      ::fcntl(fd, F_SETFL, flags | O_DIRECT) == 0)
    buffer.reset(static_cast<uint8_t*>(std::aligned_alloc(kAlign, kChunk)));
  if (!buffer) {
    if (flags >= 0 && (flags & O_DIRECT) == 0) ::fcntl(fd, F_SETFL, flags);
    return write_all(fd, head, head_bytes) && write_all(fd, tail, tail_bytes);
  }
  bool direct = true;
  // Back to the page cache for the rest: the last partial block, or a file system that refuses the
  // alignment after all (EINVAL, nothing written) or writes part of a block.
  const auto to_buffered = [&] {
    direct = false;
    ::fcntl(fd, F_SETFL, flags);
  };
  size_t done = 0;  // bytes of head + tail written
  while (done < total) {
    // The next chunk of the concatenation into the buffer.
    const size_t n = std::min(kChunk, total - done);
    for (size_t k = 0; k < n;) {
      const size_t at = done + k;
      const size_t take = at < head_bytes ? std::min(n - k, head_bytes - at) : n - k;
      std::memcpy(buffer.get() + k, at < head_bytes ? head + at : tail + (at - head_bytes), take);
      k += take;
    }
    size_t k = 0;
    while (direct && n - k >= kAlign) {
      const ssize_t w = ::write(fd, buffer.get() + k, (n - k) / kAlign * kAlign);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && errno == EINVAL && done + k == 0) {
        to_buffered();
        break;
      }
      if (w <= 0) {
        const int err = w == 0 ? EIO : errno;
        ::fcntl(fd, F_SETFL, flags);
        errno = err;
        return false;
      }
      k += static_cast<size_t>(w);
      if (k % kAlign != 0) to_buffered();
    }
    if (k < n) {
      if (direct) to_buffered();
      if (!write_all(fd, buffer.get() + k, n - k)) return false;
    }
    done += n;
  }
  if (direct) to_buffered();
  return true;
}

}  // namespace trnsim::io
