#include "tools/trnsim/out_dir.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "sim/base/error.h"
#include "sim/base/interrupt_note.h"
#include "sim/base/log.h"
#include "sim/io/file_kind.h"
#include "sim/io/made_folders.h"
#include "sim/io/manifest.h"
#include "sim/io/replace_check.h"
#include "tools/trnsim/commands.h"

namespace trnsim::cli {

namespace fs = std::filesystem;

namespace {

// Who holds a run folder's lock: a run into it, or a chain whose stage folder it is.
constexpr const char* kHeldBy =
    "it holds the folder's lock: a run with this --out, or a chain with this folder as a stage's";

// InputError unless a file can be created in `dir` (an unwritable folder is found now, not after the run).
// The probe's name is new to the folder: a leftover of a killed run with this PID is stepped over.
// Through the folder's locked handle (io::open_dir_for_write), as every write of the run.
void probe_writable(const std::string& dir, const std::string& what) {
  static std::atomic<uint64_t> counter{0};
  const io::Fd d = io::open_dir_for_write(dir);
  if (!d.ok())
    throw InputError(fmt::format("{}: cannot open the directory ({})", what, std::strerror(errno)));
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const std::string probe = fmt::format(".trnsim-probe.{}.{}", ::getpid(), counter.fetch_add(1));
    interrupt::CleanupPath registered(d.get(), probe, interrupt::CleanupPath::Kind::kFile);
    const int fd =
        ::openat(d.get(), probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0)
      throw InputError(fmt::format("{}: cannot write into the directory ({})", what, std::strerror(errno)));
    // Locked until removed: a cleanup in another PID namespace never takes it for a killed run's.
    io::hold_temporary(fd);
    ::unlinkat(d.get(), probe.c_str(), 0);
    ::close(fd);
    return;
  }
  throw InputError(fmt::format("{}: cannot write into the directory (1000 probe names are taken)", what));
}

}  // namespace

OutDir::OutDir(std::string dir) : dir_(std::move(dir)) {
  // The crash tests' switch (sim/io/output_files.h), checked where a run starts writing: a bad value is
  // refused before the simulation, and never stops a command that writes nothing (`trnsim --help`).
  io::testing::kill_at_write_step();
  std::error_code ec;
  // A symlink loop or a folder on the way that cannot be searched is not "missing": say why.
  if ((void)fs::status(dir_, ec); ec && ec != std::errc::no_such_file_or_directory)
    throw InputError(fmt::format("--out {}: {}", dir_, ec.message()));
  if (fs::exists(dir_, ec) && !fs::is_directory(dir_, ec))
    throw InputError(fmt::format("--out {}: exists and is not a directory", dir_));
  io::check_no_dangling_link(dir_, "--out " + dir_);
  // The root holds everything: a run's folder there would record, and a later run remove, files anywhere.
  if (const fs::path c = fs::canonical(dir_, ec); !ec && c == c.root_path())
    throw InputError(
        fmt::format("--out {}: is the root of the file system, not a folder for a run's files; "
                    "choose a folder of its own",
                    dir_));
  // Every missing level (--out a/b/c), outermost first: each is removed again if the run leaves it empty.
  levels_.make(dir_, "--out " + dir_);
  try {
    io::lock_for_run(lock_, dir_, "--out " + dir_, "run", kHeldBy);
    probe_writable(dir_, "--out " + dir_);
    io::RunFolderState s = io::open_run_folder(dir_);
    previous_ = std::move(s.manifest);
    for (const std::string& n : s.notes) log::note(n);
  } catch (const InputError& e) {
    // A folder another run locked between our mkdir and our lock is that run's now: removing it (it is still
    // empty) would pull it from under the other run, and both would fail.
    if (!lock_.held()) levels_.disown();
    remove_created();
    const std::string what = e.what();
    if (what.rfind("--out ", 0) == 0) throw;
    throw InputError(fmt::format("--out {}: {}", dir_, what));
  }
}

OutDir::~OutDir() {
  remove_created();
}

void OutDir::remove_created() {
  // The subfolders through the folder's handle (only when empty), then the levels of --out by path.
  if (dir_fd_.ok())
    for (auto it = created_subs_.rbegin(); it != created_subs_.rend(); ++it)
      ::unlinkat(dir_fd_.get(), it->c_str(), AT_REMOVEDIR);
  created_subs_.clear();
  levels_.remove_empty();
}

