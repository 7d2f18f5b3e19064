#include "sim/io/enclosing_set.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "sim/base/error.h"
#include "sim/io/content_hash.h"
#include "sim/io/manifest.h"

namespace trnsim::io {

namespace fs = std::filesystem;

namespace {

// Whether `folder`/`e.path` is still the file the record names (never through a symlink at the end).
bool still_recorded(const fs::path& folder, const ManifestEntry& e) {
  const fs::path p = folder / e.path;
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  if (static_cast<uint64_t>(st.st_size) != e.bytes) return false;
  if (e.inode != 0 && static_cast<uint64_t>(st.st_ino) != e.inode) return false;
  if (e.sha256.empty() || e.bytes > (16u << 20)) return true;
  const int fd = ::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  const bool same = sha256_of_fd(fd) == e.sha256;
  ::close(fd);
  return same;
}

std::optional<Manifest> complete_record(const fs::path& folder) {
  const int d = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d < 0) return std::nullopt;
  std::optional<Manifest> m;
  try {
    m = read_manifest_at(d, kManifestName, (folder / kManifestName).string());
  } catch (const InputError&) {
    m.reset();
  }
  ::close(d);
  if (!m || !m->complete || m->version < 2) return std::nullopt;
  return m;
}

}  // namespace

std::optional<EnclosingSet> enclosing_set(const std::string& dir) {
  std::error_code ec;
  fs::path up = fs::absolute(dir, ec).lexically_normal();
  if (ec) return std::nullopt;
  if (!up.has_filename()) up = up.parent_path();
  fs::path inside;
  for (int level = 0; level < 4 && up.has_relative_path(); ++level) {
    inside = inside.empty() ? up.filename() : up.filename() / inside;
    up = up.parent_path();
    const std::optional<Manifest> m = complete_record(up);
    if (!m) continue;
    EnclosingSet s;
    const std::string prefix = inside.string() + "/";
    for (const ManifestEntry& e : m->files) {
      if (e.path == "chain_stats.json") s.chain = true;
      if (e.path.rfind(prefix, 0) != 0) continue;
      s.named.push_back(e.path);
      if (!still_recorded(up, e)) s.replaced.push_back(e.path);
    }
    if (s.named.empty()) continue;
    s.folder = up.string();
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
  const std::optional<Manifest> m = complete_record(folder);
  std::vector<std::string> out;
  if (!m) return out;
  for (const ManifestEntry& e : m->files)
    if (!still_recorded(folder, e)) out.push_back(e.path);
  return out;
}

}  // namespace trnsim::io
