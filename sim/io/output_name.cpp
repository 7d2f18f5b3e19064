#include "sim/io/output_name.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "sim/base/error.h"
#include "sim/base/json_excerpt.h"

namespace trnsim::io {

std::string output_name_problem(const std::string& name) {
  const auto plain = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  };
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  const bool ok = !name.empty() && name.size() <= kMaxOutputNameBytes && name[0] != '-' &&
                  std::all_of(name.begin(), name.end(), plain) && lower != "stats" && lower != "host" &&
                  lower != "chain_stats";
  if (ok) return "";
  return fmt::format(
      "is written as OUT/<name>.npy, so a name is 1 to {} letters, digits, '_' and '-' (no '/', '.' or "
      "leading '-') and not one of stats, host, chain_stats",
      kMaxOutputNameBytes);
}

void check_output_name(const std::string& where, const std::string& name) {
  const std::string problem = output_name_problem(name);
  if (!problem.empty())
    throw InputError(fmt::format("{}: output '{}' {}", where, text_excerpt(name), problem));
}

std::string folder_name_problem(const std::string& name) {
  const bool printable = std::all_of(
      name.begin(), name.end(), [](char ch) { return static_cast<unsigned char>(ch) >= 0x20 && ch != 0x7F; });
  if (!name.empty() && name.size() <= 200 && printable && name.find('/') == std::string::npos &&
      name[0] != '.')
    return "";
  return "is not usable as a directory name (1-200 bytes of printable characters, no '/', not starting with "
         "'.': the default output folder is out/<name>, and names starting with '.' are trnsim's hidden "
         "records and temporaries)";
}

std::string output_npy_path(const std::string& dir, const std::string& name, const std::string& where) {
  check_output_name(where, name);
  return (std::filesystem::path(dir) / (name + ".npy")).string();
}

}  // namespace trnsim::io
