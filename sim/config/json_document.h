// Reading JSON documents the user wrote (workloads, hardware configs, programs, stats.json): one reader
// with the same rules everywhere.
//   - A file that is missing, a directory or unreadable: InputError "<path>: ...".
//   - Invalid JSON: InputError "<path>: not valid JSON: <parser message with the byte offset>".
//   - A key that appears twice in one object: InputError "<path>: <json path>: key appears twice" (JSON
//     allows it, but the second value would silently win).
//   - Nesting deeper than kMaxJsonDepth: InputError "<path>: <json path>: nested deeper than 64 levels"
//     (the parser is iterative, but printing or walking such a value recursively would exhaust the stack).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace trnsim::config {

inline constexpr int kMaxJsonDepth = 64;

nlohmann::json read_json_document(const std::string& path);
// `name` stands for the path in messages.
nlohmann::json parse_json_document(const std::string& text, const std::string& name);

}  // namespace trnsim::config
