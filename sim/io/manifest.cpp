#include "sim/io/manifest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <set>

#include "sim/base/error.h"
#include "sim/base/json_excerpt.h"
#include "sim/io/file_kind.h"
#include "sim/io/json_document.h"

namespace trnsim::io {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Manifests list a few files; a bigger one is not trnsim's.
constexpr size_t kMaxRecordBytes = 16 << 20;

class Reader {
 public:
  explicit Reader(std::string name) : name_(std::move(name)) {}
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw InputError(fmt::format("{}: {}: {}", name_, path, what));
  }
  void keys(const json& o, const std::string& path, std::initializer_list<const char*> allowed) const {
    for (const auto& [k, v] : o.items())
      if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return k == a; }))
        fail(path.empty() ? k : path + "." + k, "unknown key");
  }
  uint64_t count(const json& o, const char* key, const std::string& path, bool required) const {
    if (!o.contains(key)) {
      if (required) fail(path + "." + key, "missing");
      return 0;
    }
    const json& v = o[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      fail(path + "." + key, "expected a count, found " + json_excerpt(v));
    return v.get<uint64_t>();
  }
  // Inode numbers are written as decimal strings: some file systems use all 64 bits (overlayfs's xino).
  uint64_t inode(const json& o, const char* key, const std::string& path, bool required) const {
    if (!o.contains(key)) {
      if (required) fail(path + "." + key, "missing");
      return 0;
    }
    const json& v = o[key];
    const std::string s = v.is_string() ? v.get<std::string>() : "";
    uint64_t n = 0;
    bool ok = !s.empty() && s.size() <= 20 && s.find_first_not_of("0123456789") == std::string::npos;
    for (char c : s)
      if (ok) {
        ok = n <= (UINT64_MAX - static_cast<uint64_t>(c - '0')) / 10;
        n = n * 10 + static_cast<uint64_t>(c - '0');
      }
    if (!ok || n == 0)
      fail(path + "." + key, "expected a nonzero inode number as a decimal string, found " + json_excerpt(v));
    return n;
  }
  std::string text(const json& o, const char* key, const std::string& path, bool required) const {
    if (!o.contains(key)) {
      if (required) fail(path + "." + key, "missing");
      return "";
    }
    if (!o[key].is_string()) fail(path + "." + key, "expected a string, found " + json_excerpt(o[key]));
    return o[key].get<std::string>();
  }
  std::string record_path(const json& o, const char* key, const std::string& path, bool required) const {
    const std::string p = text(o, key, path, required);
    if ((required || !p.empty()) && !valid_record_path(p))
      fail(path + "." + key,
           fmt::format("'{}' is not a path inside the folder (relative, without '..' or '.')",
                       text_excerpt(p)));
    return p;
  }
  ManifestEntry entry(const json& e, const std::string& path, bool writing) const {
    if (!e.is_object()) fail(path, "expected an object, found " + json_excerpt(e));
    if (writing)
      keys(e, path, {"path", "bytes", "sha256", "temporary", "backup", "own"});
    else
      keys(e, path, {"path", "bytes", "inode", "sha256"});
    ManifestEntry m;
    m.path = record_path(e, "path", path, true);
    m.bytes = count(e, "bytes", path, true);
    if (!writing) m.inode = inode(e, "inode", path, true);
    m.sha256 = text(e, "sha256", path, true);
    if (m.sha256.size() != 64 || m.sha256.find_first_not_of("0123456789abcdef") != std::string::npos)
      fail(path + ".sha256", "expected 64 lowercase hex digits, found " + json_excerpt(e["sha256"]));
    if (!writing) return m;
    m.temporary = record_path(e, "temporary", path, true);
    m.backup = record_path(e, "backup", path, false);
    if (e.contains("own")) {
      if (!e["own"].is_boolean())
        fail(path + ".own", "expected true or false, found " + json_excerpt(e["own"]));
      m.own = e["own"].get<bool>();
    }
    const fs::path parent = fs::path(m.path).parent_path();
    for (const auto& [side, kind] : {std::pair{&m.temporary, ".tmp."}, std::pair{&m.backup, ".old."}}) {
      if (side->empty()) continue;
      const fs::path s(*side);
      if (s.parent_path() != parent ||
          !side_name_of(s.filename().string(), fs::path(m.path).filename().string(), kind))
        fail(path, fmt::format("'{}' is not a name trnsim gives a {} beside '{}' (.NAME{}PID.N)",
                               text_excerpt(*side), side == &m.temporary ? "temporary" : "backup",
                               text_excerpt(m.path), kind));
    }
    return m;
  }
  std::vector<ManifestEntry> entries(const json& doc, const char* key, bool writing,
                                     const std::string& at = "") const {
    std::vector<ManifestEntry> v;
    if (!doc.contains(key)) return v;
    const json& a = doc[key];
    const std::string where = at.empty() ? std::string(key) : at + "." + key;
    if (!a.is_array()) fail(where, "expected a list, found " + json_excerpt(a));
    std::set<std::string> seen;
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string path = fmt::format("{}[{}]", where, i);
      v.push_back(entry(a[i], path, writing));
      if (!seen.insert(v.back().path).second)
        fail(path + ".path", fmt::format("'{}' is listed twice", text_excerpt(v.back().path)));
    }
    return v;
  }

 private:
  std::string name_;
};

