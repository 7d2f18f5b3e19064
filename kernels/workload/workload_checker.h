// The error reporting the workload reader and preparation share: an InputError "<file>: <JSON path>: <what
// is wrong>", unknown keys, expected strings. Internal to kernels/workload.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/base/error.h"
#include "sim/base/json_excerpt.h"

namespace trnsim::workload {

class Checker {
 public:
  explicit Checker(std::string file) : file_(std::move(file)) {}
  [[noreturn]] void fail(const std::string& path, const std::string& msg) const {
    throw InputError(path.empty() ? fmt::format("{}: {}", file_, msg)
                                  : fmt::format("{}: {}: {}", file_, path, msg));
  }
  void keys(const nlohmann::json& obj, const std::string& path,
            const std::vector<std::string>& allowed) const {
    for (const auto& [k, v] : obj.items())
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end())
        fail(join(path, k), fmt::format("unknown key (expected {})", fmt::join(allowed, ", ")));
  }
  std::string string(const nlohmann::json& v, const std::string& path) const {
    if (!v.is_string()) fail(path, "expected a string, found " + json_excerpt(v));
    return v.get<std::string>();
  }
  static std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

 private:
  std::string file_;
};

}  // namespace trnsim::workload
