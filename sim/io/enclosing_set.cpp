#include "sim/io/enclosing_set.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/base/error.h"
#include "sim/io/content_hash.h"
#include "sim/io/dir_lock.h"
#include "sim/io/file_kind.h"
#include "sim/io/manifest.h"

namespace trnsim::io {

namespace fs = std::filesystem;

namespace {

// Whether `e.path` in the folder open as `folder` is still the file the record names (never through a symlink
// at the end).
bool still_recorded(int folder, const ManifestEntry& e) {
  struct stat st {};
  if (::fstatat(folder, e.path.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) return false;
  if (static_cast<uint64_t>(st.st_size) != e.bytes) return false;
  if (e.inode != 0 && static_cast<uint64_t>(st.st_ino) != e.inode) return false;
  if (e.sha256.empty() || e.bytes > (16u << 20)) return true;
  const Fd fd(::openat(folder, e.path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  return fd.ok() && sha256_of_fd(fd.get()) == e.sha256;
}

// still_recorded for `e` or, when a `trnsim stats --html` was killed while it replaced that report, for the
// record's "previous" entry of its path (the report it was replacing: sim/io/output_files.h rerecord_in_set).
bool still_recorded_in(int folder, const Manifest& m, const ManifestEntry& e) {
  if (still_recorded(folder, e)) return true;
  return std::any_of(m.previous.begin(), m.previous.end(),
                     [&](const ManifestEntry& p) { return p.path == e.path && still_recorded(folder, p); });
}

std::optional<Manifest> complete_record(int folder, const fs::path& shown) {
  std::optional<Manifest> m;
  try {
    m = read_manifest_at(folder, kManifestName, (shown / kManifestName).string());
  } catch (const InputError&) {
    m.reset();
  }
  if (!m || !m->complete || m->version < 2) return std::nullopt;
  return m;
}

Fd open_folder(const std::string& path) {
  return Fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
}

struct Id {
  dev_t dev = 0;
  ino_t ino = 0;
  uint64_t mount = 0;  // the mount's id (statx), 0 if unknown
  bool operator==(const Id& o) const { return dev == o.dev && ino == o.ino; }
};

std::optional<Id> id_of(int fd) {
  struct statx sx {};
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_INO | STATX_MNT_ID, &sx) != 0) return std::nullopt;
  Id id{makedev(sx.stx_dev_major, sx.stx_dev_minor), static_cast<ino_t>(sx.stx_ino), 0};
  if (sx.stx_mask & STATX_MNT_ID) id.mount = sx.stx_mnt_id;
  return id;
}

// The name under which the folder `child` sits in the folder open as `parent` ("" if none: a folder moved
// meanwhile).
std::string name_in(int parent, const Id& child) {
  const int dup = ::fcntl(parent, F_DUPFD_CLOEXEC, 0);
  DIR* d = dup >= 0 ? ::fdopendir(dup) : nullptr;
  if (d == nullptr) {
    if (dup >= 0) ::close(dup);
    return "";
  }
  // First the entries that hold the folder's inode; then, as a mount point's entry holds the covered
  // folder's inode, every other folder (a second pass: a folder such as /tmp may hold many entries).
  std::string found;
  for (const bool by_inode : {true, false}) {
    ::rewinddir(d);
    for (const dirent* e; found.empty() && (e = ::readdir(d)) != nullptr;) {
      if ((e->d_ino == child.ino) != by_inode) continue;
      if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN) continue;
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      struct stat st {};
      if (::fstatat(parent, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == child.dev &&
          st.st_ino == child.ino)
        found = e->d_name;
    }
    if (!found.empty()) break;
  }
  ::closedir(d);
  return found;
}

// One mount of /proc/self/mountinfo: its id, device, the folder of its file system it shows (`root`) and
// where.
struct Mount {
  uint64_t id = 0;
  dev_t dev = 0;
  std::string root, point;
};

std::string unescape_mountinfo(const std::string& s) {  // "\040" for a space, ...
  std::string out;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8));
      i += 3;
    } else {
      out += s[i];
    }
  return out;
}

std::vector<Mount> mounts() {
  std::vector<Mount> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    Mount m;
    std::string parent, majmin;
    if (!(f >> m.id >> parent >> majmin >> m.root >> m.point)) continue;
    unsigned maj = 0, min = 0;
    if (std::sscanf(majmin.c_str(), "%u:%u", &maj, &min) != 2) continue;
    m.dev = makedev(maj, min);
    m.root = unescape_mountinfo(m.root);
    m.point = unescape_mountinfo(m.point);
    out.push_back(std::move(m));
  }
  return out;
}

// The folder `cur` (the root of its mount, `id`) opened through another mount of its file system whose
// folder holds its parent too (for a bind mount of OUT/<stage> elsewhere: OUT/<stage> itself, whose ".." is
// OUT); an invalid Fd if there is none.
Fd through_parent_mount(const Id& id) {
  const std::vector<Mount> all = mounts();
  const Mount* self = nullptr;
  for (const Mount& m : all)
    if (m.id == id.mount) self = &m;
  if (self == nullptr || self->root == "/") return Fd();
  const Mount* best = nullptr;
  for (const Mount& m : all) {
    if (m.id == self->id || m.dev != self->dev) continue;
    const bool covers = m.root == "/" || self->root.rfind(m.root + "/", 0) == 0;
    if (covers && (best == nullptr || m.root.size() > best->root.size())) best = &m;
  }
  if (best == nullptr) return Fd();
  const std::string rest = best->root == "/" ? self->root : self->root.substr(best->root.size());
  Fd fd = open_folder((fs::path(best->point) / fs::path(rest).relative_path()).string());
  const std::optional<Id> got = fd.ok() ? id_of(fd.get()) : std::nullopt;
  return got && *got == id ? std::move(fd) : Fd();
}

}  // namespace

