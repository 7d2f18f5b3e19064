#include "sim/io/made_folders.h"

#include <fmt/format.h>

#include <filesystem>
#include <system_error>

#include "sim/base/error.h"

namespace trnsim::io {

namespace fs = std::filesystem;

void check_no_dangling_link(const std::string& dir, const std::string& what) {
  std::error_code ec;
  fs::path p = fs::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  // Up to the first level that is there: a level that is a link to nothing stops mkdir ("File exists").
  for (; !p.empty(); p = p.parent_path()) {
    if (fs::exists(p, ec)) return;
    if (fs::is_symlink(fs::symlink_status(p, ec)))
      throw InputError(fmt::format(
          "{}: {} is a symlink to {}, which does not exist (a dangling link): trnsim does not create folders "
          "through links; create the target folder or remove the link",
          what, p.string(), fs::read_symlink(p, ec).string()));
    if (p == p.parent_path()) return;
  }
}

void MadeFolders::make(const std::string& dir, const std::string& what) {
  check_no_dangling_link(dir, what);
  std::error_code ec;
  fs::path p = fs::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  std::vector<fs::path> missing;
  for (; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    interrupt::CleanupPath registered(it->string(), interrupt::CleanupPath::Kind::kEmptyFolder);
    // Another process may make the same level at the same time: only the one that made it removes it.
    const bool made = fs::create_directory(*it, ec);
    if (ec) {
      remove_empty();
      throw InputError(fmt::format("{}: cannot create the directory ({})", what, ec.message()));
    }
    if (!made) continue;
    on_signal_.push_back(std::move(registered));
    made_.push_back(it->string());
  }
}

MadeFolders::~MadeFolders() {
  remove_empty();
}

void MadeFolders::remove_empty() {
  std::error_code ec;
  for (auto it = made_.rbegin(); it != made_.rend(); ++it)
    if (fs::is_empty(*it, ec)) fs::remove(*it, ec);
  made_.clear();
}

void MadeFolders::disown() {
  made_.clear();
  on_signal_.clear();
}

}  // namespace trnsim::io
