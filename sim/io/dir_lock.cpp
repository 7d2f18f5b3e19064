#include "sim/io/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
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

// How long a writer waits for another's lock before it gives up.
constexpr double kMaxWaitSeconds = 600;

// This process holds a folder for its whole command (lock_for_run): it must not wait for a folder another
// command holds for its whole run, which may be waiting for ours (two runs whose --trace or --report is in
// each other's --out waited 600 s each: tester22i).
bool g_holds_run_lock = false;

// A folder locked for one set of files (lock_folders), not for a whole command (lock_for_run), carries an
// open-file-description read lock on byte 1 of the folder: a run that finds the folder locked waits for such
// a holder (a quantize or a trace being written there: seconds) and refuses at once any other (a run, chain,
// sweep or tune holding it until it ends, or another program).
constexpr off_t kSetWriteByte = 1;
void mark_set_write(int fd, bool on) {
  struct flock fl {};
  fl.l_type = on ? F_RDLCK : F_UNLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = kSetWriteByte;
  fl.l_len = 1;
  ::fcntl(fd, F_OFD_SETLK, &fl);  // a file system without such locks: the holder then counts as a run's
}
bool held_for_set_write(const std::string& dir) {
  const Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = kSetWriteByte;
  fl.l_len = 1;
  return d.ok() && ::fcntl(d.get(), F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

// The process holding the flock of the folder `dir` (from /proc/locks) and its command line, words joined by
// spaces and cut to about 120 characters; {0, ""} when it cannot be known (no /proc, another PID namespace).
std::pair<long, std::string> lock_holder(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return {0, ""};
  const std::string id = fmt::format("{:02x}:{:02x}:{}", major(st.st_dev), minor(st.st_dev), st.st_ino);
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    // "1: FLOCK  ADVISORY  WRITE 2401 fe:00:11199705 0 EOF" (a waiter's line has "->" after the number)
    std::istringstream in(line);
    std::string n, kind, mode, rw, dev;
    long pid = 0;
    if (!(in >> n >> kind) || kind != "FLOCK" || !(in >> mode >> rw >> pid >> dev) || dev != id || pid <= 0 ||
        pid == ::getpid())
      continue;
    std::ifstream cmd(fmt::format("/proc/{}/cmdline", pid), std::ios::binary);
    std::string words, word;
    while (std::getline(cmd, word, '\0') && words.size() < 120) {
      if (words.empty()) word = fs::path(word).filename().string();
      words += (words.empty() ? "" : " ") + word;
    }
    if (words.size() > 120) words = words.substr(0, 117) + "...";
    return {pid, words};
  }
  return {0, ""};
}

// A command line (lock_holder's) whose program is a trnsim: its first word's file name starts "trnsim".
bool is_trnsim_command(const std::string& command) {
  return fs::path(command.substr(0, command.find(' '))).filename().string().rfind("trnsim", 0) == 0;
}

// How a wait for the lock of `dir` is told: "another trnsim writing into DIR (pid N: COMMAND)" when a trnsim
// holds it, "pid N (COMMAND), not a trnsim, which holds the lock of DIR" for another program (flock(1), a
// backup tool), "another process holding the lock of DIR" when it cannot be known.
std::string holder_words(const std::string& dir) {
  const auto [pid, command] = lock_holder(dir);
  if (pid <= 0) return "another process holding the lock of " + dir;
  if (is_trnsim_command(command))
    return fmt::format("another trnsim writing into {} (pid {}: {})", dir, pid, command);
  return fmt::format("pid {} ({}), not a trnsim, which holds the lock of {}", pid,
                     command.empty() ? "command line unknown" : command, dir);
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
    fresh_ = o.fresh_;
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
  fresh_ = false;
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
    fresh_ = true;
    return Result::kLocked;
  }
  throw InputError(dir + ": cannot lock the directory: it keeps being replaced");
}

std::vector<DirLock> lock_folders(const std::vector<std::string>& dirs) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  double told_at = -1;  // when the wait was last told (s since start), -1 before
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
      if (r == DirLock::Result::kLocked) {
        if (l.fresh()) mark_set_write(l.fd(), true);
        held.push_back(std::move(l));
      }
      if (r == DirLock::Result::kUnsupported && unsupported_told.insert(d).second)
        log::note(fmt::format(
            "{}: cannot lock the folder ({}): another trnsim writing there at the same time is not detected",
            d, why));
    }
    if (busy.empty()) return held;
    held.clear();
    if (g_holds_run_lock && !held_for_set_write(busy) && is_trnsim_command(lock_holder(busy).second))
      throw InputError(
          fmt::format("{}: cannot write: {} holds the folder's lock until it ends, and this "
                      "command holds its own folder's: waiting for it could wait for ever (it may "
                      "be waiting for this one); choose another folder",
                      busy, holder_words(busy)));
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    if (waited > kMaxWaitSeconds)
      throw InputError(
          fmt::format("{}: cannot write: {} has held the folder's lock for {:.0f} s; trnsim "
                      "waits {:.0f} s at most",
                      busy, holder_words(busy), waited, kMaxWaitSeconds));
    // Told after 1 s, naming the holder and how long trnsim waits, then again every 10 s.
    if ((told_at < 0 && waited > 1) || (told_at >= 0 && waited - told_at >= 10)) {
      log::info(fmt::format("{} for {} ({:.0f} s so far, {:.0f} s at most)",
                            told_at < 0 ? "waiting" : "still waiting", holder_words(busy), waited,
                            kMaxWaitSeconds));
      told_at = waited;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void lock_for_run(DirLock& lock, const std::string& dir, const std::string& what, const std::string& who,
                  const std::string& held_by) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  bool told = false;
  for (;;) {
    std::string why;
    switch (lock.try_lock(dir, &why)) {
      case DirLock::Result::kLocked:
        mark_set_write(lock.fd(), false);  // held for the whole command now (shared with a set being written)
        g_holds_run_lock = true;
        return;
      case DirLock::Result::kUnsupported:
        log::note(fmt::format(
            "{}: cannot lock the folder ({}): another {} into it at the same time is not detected", what, why,
            who));
        return;
      case DirLock::Result::kBusy:
        break;
    }
    // Another trnsim writing one set of files there (a quantize, a trace, an HTML report): its turn ends in
    // seconds, so this run waits, as two sets do (lock_folders).
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    if (held_for_set_write(dir) && waited <= kMaxWaitSeconds) {
      if (!told && waited > 1) {
        log::info(fmt::format("waiting for {} ({:.0f} s at most)", holder_words(dir), kMaxWaitSeconds));
        told = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    // Held for a whole command: named as its process says (a run, chain, sweep, tune, another program).
    const auto [pid, command] = lock_holder(dir);
    if (pid > 0 && is_trnsim_command(command) && command.find(' ') != std::string::npos) {
      const std::string sub = command.substr(command.find(' ') + 1);
      throw InputError(
          fmt::format("{}: another trnsim {} is writing into this folder (pid {}: {}; it holds the folder's "
                      "lock until it "
                      "ends); wait for it to finish or choose another --out",
                      what, sub.substr(0, sub.find(' ')), pid, command));
    }
    // Another program, or a process whose command line cannot be read: named as far as it is known.
    const std::string by =
        pid > 0 && !command.empty() ? fmt::format("; held by pid {}: {}", pid, command) : "";
    throw InputError(what + ": another trnsim " + who + " is writing into this folder (" + held_by + by +
                     "); wait for it to finish or choose another --out");
  }
}

}  // namespace trnsim::io