json entry_json(const ManifestEntry& e, bool writing) {
  json j = {{"path", e.path}, {"bytes", e.bytes}, {"sha256", e.sha256}};
  if (!writing) j["inode"] = std::to_string(e.inode);
  if (writing) {
    j["temporary"] = e.temporary;
    if (!e.backup.empty()) j["backup"] = e.backup;
    if (e.own) j["own"] = true;
  }
  return j;
}

}  // namespace

std::string written_name_of(unsigned uid) {
  return fmt::format("{}.{}", kWrittenName, uid);
}

std::string journal_name_of(unsigned uid) {
  return fmt::format("{}.{}", kJournalName, uid);
}

std::string own_record_name(int dir_fd, const char* base, unsigned* owner) {
  const unsigned me = static_cast<unsigned>(::geteuid());
  const std::string mine = fmt::format("{}.{}", base, me);
  struct stat st {};
  const bool mine_there = ::fstatat(dir_fd, mine.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  const unsigned mine_owner = mine_there ? static_cast<unsigned>(st.st_uid) : me;
  std::string name = base;
  unsigned at_name = me;
  if (mine_there && mine_owner == me) {
    name = mine;
  } else if (::fstatat(dir_fd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
    at_name = static_cast<unsigned>(st.st_uid);
    if (at_name != me) {
      name = mine;
      at_name = mine_owner;
    }
  }
  if (owner) *owner = at_name;
  return name;
}

std::string removal_advice(int dir_fd, const std::string& name) {
  struct stat file {
  }, folder{};
  const unsigned me = static_cast<unsigned>(::geteuid());
  if (me == 0 || ::fstatat(dir_fd, name.c_str(), &file, AT_SYMLINK_NOFOLLOW) != 0 ||
      ::fstat(dir_fd, &folder) != 0 || (folder.st_mode & S_ISVTX) == 0 || file.st_uid == me ||
      folder.st_uid == me)
    return "remove it";
  return fmt::format(
      "its owner (uid {}) or root can remove it (the folder's sticky bit keeps other users from it)",
      file.st_uid);
}

namespace {

// BASE or BASE.UID (digits).
bool is_user_record(const std::string& name, const char* base) {
  const std::string user = std::string(base) + ".";
  return name == base || (name.size() > user.size() && name.rfind(user, 0) == 0 &&
                          name.find_first_not_of("0123456789", user.size()) == std::string::npos);
}

}  // namespace

bool is_journal_name(const std::string& name) {
  return is_user_record(name, kJournalName);
}

bool is_record_name(const std::string& name) {
  return name == kManifestName || name == kManifestBackupName || is_user_record(name, kWrittenName) ||
         is_journal_name(name);
}

bool side_name_of(const std::string& side, const std::string& name, const std::string& kind) {
  // ".NAME<kind>PID.N", NAME cut short when the whole would pass 255 bytes (fresh_name_at, temp_name_for).
  const size_t at = side.rfind(kind);
  if (side.size() < 2 || side[0] != '.' || at == std::string::npos || at < 2) return false;
  const std::string base = side.substr(1, at - 1);
  const std::string rest = side.substr(at + kind.size());
  const size_t dot = rest.find('.');
  const auto digits = [](const std::string& d) {
    return !d.empty() && d.find_first_not_of("0123456789") == std::string::npos;
  };
  if (dot == std::string::npos || !digits(rest.substr(0, dot)) || !digits(rest.substr(dot + 1))) return false;
  return base == name || (side.size() == 255 && name.rfind(base, 0) == 0);
}

bool valid_record_path(const std::string& rel) {
  if (rel.empty() || rel.size() > 4096 || rel.front() == '/' || rel.find('\0') != std::string::npos)
    return false;
  size_t start = 0;
  while (start <= rel.size()) {
    const size_t slash = std::min(rel.find('/', start), rel.size());
    const std::string_view c(rel.data() + start, slash - start);
    if (c.empty() || c == "." || c == ".." || c.size() > 255) return false;
    start = slash + 1;
  }
  return true;
}

Manifest parse_manifest(const std::string& text, const std::string& name) {
  Manifest m;
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text[first] != '{') {
    // An older trnsim's: one relative path per line. Its files are never removed on its word.
    m.version = 1;
    std::set<std::string> seen;
    size_t start = 0;
    while (start < text.size()) {
      const size_t end = std::min(text.find('\n', start), text.size());
      const std::string line = text.substr(start, end - start);
      start = end + 1;
      if (line.empty()) continue;
      if (!valid_record_path(line))
        throw InputError(fmt::format("{}: '{}' is not a path inside the folder", name, text_excerpt(line)));
      if (seen.insert(line).second) m.files.push_back({line});
    }
    return m;
  }
  const json doc = parse_json_document(text, name);
  const Reader r(name);
  if (!doc.is_object()) r.fail("(top level)", "expected an object, found " + json_excerpt(doc));
  // The layout first: a newer trnsim's record is named as such, whatever keys it holds.
  const json* layout = doc.contains("trnsim_files") ? &doc["trnsim_files"] : nullptr;
  if (layout != nullptr && layout->is_number_integer() && *layout > kRecordLayout)
    throw NewerRecordError(fmt::format(
        "{}: written by a newer trnsim (record layout {}; this trnsim reads layouts 1 to {}): it is kept as "
        "it is; write into this folder with that trnsim, which settles its set, or remove the record (the "
        "files it names then stay as they are)",
        name, json_excerpt(*layout), kRecordLayout));
  if (layout == nullptr || !(*layout == 2 || *layout == 3))
    r.fail("trnsim_files", fmt::format("expected 2 or 3 (the record's layout), found {}",
                                       layout != nullptr ? json_excerpt(*layout) : "nothing"));
  m.version = layout->get<int>();
  r.keys(doc, "", {"trnsim_files", "state", "files", "previous", "set", "others", "written_by"});
  const std::string state = r.text(doc, "state", "", true);
  if (state != "complete" && state != "writing")
    r.fail("state",
           fmt::format("expected \"complete\" or \"writing\", found {}", json_excerpt(doc["state"])));
  m.complete = state == "complete";
  m.files = r.entries(doc, "files", !m.complete);
  m.previous = r.entries(doc, "previous", false);
  for (const char* key : {"set", "others", "written_by"})
    if (m.complete && doc.contains(key)) r.fail(key, "only a record in state \"writing\" has one");
  m.written_by = r.text(doc, "written_by", "", false);
  if (m.written_by.size() > 64 ||
      m.written_by.find_first_not_of("abcdefghijklmnopqrstuvwxyz- ") != std::string::npos)
    r.fail("written_by", "expected a command's name (up to 64 of a-z, '-' and spaces), found " +
                             json_excerpt(doc["written_by"]));
  m.set = r.text(doc, "set", "", doc.contains("others"));
  if (doc.contains("set") &&
      (m.set.empty() || m.set.size() > 128 ||
       m.set.find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyz.") != std::string::npos))
    r.fail("set",
           "expected an identifier (up to 128 of 0-9, a-z and '.'), found " + json_excerpt(doc["set"]));
  if (doc.contains("others")) {
    const json& a = doc["others"];
    if (!a.is_array()) r.fail("others", "expected a list, found " + json_excerpt(a));
    std::set<std::string> folders;
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string at = fmt::format("others[{}]", i);
      const json& o = a[i];
      if (!o.is_object()) r.fail(at, "expected an object, found " + json_excerpt(o));
      r.keys(o, at, {"folder", "record", "files"});
      OtherRecord other;
      other.folder = r.text(o, "folder", at, true);
      const fs::path f(other.folder);
      if (other.folder.size() > 4096 || other.folder.find('\0') != std::string::npos || !f.is_absolute() ||
          f.lexically_normal().string() != other.folder ||
          (other.folder.size() > 1 && other.folder.back() == '/'))
        r.fail(at + ".folder",
               fmt::format("'{}' is not an absolute, normalised folder path", text_excerpt(other.folder)));
      if (!folders.insert(other.folder).second)
        r.fail(at + ".folder", fmt::format("'{}' is listed twice", text_excerpt(other.folder)));
      other.record = r.text(o, "record", at, true);
      if (other.record != kManifestName && !is_journal_name(other.record))
        r.fail(at + ".record", fmt::format("expected \"{}\", \"{}\" or \"{}.UID\", found {}", kManifestName,
                                           kJournalName, kJournalName, json_excerpt(o["record"])));
      other.files = r.entries(o, "files", true, at);
      m.others.push_back(std::move(other));
    }
  }
  return m;
}

std::string manifest_text(const Manifest& m) {
  json files = json::array(), previous = json::array();
  for (const ManifestEntry& e : m.files) files.push_back(entry_json(e, !m.complete));
  for (const ManifestEntry& e : m.previous) previous.push_back(entry_json(e, false));
  // The lowest layout that holds the record (manifest.h): 3 only for "written_by".
  const bool written_by = !m.complete && !m.written_by.empty();
  json j = {
      {"trnsim_files", written_by ? 3 : 2}, {"state", m.complete ? "complete" : "writing"}, {"files", files}};
  if (!m.complete || !m.previous.empty()) j["previous"] = previous;
  if (!m.complete && !m.set.empty()) j["set"] = m.set;
  if (written_by) j["written_by"] = m.written_by;
  if (!m.complete && !m.others.empty()) {
    json others = json::array();
    for (const OtherRecord& o : m.others) {
      json files = json::array();
      for (const ManifestEntry& e : o.files) files.push_back(entry_json(e, true));
      others.push_back({{"folder", o.folder}, {"record", o.record}, {"files", files}});
    }
    j["others"] = others;
  }
  return j.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::optional<Manifest> read_manifest_at(int dir_fd, const std::string& name, const std::string& shown,
                                         unsigned* owner) {
  const auto refuse = [&](const std::string& what) {
    throw InputError(
        fmt::format("{}: {}; trnsim keeps its record of the files it wrote in the folder there ({})", shown,
                    what, removal_advice(dir_fd, name)));
  };
  const int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return std::nullopt;
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      if (S_ISLNK(st.st_mode)) refuse("is a symlink");
      if (S_ISDIR(st.st_mode)) refuse("is a directory");
    }
    throw InputError(fmt::format("{}: cannot open: {}", shown, std::strerror(err)));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw InputError(fmt::format("{}: cannot read: {}", shown, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) refuse("is a directory");
  if (!S_ISREG(st.st_mode)) refuse(kNotARegularFile);
  if (owner) *owner = static_cast<unsigned>(st.st_uid);
  if (static_cast<uint64_t>(st.st_size) > kMaxRecordBytes)
    throw InputError(
        fmt::format("{}: {} bytes: too large for trnsim's record of the files it wrote", shown, st.st_size));
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t have = 0;
  while (have < text.size()) {
    const ssize_t n = ::pread(fd, text.data() + have, text.size() - have, static_cast<off_t>(have));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(fmt::format("{}: cannot read: {}", shown, std::strerror(errno)));
    if (n == 0) break;
    have += static_cast<size_t>(n);
  }
  text.resize(have);
  return parse_manifest(text, shown);
}

}  // namespace trnsim::io
