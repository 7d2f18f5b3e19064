#include "sim/io/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "sim/base/error.h"

namespace trnsim::io {
namespace {

// The folders this process holds locked: one open descriptor each, shared by its handles.
struct Held {
  dev_t dev = 0;
  ino_t ino = 0;
  int fd = -1;
  int users = 0;
};
std::mutex g_mutex;
std::vector<Held> g_held;

}  // namespace

DirLock::~DirLock() {
  unlock();
}

DirLock& DirLock::operator=(DirLock&& o) noexcept {
  if (this != &o) {
    unlock();
    key_ = o.key_;
    o.key_ = -1;
  }
  return *this;
}

void DirLock::unlock() {
  if (key_ < 0) return;
  std::lock_guard<std::mutex> g(g_mutex);
  Held& h = g_held[static_cast<size_t>(key_)];
  if (--h.users == 0) {
    ::close(h.fd);  // releases the flock
    h = Held{};
  }
  key_ = -1;
}

DirLock::Result DirLock::try_lock(const std::string& dir, std::string* why) {
  unlock();
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) throw InputError(dir + ": cannot open the directory: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      throw InputError(dir + ": cannot open the directory: " + std::strerror(err));
    }
    std::lock_guard<std::mutex> g(g_mutex);
    for (size_t i = 0; i < g_held.size(); ++i)
      if (g_held[i].users > 0 && g_held[i].dev == st.st_dev && g_held[i].ino == st.st_ino) {
        ::close(fd);
        ++g_held[i].users;
        key_ = static_cast<int>(i);
        return Result::kLocked;
      }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK) return Result::kBusy;
      if (why) *why = std::strerror(err);
      return Result::kUnsupported;
    }
    // The folder may have been removed (and another made under its name) between the open and the lock.
    struct stat now {};
    if (::stat(dir.c_str(), &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino) {
      ::close(fd);
      continue;
    }
    size_t slot = 0;
    while (slot < g_held.size() && g_held[slot].users > 0) ++slot;
    if (slot == g_held.size()) g_held.emplace_back();
    g_held[slot] = Held{st.st_dev, st.st_ino, fd, 1};
    key_ = static_cast<int>(slot);
    return Result::kLocked;
  }
  throw InputError(dir + ": cannot lock the directory: it keeps being replaced");
}

void lock_for_run(DirLock& lock, const std::string& dir, const std::string& what, const std::string& who,
                  const std::string& held_by) {
  std::string why;
  switch (lock.try_lock(dir, &why)) {
    case DirLock::Result::kLocked:
      break;
    case DirLock::Result::kBusy:
      throw InputError(what + ": another trnsim " + who + " is writing into this folder (" + held_by +
                       "); wait for it to finish or choose another --out");
    case DirLock::Result::kUnsupported:
      std::fprintf(
          stderr,
          "trnsim: note: %s: cannot lock the folder (%s): another %s into it at the same time is not "
          "detected\n",
          what.c_str(), why.c_str(), who.c_str());
      break;
  }
}

}  // namespace trnsim::io
