// What a path names, after symlinks: the one classification behind every "is this a file we can read or
// replace" question (a .npy input, a JSON document, a hardware config, an output written through in place),
// and the one way to read a small text file the user gave (a JSON document, a hardware config).
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

// Why `path`, which file_kind() calls kMissing, cannot be opened, in message words: "no such file", or, when
// the way there cannot be followed, "a symlink loop (ELOOP: ...)" or "cannot open: <reason>".
std::string missing_reason(const std::string& path);

// The absolute path the file or folder open as `fd` has now, as this process sees it (read through
// /proc/self/fd: it follows the folder when it is moved or renamed), or "" when that cannot be known (no
// /proc, removed, or the path read no longer names the file open: another device or inode).
std::string path_of_fd(int fd);

// The words for kSpecial in messages.
inline constexpr const char* kNotARegularFile = "not a regular file (a FIFO, device or socket)";

// The whole content of the regular file at `path` (symlinks followed). The file is opened first and then
// classified, so a FIFO or device swapped in meanwhile is refused too, never read. `expected` completes the
// messages: InputError "<path>: no such file", "<path>: is a directory, expected <expected>", "<path>: not a
// regular file (a FIFO, device or socket), expected <expected>", "<path>: cannot open: <reason>",
// "<path>: cannot read: <reason>".
std::string read_regular_file(const std::string& path, const std::string& expected);

}  // namespace trnsim::io
