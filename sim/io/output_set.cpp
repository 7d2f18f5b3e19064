// The set protocol of sim/io/output_files.h: locks, temporaries, backups, the record (manifest or journal),
// renames, rollback, recovery after a kill, and the removal of an earlier run's files.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "sim/base/error.h"
#include "sim/base/interrupt.h"
#include "sim/base/log.h"
#include "sim/io/content_hash.h"
#include "sim/io/dir_lock.h"
#include "sim/io/file_fill.h"
#include "sim/io/file_kind.h"
#include "sim/io/manifest.h"
#include "sim/io/output_detail.h"
#include "sim/io/output_files.h"
#include "sim/io/replace_check.h"

namespace trnsim::io {
namespace {

namespace fs = std::filesystem;

std::string errno_text(int err = errno) {
  return std::strerror(err);
}

std::function<void(long)>& step_hook() {
  static std::function<void(long)> hook;
  return hook;
}
thread_local long t_step = 0;  // steps of the set being written

// TRNSIM_TEST_KILL_AT_WRITE_STEP=N: SIGKILL at the N-th step (the crash tests' way to stop at every point);
// with TRNSIM_TEST_KILL_SIGNAL=INT (TERM, HUP, ...), that signal instead (a Ctrl-C there); with STOP, SIGSTOP
// (the test acts on the folder, then sends SIGCONT).
void step() {
  static const long kill_at = [] {
    try {
      return testing::kill_at_write_step();
    } catch (const InputError&) {
      return 0L;  // refused before the first step (write_files_atomic, a run's OutDir)
    }
  }();
  static const int sig = [] {
    try {
      return testing::kill_signal();
    } catch (const InputError&) {
      return SIGKILL;  // refused with the step (kill_at_write_step)
    }
  }();
  ++t_step;
  if (step_hook()) step_hook()(t_step);
  // To this thread: the signal lands exactly here, as the step number says (a SIGKILL or SIGSTOP stops the
  // whole process anyway).
  if (kill_at > 0 && t_step == kill_at) std::raise(sig);
}

// TRNSIM_TEST_KILL_AT_WRITE_STEP=rN: the same signal inside the N-th record write of the process, between
// its temporary written and its rename (the window where a SIGKILL leaves a record's temporary).
void record_step() {
  static const long kill_at = [] {
    try {
      return testing::kill_in_record_write();
    } catch (const InputError&) {
      return 0L;
    }
  }();
  static std::atomic<long> writes{0};
  if (kill_at > 0 && ++writes == kill_at) std::raise(testing::kill_signal());
}

// The record writes under way in this process: while there is one, a record temporary with this process's
// PID may be its own (remove_killed_temporaries).
std::atomic<int> g_record_writes{0};
struct RecordWriting {
  RecordWriting() { ++g_record_writes; }
  ~RecordWriting() { --g_record_writes; }
  RecordWriting(const RecordWriting&) = delete;
  RecordWriting& operator=(const RecordWriting&) = delete;
};

// A folder, open: through the handle of a folder this process holds locked when it lies in one (a run's
// --out moved during the run is still the one written into), else by its path.
Fd open_dir(const std::string& dir) {
  return open_dir_for_write(dir);
}

// The folder `rel` below the folder open as `base`, never through a symlink ("" is `base` itself).
Fd open_below(int base, const fs::path& rel) {
  Fd cur(::fcntl(base, F_DUPFD_CLOEXEC, 0));
  for (const fs::path& c : rel) {
    if (c.empty() || c == ".") continue;
    if (c == "..") return Fd();
    Fd next(::openat(cur.get(), c.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next.ok()) return Fd();
    cur = std::move(next);
  }
  return cur;
}

// The file `name` in the folder `dir_fd`, not following a symlink: a regular file's inode and size.
struct FileId {
  bool regular = false;
  bool exists = false;
  uint64_t inode = 0, bytes = 0;
};
FileId file_id_at(int dir_fd, const std::string& name) {
  struct stat st {};
  FileId id;
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return id;
  id.exists = true;
  id.regular = S_ISREG(st.st_mode);
  id.inode = st.st_ino;
  id.bytes = static_cast<uint64_t>(st.st_size);
  return id;
}

}  // namespace

void detail::write_record(int dir_fd, const std::string& dir, const std::string& name,
                          const std::string& text) {
  const std::string path = (fs::path(dir) / name).string();
  std::vector<interrupt::CleanupPath> on_signal;
  const RecordWriting writing;
  const TempFile t = create_temp_in(dir_fd, name, path, on_signal);
  bool ok = std::fwrite(text.data(), 1, text.size(), t.file) == text.size() && std::fflush(t.file) == 0 &&
            ::fsync(::fileno(t.file)) == 0;
  int err = errno;
  record_step();
  if (ok && ::renameat(dir_fd, t.name.c_str(), dir_fd, name.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) ::unlinkat(dir_fd, t.name.c_str(), 0);
  // Closed (its lock let go: hold_temporary) only once the temporary is renamed or removed.
  std::fclose(t.file);
  if (!ok) throw InputError(path + ": cannot write: " + errno_text(err));
  ::fsync(dir_fd);  // some file systems refuse to sync a folder: nothing more to do then
}

namespace {

// The process `pid` is gone (a PID another user's process has is alive: kill says EPERM).
bool process_gone(long pid) {
  return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// "PID.N" with both whole numbers: PID, else -1.
long pid_of_suffix(const std::string& s) {
  const size_t dot = s.find('.');
  const auto digits = [](const std::string& d) {
    return !d.empty() && d.size() <= 18 && d.find_first_not_of("0123456789") == std::string::npos;
  };
  if (dot == std::string::npos || !digits(s.substr(0, dot)) || !digits(s.substr(dot + 1))) return -1;
  return std::stol(s.substr(0, dot));
}

}  // namespace

bool is_trace_head(std::string_view head) {
  // sim/trace/json_trace_writer.cpp's first line.
  constexpr std::string_view kJson = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
  if (head.substr(0, kJson.size()) == kJson) return true;
  // A Perfetto trace: TracePacket (field 1, length-delimited: 0x0a), its length (a varint of up to 5 bytes),
  // then the packet's first field: timestamp (8) or trusted_packet_sequence_id (10), both varints.
  if (head.size() < 3 || static_cast<uint8_t>(head[0]) != 0x0a) return false;
  size_t at = 1;
  while (at < head.size() && at < 6 && (static_cast<uint8_t>(head[at]) & 0x80) != 0) ++at;
  if (at + 1 >= head.size() || at == 6) return false;
  const uint8_t field = static_cast<uint8_t>(head[at + 1]);
  return field == (8 << 3) || field == (10 << 3);
}

bool looks_like_trnsims_leftover(int dir_fd, const std::string& name, Leftover kind) {
  const Fd f(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!f.ok() || ::fstat(f.get(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  if (st.st_size == 0) return true;  // a probe, a record or trace killed before its first byte
  if (kind == Leftover::kProbe) return false;
  char head[64] = {};
  const ssize_t n = ::read(f.get(), head, sizeof head - 1);
  if (n <= 0) return false;
  const std::string text(head, static_cast<size_t>(n));
  if (kind == Leftover::kTrace) return is_trace_head(text);
  // A record (sim/io/manifest.h): a JSON object whose first key, in sorted order, is "files".
  const size_t key = text.find_first_not_of(" \t\r\n", 1);
  return text[0] == '{' && key != std::string::npos && text.compare(key, 7, "\"files\"") == 0;
}

namespace {

// Notes a file left because it is named as trnsim's temporaries are but holds something else (a user's),
// once per path in this process.
void note_left(int dir_fd, const std::string& name) {
  static std::mutex mutex;
  static std::set<std::string> said;
  const std::string folder = path_of_fd(dir_fd);
  const std::string where = folder.empty() ? name : (fs::path(folder) / name).string();
  const std::lock_guard<std::mutex> lock(mutex);
  if (!said.insert(where).second) return;
  log::note(
      fmt::format("{}: left as it is: named as trnsim's temporaries are, but it does not hold one "
                  "(rename it: a name starting with .trnsim- or ..trnsim- is trnsim's)",
                  where));
}

// A killed trnsim's record backup (DIR/.trnsim-files.old): a hard link to a record, never empty; an empty
// file there is a user's.
bool is_killed_record_backup(int dir_fd) {
  return file_id_at(dir_fd, kManifestBackupName).bytes > 0 &&
         looks_like_trnsims_leftover(dir_fd, kManifestBackupName, Leftover::kRecord);
}

}  // namespace

namespace {

// The file `name` (stat'ed as `st`) in the folder `dir_fd`, open and locked (flock) when no process holds
// its lock, as a killed writer's temporary or probe (hold_temporary); an invalid Fd while one does. A file
// system without flock: open, unlocked (judged by PID alone), `locked` false.
Fd lock_leftover(int dir_fd, const std::string& name, const struct stat& st, bool& locked) {
  locked = false;
  Fd f(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat now {};
  if (!f.ok() || ::fstat(f.get(), &now) != 0 || now.st_ino != st.st_ino || now.st_dev != st.st_dev)
    return Fd();
  if (::flock(f.get(), LOCK_EX | LOCK_NB) == 0)
    locked = true;
  else if (errno == EWOULDBLOCK)
    return Fd();
  return f;
}

}  // namespace

void remove_killed_temporaries(int dir_fd) {
  const int copy = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  DIR* d = copy < 0 ? nullptr : ::fdopendir(copy);
  if (d == nullptr) {
    if (copy >= 0) ::close(copy);
    return;
  }
  // The names a killed trnsim leaves: a record's temporary (write_record, create_temp_in), a probe and a
  // trace's temporary.
  const std::vector<std::pair<std::string, Leftover>> prefixes = {
      {fmt::format(".{}.tmp.", kManifestName), Leftover::kRecord},
      {fmt::format(".{}.tmp.", kJournalName), Leftover::kRecord},
      {fmt::format(".{}.tmp.", kWrittenName), Leftover::kRecord},
      {fmt::format(".{}.tmp.", written_name_of(::geteuid())), Leftover::kRecord},
      {fmt::format(".{}.tmp.", journal_name_of(::geteuid())), Leftover::kRecord},
      {".trnsim-probe.", Leftover::kProbe},
      {kTraceTempPrefix, Leftover::kTrace}};
  struct Found {
    std::string name;
    Fd lock;
    long pid;
    Leftover kind;
  };
  std::vector<Found> gone, empty;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    for (const auto& [prefix, kind] : prefixes) {
      if (name.rfind(prefix, 0) != 0) continue;
      const long pid = pid_of_suffix(name.substr(prefix.size()));
      struct stat st {};
      if (pid <= 0 || ::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
          st.st_uid != ::geteuid())
        break;
      // This process's PID (a container's runs share one): a leftover unless one of its own record writes
      // is under way (a trace of its own: while it holds the trace's lock, below).
      const bool own = pid == ::getpid();
      if (!(own ? kind == Leftover::kTrace || g_record_writes == 0 : process_gone(pid))) break;
      // A FIFO, folder or symlink there is never trnsim's: the user's, kept with a note as any other.
      if (!S_ISREG(st.st_mode) || !looks_like_trnsims_leftover(dir_fd, name, kind)) {
        note_left(dir_fd, name);
        break;
      }
      // Its writer's lock, held until it is removed: a live writer's (in another PID namespace, where its
      // PID is no process here) is never taken for a killed one's. A trace with this process's PID only when
      // the lock says so (without flock it may be one this process writes).
      bool locked = false;
      Fd lock = lock_leftover(dir_fd, name, st, locked);
      if (lock.ok() && (locked || !own || kind != Leftover::kTrace))
        (st.st_size == 0 ? empty : gone).push_back({name, std::move(lock), pid, kind});
      break;
    }
  }
  ::closedir(d);
  const std::string folder = gone.empty() && empty.empty() ? "" : path_of_fd(dir_fd);
  const auto in = [&](const std::string& n) { return folder.empty() ? n : (fs::path(folder) / n).string(); };
  // A record's temporary goes silently; a trace's is said (it held what a killed run had traced).
  for (const Found& f : gone)
    if (::unlinkat(dir_fd, f.name.c_str(), 0) == 0 && f.kind == Leftover::kTrace)
      log::note(fmt::format("{}: removed: the unfinished trace of a trnsim that was killed (pid {})",
                            in(f.name), f.pid));
  // An empty file is what a killed trnsim leaves (a probe, a record or trace killed before its first byte),
  // and holds nothing to lose; but a user's could look the same: its removal is noted, as a kept one is.
  for (const Found& f : empty)
    if (::unlinkat(dir_fd, f.name.c_str(), 0) == 0)
      log::note(
          fmt::format("{}: removed: an empty file at the name of a temporary of a trnsim that was killed "
                      "(a name starting with .trnsim- or ..trnsim- is trnsim's)",
                      in(f.name)));
}

namespace {

using detail::write_record;

// Whether the file `name` in the folder `dir_fd` is the one entry `e` of a record in state "writing" was to
// put there: its size and SHA-256 (never through a symlink). `id` gets what is there.
bool is_new_file(int dir_fd, const std::string& name, const ManifestEntry& e, FileId& id) {
  id = file_id_at(dir_fd, name);
  if (!id.regular || id.bytes != e.bytes) return false;
  const Fd f(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  return f.ok() && sha256_of_fd(f.get()) == e.sha256;
}

// One folder's part of a set a killed switch left: the folder (open), its entries (state "writing") and, for
// a run folder's manifest, the earlier set it replaces. A part is only judged, never changed, unless the
// folder holds a record of this very set (`act`): a record names files in another folder only beside a
// record of its own there, so no record makes trnsim change a file anywhere else.
struct SetPart {
  std::string dir;
  Fd fd;
  std::vector<ManifestEntry> files;
  std::vector<ManifestEntry> previous;
  bool act = true;
};

// The path of `rel` for messages: a part's own path, with its folder when the set spans several.
std::string shown_in(const SetPart& part, const std::string& rel, bool several) {
  return several ? (fs::path(part.dir) / rel).string() : rel;
}

// What a killed switch left, made whole again as one set across every folder it wrote into
// (sim/io/output_files.h): a set whose every file was switched is kept; otherwise every file that is the new
// set's goes back to its backup (or is removed when nothing was there). The temporaries and backups the
// record names are removed. Returns, per part, the record of the files now there that the set or the one
// before it wrote; `notes` gets what happened.
std::vector<Manifest> roll_back(const std::vector<SetPart>& parts, const std::string& written_by,
                                std::vector<std::string>& notes) {
  struct Where {
    Fd parent;
    std::string name;
  };
  const auto where = [&](const SetPart& part, const std::string& rel) {
    const fs::path p(rel);
    return Where{part.fd.ok() ? open_below(part.fd.get(), p.parent_path()) : Fd(), p.filename().string()};
  };
  const bool several = parts.size() > 1;
  std::vector<std::vector<bool>> now_new(parts.size());
  bool all_new = true;
  for (size_t k = 0; k < parts.size(); ++k)
    for (const ManifestEntry& e : parts[k].files) {
      const Where w = where(parts[k], e.path);
      FileId id;
      now_new[k].push_back(w.parent.ok() && is_new_file(w.parent.get(), w.name, e, id));
      all_new = all_new && now_new[k].back();
    }
  std::vector<std::string> restored, lost;
  for (size_t k = 0; k < parts.size(); ++k)
    for (size_t i = 0; i < parts[k].files.size(); ++i) {
      const ManifestEntry& e = parts[k].files[i];
      if (!parts[k].act) continue;
      const Where w = where(parts[k], e.path);
      if (!w.parent.ok()) continue;
      const int pd = w.parent.get();
      const std::string tmp = fs::path(e.temporary).filename().string();
      const std::string bak = e.backup.empty() ? "" : fs::path(e.backup).filename().string();
      const std::string shown = shown_in(parts[k], e.path, several);
      if (!all_new && now_new[k][i]) {
        if (bak.empty()) {  // nothing was there before
          (::unlinkat(pd, w.name.c_str(), 0) == 0 ? restored : lost).push_back(shown);
        } else if (file_id_at(pd, bak).regular) {
          (::renameat(pd, bak.c_str(), pd, w.name.c_str()) == 0 ? restored : lost).push_back(shown);
        }
        // A backup the record names but that is not there was never made: the switch had not begun.
      }
      if (file_id_at(pd, tmp).regular) ::unlinkat(pd, tmp.c_str(), 0);
      if (!bak.empty() && file_id_at(pd, bak).regular) ::unlinkat(pd, bak.c_str(), 0);
      ::fsync(pd);
    }
  std::vector<std::string> dirs;
  for (const SetPart& part : parts) dirs.push_back(part.dir);
  const std::string dir = fmt::format("{}", fmt::join(dirs, " and "));
  const std::string of_set = several ? " (one set across these folders)" : "";
  const std::string killed = written_by.empty() ? "a trnsim run" : "a trnsim " + written_by;
  if (all_new)
    notes.push_back(fmt::format(
        "{}: the last trnsim to write there{} stopped before it had completed its record (it was killed, or "
        "the record could not be written: a full disk), after it had replaced every file of its set{}: the "
        "set is kept",
        dir, written_by.empty() ? "" : " (" + written_by + ")", of_set));
  else if (lost.empty())
    notes.push_back(fmt::format("{}: {} was killed while replacing its files{}: the earlier files are back{}",
                                dir, killed, of_set,
                                restored.empty() ? " (none had been replaced yet)" : ""));
  else
    notes.push_back(fmt::format(
        "{}: {} was killed while replacing its files{} and {} could not be put back: those are the killed "
        "command's",
        dir, killed, of_set, fmt::join(lost, ", ")));
  // The record of what is there now, per folder: each path's file as one of the two sets wrote it, else
  // nothing.
  std::vector<Manifest> now(parts.size());
  for (size_t k = 0; k < parts.size(); ++k) {
    std::set<std::string> seen;
    for (const ManifestEntry& e : parts[k].files) {
      const Where w = where(parts[k], e.path);
      FileId id;
      if (!w.parent.ok() || !is_new_file(w.parent.get(), w.name, e, id)) continue;
      now[k].files.push_back({e.path, e.bytes, id.inode, e.sha256});
      seen.insert(e.path);
    }
    for (const ManifestEntry& e : parts[k].previous) {
      if (!e.identified() || seen.count(e.path)) continue;
      const Where w = where(parts[k], e.path);
      FileId cur = w.parent.ok() ? file_id_at(w.parent.get(), w.name) : FileId{};
      if (!cur.regular || cur.bytes != e.bytes) continue;
      // Another inode with the recorded bytes (a folder copied with `cp -a`) is still that set's file: kept
      // in the record under the inode it has now, so a later run may replace it (sim/io/replace_check.h).
      if (cur.inode != e.inode && !(e.identified() && is_new_file(w.parent.get(), w.name, e, cur))) continue;
      now[k].files.push_back({e.path, e.bytes, cur.inode, e.sha256});
      seen.insert(e.path);
    }
  }
  return now;
}

// A record someone else wrote (a shared folder) could name this user's files: it is never acted on.
std::string not_ours(const std::string& path, unsigned owner) {
  if (owner == static_cast<unsigned>(::geteuid())) return "";
  return fmt::format(
      "{}: written by another user (uid {}): trnsim acts only on its own records, and keeps "
      "every file it names",
      path, owner);
}

// InputError text for a record in state "writing" another user left at `path`.
std::string killed_by_another_user(const std::string& path, unsigned owner) {
  return fmt::format(
      "{}: written by another user (uid {}), in state \"writing\": their trnsim was killed while it replaced "
      "the files there, which may be a mix of two runs; trnsim acts only on its own records and would erase "
      "this one by writing its own: run trnsim into the folder as that user to settle it, or choose another "
      "folder",
      path, owner);
}

// Settles the set a killed switch left, whose record `m` (state "writing") is in `dir` (open as `dir_fd`,
// locked): as one with its parts in the other folders the record names, whose locks are taken meanwhile. The
// records of the same set there are put right too (a journal removed, a run folder's manifest rewritten);
// this folder's is left to the caller. Returns this folder's record of the files now there.
Manifest settle_set(int dir_fd, const std::string& dir, const Manifest& m, std::vector<std::string>& notes) {
  std::vector<SetPart> parts;
  parts.push_back({dir, Fd(::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0)), m.files, m.previous});
  struct stat own {};
  ::fstat(dir_fd, &own);
  // The record of this set in `folder` (open as `fd`), if there is one this user wrote.
  const auto record_there = [&](int fd, const OtherRecord& o) -> std::optional<Manifest> {
    try {
      unsigned owner = 0;
      std::optional<Manifest> r =
          read_manifest_at(fd, o.record, (fs::path(o.folder) / o.record).string(), &owner);
      if (r && !r->complete && r->set == m.set && not_ours("", owner).empty()) return r;
    } catch (const InputError&) {
      // not this set's record: left as it is
    }
    return std::nullopt;
  };
  // The folders holding a record of this set are locked (and read again under the lock); the others are only
  // judged.
  std::vector<std::string> folders;
  for (const OtherRecord& o : m.others) {
    const Fd fd = open_dir(o.folder);
    if (fd.ok() && record_there(fd.get(), o)) folders.push_back(o.folder);
  }
  std::sort(folders.begin(), folders.end());
  const std::vector<DirLock> locks = lock_folders(folders);
  std::vector<const OtherRecord*> same_set(1, nullptr);  // per part: its record there is this set's
  for (const OtherRecord& o : m.others) {
    SetPart part{o.folder, open_dir(o.folder), o.files, {}, false};
    struct stat st {};
    if (part.fd.ok() && ::fstat(part.fd.get(), &st) == 0 && st.st_dev == own.st_dev &&
        st.st_ino == own.st_ino)
      continue;  // this very folder under another name: not a record trnsim writes
    const bool locked = std::find(folders.begin(), folders.end(), o.folder) != folders.end();
    const std::optional<Manifest> r = part.fd.ok() && locked ? record_there(part.fd.get(), o) : std::nullopt;
    if (r) part.previous = r->previous;
    part.act = r.has_value();
    same_set.push_back(r ? &o : nullptr);
    parts.push_back(std::move(part));
  }
  const std::vector<Manifest> now = roll_back(parts, m.written_by, notes);
  for (size_t k = 1; k < parts.size(); ++k) {
    if (!same_set[k]) continue;
    if (is_journal_name(same_set[k]->record)) {
      // What is there now is trnsim's: recorded before the journal goes, as a finished write records it.
      record_written(parts[k].fd.get(), parts[k].dir, now[k].files);
      ::unlinkat(parts[k].fd.get(), kJournalName, 0);
      ::fsync(parts[k].fd.get());
    } else {
      try {
        write_record(parts[k].fd.get(), parts[k].dir, kManifestName, manifest_text(now[k]));
      } catch (const InputError& e) {
        notes.push_back(e.what());
      }
    }
  }
  return now[0];
}

// One file of a set being written.
struct Plan {
  size_t index = 0;    // in the caller's list
  std::string target;  // where it lands, for messages (symlinks resolved outside a locked folder)
  std::string dir;     // target's folder
  Fd fd;               // that folder, open: every name below is in it
  std::string name;    // the file's name there
  std::string rel;     // its path in its group's record (relative to the group's folder)
  size_t group = 0;
  std::FILE* file = nullptr;
  std::string temp, backup;  // names in `fd`
  uint64_t inode = 0, bytes = 0;
  std::string sha256;
  int mode = -1;         // the permissions of the file at the target, which its replacement keeps
  bool existed = false;  // a file was at the target (a backup could not always be made)
  bool renamed = false;
  bool own = false;  // OutputFile::own: never recorded in DIR/.trnsim-written
};

// Why `p`'s temporary is no longer the file this set created ("" when it is): something else was put at its
// name meanwhile (a FIFO, a hard link to another file, a symlink). Compared by the inode it was created
// with, without following a link.
std::string temp_replaced(const Plan& p) {
  struct stat st {};
  if (::fstatat(p.fd.get(), p.temp.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return fmt::format("its temporary {} was removed while this run was writing its files", p.temp);
  if (!S_ISREG(st.st_mode) || st.st_ino != p.inode || st.st_nlink != 1)
    return fmt::format(
        "its temporary {} was replaced while this run was writing its files (it is not the file this run "
        "created there: another inode{}); nothing is written through it",
        p.temp,
        S_ISREG(st.st_mode) ? (st.st_nlink != 1 ? " with other links" : "") : " and not a regular file");
  return "";
}

// Opens `p`'s temporary again to fill it, into `*fd`, never through anything put at its name since it was
// created: not blocking (a FIFO there would wait for a reader for ever), not through a symlink, and checked
// by its inode once open (a hard link to another file is not written into). "" when open, else why not.
std::string reopen_temp(const Plan& p, int* fd) {
  *fd = ::openat(p.fd.get(), p.temp.c_str(), O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (*fd < 0) {
    const int err = errno;
    if (const std::string why = temp_replaced(p); !why.empty()) return why;
    return errno_text(err);
  }
  struct stat st {};
  if (::fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_ino != p.inode || st.st_nlink != 1) {
    ::close(*fd);
    *fd = -1;
    const std::string why = temp_replaced(p);
    return why.empty()
               ? fmt::format("its temporary {} was replaced while this run was writing its files", p.temp)
               : why;
  }
  ::fcntl(*fd, F_SETFL, ::fcntl(*fd, F_GETFL) & ~O_NONBLOCK);
  return "";
}

// Why the file now at `p`'s destination may no longer be replaced ("" when it may): the check that began the
// set (check_may_replace_at), made again as the file is now, under the folder's lock. A user who edits or
// replaces an earlier output, or puts a file where none was, while the set is being written (the check
// before the run, the temporaries filled) keeps it: the set is rolled back and refused. The backup is a hard
// link to the same file, so an edit in place is in it too: only this check tells the edit from the earlier
// run's bytes. Its SHA-256 is compared with the record's (replace_check.h), not its times: a write within the
// file system's time resolution leaves mtime and ctime as they were, and another inode with the same bytes
// holds nothing a rerun would lose.
std::string changed_meanwhile(const Plan& p, const OutputFile& f) {
  if (f.own) return "";
  struct stat st {};
  if (::fstatat(p.fd.get(), p.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return "";  // removed meanwhile: nothing there to lose
  if (!S_ISREG(st.st_mode))
    return overwrite_allowed() ? "" : "something else than a regular file is there now";
  return replace_refusal_at(p.fd.get(), p.name, p.target);
}

std::string changed_text(const Plan& p, const std::string& why) {
  return fmt::format(
      "{} while this run was writing its files ({}): it is kept as it is now, and no file of the run's set "
      "is "
      "put in place; run again to replace it, or pass --overwrite",
      p.existed ? "the file there changed" : "a file was put there", why);
}

// The files of a set that one record describes: a run folder's (its manifest) or one other folder's (a
// journal).
struct Group {
  std::string dir;
  Fd fd = Fd();  // the folder, open
  bool run_folder = false;
  std::string record;             // kManifestName or kJournalName
  bool had_record = false;        // a record was there before (a run folder's manifest)
  Manifest previous_record = {};  // that record, to put back on failure
  std::vector<size_t> plans = {};
};

// The relative path of `path` inside the run folder, when it lands there without a symlink on the way (not
// the folder's own symlink, which the user gave as --out): "" otherwise.
std::string run_folder_rel(const RunFolder& folder, const std::string& path) {
  const std::string rel = fs::path(path).lexically_relative(folder.dir).lexically_normal().string();
  if (!valid_record_path(rel)) return "";
  const Fd d = open_dir(folder.dir);
  if (!d.ok()) return "";
  const fs::path r(rel);
  const Fd parent = open_below(d.get(), r.parent_path());
  if (!parent.ok()) return "";
  const FileId id = file_id_at(parent.get(), r.filename().string());
  if (id.exists && !id.regular) return "";  // a symlink (written through), device or folder
  return rel;
}

// InputError when `path`, which lies by its name in a subfolder of the run folder (open as `run_fd`), is to
// be written into a folder (`fd`: reached through a lock this process holds, e.g. a chain's stage folder)
// other than the one that name reaches in the run folder now: that subfolder was moved, renamed or removed
// during the run. The run folder's record names its files by their paths in it, so they are never written
// elsewhere (and never beside files of another set there).
// Where the subfolder `path` lies in (`fd`, reached through the run folder's lock) is now, when it is no
// longer the one its name reaches in the run folder (open as `run_fd`): its path in the run folder and
// where it is now ("" when that cannot be known); nullopt while it is in place (or `path` is not in a
// subfolder of the run folder).
struct MovedFolder {
  std::string shown;  // e.g. O/sa
  std::string now;    // e.g. /home/u/E
};
std::optional<MovedFolder> moved_subfolder(const RunFolder& folder, int run_fd, const std::string& path,
                                           int fd) {
  const fs::path rel = fs::path(path).lexically_relative(folder.dir).lexically_normal();
  if (rel.empty() || *rel.begin() == ".." || rel.parent_path().empty()) return std::nullopt;
  const Fd there = open_below(run_fd, rel.parent_path());
  struct stat a {
  }, b{};
  if (there.ok() && ::fstat(there.get(), &a) == 0 && ::fstat(fd, &b) == 0 && a.st_dev == b.st_dev &&
      a.st_ino == b.st_ino)
    return std::nullopt;
  return MovedFolder{(fs::path(folder.dir) / rel.parent_path()).string(), path_of_fd(fd)};
}

void check_subfolder_in_place(const RunFolder& folder, int run_fd, const std::string& path, int fd) {
  const std::optional<MovedFolder> m = moved_subfolder(folder, run_fd, path, fd);
  if (!m) return;
  throw InputError(fmt::format(
      "{}: cannot write: the folder was moved, renamed or removed during the run{}: its files belong to the "
      "set recorded in {}, which names them by their path there, so none of the set is written; put the "
      "folder back or run again",
      m->shown, m->now.empty() ? "" : fmt::format(" (the folder this run held is now {})", m->now),
      (fs::path(folder.dir) / kManifestName).string()));
}

std::string rel_beside(const std::string& rel, const std::string& full) {
  return (fs::path(rel).parent_path() / fs::path(full).filename()).string();
}

std::vector<ManifestEntry> writing_entries(const Group& g, const std::vector<Plan>& plans) {
  std::vector<ManifestEntry> v;
  for (size_t i : g.plans) {
    const Plan& p = plans[i];
    ManifestEntry e{p.rel, p.bytes, 0, p.sha256};
    e.temporary = rel_beside(p.rel, p.temp);
    if (!p.backup.empty()) e.backup = rel_beside(p.rel, p.backup);
    e.own = p.own;
    v.push_back(std::move(e));
  }
  return v;
}

// The files a run folder's record names as written by earlier runs: its set and, in a record a run left
// before it had removed its earlier set's stale files ("previous" in state "complete"), those (the set's own
// entry wins for a path).
std::vector<ManifestEntry> earlier_files(const Manifest& m) {
  std::vector<ManifestEntry> v = m.files;
  std::set<std::string> seen;
  for (const ManifestEntry& e : m.files) seen.insert(e.path);
  if (m.complete)
    for (const ManifestEntry& e : m.previous)
      if (seen.insert(e.path).second) v.push_back(e);
  return v;
}

// The record of group `gi` in state "writing": its files and, for a set in several folders, every other
// folder's files under the identifier `set`.
Manifest writing_record(const std::vector<Group>& groups, size_t gi, const std::vector<Plan>& plans,
                        const Manifest* previous, const std::string& set) {
  Manifest m;
  m.complete = false;
  m.files = writing_entries(groups[gi], plans);
  if (previous)
    for (const ManifestEntry& e : earlier_files(*previous))
      if (e.identified()) m.previous.push_back(e);
  for (size_t h = 0; h < groups.size(); ++h) {
    if (h == gi || groups[h].plans.empty()) continue;
    std::string folder = fs::absolute(groups[h].dir).lexically_normal().string();
    while (folder.size() > 1 && folder.back() == '/') folder.pop_back();
    m.others.push_back({folder, groups[h].record, writing_entries(groups[h], plans)});
  }
  if (!m.others.empty()) m.set = set;
  m.written_by = writer_command();
  return m;
}

// A hidden name beside `name` in the folder `dir_fd` that nothing has: ".NAME<kind>.PID.N" (NAME cut short
// to fit 255 bytes). A leftover of a killed run with this PID (a container) is stepped over.
std::string fresh_name_at(int dir_fd, const std::string& name_in, const std::string& shown,
                          const char* kind) {
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const std::string suffix = fmt::format("{}.{}.{}", kind, ::getpid(), counter.fetch_add(1));
    std::string name = name_in;
    if (1 + name.size() + suffix.size() > 255) name.resize(255 - 1 - suffix.size());
    const std::string b = "." + name + suffix;
    struct stat st {};
    if (::fstatat(dir_fd, b.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT) return b;
  }
  throw InputError(shown + ": cannot write: 1000 hidden names next to it exist already");
}

// Whether the earlier run's file `e` is still at its path in the folder `dir_fd` (its inode and size, never
// through a symlink); `parent` gets its folder, `st` what is there.
bool still_there(int dir_fd, const ManifestEntry& e, Fd* parent = nullptr, struct stat* st = nullptr) {
  const fs::path rel(e.path);
  Fd p = open_below(dir_fd, rel.parent_path());
  if (!p.ok()) return false;
  struct stat s {};
  if (::fstatat(p.get(), rel.filename().c_str(), &s, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(s.st_mode) ||
      s.st_ino != e.inode || static_cast<uint64_t>(s.st_size) != e.bytes)
    return false;
  if (parent) *parent = std::move(p);
  if (st) *st = s;
  return true;
}

// earlier_files and, for a path the set names, also the record's "previous" entry of it: a report that
// `trnsim stats --html` was replacing when it was killed (rerecord_in_set's kComing), whichever of the two
// files is at the path.
std::vector<ManifestEntry> earlier_identities(const Manifest& m) {
  std::vector<ManifestEntry> v = earlier_files(m);
  if (!m.complete) return v;
  for (const ManifestEntry& e : m.previous)
    if (std::any_of(m.files.begin(), m.files.end(), [&](const ManifestEntry& f) { return f.path == e.path; }))
      v.push_back(e);
  return v;
}

// The files of `previous` (earlier_identities) that `now` does not hold and that are still there, never one
// of `keep`: what remove_stale removes.
std::vector<ManifestEntry> stale_files(int dir_fd, const Manifest& previous, const std::set<std::string>& now,
                                       const std::vector<std::string>& keep) {
  std::vector<ManifestEntry> v;
  for (const ManifestEntry& e : earlier_identities(previous)) {
    struct stat st {};
    if (!e.identified() || now.count(e.path) || !still_there(dir_fd, e, nullptr, &st)) continue;
    const bool is_kept = std::any_of(keep.begin(), keep.end(), [&](const std::string& k) {
      struct stat ks {};
      return ::stat(k.c_str(), &ks) == 0 && ks.st_dev == st.st_dev && ks.st_ino == st.st_ino;
    });
    if (!is_kept) v.push_back(e);
  }
  return v;
}

// The files of `previous` (earlier_files) that `now` does not hold and that are there under another inode
// with the recorded size and SHA-256: a copy of the folder (cp -a, rsync -a, tar x), or the user's own file
// moved back in. Never removed (the user's, as far as anyone can tell), but the new record keeps naming them
// ("previous"), so a later run may still replace them without --overwrite (sim/io/replace_check.h).
std::vector<ManifestEntry> copied_files(int dir_fd, const Manifest& previous,
                                        const std::set<std::string>& now) {
  std::vector<ManifestEntry> v;
  const std::vector<ManifestEntry> earlier = earlier_identities(previous);
  // One entry a path: where one of its recorded files is there itself (stale_files' case), no other entry of
  // the path is a copy.
  std::set<std::string> named;
  for (const ManifestEntry& e : earlier)
    if (e.identified() && still_there(dir_fd, e)) named.insert(e.path);
  for (const ManifestEntry& e : earlier) {
    if (!e.identified() || now.count(e.path) || named.count(e.path)) continue;
    const fs::path rel(e.path);
    const Fd p = open_below(dir_fd, rel.parent_path());
    const std::string name = rel.filename().string();
    // The recorded inode is stale_files' case; only another one is hashed.
    if (!p.ok() || file_id_at(p.get(), name).inode == e.inode) continue;
    FileId id;
    if (is_new_file(p.get(), name, e, id)) {
      v.push_back(e);
      named.insert(e.path);
    }
  }
  return v;
}

// Removes, from the run folder, the files `stale` lists, each only while its size, inode and SHA-256 are the
// recorded ones, never through a symlink. Returns their paths.
std::vector<std::string> remove_stale(const std::string& dir, const std::vector<ManifestEntry>& stale) {
  std::vector<std::string> removed;
  const Fd d = open_dir(dir);
  if (!d.ok()) return removed;
  for (const ManifestEntry& e : stale) {
    const fs::path rel(e.path);
    Fd parent;
    if (!still_there(d.get(), e, &parent)) continue;
    const std::string name = rel.filename().string();
    const Fd f(::openat(parent.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    struct stat fs_ {};
    if (!f.ok() || ::fstat(f.get(), &fs_) != 0 || fs_.st_ino != e.inode || sha256_of_fd(f.get()) != e.sha256)
      continue;
    if (::unlinkat(parent.get(), name.c_str(), 0) != 0) continue;
    step();
    removed.push_back((fs::path(dir) / rel).string());
    if (!rel.parent_path().empty()) ::unlinkat(d.get(), rel.parent_path().c_str(), AT_REMOVEDIR);  // if empty
  }
  return removed;
}

// A subfolder moved after its files were in place (the backups gone): the set stays, and the user is told
// where those files are now, since the run folder's record names them at their paths in it, and which files
// there are the earlier run's (`stale` of that folder: a moved folder is not reached to remove them). The
// moved folder gets a record of its own (DIR/.trnsim-files, unless it has one): this run's files there and,
// as "previous", the earlier run's, so `trnsim stats` on its stats.json names those, and a run into it
// removes them.
void note_moved_subfolders(const RunFolder& folder, int run_fd, const std::vector<OutputFile>& files,
                           const std::vector<Plan>& plans, const std::vector<ManifestEntry>& stale) {
  struct Moved {
    std::string now;
    int fd = -1;
    fs::path rel;  // in the run folder
    Manifest record;
  };
  std::map<std::string, Moved> moved;  // by its path in the run folder
  for (const Plan& p : plans)
    if (const auto m = moved_subfolder(folder, run_fd, files[p.index].path, p.fd.get())) {
      Moved& mv = moved[m->shown];
      mv.now = m->now;
      mv.fd = p.fd.get();
      mv.rel = fs::path(p.rel).parent_path();
      mv.record.files.push_back({p.name, p.bytes, p.inode, p.sha256});
    }
  for (auto& [shown, mv] : moved) {
    std::vector<std::string> names, earlier;
    for (const ManifestEntry& e : mv.record.files) names.push_back(e.path);
    for (const ManifestEntry& e : stale) {
      if (fs::path(e.path).parent_path() != mv.rel) continue;
      ManifestEntry here = e;
      here.path = fs::path(e.path).filename().string();
      if (!still_there(mv.fd, here)) continue;
      earlier.push_back(here.path);
      mv.record.previous.push_back(std::move(here));
    }
    const std::string earlier_text =
        earlier.empty() ? ""
                        : fmt::format(", beside the earlier run's {} (which this run did not remove)",
                                      fmt::join(earlier, ", "));
    log::note(
        fmt::format("{} was moved, renamed or removed during the run, after this run's files were in place "
                    "in it: {} {}{}, "
                    "not where {} names them",
                    shown, fmt::join(names, ", "), mv.now.empty() ? "went with it" : "are in " + mv.now,
                    earlier_text, (fs::path(folder.dir) / kManifestName).string()));
    if (!mv.now.empty() && !earlier.empty() && !file_id_at(mv.fd, kManifestName).exists) try {
        write_record(mv.fd, mv.now, kManifestName, manifest_text(mv.record));
      } catch (const InputError& e) {
        log::note(e.what());
      }
  }
}

}  // namespace

namespace {

// TRNSIM_TEST_KILL_AT_WRITE_STEP: {step, 0} for "N", {0, N} for "rN", {0, 0} unset; InputError otherwise.
std::pair<long, long> kill_at() {
  const char* v = std::getenv("TRNSIM_TEST_KILL_AT_WRITE_STEP");
  if (v == nullptr) return {0, 0};
  const bool record = *v == 'r';
  const char* digits = record ? v + 1 : v;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(digits, &end, 10);
  if (*digits < '0' || *digits > '9' || *end != '\0' || errno != 0 || n < 1)
    throw InputError(
        fmt::format("TRNSIM_TEST_KILL_AT_WRITE_STEP='{}': expected a whole number from 1 (the write step at "
                    "which the crash tests kill trnsim), or r and one (inside that record write); unset it "
                    "for a normal run",
                    v));
  (void)testing::kill_signal();
  return record ? std::pair{0L, n} : std::pair{n, 0L};
}

}  // namespace

long testing::kill_at_write_step() {
  return kill_at().first;
}

long testing::kill_in_record_write() {
  return kill_at().second;
}

int testing::kill_signal() {
  const char* v = std::getenv("TRNSIM_TEST_KILL_SIGNAL");
  if (v == nullptr) return SIGKILL;
  std::vector<std::pair<std::string, int>> known = {{"KILL", SIGKILL}, {"STOP", SIGSTOP}};
  for (int s : interrupt::handled_signals()) known.emplace_back(sigabbrev_np(s), s);
  const std::string name = std::string(v).rfind("SIG", 0) == 0 ? std::string(v).substr(3) : std::string(v);
  std::vector<std::string> names;
  for (const auto& [n, s] : known) {
    if (n == name) return s;
    names.push_back(n);
  }
  throw InputError(fmt::format(
      "TRNSIM_TEST_KILL_SIGNAL='{}': expected one of {} (the signal the crash tests send at "
      "TRNSIM_TEST_KILL_AT_WRITE_STEP's step: KILL, the default, STOP, or one a run handles); unset it for a "
      "normal run",
      v, fmt::join(names, ", ")));
}

void testing::set_write_step_hook(std::function<void(long)> hook) {
  step_hook() = std::move(hook);
}

std::vector<std::string> write_files_atomic(const std::vector<OutputFile>& files, const RunFolder* folder,
                                            const BeforeRenames& before_renames) {
  // A bad TRNSIM_TEST_KILL_AT_WRITE_STEP is refused before anything is written.
  (void)testing::kill_at_write_step();
  t_step = 0;
  // Where each file lands: its folder, open (in a locked folder, e.g. the run's --out, through the lock's
  // handle: a folder moved during the run gets its files where it is now), and its name there.
  std::vector<Destination> dests;
  std::vector<std::string> targets;  // the same as paths, for grouping and messages
  std::set<std::string> seen;
  for (const auto& o : files) {
    if (o.path.empty()) throw InputError("output path is empty");
    check_not_a_record(o.path, "output");
    Destination d = destination_of(o.path, "output", folder ? folder->dir : "");
    std::string target = d.held ? fs::path(o.path).lexically_normal().string() : resolved_path(o.path);
    check_not_a_record(target, "output");
    if (!d.special && !seen.insert(target).second)
      throw InputError(o.path + ": the same output path is given twice");
    // The one place that decides whether a file there may be replaced (sim/io/replace_check.h).
    if (!d.special && !o.own) check_may_replace_at(d.dir.get(), d.name, target, "output");
    targets.push_back(std::move(target));
    dests.push_back(std::move(d));
  }
  // Devices first, in place: a failing one stops the run before any regular destination changes.
  for (size_t i = 0; i < files.size(); ++i)
    if (dests[i].special)
      detail::write_through(
          dests[i].dir.get(), dests[i].name,
          files[i].path == targets[i] ? targets[i] : files[i].path + " (" + targets[i] + ")", files[i].bytes,
          files[i].tail);

  // The regular files, grouped by the record that describes them.
  std::vector<Plan> plans;
  std::vector<Group> groups;
  std::map<std::string, size_t> group_of_dir;
  if (folder) {
    groups.push_back({folder->dir, open_dir(folder->dir), true, kManifestName});
    if (!groups[0].fd.ok())
      throw InputError(fmt::format("{}: cannot open the directory: {}", folder->dir, errno_text()));
  }
  for (size_t i = 0; i < files.size(); ++i) {
    if (dests[i].special) continue;
    Plan p;
    p.index = i;
    p.own = files[i].own;
    p.target = targets[i];
    p.dir = fs::path(targets[i]).parent_path().string();
    if (p.dir.empty()) p.dir = ".";
    p.fd = std::move(dests[i].dir);
    p.name = dests[i].name;
    if (folder) {
      check_subfolder_in_place(*folder, groups[0].fd.get(), files[i].path, p.fd.get());
      p.rel = run_folder_rel(*folder, files[i].path);
    }
    if (!p.rel.empty()) {
      p.group = 0;
    } else {
      p.rel = p.name;
      const auto [it, fresh] = group_of_dir.emplace(p.dir, groups.size());
      if (fresh) groups.push_back({p.dir, Fd(::fcntl(p.fd.get(), F_DUPFD_CLOEXEC, 0)), false, kJournalName});
      p.group = it->second;
    }
    groups[p.group].plans.push_back(plans.size());
    plans.push_back(std::move(p));
  }
  if (plans.empty() && !folder) return {};

  std::vector<std::string> lock_list;
  for (const Group& g : groups) lock_list.push_back(g.dir);
  for (const Plan& p : plans) lock_list.push_back(p.dir);
  std::sort(lock_list.begin(), lock_list.end());
  lock_list.erase(std::unique(lock_list.begin(), lock_list.end()), lock_list.end());
  const std::vector<DirLock> locks = lock_folders(lock_list);

  // A journal of this user's that a killed set left in a folder this set writes into: that set is made whole
  // first. Another user's journal (a shared folder) is theirs to settle and left as it is: this set's journal
  // there gets this user's own name (own_record_name), and their files are not this user's to replace
  // (replace_check.h).
  for (const std::string& dir : lock_list) {
    const Fd d = open_dir(dir);
    if (!d.ok()) throw InputError(fmt::format("{}: cannot open the directory: {}", dir, errno_text()));
    remove_killed_temporaries(d.get());
    for (const std::string& name : {std::string(kJournalName), journal_name_of(::geteuid())}) {
      struct stat st {};
      if (::fstatat(d.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != ::geteuid())
        continue;
      const std::string shown = (fs::path(dir) / name).string();
      std::optional<Manifest> journal;
      try {
        journal = read_manifest_at(d.get(), name, shown);
      } catch (const NewerRecordError&) {
        throw;
      } catch (const InputError& e) {
        throw InputError(
            fmt::format("{}; it should be trnsim's journal of a set of files it was replacing in that "
                        "folder: look at it, "
                        "then remove it (the files there stay as they are)",
                        e.what()));
      }
      // Journals were always JSON: one that is not (a word, a list of paths) is not trnsim's, and is kept.
      if (journal && journal->version == 1)
        throw InputError(fmt::format(
            "{}: not JSON, so not a journal trnsim wrote (they are JSON records of a set of files being "
            "replaced); it is kept as it is: look at it, then remove or rename it to write into this folder",
            shown));
      if (!journal) continue;
      std::vector<std::string> notes;
      // What is there now is trnsim's (the set kept whole, or the earlier files back): recorded before the
      // journal goes, as a finished write records it (replace_check.h).
      // The files of a folder trnsim keeps for itself (a sweep's rows) are not (OutputFile::own).
      std::vector<ManifestEntry> now =
          journal->complete ? journal->files : settle_set(d.get(), dir, *journal, notes).files;
      std::set<std::string> own;
      for (const ManifestEntry& e : journal->files)
        if (e.own) own.insert(e.path);
      now.erase(
          std::remove_if(now.begin(), now.end(), [&](const ManifestEntry& e) { return own.count(e.path); }),
          now.end());
      record_written(d.get(), dir, now);
      ::unlinkat(d.get(), name.c_str(), 0);
      for (const std::string& n : notes) log::note(n);
    }
  }
  // Each journal's name, now that this user's killed ones are gone: another user's file under this user's own
  // name (a sticky folder keeps this user from replacing it) is refused before anything is written.
  for (Group& g : groups) {
    if (g.run_folder || g.plans.empty()) continue;
    unsigned owner = 0;
    g.record = own_record_name(g.fd.get(), kJournalName, &owner);
    if (owner != static_cast<unsigned>(::geteuid()))
      throw InputError(
          fmt::format("{}: cannot write: another user (uid {}) made a file under the name of your journal "
                      "there (trnsim's "
                      "record of a set of files while it replaces them), which trnsim does not replace: {}; "
                      "or write into "
                      "another folder",
                      (fs::path(g.dir) / g.record).string(), owner, removal_advice(g.fd.get(), g.record)));
  }
  for (Group& g : groups)
    if (g.run_folder) {
      g.had_record = file_id_at(g.fd.get(), kManifestName).exists;
      if (g.had_record) g.previous_record = folder->previous;
    }

  std::vector<interrupt::CleanupPath>
      on_signal;  // temporaries, backups, new records: gone if a signal ends us
  // The run folder's earlier record, linked aside while this set's record in state "writing" replaces it:
  // a signal before the first rename puts it back (the files are all the earlier set's then).
  std::optional<interrupt::CleanupPath> record_back_on_signal;
  bool record_backup = false;
  std::vector<size_t> written_records;  // groups whose journal is written (removed on failure)
  bool run_record_written = false;
  // Puts every destination back as it was and removes what this set created; returns what could not be put
  // back.
  bool undone = false;
  const auto undo = [&]() {
    std::vector<std::string> lost;
    if (undone) return lost;  // once: `fail` has undone the set before it throws
    undone = true;
    for (Plan& p : plans) {
      const int pd = p.fd.get();
      if (p.renamed) {
        if (!p.backup.empty()) {
          if (::renameat(pd, p.backup.c_str(), pd, p.name.c_str()) == 0)
            p.backup.clear();
          else
            lost.push_back(files[p.index].path);
        } else if (p.existed) {
          lost.push_back(files[p.index].path);
        } else {
          ::unlinkat(pd, p.name.c_str(), 0);
        }
      }
      if (p.file) std::fclose(p.file);
      p.file = nullptr;
      if (!p.temp.empty() && !p.renamed) ::unlinkat(pd, p.temp.c_str(), 0);
      if (!p.backup.empty()) ::unlinkat(pd, p.backup.c_str(), 0);
    }
    for (size_t gi : written_records) ::unlinkat(groups[gi].fd.get(), groups[gi].record.c_str(), 0);
    record_back_on_signal.reset();
    if (record_backup) {
      const int gd = groups[0].fd.get();
      if (run_record_written && ::renameat(gd, kManifestBackupName, gd, kManifestName) == 0) {
        run_record_written = false;
        ::fsync(gd);
      }
      ::unlinkat(gd, kManifestBackupName, 0);  // not put back, or still there when both were one file
    }
    if (run_record_written) {
      const Group& g = groups[0];
      try {
        if (g.had_record)
          write_record(g.fd.get(), g.dir, kManifestName, manifest_text(g.previous_record));
        else
          ::unlinkat(g.fd.get(), kManifestName, 0);
      } catch (const InputError&) {
        // the manifest stays in state "writing": the next run rolls back, which finds nothing to do
      }
    }
    return lost;
  };
  const auto fail = [&](const std::string& path, const std::string& why) {
    const std::vector<std::string> lost = undo();
    if (lost.empty()) throw InputError(fmt::format("{}: cannot write: {}", path, why));
    throw InputError(fmt::format("{}: cannot write: {}; {} could not be put back as they were", path, why,
                                 fmt::join(lost, ", ")));
  };

  try {
    // The record first, with the names the set will use: a kill from here on leaves nothing it does not name.
    for (Plan& p : plans) {
      const OutputFile& f = files[p.index];
      p.sha256 = sha256_of(f);
      p.bytes = f.bytes.size() + f.tail.size();
      p.temp = fresh_name_at(p.fd.get(), p.name, p.target, ".tmp");
      p.existed = file_id_at(p.fd.get(), p.name).regular;
      if (p.existed) p.backup = fresh_name_at(p.fd.get(), p.name, p.target, ".old");
    }
    static std::atomic<uint64_t> sets{0};
    const std::string set_id =
        fmt::format("{}.{}.{}", ::getpid(), std::chrono::system_clock::now().time_since_epoch().count(),
                    sets.fetch_add(1));
    for (Group& g : groups) {
      if (g.plans.empty() && !g.run_folder) continue;
      const Manifest m = writing_record(groups, static_cast<size_t>(&g - groups.data()), plans,
                                        g.run_folder ? &folder->previous : nullptr, set_id);
      if (g.run_folder && g.had_record) {
        if (file_id_at(g.fd.get(), kManifestBackupName).regular) {  // a killed run's, else a user's: kept
          if (is_killed_record_backup(g.fd.get()))
            ::unlinkat(g.fd.get(), kManifestBackupName, 0);
          else
            note_left(g.fd.get(), kManifestBackupName);
        }
        // No hard links, or a user's file at the name: undo() rewrites the record. A signal between the link
        // and its registration leaves a link the next run removes (it holds a record).
        record_backup = ::linkat(g.fd.get(), kManifestName, g.fd.get(), kManifestBackupName, 0) == 0;
        if (record_backup) record_back_on_signal.emplace(g.fd.get(), kManifestBackupName, kManifestName);
      }
      write_record(g.fd.get(), g.dir, g.record, manifest_text(m));
      if (g.run_folder) {
        run_record_written = true;
        if (!g.had_record)  // a new record goes again if a signal ends the run before its files are in place
          on_signal.emplace_back(g.fd.get(), g.record, interrupt::CleanupPath::Kind::kFile);
      } else {
        written_records.push_back(static_cast<size_t>(&g - groups.data()));
        on_signal.emplace_back(g.fd.get(), g.record, interrupt::CleanupPath::Kind::kFile);
      }
      step();
    }
    // The temporaries (empty yet) and the backups, under the names the record gives.
    for (Plan& p : plans) {
      const OutputFile& f = files[p.index];
      const int pd = p.fd.get();
      on_signal.emplace_back(pd, p.temp, interrupt::CleanupPath::Kind::kFile);
      const int fd = ::openat(pd, p.temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
      if (fd < 0) {
        const int err = errno;
        p.temp.clear();  // not ours
        fail(f.path, errno_text(err));
      }
      // The destination keeps its permissions when it is replaced, given once the temporary is filled (a
      // read-only one would keep this user from filling it). Closed until it is filled: a set of many files
      // holds one descriptor at a time (a low `ulimit -n`).
      struct stat st {};
      if (p.existed && ::fstatat(pd, p.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
        p.mode = st.st_mode & 07777;
      const bool id_ok = ::fstat(fd, &st) == 0;
      const int err = errno;
      ::close(fd);
      if (!id_ok) fail(f.path, errno_text(err));
      p.inode = st.st_ino;
      if (p.existed) {
        on_signal.emplace_back(pd, p.backup, interrupt::CleanupPath::Kind::kFile);
        // No hard link (a file system without them, an immutable file): the file cannot be put back if a
        // later rename fails.
        if (::linkat(pd, p.name.c_str(), pd, p.backup.c_str(), 0) != 0) p.backup.clear();
      }
      step();
    }
    for (Plan& p : plans) {
      const OutputFile& f = files[p.index];
      int fd = -1;
      if (const std::string why = reopen_temp(p, &fd); !why.empty()) {
        p.temp.clear();  // not ours now: left where it is
        fail(f.path, why);
      }
      p.file = fd < 0 ? nullptr : ::fdopen(fd, "wb");
      if (p.file == nullptr) {
        const int err = errno;
        if (fd >= 0) ::close(fd);
        fail(f.path, errno_text(err));
      }
      bool ok = write_head_and_tail(::fileno(p.file), f.bytes.data(), f.bytes.size(), f.tail.data(),
                                    f.tail.size()) &&
                std::fflush(p.file) == 0 && (p.mode < 0 || ::fchmod(::fileno(p.file), p.mode) == 0) &&
                ::fdatasync(::fileno(p.file)) == 0;
      int err = errno;
      if (std::fclose(p.file) != 0 && ok) {
        ok = false;
        err = errno;
      }
      p.file = nullptr;
      if (!ok) fail(p.target == f.path ? f.path : f.path + " (" + p.target + ")", errno_text(err));
      step();
    }
    if (before_renames) {
      std::vector<ManifestEntry> coming;
      for (const Plan& p : plans) coming.push_back({files[p.index].path, p.bytes, p.inode, p.sha256});
      before_renames(coming);
    }
  } catch (...) {
    // Also a record that could not be written (a full disk, a folder gone): the records already written
    // are put back, so nothing says a run was killed.
    undo();
    throw;
  }

  // Every temporary is complete. The earlier run's files this set does not write again, to be removed once
  // it is in place.
  std::vector<ManifestEntry> stale, copies;  // copies: copied_files
  if (folder) {
    std::set<std::string> now;
    for (const Plan& p : plans)
      if (p.group == 0) now.insert(p.rel);
    stale = stale_files(groups[0].fd.get(), folder->previous, now, folder->keep);
    copies = copied_files(groups[0].fd.get(), folder->previous, now);
  }
  Manifest complete_record;
  bool complete_written = false;
  std::string incomplete;  // why the run folder's record could not say "complete"
  // A signal now waits until every file is in place and recorded, and the earlier set's files are removed.
  std::vector<std::string> removed;
  {
    const interrupt::SignalsHeld all_renames_or_none;
    // A subfolder moved while the temporaries were written (a stopped run): nothing is renamed.
    if (folder) try {
        for (const Plan& p : plans)
          check_subfolder_in_place(*folder, groups[0].fd.get(), files[p.index].path, p.fd.get());
      } catch (const InputError& e) {
        undo();
        throw;
      }
    // A file changed at a destination since the set began: nothing is renamed.
    for (const Plan& p : plans)
      if (const std::string why = changed_meanwhile(p, files[p.index]); !why.empty()) {
        undo();
        throw InputError(fmt::format("{}: cannot write: {}", files[p.index].path, changed_text(p, why)));
      }
    // From the first rename on, a record in state "writing" is what tells the files' sets apart.
    record_back_on_signal.reset();
    for (Plan& p : plans) {
      // Changed since the check above (a stopped run): the files renamed already go back.
      if (const std::string why = changed_meanwhile(p, files[p.index]); !why.empty())
        fail(files[p.index].path, changed_text(p, why));
      if (const std::string why = temp_replaced(p); !why.empty()) {
        p.temp.clear();  // not ours now: left where it is
        fail(files[p.index].path, why);
      }
      if (::renameat(p.fd.get(), p.temp.c_str(), p.fd.get(), p.name.c_str()) != 0) {
        const int err = errno;
        fail(files[p.index].path, errno_text(err));
      }
      p.renamed = true;
      step();
    }
    // Each folder written into, synced once (some file systems refuse to sync a folder: nothing more to do).
    std::map<std::string, int> dirs;
    for (const Plan& p : plans) dirs.emplace(p.dir, p.fd.get());
    for (const auto& [d, fd] : dirs) ::fsync(fd);
    step();
    // A subfolder moved during the renames: while the backups are there, the set goes back whole.
    if (folder) try {
        for (const Plan& p : plans)
          check_subfolder_in_place(*folder, groups[0].fd.get(), files[p.index].path, p.fd.get());
      } catch (const InputError& e) {
        const std::vector<std::string> lost = undo();
        if (lost.empty()) throw;
        throw InputError(
            fmt::format("{}; {} could not be put back as they were", e.what(), fmt::join(lost, ", ")));
      }
    // The backups go before the record says "complete": a kill between the two leaves a record in state
    // "writing" whose every file is in place, which the next run keeps.
    for (Plan& p : plans)
      if (!p.backup.empty()) {
        ::unlinkat(p.fd.get(), p.backup.c_str(), 0);
        step();
      }
    for (Group& g : groups) {
      if (g.run_folder) {
        Manifest& m = complete_record;
        for (size_t i : g.plans) {
          const Plan& p = plans[i];
          m.files.push_back({p.rel, p.bytes, p.inode, p.sha256});
        }
        // Until they are removed, the earlier set's files the record keeps naming: a kill before then leaves
        // them for the next run to remove, and `trnsim stats` says they are there.
        m.previous = stale;
        m.previous.insert(m.previous.end(), copies.begin(), copies.end());
        try {
          write_record(g.fd.get(), g.dir, kManifestName, manifest_text(m));
          complete_written = true;
        } catch (const InputError& e) {
          // Every file is in place; the record says "writing", so the next run keeps this complete set. The
          // run still fails (below): its folder's record is not what a finished run leaves.
          incomplete = e.what();
        }
        if (record_backup) ::unlinkat(g.fd.get(), kManifestBackupName, 0);
      }
    }
    // Outside the run folder, each folder's lasting record of what trnsim wrote there, before the journal
    // goes: a kill between the two leaves a journal whose every file is in place, which the next writer
    // keeps.
    for (const Group& g : groups) {
      if (g.run_folder) continue;
      std::vector<ManifestEntry> written;
      for (size_t i : g.plans)
        if (!files[plans[i].index].own)
          written.push_back({plans[i].rel, plans[i].bytes, plans[i].inode, plans[i].sha256});
      record_written(g.fd.get(), g.dir, written);
    }
    for (size_t gi : written_records) ::unlinkat(groups[gi].fd.get(), groups[gi].record.c_str(), 0);
    for (size_t gi : written_records) ::fsync(groups[gi].fd.get());
    on_signal.clear();
    step();
    if (!folder) return {};
    removed = remove_stale(folder->dir, stale);
    note_moved_subfolders(*folder, groups[0].fd.get(), files, plans, stale);
    if (complete_written && !stale.empty()) {
      // Removed, or no longer the earlier run's (changed or replaced meanwhile: the user's now).
      complete_record.previous = copies;
      try {
        write_record(groups[0].fd.get(), groups[0].dir, kManifestName, manifest_text(complete_record));
      } catch (const InputError& e) {
        log::note(e.what());  // the next run removes nothing not there
      }
      step();
    }
  }
  if (!incomplete.empty())
    throw InputError(fmt::format(
        "{}: every file of the run is in place, but the folder's record of them could not be completed (it "
        "still says \"writing\"); the next trnsim run into {} keeps these files and completes it (make room "
        "first)",
        incomplete, folder->dir));
  return removed;
}

RunFolderState open_run_folder(const std::string& dir) {
  RunFolderState s;
  const Fd d = open_dir(dir);
  if (!d.ok()) throw InputError(fmt::format("{}: cannot open the directory: {}", dir, errno_text()));
  remove_killed_temporaries(d.get());
  // A killed run's link to the record it was replacing (the record itself says what the files are); another
  // user's is theirs.
  if (struct stat st{};
      ::fstatat(d.get(), kManifestBackupName, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_uid == ::geteuid()) {
    if (S_ISREG(st.st_mode) && is_killed_record_backup(d.get()))
      ::unlinkat(d.get(), kManifestBackupName, 0);
    else
      note_left(d.get(), kManifestBackupName);
  }
  const std::string shown = (fs::path(dir) / kManifestName).string();
  std::optional<Manifest> m;
  unsigned owner = 0;
  try {
    m = read_manifest_at(d.get(), kManifestName, shown, &owner);
  } catch (const NewerRecordError&) {
    throw;  // that trnsim's to settle: never rewritten
  } catch (const InputError& e) {
    // Something else than a regular file in the record's place is the user's: refused, never replaced.
    const FileId id = file_id_at(d.get(), kManifestName);
    if (!id.regular) throw;
    s.notes.push_back(fmt::format("{}: the files earlier runs wrote there are kept", e.what()));
    return s;
  }
  if (!m) return s;
  if (const std::string n = not_ours(shown, owner); !n.empty()) {
    // A set another user's run was killed while replacing: only they can settle it, and this run's record
    // would erase the only sign of the mix (and of the leftovers it names). Another user's complete record
    // is only noted: this run replaces it with its own.
    if (!m->complete) throw InputError(killed_by_another_user(shown, owner));
    s.notes.push_back(n);
    return s;
  }
  if (m->version == 1)
    s.notes.push_back(fmt::format(
        "{}: not JSON: read as an older trnsim's record (one path a line) or a damaged one; the files there "
        "are kept (nothing is removed on its word) and the record is rewritten",
        shown));
  if (m->complete) {
    s.manifest = *m;
    return s;
  }
  s.manifest = settle_set(d.get(), dir, *m, s.notes);
  write_record(d.get(), dir, kManifestName, manifest_text(s.manifest));
  return s;
}

FolderSetState inspect_run_folder(const std::string& dir, std::string* detail) {
  const Fd d = open_dir(dir);
  if (!d.ok()) return FolderSetState::kComplete;
  std::optional<Manifest> m;
  try {
    m = read_manifest_at(d.get(), kManifestName, (fs::path(dir) / kManifestName).string());
  } catch (const InputError&) {
    return FolderSetState::kComplete;  // not a record this can judge by
  }
  if (!m || m->complete) return FolderSetState::kComplete;
  // The set as one, in this folder and every other it was written into (each named with its folder).
  std::vector<std::string> now_new, not_yet;
  const auto judge = [&](int dir_fd, const std::vector<ManifestEntry>& files, const std::string& folder) {
    for (const ManifestEntry& e : files) {
      const fs::path rel(e.path);
      const Fd parent = dir_fd >= 0 ? open_below(dir_fd, rel.parent_path()) : Fd();
      FileId id;
      const std::string shown = folder.empty() ? e.path : (fs::path(folder) / e.path).string();
      if (parent.ok() && is_new_file(parent.get(), rel.filename().string(), e, id))
        now_new.push_back(shown);
      else
        not_yet.push_back(shown);
    }
  };
  judge(d.get(), m->files, "");
  for (const OtherRecord& o : m->others) {
    const Fd od = open_dir(o.folder);
    judge(od.get(), o.files, o.folder);
  }
  if (not_yet.empty()) return FolderSetState::kNewSet;
  if (now_new.empty()) return FolderSetState::kOldSet;
  if (detail)
    *detail =
        fmt::format("already replaced: {}; not yet: {}", fmt::join(now_new, ", "), fmt::join(not_yet, ", "));
  return FolderSetState::kMixed;
}

std::vector<std::string> earlier_files_left(const std::string& dir) {
  const Fd d = open_dir(dir);
  if (!d.ok()) return {};
  std::optional<Manifest> m;
  try {
    m = read_manifest_at(d.get(), kManifestName, (fs::path(dir) / kManifestName).string());
  } catch (const InputError&) {
    return {};
  }
  if (!m || m->previous.empty()) return {};
  if (!m->complete && inspect_run_folder(dir) != FolderSetState::kNewSet) return {};
  std::set<std::string> current;
  for (const ManifestEntry& e : m->files) current.insert(e.path);
  std::vector<std::string> left;
  for (const ManifestEntry& e : m->previous)
    if (e.identified() && !current.count(e.path) && still_there(d.get(), e)) left.push_back(e.path);
  return left;
}

namespace {

// The record of a folder up to four levels above `file`'s folder that names `file` (a chain's
// OUT/<stage>/stats.json is in the set recorded in OUT/.trnsim-files): nullopt when `file`'s folder has a
// record of its own (a run into a chain's stage folder since) or none above names it.
struct EnclosingRecord {
  fs::path folder;  // the folder holding the record
  fs::path rel;     // `file`'s path in it
  Manifest record;
};
std::optional<EnclosingRecord> enclosing_record(const std::string& file) {
  fs::path dir = fs::path(file).parent_path();
  if (dir.empty()) dir = ".";
  if (const Fd d = open_dir(dir.string()); d.ok() && file_id_at(d.get(), kManifestName).exists)
    return std::nullopt;
  fs::path rel = fs::path(file).filename();
  fs::path up = fs::absolute(dir).lexically_normal();
  for (int level = 0; level < 4 && up.has_relative_path(); ++level) {
    rel = up.filename() / rel;
    up = up.parent_path();
    const Fd d = open_dir(up.string());
    if (!d.ok()) break;
    std::optional<Manifest> m;
    try {
      m = read_manifest_at(d.get(), kManifestName, (up / kManifestName).string());
    } catch (const InputError&) {
      continue;
    }
    if (!m) continue;
    const bool named = std::any_of(m->files.begin(), m->files.end(),
                                   [&](const ManifestEntry& e) { return e.path == rel.string(); });
    if (named) return EnclosingRecord{up, rel, std::move(*m)};
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::string> earlier_files_left_of(const std::string& file, std::string* set_dir) {
  fs::path dir = fs::path(file).parent_path();
  if (dir.empty()) dir = ".";
  const std::optional<EnclosingRecord> r = enclosing_record(file);
  if (!r) return earlier_files_left(dir.string());
  // The enclosing set's leftovers in `file`'s folder, by their paths there.
  const fs::path sub = r->rel.parent_path();
  std::vector<std::string> left;
  for (const std::string& f : earlier_files_left(r->folder.string())) {
    const fs::path in = fs::path(f).lexically_relative(sub);
    if (!in.empty() && *in.begin() != "..") left.push_back(in.string());
  }
  if (set_dir && !left.empty()) *set_dir = r->folder.string();
  return left;
}

std::string record_naming(const std::string& file) {
  fs::path dir = fs::path(file).parent_path();
  if (dir.empty()) dir = ".";
  if (const Fd d = open_dir(dir.string()); d.ok()) try {
      const std::optional<Manifest> m =
          read_manifest_at(d.get(), kManifestName, (dir / kManifestName).string());
      const std::string name = fs::path(file).filename().string();
      if (m && std::any_of(m->files.begin(), m->files.end(),
                           [&](const ManifestEntry& e) { return e.path == name; }))
        return (dir / kManifestName).string();
    } catch (const InputError&) {
      // not a record this can read: it names nothing
    }
  if (const std::optional<EnclosingRecord> r = enclosing_record(file)) {
    // As the user named it: `file` less its path in the folder.
    const fs::path given = fs::path(file).lexically_normal();
    fs::path folder = given;
    for (auto it = r->rel.begin(); it != r->rel.end(); ++it) folder = folder.parent_path();
    if (folder.empty()) folder = given.is_absolute() ? r->folder : fs::path(".");
    return (folder / kManifestName).string();
  }
  return "";
}

namespace {

std::mutex g_writer_mutex;
std::string g_writer_command;

}  // namespace

void set_writer_command(const std::string& command) {
  const std::lock_guard<std::mutex> g(g_writer_mutex);
  // Only what a record may hold (sim/io/manifest.h), else nothing.
  const bool fits =
      command.size() <= 64 && command.find_first_not_of("abcdefghijklmnopqrstuvwxyz- ") == std::string::npos;
  g_writer_command = fits ? command : "";
}

std::string writer_command() {
  const std::lock_guard<std::mutex> g(g_writer_mutex);
  return g_writer_command;
}

std::string sha256_of(const OutputFile& f) {
  Sha256 h;
  h.update(f.bytes.data(), f.bytes.size());
  h.update(f.tail.data(), f.tail.size());
  return h.hex();
}

void rerecord_in_set(const OutputFile& written, const std::string& drawn_from, RecordPhase phase,
                     uint64_t coming_inode) {
  const std::string& file = written.path;
  fs::path folder = fs::path(file).parent_path();
  if (folder.empty()) folder = ".";
  fs::path rel = fs::path(file).filename();
  // The same folder also under another name (--html=Hl/stats.html, Hl -> H; a bind mount; H/../Hl).
  const bool beside =
      !drawn_from.empty() && lies_in_folder(file, fs::path(drawn_from).parent_path().string());
  if (std::optional<EnclosingRecord> r = enclosing_record(file)) {
    folder = r->folder;
    rel = r->rel;
  } else if (std::optional<EnclosingRecord> from = beside ? enclosing_record(drawn_from) : std::nullopt) {
    // A report beside a stats.json that a folder above records (a chain's OUT/<stage>/stats.json): it joins
    // that set, under its path there.
    folder = from->folder;
    rel = from->rel.parent_path() / rel;
  }
  const std::vector<DirLock> locks = lock_folders({folder.string()});
  const Fd d = open_dir(folder.string());
  if (!d.ok()) return;
  const std::string shown = (folder / kManifestName).string();
  std::optional<Manifest> m;
  unsigned owner = 0;
  try {
    m = read_manifest_at(d.get(), kManifestName, shown, &owner);
  } catch (const InputError&) {
    return;  // not a record this can update
  }
  if (!m || !m->complete || !not_ours("", owner).empty()) return;
  const auto named = [&](const fs::path& p) {
    return std::find_if(m->files.begin(), m->files.end(),
                        [&](const ManifestEntry& x) { return x.path == p.string(); });
  };
  auto e = named(rel);
  bool added = false;
  if (e == m->files.end()) {
    // A report drawn from a member of the set beside it (OUT/stats.json -> OUT/stats.html) joins the set: the
    // next run into the folder replaces it, or removes it as an earlier run's file, instead of leaving a
    // report of an older run beside its stats.json.
    const fs::path from = rel.parent_path() / fs::path(drawn_from).filename();
    if (phase == RecordPhase::kFailed || !beside || named(from) == m->files.end()) return;
    m->files.push_back({rel.string()});
    e = m->files.end() - 1;
    added = true;
  }
  // The file kComing kept aside (the one at the path before the write), if any.
  const auto aside = [&] {
    return std::find_if(m->previous.begin(), m->previous.end(),
                        [&](const ManifestEntry& x) { return x.path == rel.string(); });
  };
  const Fd parent = open_below(d.get(), rel.parent_path());
  struct stat st {};
  const bool there = parent.ok() &&
                     ::fstatat(parent.get(), rel.filename().c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                     S_ISREG(st.st_mode);
  const ManifestEntry coming{e->path, written.bytes.size() + written.tail.size(), coming_inode,
                             sha256_of(written)};
  switch (phase) {
    case RecordPhase::kComing: {
      // The file at the path now, when the record names it (the set's entry, or one an earlier killed write
      // kept aside), stays named beside the coming one.
      std::optional<ManifestEntry> now;
      for (const ManifestEntry* x :
           {added ? nullptr : &*e, aside() == m->previous.end() ? nullptr : &*aside()})
        if (x && there && x->identified() && x->inode == static_cast<uint64_t>(st.st_ino) &&
            x->bytes == static_cast<uint64_t>(st.st_size))
          now = *x;
      *e = coming;
      while (aside() != m->previous.end()) m->previous.erase(aside());
      if (now) m->previous.push_back(*now);
      // Not written: the write stops (write_files_atomic undoes it), as the record could not name the file.
      write_record(d.get(), folder.string(), kManifestName, manifest_text(*m));
      return;
    }
    case RecordPhase::kFailed:
      // The file that was there before the write is there again (or still).
      if (aside() != m->previous.end()) {
        *e = *aside();
        m->previous.erase(aside());
      } else if (e->sha256 == coming.sha256 && e->inode == coming.inode) {
        m->files.erase(e);
      } else {
        return;
      }
      break;
    case RecordPhase::kWritten:
      // A device, FIFO or link to one, written through, is no file of the set (a record of inode 0 made the
      // next run refuse the folder: tester22i).
      if (!there && added) return;
      // The bytes trnsim wrote, never the file as it is now: an edit made since the rename stays the user's
      // (the record then differs from the file, so the next run refuses to replace it). The inode is the
      // file's at the path when it is still a regular file (a removal also compares the SHA-256).
      *e = {e->path, coming.bytes, there ? static_cast<uint64_t>(st.st_ino) : 0, coming.sha256};
      while (aside() != m->previous.end()) m->previous.erase(aside());
      break;
  }
  try {
    write_record(d.get(), folder.string(), kManifestName, manifest_text(*m));
  } catch (const InputError& err) {
    log::note(err.what());
  }
}

FolderSetState inspect_set_of(const std::string& file, std::string* detail) {
  fs::path dir = fs::path(file).parent_path();
  if (dir.empty()) dir = ".";
  const FolderSetState own = inspect_run_folder(dir.string(), detail);
  if (own != FolderSetState::kComplete) return own;
  const std::optional<EnclosingRecord> r = enclosing_record(file);
  if (!r || r->record.complete) return FolderSetState::kComplete;
  return inspect_run_folder(r->folder.string(), detail);
}

}  // namespace trnsim::io
