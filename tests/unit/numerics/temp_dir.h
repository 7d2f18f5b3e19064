// A scratch folder for tests that write files: made fresh, removed with everything in it.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace trnsim::test_util {

struct TempDir {
  std::filesystem::path dir;
  explicit TempDir(const std::string& prefix = "trnsim_test_") {
    static int n = 0;
    dir = std::filesystem::temp_directory_path() /
          (prefix + std::to_string(::getpid()) + "_" + std::to_string(n++));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~TempDir() { std::filesystem::remove_all(dir); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (dir / name).string(); }
  // The names in the folder (not below it), sorted, hidden ones too.
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

}  // namespace trnsim::test_util
