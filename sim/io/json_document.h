// Reading JSON documents the user wrote (workloads, hardware configs, programs, stats.json, the output
// folder's manifest): one reader with the same rules everywhere, in one pass over the text (time linear in
// its size, whatever its shape).
//   - A file that is missing, a directory, a FIFO or device, or unreadable: InputError "<path>: ..."
//     (read_regular_file).
//   - A NUL byte anywhere: InputError "<path>: not valid JSON: a NUL byte at byte offset N (line L)" (the
//     parser would take it for the end of the text and ignore what follows).
//   - Invalid JSON: InputError "<path>: not valid JSON: <parser message with the byte offset>".
//   - A key that appears twice in one object: InputError "<path>: <json path>: key appears twice" (JSON
//     allows it, but the second value would silently win).
//   - Nesting deeper than kMaxJsonDepth: InputError "<path>: <json path>: nested deeper than 64 levels"
//     (the parser is iterative, but printing or walking such a value recursively would exhaust the stack).
//   - A key longer than kMaxJsonKeyBytes or holding a control character (U+0000..U+001F): InputError
//     "<path>: <json path>: key '...' has 300 bytes (keys have at most 256)" / "... holds a control
//     character" (keys are names; they appear in every message about the values under them).
//   - An integer beyond int64 (at or above 2^63, or below -2^63): InputError "<path>: <json path>: the
//     integer 18446744073709551615 is out of range (...)", quoting it as written (it would otherwise wrap to
//     a negative value or turn into a rounded double).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace trnsim::io {

inline constexpr int kMaxJsonDepth = 64;
inline constexpr size_t kMaxJsonKeyBytes = 256;

nlohmann::json read_json_document(const std::string& path);
// `name` stands for the path in messages.
nlohmann::json parse_json_document(const std::string& text, const std::string& name);
// A value written on the command line (--set path=VALUE): JSON under the same depth and key rules
// (InputError "<name>: ..."), or std::nullopt when `text` is not JSON at all (a bare word).
std::optional<nlohmann::json> parse_json_value(const std::string& text, const std::string& name);

}  // namespace trnsim::io
