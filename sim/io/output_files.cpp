#include "sim/io/output_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "sim/base/error.h"
#include "sim/base/interrupt.h"
#include "sim/io/file_kind.h"
#include "sim/io/output_detail.h"

namespace trnsim::io {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& name, const std::string& msg) {
  throw InputError(name + ": " + msg);
}

std::string errno_text() {
  return std::strerror(errno);
}

std::string dir_of(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

}  // namespace

namespace detail {

void check_output_path(const std::string& path) {
  if (path.empty()) throw InputError("output path is empty");
  std::error_code ec;
  std::string dir = dir_of(path);
  if (!fs::is_directory(dir, ec)) fail(path, "cannot write: directory '" + dir + "' does not exist");
  if (fs::is_directory(path, ec)) fail(path, "cannot write: it is a directory");
}

void write_through(int dir_fd, const std::string& name, const std::string& shown,
                   const std::vector<uint8_t>& image, const HostBytes& tail) {
  const Fd fd(::openat(dir_fd, name.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC));
  if (!fd.ok()) fail(shown, "cannot write: " + errno_text());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail(shown, "cannot write: " + errno_text());
  if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))
    fail(shown, "cannot write: it was replaced by a regular file or folder while the run wrote its files");
  const std::pair<const uint8_t*, size_t> parts[] = {{image.data(), image.size()},
                                                     {tail.data(), tail.size()}};
  for (const auto& [data, size] : parts)
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::write(fd.get(), data + done, size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail(shown, "cannot write: " + (n < 0 ? errno_text() : std::string("nothing written")));
      done += static_cast<size_t>(n);
    }
}

}  // namespace detail

namespace {

// ".NAME.tmp.PID.N" for `name`, cut short to fit 255 bytes; "<prefix>PID.N" with a prefix (kTraceTempPrefix).
std::string temp_name_for(const std::string& name_in, const std::string& prefix = "") {
  static std::atomic<uint64_t> counter{0};
  if (!prefix.empty()) return fmt::format("{}{}.{}", prefix, ::getpid(), counter.fetch_add(1));
  const std::string suffix = fmt::format(".tmp.{}.{}", ::getpid(), counter.fetch_add(1));
  // A name near the 255-byte limit is cut short: the temporary must fit where its destination does.
  constexpr size_t kNameMax = 255;
  std::string name = name_in;
  if (1 + name.size() + suffix.size() > kNameMax) name.resize(kNameMax - 1 - suffix.size());
  return "." + name + suffix;
}

}  // namespace

std::string temp_path_for(const std::string& path) {
  const fs::path p(path);
  return (p.parent_path() / temp_name_for(p.filename().string())).string();
}

