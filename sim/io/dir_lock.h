// An advisory lock (flock, exclusive) on a folder trnsim writes into, so that two trnsim processes never
// replace files in one folder at the same time: a run holds its output folder's lock from its start to its
// end (a second run into the folder is refused at once), and every set of files (sim/io/output_files.h)
// holds the lock of each folder it writes into while it replaces its files (a second writer waits).
// Within one process a folder is locked once: a second DirLock of it shares the first.
// flock is advisory: it orders trnsim processes, not other programs. On a file system without flock (some
// network mounts) the lock is skipped (lock() says why) and writes are not serialised there.
#pragma once

#include <string>

namespace trnsim::io {

class DirLock {
 public:
  enum class Result {
    kLocked,       // held (by this handle or shared with another of this process)
    kBusy,         // another process holds it (try_lock only)
    kUnsupported,  // the file system refuses flock: not locked
  };

  DirLock() = default;
  ~DirLock();
  DirLock(DirLock&& o) noexcept : key_(o.key_) { o.key_ = -1; }
  DirLock& operator=(DirLock&& o) noexcept;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

  // Locks the folder `dir` (it must exist) without waiting. After locking, checks that `dir` still names
  // the folder locked (it was not removed and created again meanwhile) and locks again if not. `why` gets
  // the reason of kUnsupported. InputError "<dir>: cannot open the directory: <reason>".
  Result try_lock(const std::string& dir, std::string* why = nullptr);
  bool held() const { return key_ >= 0; }
  void unlock();

 private:
  int key_ = -1;  // slot in the process's table of locked folders
};

// Locks `dir` with `lock` for a command's whole run: InputError "<what>: another trnsim <who> is writing into
// this folder (<held_by>); wait for it to finish or choose another --out" when another process holds it; on a
// file system that cannot lock, a note on stderr that another <who> into it at the same time is not detected.
void lock_for_run(DirLock& lock, const std::string& dir, const std::string& what, const std::string& who,
                  const std::string& held_by);

}  // namespace trnsim::io
