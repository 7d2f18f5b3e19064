#include "sim/io/replace_check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/base/error.h"
#include "sim/base/log.h"
#include "sim/io/content_hash.h"
#include "sim/io/dir_lock.h"
#include "sim/io/file_kind.h"
#include "sim/io/output_detail.h"

namespace trnsim::io {
namespace {

namespace fs = std::filesystem;

std::atomic<bool> g_overwrite{false};

using StatKey = std::tuple<dev_t, ino_t, off_t, time_t, long, time_t, long>;
StatKey key_of(const struct stat& st) {
  return {st.st_dev,          st.st_ino,         st.st_size,        st.st_mtim.tv_sec,
          st.st_mtim.tv_nsec, st.st_ctim.tv_sec, st.st_ctim.tv_nsec};
}

// A file's SHA-256, hashed once per process for one state of the file (a run checks its outputs before it
// simulates, when its write begins and before each rename: write_files_atomic). A hash is kept only when no
// later write can leave the key (inode, size, mtime, ctime) as it was: the file did not change while it was
// hashed, and its last change (ctime) lies more than 2 s before the hash began, so any write from then on
// gives it another ctime even where the file system keeps coarse times (1 s, FAT's 2 s) or two writes fall in
// one clock tick (git's "racily clean" rule). A file changed more recently is hashed again each time.
std::string sha256_of(int dir_fd, const std::string& name, const struct stat& st) {
  static std::mutex mutex;
  static std::map<StatKey, std::string> cache;
  const StatKey key = key_of(st);
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (const auto it = cache.find(key); it != cache.end()) return it->second;
  }
  timespec began{};
  ::clock_gettime(CLOCK_REALTIME_COARSE, &began);
  const Fd f(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  struct stat now {};
  if (!f.ok() || ::fstat(f.get(), &now) != 0 || now.st_ino != st.st_ino) return "";
  std::string h = sha256_of_fd(f.get());
  struct stat after {};
  if (key_of(now) != key || ::fstat(f.get(), &after) != 0 || key_of(after) != key) return "";  // changing
  if (st.st_ctim.tv_sec + 2 < began.tv_sec) {
    const std::lock_guard<std::mutex> lock(mutex);
    cache[key] = h;
  }
  return h;
}

// The records that may list a file of the folder `dir_fd`: the run folder's manifest, the complete record a
// killed run left beside its "writing" one (.trnsim-files.old: the files still in place may be that set's),
// what trnsim wrote there outside a run, a killed set's journal. One that cannot be read lists nothing, and
// so does one another user wrote (their files are not this user's to replace without --overwrite).
std::optional<Manifest> read_quietly(int dir_fd, const char* record, const std::string& shown) {
  try {
    unsigned owner = 0;
    std::optional<Manifest> m = read_manifest_at(dir_fd, record, shown, &owner);
    if (m && owner != static_cast<unsigned>(::geteuid())) return std::nullopt;
    return m;
  } catch (const InputError&) {
    return std::nullopt;
  }
}

}  // namespace

void set_overwrite_allowed(bool allowed) {
  g_overwrite = allowed;
}

bool overwrite_allowed() {
  return g_overwrite;
}

namespace {

// replace_refusal_at for the file as `st` found it.
std::string refusal_for(int dir_fd, const std::string& name, const std::string& path, const struct stat& st) {
  std::string changed;
  // Whether `m` (the record `shown`) lists the file as `rel` and the file is still as recorded.
  const auto listed = [&](const Manifest& m, const std::string& rel, const std::string& shown) {
    // A record in state "writing" describes in "files" a set being put in place, not a file written there
    // before: no reason to call the file changed (a set being written checks its destinations again).
    std::vector<std::pair<const ManifestEntry*, bool>> entries;  // entry, the file as written earlier
    for (const ManifestEntry& e : m.files) entries.emplace_back(&e, m.complete);
    for (const ManifestEntry& e : m.previous) entries.emplace_back(&e, true);
    for (const auto& [e, written] : entries) {
      if (e->path != rel) continue;
      if (m.version == 1) return true;  // an older trnsim's record: its paths only
      if (e->sha256.empty()) continue;
      if (e->bytes == static_cast<uint64_t>(st.st_size) && sha256_of(dir_fd, name, st) == e->sha256)
        return true;
      if (changed.empty() && written)
        changed = e->bytes != static_cast<uint64_t>(st.st_size)
                      ? fmt::format("{} lists it with {} bytes, it has {} now", shown, e->bytes, st.st_size)
                      : fmt::format("{} lists it with another SHA-256", shown);
    }
    return false;
  };
  const fs::path target = fs::absolute(path).lexically_normal();
  const fs::path here = target.parent_path();
  // This user's own .trnsim-written.UID vouches only for this user's files.
  // The journals before the records of finished writes: a writer records its files there before its
  // journal goes, so a journal found gone means the record read next has them (a check made while another
  // trnsim finishes its set, tester22f #6).
  const std::string mine = written_name_of(::geteuid());
  const bool own_file = st.st_uid == ::geteuid();
  for (const std::string& record :
       {std::string(kManifestName), std::string(kManifestBackupName), std::string(kJournalName),
        journal_name_of(::geteuid()), std::string(kWrittenName), mine}) {
    if (record == mine && !own_file) continue;
    const std::string shown = (here / record).string();
    if (const std::optional<Manifest> m = read_quietly(dir_fd, record.c_str(), shown);
        m && listed(*m, name, shown))
      return "";
  }
  // A run folder above whose set holds it (OUT/inputs/x.npy, a chain's OUT/<stage>/stats.json).
  for (fs::path dir = here.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    const Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (d.ok()) {
      const std::string shown = (dir / kManifestName).string();
      if (const std::optional<Manifest> m = read_quietly(d.get(), kManifestName, shown);
          m && listed(*m, target.lexically_relative(dir).string(), shown))
        return "";
    }
    if (dir == dir.parent_path()) break;
  }
  if (!changed.empty()) return "it changed since the run that wrote it (" + changed + ")";
  return "no trnsim record lists it (trnsim replaces only the files it wrote there itself, unchanged)";
}

}  // namespace

std::string replace_refusal_at(int dir_fd, const std::string& name, const std::string& path) {
  if (overwrite_allowed()) return "";
  // Made again while the file is replaced during the check (another trnsim finishing its set of the same
  // files: the records read would describe another file than the one hashed), as long as that goes on.
  std::string why;
  for (int attempt = 0; attempt < 100; ++attempt) {
    struct stat st {
    }, after{};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) return "";
    why = refusal_for(dir_fd, name, path, st);
    if (why.empty() ||
        (::fstatat(dir_fd, name.c_str(), &after, AT_SYMLINK_NOFOLLOW) == 0 && key_of(after) == key_of(st)))
      return why;
  }
  return why;
}

