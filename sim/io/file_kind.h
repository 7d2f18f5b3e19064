// What a path names, after symlinks: the one classification behind every "is this a file we can read or
// replace" question (a .npy input, a JSON document, a hardware config, an output written through in place).
#pragma once

#include <string>

namespace trnsim::io {

enum class FileKind {
  kMissing,    // nothing there (or a dangling symlink)
  kDirectory,  //
  kSpecial,  // a character or block device, FIFO or socket: a FIFO would block a reader, /dev/zero never ends
  kRegular,
};

FileKind file_kind(const std::string& path);

// The words for kSpecial in messages.
inline constexpr const char* kNotARegularFile = "not a regular file (a FIFO, device or socket)";

}  // namespace trnsim::io