Destination destination_of(const std::string& path, const std::string& what, const std::string& base) {
  if (path.empty()) throw InputError("output path is empty");
  const auto refuse = [&](const std::string& why) {
    throw InputError(fmt::format("{} '{}': cannot write: {}", what, path, why));
  };
  Destination d;
  const fs::path given(path);
  const std::string parent = given.has_parent_path() ? given.parent_path().string() : ".";
  // A '..' in the path: the folder as the kernel reaches it. A held folder's path and resolved_path are
  // normalised, A/sub/.. to A even without A/sub, where an open(2) of A/sub/../f fails (tester27r: stats
  // --html=A/./sub/../r.html wrote A/r.html).
  const fs::path up("..");
  if (std::find(given.begin(), given.end(), up) != given.end()) {
    if (const int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); fd >= 0)
      ::close(fd);
    else
      refuse(fmt::format("directory '{}' cannot be opened ({})", parent, errno_text()));
  }
  d.dir = open_dir_for_write(parent, &d.held);
  if (d.held) {
    if (!d.dir.ok()) {
      const int err = errno;
      if (err == ELOOP || err == ENOTDIR)
        refuse(
            fmt::format("a folder on its way below the output folder is a symlink or not a folder ({}): "
                        "trnsim does not write through links below the output folder",
                        std::strerror(err)));
      fail(path,
           fmt::format("cannot write: directory '{}' cannot be opened ({})", parent, std::strerror(err)));
    }
    d.name = given.filename().string();
    if (d.name.empty() || d.name == "." || d.name == "..") fail(path, "cannot write: it is a directory");
    struct stat st {};
    if (::fstatat(d.dir.get(), d.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return d;  // a new file
    if (S_ISLNK(st.st_mode)) {
      struct stat t {};
      const bool to_special =
          ::fstatat(d.dir.get(), d.name.c_str(), &t, 0) == 0 && !S_ISREG(t.st_mode) && !S_ISDIR(t.st_mode);
      if (!to_special) {
        std::string target(4096, '\0');
        const ssize_t n = ::readlinkat(d.dir.get(), d.name.c_str(), target.data(), target.size());
        target.resize(n > 0 ? static_cast<size_t>(n) : 0);
        refuse(
            fmt::format("{} is a symlink (to {}): trnsim does not write through links (it would replace "
                        "the file the link points to); remove the link or choose another path",
                        path, target));
      }
      d.special = true;
      return d;
    }
    if (S_ISDIR(st.st_mode)) fail(path, "cannot write: it is a directory");
    d.special = !S_ISREG(st.st_mode);
    return d;
  }
  d.dir = Fd();
  check_no_links(path, what, base);
  // A device, FIFO or socket, also through links (/dev/stderr -> /proc/self/fd/2 -> a pipe, which has no
  // path to resolve to): opened by its own name and written through in place.
  if (is_special_file(path)) {
    d.dir = open_dir_for_write(parent);
    if (!d.dir.ok()) refuse(fmt::format("directory '{}' cannot be opened ({})", parent, errno_text()));
    d.name = given.filename().string();
    d.special = true;
    return d;
  }
  const std::string target = resolved_path(path);
  detail::check_output_path(target);
  const fs::path t(target);
  d.dir = open_dir_for_write(dir_of(target));
  if (!d.dir.ok()) refuse(fmt::format("directory '{}' cannot be opened ({})", dir_of(target), errno_text()));
  d.name = t.filename().string();
  d.special = is_special_file(target);
  return d;
}

bool hold_temporary(int fd) {
  if (::flock(fd, LOCK_EX) != 0) return true;  // a file system without flock: judged by PID alone
  struct stat st {};
  return ::fstat(fd, &st) != 0 || st.st_nlink > 0;
}

TempFile create_temp_in(int dir_fd, const std::string& name, const std::string& shown,
                        std::vector<interrupt::CleanupPath>& on_signal, const std::string& prefix) {
  struct stat dest {};
  const bool exists =
      ::fstatat(dir_fd, name.c_str(), &dest, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(dest.st_mode);
  // A leftover of a killed run whose PID this process has again (a container) is never opened or removed:
  // the next name is tried.
  for (int attempt = 0; attempt < 1000; ++attempt) {
    std::string tmp = temp_name_for(name, prefix);
    interrupt::CleanupPath registered(dir_fd, tmp, interrupt::CleanupPath::Kind::kFile);
    const int fd = ::openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) fail(shown, "cannot write: " + errno_text());
    if (!hold_temporary(fd)) {  // taken for a killed writer's between its creation and its lock
      ::close(fd);
      continue;
    }
    std::FILE* f = ::fdopen(fd, "wb");
    if (f == nullptr) {
      const int err = errno;
      ::close(fd);
      ::unlinkat(dir_fd, tmp.c_str(), 0);
      fail(shown, std::string("cannot write: ") + std::strerror(err));
    }
    on_signal.push_back(std::move(registered));
    // The destination keeps its permissions when it is replaced.
    if (exists) ::fchmod(fd, dest.st_mode & 07777);
    return {f, tmp};
  }
  fail(shown, "cannot write: 1000 temporary names next to it exist already");
}

bool lies_in_folder(const std::string& path, const std::string& folder) {
  const fs::path parent = fs::path(path).parent_path();
  struct stat a {
  }, b{};
  return ::stat(parent.empty() ? "." : parent.c_str(), &a) == 0 &&
         ::stat(folder.empty() ? "." : folder.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

bool is_special_file(const std::string& p) {
  return file_kind(p) == FileKind::kSpecial;
}

std::string resolved_path(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (ec) p = path;
  // The last component's symlinks are followed by hand: weakly_canonical stops at a dangling one, which the
  // rename would then replace instead of creating its target.
  for (int hops = 0; fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    if (hops == 40) fail(path, "cannot use: too many levels of symbolic links");
    const fs::path t = fs::read_symlink(p, ec);
    if (ec) break;
    p = t.is_absolute() ? t : p.parent_path() / t;
  }
  const fs::path w = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal().string() : w.string();
}

void check_not_a_record(const std::string& path, const std::string& what) {
  const std::string name = fs::path(path).filename().string();
  // A temporary of a record (..trnsim-files.tmp.PID.N), a probe (.trnsim-probe.PID.N) or a trace
  // (.trnsim-trace.PID.N): the next trnsim in
  // the folder removes such names as a killed writer's leftovers (a tester: a quantize --data named so was
  // deleted).
  if (name.rfind("..trnsim-", 0) == 0 || name.rfind(".trnsim-probe.", 0) == 0 ||
      name.rfind(kTraceTempPrefix, 0) == 0)
    throw InputError(
        fmt::format("{} '{}': cannot write: {} is a name trnsim gives its own temporary files (the "
                    "next trnsim writing into the folder removes it); choose another name",
                    what, path, name));
  if (is_record_name(name))
    throw InputError(
        fmt::format("{} '{}': cannot write: {} is the name of trnsim's record of the files it writes "
                    "into a folder; choose another name",
                    what, path, name));
}

namespace {

// Where a file lands, also before it exists: its folder's device and inode, and its name there. One folder
// reached under two names (a bind mount: `mount --bind A B`) gives the same place for A/f and B/f.
struct Place {
  bool known = false;
  dev_t dev = 0;
  ino_t ino = 0;
  std::string name;
  bool operator==(const Place& o) const {
    return known && o.known && dev == o.dev && ino == o.ino && name == o.name;
  }
};

Place place_of(const std::string& resolved) {
  const fs::path p(resolved);
  struct stat st {};
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : std::string(".");
  if (!p.has_filename() || ::stat(dir.c_str(), &st) != 0) return {};
  return {true, st.st_dev, st.st_ino, p.filename().string()};
}

}  // namespace

void check_distinct_files(const std::vector<NamedPath>& paths) {
  for (const NamedPath& p : paths)
    if (!p.is_input) check_not_a_record(p.path, p.what);
  std::vector<std::string> resolved;
  std::vector<Place> places;
  for (const NamedPath& p : paths) {
    resolved.push_back(resolved_path(p.path));
    places.push_back(place_of(resolved.back()));
  }
  for (size_t i = 0; i < paths.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      if (paths[i].is_input && paths[j].is_input) continue;
      std::error_code ec;
      const bool same = resolved[i] == resolved[j] || fs::equivalent(resolved[i], resolved[j], ec) ||
                        places[i] == places[j];
      if (!same || is_special_file(resolved[i])) continue;
      // The same path; the same name in one folder reached under two names; else two names of one file.
      const std::string where =
          resolved[i] == resolved[j] ? resolved[i]
          : places[i] == places[j]
              ? fmt::format("{} and {}: one folder under two names, e.g. a bind mount", paths[j].path,
                            paths[i].path)
              : fmt::format("{} and {}: hard links to one file", paths[j].path, paths[i].path);
      throw InputError(
          fmt::format("{} and {} are the same file ({}){}", paths[j].what, paths[i].what, where,
                      paths[i].is_input || paths[j].is_input ? ": an input is never overwritten" : ""));
    }
}

void check_not_recorded(const std::string& path, const std::string& what, const std::string& report_of) {
  const fs::path target(resolved_path(path));
  const fs::path source = report_of.empty() ? fs::path() : fs::path(resolved_path(report_of));
  for (fs::path dir = target.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    std::optional<Manifest> m;
    if (fd >= 0) {
      try {
        m = read_manifest_at(fd, kManifestName, (dir / kManifestName).string());
      } catch (const InputError&) {
        // not a record this can read: it names nothing
      }
      ::close(fd);
    }
    const auto named = [&](const fs::path& p) {
      const std::string rel = p.lexically_relative(dir).string();
      return std::any_of(m->files.begin(), m->files.end(),
                         [&](const ManifestEntry& e) { return e.path == rel; });
    };
    if (m && named(target)) {
      // The run's own report, drawn again from a stats.json of the same set.
      if (!source.empty() && target.extension() == ".html" && named(source)) return;
      throw InputError(fmt::format(
          "{} '{}': cannot write: it is one of the files a run wrote into {} (its record {} names it): "
          "writing over it would change that run's set; choose another path",
          what, path, dir.string(), (dir / kManifestName).string()));
    }
    if (dir == dir.parent_path()) break;
  }
}

void check_no_links(const std::string& path, const std::string& what, const std::string& base) {
  const fs::path p(path);
  std::vector<fs::path> checked;  // the components checked, each as the path up to it
  const fs::path rel = base.empty() ? fs::path() : p.lexically_relative(base);
  if (!base.empty() && !rel.empty() && *rel.begin() != ".." && !rel.is_absolute()) {
    fs::path cur(base);
    for (const fs::path& c : rel) {
      if (c.empty() || c == ".") continue;
      cur /= c;
      checked.push_back(cur);
    }
  } else if (p.has_filename()) {
    checked.push_back(p);
  }
  for (size_t i = 0; i < checked.size(); ++i) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(checked[i], ec))) continue;
    const bool last = i + 1 == checked.size();
    // A link to a device, FIFO or socket (/dev/null) is an output the user asked to be written in place.
    if (last && file_kind(checked[i].string()) == FileKind::kSpecial) continue;
    const std::string target = fs::read_symlink(checked[i], ec).string();
    throw InputError(fmt::format(
        "{} '{}': cannot write: {} is a symlink (to {}): trnsim does not write through links{}; remove the "
        "link or choose another path",
        what, path, checked[i].string(), target,
        last ? " (it would replace the file the link points to)" : " below the output folder"));
  }
}

void check_no_links(const std::vector<NamedPath>& paths, const std::string& out_dir) {
  for (const NamedPath& p : paths)
    if (!p.is_input) check_no_links(p.path, p.what, out_dir);
}

void check_not_directories(const std::vector<NamedPath>& paths) {
  for (const NamedPath& p : paths) {
    std::error_code ec;
    if (!p.is_input && fs::is_directory(p.path, ec))
      throw InputError(fmt::format("{} '{}': cannot write: it is a directory", p.what, p.path));
  }
}

}  // namespace trnsim::io
