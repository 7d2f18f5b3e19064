#include "sim/io/output_files.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>

#include "sim/base/error.h"

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

std::string temp_path_for(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  fs::path p(path);
  std::string base = ".";
  base += p.filename().string();
  base += ".tmp.";
  base += std::to_string(::getpid());
  base += '.';
  base += std::to_string(counter.fetch_add(1));
  return (p.parent_path() / base).string();
}

void check_output_path(const std::string& path) {
  if (path.empty()) throw InputError("output path is empty");
  std::error_code ec;
  std::string dir = dir_of(path);
  if (!fs::is_directory(dir, ec)) fail(path, "cannot write: directory '" + dir + "' does not exist");
  if (fs::is_directory(path, ec)) fail(path, "cannot write: it is a directory");
}

// Writes the image to a fresh temporary next to `path` and returns the temporary's name.
std::string write_temp(const std::string& path, const std::vector<uint8_t>& image) {
  check_output_path(path);
  std::string tmp = temp_path_for(path);
  std::FILE* raw = std::fopen(tmp.c_str(), "wb");
  if (!raw) fail(path, "cannot write: " + errno_text());
  bool ok = std::fwrite(image.data(), 1, image.size(), raw) == image.size();
  std::string why = ok ? "" : errno_text();
  if (std::fclose(raw) != 0 && ok) {
    ok = false;
    why = errno_text();
  }
  if (!ok) {
    std::remove(tmp.c_str());
    fail(path, "cannot write: " + why);
  }
  return tmp;
}

}  // namespace

void write_files_atomic(const std::vector<OutputFile>& files) {
  std::set<fs::path> paths;
  for (const auto& o : files) {
    check_output_path(o.path);
    if (!paths.insert(fs::absolute(o.path).lexically_normal()).second)
      fail(o.path, "the same output path is given twice");
  }
  std::vector<std::string> temps;
  auto remove_temps = [&temps] {
    for (const auto& t : temps) std::remove(t.c_str());
  };
  try {
    for (const auto& o : files) temps.push_back(write_temp(o.path, o.bytes));
  } catch (...) {
    remove_temps();
    throw;
  }
  // All temporaries are complete; renames within one directory do not fail short of a vanished directory.
  for (size_t i = 0; i < files.size(); ++i) {
    if (std::rename(temps[i].c_str(), files[i].path.c_str()) != 0) {
      std::string why = errno_text();
      for (size_t j = i; j < temps.size(); ++j) std::remove(temps[j].c_str());
      fail(files[i].path, "cannot write: " + why);
    }
  }
}

}  // namespace trnsim::io