void check_may_replace_at(int dir_fd, const std::string& name, const std::string& path,
                          const std::string& what) {
  std::string why = replace_refusal_at(dir_fd, name, path);
  if (why.empty()) return;
  // Judged again under the folder's lock: another trnsim may be between putting its file there and
  // recording it (a trace renamed in, then added to .trnsim-written, both under the lock), which an unlocked
  // look takes for a changed file. Where the lock cannot be had (another run holds the folder until it ends),
  // the first judgement stands.
  if (const std::string folder = path_of_fd(dir_fd); !folder.empty()) try {
      const std::vector<DirLock> locks = lock_folders({folder});
      why = replace_refusal_at(dir_fd, name, path);
      if (why.empty()) return;
    } catch (const InputError&) {
      // not lockable now: as judged
    }
  throw InputError(
      fmt::format("{} '{}': cannot write: a file is there that trnsim will not replace: {}; pass --overwrite "
                  "(trnsim.nki.benchmark: overwrite=True) to replace it, or choose another path",
                  what, path, why));
}

void check_may_replace(const std::string& path, const std::string& what) {
  if (path.empty()) return;
  const fs::path p(path);
  if (!p.has_filename()) return;
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : std::string(".");
  const Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!d.ok()) return;  // nothing there to replace (a missing folder is the other checks')
  check_may_replace_at(d.get(), p.filename().string(), path, what);
}

