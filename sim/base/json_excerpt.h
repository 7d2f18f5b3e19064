// A short, bounded description of a JSON value for error messages: never more than about 60 characters and
// never a recursive walk (a value nested 100,000 deep must not crash the message that rejects it).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace trnsim {

inline std::string json_excerpt(const nlohmann::json& v) {
  if (v.is_array()) return "an array of " + std::to_string(v.size()) + " elements";
  if (v.is_object()) return "an object with " + std::to_string(v.size()) + " keys";
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

}  // namespace trnsim
