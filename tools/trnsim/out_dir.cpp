#include "tools/trnsim/out_dir.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "sim/base/error.h"

namespace trnsim::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kManifest = ".trnsim-files";

std::string relative_to(const std::string& dir, const std::string& path) {
  return fs::path(path).lexically_relative(dir).lexically_normal().string();
}

// InputError unless a file can be created in `dir` (an unwritable folder is found now, not after the run).
void probe_writable(const std::string& dir, const std::string& what) {
  const fs::path probe = fs::path(dir) / fmt::format(".trnsim-probe.{}", ::getpid());
  std::FILE* f = std::fopen(probe.c_str(), "wbx");
  if (f == nullptr)
    throw InputError(fmt::format("{}: cannot write into the directory ({})", what, std::strerror(errno)));
  std::fclose(f);
  std::error_code ec;
  fs::remove(probe, ec);
}

}  // namespace

OutDir::OutDir(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  if (fs::exists(dir_, ec) && !fs::is_directory(dir_, ec))
    throw InputError(fmt::format("--out {}: exists and is not a directory", dir_));
  if (!fs::exists(dir_, ec)) {
    // Every missing level (--out a/b/c), outermost first: each is removed again if the run leaves it empty.
    fs::path p = fs::path(dir_).lexically_normal();
    if (!p.has_filename()) p = p.parent_path();
    std::vector<fs::path> missing;
    for (; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
      missing.push_back(p);
      if (p == p.parent_path()) break;
    }
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
      on_signal_.emplace_back(it->string(), interrupt::CleanupPath::Kind::kEmptyFolder);
      fs::create_directory(*it, ec);
      if (ec) {
        remove_created();
        throw InputError(fmt::format("--out {}: cannot create the directory ({})", dir_, ec.message()));
      }
      created_.push_back(it->string());
    }
  }
  probe_writable(dir_, "--out " + dir_);
  std::ifstream m(fs::path(dir_) / kManifest);
  for (std::string line; std::getline(m, line);)
    if (!line.empty()) previous_.push_back(line);
  if (!previous_.empty()) previous_time_ = fs::last_write_time(fs::path(dir_) / kManifest, ec);
}

OutDir::~OutDir() {
  remove_created();
}

void OutDir::remove_created() {
  std::error_code ec;
  for (auto it = created_.rbegin(); it != created_.rend(); ++it)
    if (fs::is_empty(*it, ec)) fs::remove(*it, ec);
  created_.clear();
}

void OutDir::add_subfolder(const std::string& name) {
  const std::string sub = (fs::path(dir_) / name).string();
  const std::string what = fmt::format("--out {}: {}", dir_, name);
  std::error_code ec;
  if (fs::exists(sub, ec) && !fs::is_directory(sub, ec))
    throw InputError(what + ": exists and is not a directory");
  if (!fs::exists(sub, ec)) {
    fs::create_directory(sub, ec);
    if (ec) throw InputError(fmt::format("{}: cannot create the directory ({})", what, ec.message()));
    created_.push_back(sub);
    on_signal_.emplace_back(sub, interrupt::CleanupPath::Kind::kEmptyFolder);
  }
  probe_writable(sub, what);
}

io::OutputFile OutDir::manifest(const std::vector<io::OutputFile>& files) const {
  std::string text;
  for (const io::OutputFile& f : files) text += relative_to(dir_, f.path) + "\n";
  return {(fs::path(dir_) / kManifest).string(), std::vector<uint8_t>(text.begin(), text.end())};
}

std::vector<std::string> OutDir::remove_stale(const std::vector<io::OutputFile>& files,
                                              const std::vector<std::string>& read) {
  std::set<std::string> now;
  for (const io::OutputFile& f : files) now.insert(relative_to(dir_, f.path));
  std::vector<std::string> removed;
  for (const std::string& rel : previous_) {
    // Only plain relative paths inside the folder, as a manifest this program wrote holds.
    if (rel.empty() || fs::path(rel).is_absolute() || rel.find("..") != std::string::npos || now.count(rel))
      continue;
    const fs::path p = fs::path(dir_) / rel;
    std::error_code ec;
    if (fs::is_symlink(p, ec) || !fs::is_regular_file(p, ec)) continue;
    if (std::any_of(read.begin(), read.end(), [&](const std::string& r) { return fs::equivalent(p, r, ec); }))
      continue;
    // The earlier run wrote its files before its manifest: a newer one was changed since, by someone else.
    if (const auto t = fs::last_write_time(p, ec); !ec && t > previous_time_) continue;
    if (fs::remove(p, ec)) removed.push_back(p.string());
    const fs::path parent = p.parent_path();
    if (parent != fs::path(dir_) && fs::is_empty(parent, ec)) fs::remove(parent, ec);
  }
  return removed;
}

}  // namespace trnsim::cli
