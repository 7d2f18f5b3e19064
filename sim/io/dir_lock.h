// An advisory lock (flock, exclusive) on a folder trnsim writes into, so that two trnsim processes never
// replace files in one folder at the same time: a run holds its output folder's lock from its start to its
// end (a second run into the folder is refused at once), and every set of files (sim/io/output_files.h)
// holds the lock of each folder it writes into while it replaces its files (a second writer waits).
// Within one process a folder is locked once: a second DirLock of it shares the first.
// flock is advisory: it orders trnsim processes, not other programs. On a file system without flock (some
// network mounts) the lock is skipped (lock() says why) and writes are not serialised there.
// A locked folder is written through the handle the lock holds (open_dir_for_write): a folder renamed or
// moved while a run holds it (`mv OUT OUT2`, a symlink on the way repointed) still gets the run's files
// where it now is, and whatever is at its old path is never touched.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace trnsim::io {

// An open file descriptor, closed with its owner.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd();
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

class DirLock {
 public:
  enum class Result {
    kLocked,       // held (by this handle or shared with another of this process)
    kBusy,         // another process holds it (try_lock only)
    kUnsupported,  // the file system refuses flock: not locked
  };

  DirLock() = default;
  ~DirLock();
  DirLock(DirLock&& o) noexcept : key_(o.key_), fresh_(o.fresh_) { o.key_ = -1; }
  DirLock& operator=(DirLock&& o) noexcept;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

  // Locks the folder `dir` (it must exist) without waiting, opened as open_dir_for_write opens it (a folder
  // this process holds already under the name `dir` is that one, wherever it is now). After locking,
  // checks that `dir` still names the folder locked (it was not removed and created again meanwhile) and
  // locks again if not. `why` gets the reason of kUnsupported. InputError "<dir>: cannot open the
  // directory: <reason>".
  Result try_lock(const std::string& dir, std::string* why = nullptr);
  bool held() const { return key_ >= 0; }
  // The last try_lock took the lock itself (it was not shared with one this process held already).
  bool fresh() const { return fresh_; }
  // The locked folder's handle (owned by the lock), -1 when not held.
  int fd() const;
  void unlock();

 private:
  int key_ = -1;        // slot in the process's table of locked folders
  bool fresh_ = false;  // the last try_lock took the lock (not shared with a lock this process held)
};

// The folder `dir`, open for writing into: when `dir` lies, by its name, in a folder this process holds
// locked (the innermost such), it is opened through the lock's handle, each level below it without
// following a symlink; otherwise by its path. An invalid Fd with errno set when it cannot be opened.
// `held` (if given) says whether `dir` lies in a locked folder.
Fd open_dir_for_write(const std::string& dir, bool* held = nullptr);

// Locks every folder of `dirs` (a set of files holds them all while it replaces its files), waiting (up to
// 600 s, saying so on stderr after 1 s) while another trnsim holds one: every lock this call took is released
// meanwhile, so two writers that need the same folders never hold one each and wait for the other. A folder
// whose file system cannot lock is noted on stderr once and left unlocked. InputError "<dir>: cannot write:
// another trnsim has held the folder's lock for N s".
std::vector<DirLock> lock_folders(const std::vector<std::string>& dirs);

// Locks `dir` with `lock` for a command's whole run. While another trnsim holds it to write one set of files
// there (lock_folders: a quantize, a trace), waits for it as lock_folders does; when another process holds it
// for its whole run (a run, chain, sweep or tune: lock_for_run; or another program), InputError at once,
// naming that process from /proc/locks: "<what>: another trnsim <its command> is writing into this folder
// (pid N: <its command line>; it holds the folder's lock until it ends); wait for it to finish or choose
// another --out", or, for another program or where it cannot be known, "<what>: another trnsim <who> is
// writing into this folder (<held_by>[; held by pid N: <its command line>]); ...". On a file system that
// cannot lock, a note on stderr that another <who> into it at the same time is not detected.
void lock_for_run(DirLock& lock, const std::string& dir, const std::string& what, const std::string& who,
                  const std::string& held_by);

}  // namespace trnsim::io