void check_may_replace(const std::vector<NamedPath>& paths) {
  for (const NamedPath& p : paths)
    if (!p.is_input) check_may_replace(p.path, p.what);
}

namespace {

// The record of what this user wrote into the folder `dir_fd` (own_record_name: .trnsim-written, or
// .trnsim-written.UID in a shared folder, where the sticky bit keeps this user from replacing another's
// record, which is never this user's to rewrite anyway), with what is there now (`there`: fstatat succeeded).
struct WrittenRecord {
  std::string name;
  bool there = false;
  struct stat st {};
};
WrittenRecord written_record_of_mine(int dir_fd) {
  WrittenRecord r{own_record_name(dir_fd, kWrittenName)};
  r.there = ::fstatat(dir_fd, r.name.c_str(), &r.st, AT_SYMLINK_NOFOLLOW) == 0;
  return r;
}

}  // namespace

void record_written(int dir_fd, const std::string& dir, const std::vector<ManifestEntry>& files) {
  if (files.empty()) return;
  // Read, changed and written under the folder's lock (shared with a set this process is writing there), so
  // that a concurrent writer's entry is never dropped. A folder no longer at its path (moved meanwhile) is
  // recorded without.
  std::vector<DirLock> locks;
  try {
    locks = lock_folders({dir});
  } catch (const InputError&) {
    // not at its path any more, or held for minutes: recorded as before, unlocked
  }
  const WrittenRecord record = written_record_of_mine(dir_fd);
  const std::string shown = (fs::path(dir) / record.name).string();
  // A record another user wrote vouches for nothing (read_quietly's rule): its entries are not taken over
  // (a tester: root's run adopted what `nobody` had forged in a sticky folder's .trnsim-written.0).
  const bool others = record.there && record.st.st_uid != ::geteuid();
  Manifest m;
  try {
    if (std::optional<Manifest> old = others ? std::nullopt : read_manifest_at(dir_fd, record.name, shown);
        old && old->version == 2)
      m.files = std::move(old->files);
  } catch (const InputError& e) {
    // Something else than a regular file there is the user's: kept.
    if (record.there && !S_ISREG(record.st.st_mode)) {
      log::note(fmt::format("{}; the files written now are not recorded", e.what()));
      return;
    }
    log::note(fmt::format("{}: rewritten", e.what()));
  }
  std::set<std::string> now;
  for (const ManifestEntry& e : files) now.insert(e.path);
  std::vector<ManifestEntry> kept;
  for (ManifestEntry& e : m.files) {
    struct stat st {};
    if (now.count(e.path) || ::fstatat(dir_fd, e.path.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != e.bytes)
      continue;
    kept.push_back(std::move(e));
  }
  for (const ManifestEntry& e : files) kept.push_back({e.path, e.bytes, e.inode, e.sha256});
  m.files = std::move(kept);
  m.complete = true;
  try {
    detail::write_record(dir_fd, dir, record.name, manifest_text(m));
  } catch (const InputError& e) {
    std::vector<std::string> names;
    for (const ManifestEntry& f : files) names.push_back(f.path);
    // One message for a record under this user's name that another user made and a sticky folder keeps:
    // it vouches for nothing, and it is not this user's to replace.
    struct stat folder {};
    if (others && ::fstat(dir_fd, &folder) == 0 && (folder.st_mode & S_ISVTX) != 0)
      log::note(fmt::format(
          "{}: another user (uid {}) made this file under your record's name, and trnsim cannot replace it "
          "(the folder's sticky bit keeps another user's file): {} {} not recorded, so a later write over "
          "{} will ask for --overwrite; its owner or root can remove it",
          shown, record.st.st_uid, fmt::join(names, ", "), names.size() == 1 ? "is" : "are",
          names.size() == 1 ? "it" : "them"));
    else
      log::note(fmt::format("{}; a later write over these files will ask for --overwrite", e.what()));
  }
}

}  // namespace trnsim::io
