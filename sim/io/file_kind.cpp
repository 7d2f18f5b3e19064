#include "sim/io/file_kind.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

#include "sim/base/error.h"

namespace trnsim::io {

FileKind file_kind(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);  // follows symlinks
  if (ec || !fs::exists(st)) return FileKind::kMissing;
  if (fs::is_directory(st)) return FileKind::kDirectory;
  return fs::is_regular_file(st) ? FileKind::kRegular : FileKind::kSpecial;
}

std::string path_of_fd(int fd) {
  struct stat held {
  }, named{};
  if (fd < 0 || ::fstat(fd, &held) != 0) return "";
  char buf[PATH_MAX];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return "";
  const std::string now(buf, static_cast<size_t>(n));
  if (now[0] != '/' || ::stat(now.c_str(), &named) != 0 || named.st_dev != held.st_dev ||
      named.st_ino != held.st_ino)
    return "";
  return now;
}

std::string missing_reason(const std::string& path) {
  if (::access(path.c_str(), F_OK) == 0 || errno == ENOENT || errno == ENOTDIR) return "no such file";
  const int err = errno;
  if (err == ELOOP) return std::string("a symlink loop (ELOOP: ") + std::strerror(err) + ")";
  return std::string("cannot open: ") + std::strerror(err);
}

std::string read_regular_file(const std::string& path, const std::string& expected) {
  // O_NONBLOCK: opening a FIFO without a writer returns at once instead of waiting for one.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) throw InputError(path + ": no such file");
    if (file_kind(path) == FileKind::kDirectory)
      throw InputError(path + ": is a directory, expected " + expected);
    throw InputError(path + ": cannot open: " + std::strerror(err));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw InputError(path + ": cannot read: " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw InputError(path + ": is a directory, expected " + expected);
  if (!S_ISREG(st.st_mode)) throw InputError(path + ": " + kNotARegularFile + ", expected " + expected);
  std::string text;
  text.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(path + ": cannot read: " + std::strerror(errno));
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace trnsim::io