std::optional<EnclosingSet> enclosing_set(const std::string& dir) {
  // The nearest folder that exists, by the path given (the levels below it, missing, lead `inside`).
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec).lexically_normal();
  if (ec) return std::nullopt;
  if (!p.has_filename()) p = p.parent_path();
  fs::path inside;
  Fd cur = open_folder(p.string());
  while (!cur.ok() && p.has_relative_path()) {
    inside = inside.empty() ? p.filename() : p.filename() / inside;
    p = p.parent_path();
    cur = open_folder(p.string());
  }
  // Then up through the folders that really hold it (device and inode, not the path's text: a symlink to
  // OUT/<stage> or a bind mount of it is still OUT/<stage>).
  const auto depth = [](const fs::path& q) { return std::distance(q.begin(), q.end()); };
  while (cur.ok() && depth(inside) < 4) {
    std::optional<Id> id = id_of(cur.get());
    if (!id) return std::nullopt;
    Fd up(::openat(cur.get(), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    std::optional<Id> up_id = up.ok() ? id_of(up.get()) : std::nullopt;
    if (!up_id || *up_id == *id) return std::nullopt;  // the root
    if (id->mount != 0 && up_id->mount != id->mount) {
      // `cur` is the root of its mount: a bind mount of a folder inside a file system mounted elsewhere too
      // has its real parent there.
      if (Fd real = through_parent_mount(*id); real.ok()) {
        up = Fd(::openat(real.get(), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        up_id = up.ok() ? id_of(up.get()) : std::nullopt;
        if (!up_id) return std::nullopt;
      }
    }
    const std::string name = name_in(up.get(), *id);
    if (name.empty()) return std::nullopt;
    inside = inside.empty() ? fs::path(name) : name / inside;
    cur = std::move(up);
    const fs::path folder = fs::path(path_of_fd(cur.get()));
    const std::optional<Manifest> m = complete_record(cur.get(), folder);
    if (!m) continue;
    EnclosingSet s;
    const std::string prefix = inside.string() + "/";
    for (const ManifestEntry& e : m->files) {
      if (e.path == "chain_stats.json") s.chain = true;
      if (e.path.rfind(prefix, 0) != 0) continue;
      s.named.push_back(e.path);
      if (!still_recorded_in(cur.get(), *m, e)) s.replaced.push_back(e.path);
    }
    if (s.named.empty()) continue;
    s.folder = folder.string();
    s.inside = inside.string();
    return s;
  }
  return std::nullopt;
}

namespace {

// The words both messages use for the folder inside the set, the set's kind, and the rest of the set.
struct SetWords {
  std::string part, kind, others;
};

SetWords words_of(const EnclosingSet& s) {
  if (s.chain)
    return {fmt::format("stage '{}'", s.inside), "chain",
            (fs::path(s.folder) / "chain_stats.json").string() + " and the other stages"};
  return {fmt::format("the folder '{}'", s.inside), "run", "the run's other files"};
}

}  // namespace

std::string enclosing_set_refusal(const std::string& out_dir, const EnclosingSet& s,
                                  const std::string& flag) {
  const fs::path folder(s.folder);
  const SetWords w = words_of(s);
  return fmt::format(
      "--out {}: is {} of the {} recorded in {} (its record {} names {}): a single run here would replace "
      "those files while {} still describe the earlier run. Run the {} again, or give this run another "
      "--out; {} replaces them anyway (trnsim stats then says that {} was replaced)",
      out_dir, w.part, w.kind, s.folder, (folder / kManifestName).string(),
      (folder / s.named.front()).string() +
          (s.named.size() > 1 ? fmt::format(" and {} more", s.named.size() - 1) : ""),
      w.others, w.kind, flag, s.chain ? "the stage" : "the folder");
}

std::string replaced_stage_note(const std::string& dir) {
  const std::optional<EnclosingSet> s = enclosing_set(dir);
  if (!s || s->replaced.empty()) return "";
  const SetWords w = words_of(*s);
  return fmt::format(
      "{} is {} of the {} in {}, and was replaced since that {} ran ({} {} not the file{} it wrote): {} "
      "describe the earlier run, so the {}'s set is mixed; run the {} again for a consistent set",
      dir, w.part, w.kind, s->folder, w.kind, fmt::format("{}", fmt::join(s->replaced, ", ")),
      s->replaced.size() == 1 ? "is" : "are", s->replaced.size() == 1 ? "" : "s", w.others, w.kind, w.kind);
}

std::vector<std::string> replaced_files_of_set(const std::string& folder) {
  std::vector<std::string> out;
  const Fd d = open_folder(folder);
  if (!d.ok()) return out;
  const std::optional<Manifest> m = complete_record(d.get(), folder);
  if (!m) return out;
  for (const ManifestEntry& e : m->files)
    if (!still_recorded_in(d.get(), *m, e)) out.push_back(e.path);
  return out;
}

}  // namespace trnsim::io