void OutDir::add_subfolder(const std::string& name) {
  const std::string sub = (fs::path(dir_) / name).string();
  const std::string what = fmt::format("--out {}: {}", dir_, name);
  // In the folder this run holds, through its handle (wherever it is now).
  if (!dir_fd_.ok()) dir_fd_ = io::open_dir_for_write(dir_);
  if (!dir_fd_.ok())
    throw InputError(fmt::format("{}: cannot open the directory ({})", what, std::strerror(errno)));
  struct stat st {};
  if (::fstatat(dir_fd_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(st.st_mode)) {
      io::check_no_dangling_link(sub, what);
      throw InputError(what + ": is a symlink: trnsim does not write through links below the output folder");
    }
    if (!S_ISDIR(st.st_mode)) throw InputError(what + ": exists and is not a directory");
  } else {
    interrupt::CleanupPath registered(dir_fd_.get(), name, interrupt::CleanupPath::Kind::kEmptyFolder);
    if (::mkdirat(dir_fd_.get(), name.c_str(), 0777) == 0) {
      created_subs_.push_back(name);
      on_signal_.push_back(std::move(registered));
    } else if (errno != EEXIST) {
      throw InputError(fmt::format("{}: cannot create the directory ({})", what, std::strerror(errno)));
    }
  }
  sub_locks_.emplace_back();
  io::lock_for_run(sub_locks_.back(), sub, what, "run", kHeldBy);
  probe_writable(sub, what);
  // A record of its own there (an earlier single run into the folder): its set is this folder's earlier set
  // too, so the files it names that this run does not write again are removed as a run's own earlier files
  // are (each only while it is still the file recorded), and the record goes once this run's set is in place.
  io::RunFolderState own;
  try {
    own = io::open_run_folder(sub);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", what, e.what()));
  }
  for (const std::string& n : own.notes) log::note(n);
  struct stat rec {};
  const io::Fd sub_fd(::openat(dir_fd_.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!sub_fd.ok() || ::fstatat(sub_fd.get(), io::kManifestName, &rec, AT_SYMLINK_NOFOLLOW) != 0 ||
      !S_ISREG(rec.st_mode))
    return;
  std::vector<io::ManifestEntry> earlier = own.manifest.files;
  for (const io::ManifestEntry& e : own.manifest.previous) earlier.push_back(e);
  // First: for a path OUT's record names too, this newer record's file is the one there.
  std::vector<io::ManifestEntry> mine;
  for (io::ManifestEntry e : earlier) {
    e.path = (fs::path(name) / e.path).lexically_normal().string();
    if (e.identified() && io::valid_record_path(e.path)) mine.push_back(std::move(e));
  }
  previous_.files.insert(previous_.files.begin(), mine.begin(), mine.end());
  sub_records_.push_back({name, rec.st_ino});
}

std::string OutDir::where_now() const {
  const int fd = lock_.fd();
  struct stat held {
  }, named{};
  if (fd < 0 || ::fstat(fd, &held) != 0) return dir_;
  if (::stat(dir_.c_str(), &named) == 0 && named.st_dev == held.st_dev && named.st_ino == held.st_ino)
    return dir_;
  return io::path_of_fd(fd);
}

std::string OutDir::shown(const std::string& path, const std::string& dir, const std::string& now_at) {
  const std::string rel = fs::path(path).lexically_relative(dir).string();
  return now_at.empty() ? rel : (fs::path(now_at) / rel).string();
}

std::vector<std::string> OutDir::commit(const std::vector<io::OutputFile>& files,
                                        const std::vector<std::string>& read) {
  const io::RunFolder folder{dir_, previous_, read};
  std::vector<std::string> removed = io::write_files_atomic(files, &folder);
  // A signal from now on (a scheduler's SIGTERM while the summary is printed) still ends the run with its
  // status, saying that the folder is complete.
  interrupt::set_done_note(fmt::format(
      "every file of the run was written before the signal: {} is complete (the exit status says only that "
      "the process was ended by the signal)",
      dir_));
  // The subfolders' own records (add_subfolder): OUT's record names their files now.
  for (const auto& [name, inode] : sub_records_) {
    const io::Fd d(::openat(dir_fd_.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (d.ok() && ::fstatat(d.get(), io::kManifestName, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_ino == inode)
      ::unlinkat(d.get(), io::kManifestName, 0);
  }
  levels_.keep();
  created_subs_.clear();
  return removed;
}

void add_overwrite_option(CLI::App* cmd) {
  cmd->add_flag_callback(
      "--overwrite", [] { io::set_overwrite_allowed(true); },
      "let outputs replace files already at their paths that no trnsim record lists as written by trnsim (a "
      "file of yours) or that changed since trnsim wrote them; refused otherwise, before any work");
}

namespace {

// CAP_FOWNER (capability 3) in the effective set: the sticky bit does not stop such a process (root).
bool has_cap_fowner() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("CapEff:", 0) == 0) try {
        return (std::stoull(line.substr(7), nullptr, 16) >> 3) & 1;
      } catch (const std::exception&) {
        break;
      }
  return ::geteuid() == 0;
}

}  // namespace

void check_replaceable(const std::vector<io::NamedPath>& paths) {
  for (const io::NamedPath& p : paths) {
    struct stat st {
    }, dir{};
    // A new file, a symlink (check_no_links) or a device (written through in place) is not renamed over.
    if (p.is_input || ::lstat(p.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const fs::path parent =
        fs::path(p.path).parent_path().empty() ? fs::path(".") : fs::path(p.path).parent_path();
    if (::stat(parent.c_str(), &dir) != 0 || !(dir.st_mode & S_ISVTX)) continue;
    const uid_t me = ::geteuid();
    if (st.st_uid == me || dir.st_uid == me || has_cap_fowner()) continue;
    throw InputError(fmt::format(
        "{} '{}': cannot write: it belongs to another user (uid {}) and its folder has the sticky bit (as "
        "/tmp "
        "has) and belongs to uid {}, so only one of them can replace it (the rename would fail with "
        "\"Operation not permitted\"); remove it as its owner, or choose another --out",
        p.what, p.path, st.st_uid, dir.st_uid));
  }
}

}  // namespace trnsim::cli
