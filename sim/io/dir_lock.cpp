#include "sim/io/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "sim/base/error.h"
#include "sim/base/log.h"

namespace trnsim::io {
namespace {

namespace fs = std::filesystem;

// The folders this process holds locked: one open descriptor each, shared by its handles, and the names
// it was locked under (as given and made absolute, both normalised).
struct Held {
  dev_t dev = 0;
  ino_t ino = 0;
  int fd = -1;
  int users = 0;
  fs::path given, absolute;
};
std::mutex g_mutex;
std::vector<Held> g_held;

fs::path normal(const fs::path& p) {
  fs::path n = p.lexically_normal();
  if (!n.has_filename() && n.has_parent_path() && n != n.root_path()) n = n.parent_path();
  return n;
}

// The held folder `dir` lies in by name (the innermost), with `dir`'s path below it ("." for itself); -1
// when none. Under g_mutex.
int find_held(const std::string& dir, fs::path* rel) {
  const fs::path given = normal(dir);
  std::error_code ec;
  const fs::path absolute = normal(fs::absolute(dir, ec));
  int best = -1;
  size_t best_len = 0;
  for (size_t i = 0; i < g_held.size(); ++i) {
    const Held& h = g_held[i];
    if (h.users == 0) continue;
    for (const auto& [q, base] : {std::pair{given, h.given}, std::pair{absolute, h.absolute}}) {
      if (base.empty() || q.is_absolute() != base.is_absolute()) continue;
      const fs::path r = q.lexically_relative(base);
      if (r.empty() || *r.begin() == "..") continue;
      if (best >= 0 && base.native().size() <= best_len) continue;
      best = static_cast<int>(i);
      best_len = base.native().size();
      *rel = r;
    }
  }
  return best;
}

// The folder `rel` below the folder open as `base`, never through a symlink.
Fd open_below(int base, const fs::path& rel) {
  Fd cur(::fcntl(base, F_DUPFD_CLOEXEC, 0));
  for (const fs::path& c : rel) {
    if (c.empty() || c == ".") continue;
    if (c == "..") {
      errno = EINVAL;
      return Fd();
    }
    Fd next(::openat(cur.get(), c.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next.ok()) return Fd();
    cur = std::move(next);
  }
  return cur;
}

}  // namespace

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

// open_dir_for_write under g_mutex.
Fd open_held_or_path(const std::string& dir, bool* held = nullptr) {
  fs::path rel;
  const int k = find_held(dir, &rel);
  if (held) *held = k >= 0;
  if (k >= 0) return open_below(g_held[static_cast<size_t>(k)].fd, rel);
  return Fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
}

Fd open_dir_for_write(const std::string& dir, bool* held) {
  std::lock_guard<std::mutex> g(g_mutex);
  return open_held_or_path(dir, held);
}

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

int DirLock::fd() const {
  if (key_ < 0) return -1;
  std::lock_guard<std::mutex> g(g_mutex);
  return g_held[static_cast<size_t>(key_)].fd;
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
  {
    // A folder held under this very name is that one, also when it was moved since.
    std::lock_guard<std::mutex> g(g_mutex);
    fs::path rel;
    const int k = find_held(dir, &rel);
    if (k >= 0 && rel == ".") {
      ++g_held[static_cast<size_t>(k)].users;
      key_ = k;
      return Result::kLocked;
    }
  }
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = open_dir_for_write(dir).release();  // this process's own locks are not changing now
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
    const Fd again = open_held_or_path(dir);
    if (!again.ok() || ::fstat(again.get(), &now) != 0 || now.st_dev != st.st_dev ||
        now.st_ino != st.st_ino) {
      ::close(fd);
      continue;
    }
    size_t slot = 0;
    while (slot < g_held.size() && g_held[slot].users > 0) ++slot;
    if (slot == g_held.size()) g_held.emplace_back();
    std::error_code ec;
    g_held[slot] = Held{st.st_dev, st.st_ino, fd, 1, normal(dir), normal(fs::absolute(dir, ec))};
    key_ = static_cast<int>(slot);
    return Result::kLocked;
  }
  throw InputError(dir + ": cannot lock the directory: it keeps being replaced");
}

std::vector<DirLock> lock_folders(const std::vector<std::string>& dirs) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  bool told = false;
  static std::set<std::string> unsupported_told;
  for (;;) {
    std::vector<DirLock> held;
    std::string busy;
    for (const std::string& d : dirs) {
      DirLock l;
      std::string why;
      const DirLock::Result r = l.try_lock(d, &why);
      if (r == DirLock::Result::kBusy) {
        busy = d;
        break;
      }
      if (r == DirLock::Result::kLocked) held.push_back(std::move(l));
      if (r == DirLock::Result::kUnsupported && unsupported_told.insert(d).second)
        log::note(fmt::format(
            "{}: cannot lock the folder ({}): another trnsim writing there at the same time is not detected",
            d, why));
    }
    if (busy.empty()) return held;
    held.clear();
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    if (waited > 600)
      throw InputError(fmt::format("{}: cannot write: another trnsim has held the folder's lock for {:.0f} s",
                                   busy, waited));
    if (!told && waited > 1) {
      log::info("waiting for another trnsim writing into " + busy);
      told = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
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
      log::note(
          fmt::format("{}: cannot lock the folder ({}): another {} into it at the same time is not detected",
                      what, why, who));
      break;
  }
}

}  // namespace trnsim::io
