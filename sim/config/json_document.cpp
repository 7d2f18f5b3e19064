#include "sim/config/json_document.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "sim/base/error.h"
#include "sim/base/json_excerpt.h"
#include "sim/io/file_kind.h"

namespace trnsim::config {
namespace {

using nlohmann::json;

// Tracks the JSON path and the keys seen in each open object while the parser streams events.
class Guard {
 public:
  explicit Guard(std::string name) : name_(std::move(name)) {}

  bool event(int depth, json::parse_event_t ev, json& parsed) {
    switch (ev) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= kMaxJsonDepth)
          throw InputError(
              fmt::format("{}: {}: nested deeper than {} levels", name_, nesting_start(), kMaxJsonDepth));
        frames_.push_back({ev == json::parse_event_t::object_start, {}, "", 0});
        break;
      case json::parse_event_t::key: {
        Frame& f = frames_.back();
        const std::string key = parsed.get<std::string>();
        f.current.clear();  // messages about the key itself name the object that holds it
        if (key.size() > kMaxJsonKeyBytes)
          throw InputError(fmt::format("{}: {}: key '{}' has {} bytes (keys have at most {})", name_, path(),
                                       text_excerpt(key), key.size(), kMaxJsonKeyBytes));
        if (std::any_of(key.begin(), key.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }))
          throw InputError(
              fmt::format("{}: {}: key '{}' holds a control character", name_, path(), text_excerpt(key)));
        f.current = key;
        if (!f.keys.insert(key).second)
          throw InputError(fmt::format("{}: {}: key appears twice in one object", name_, path()));
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        frames_.pop_back();
        advance();
        break;
      case json::parse_event_t::value:
        advance();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string current;
    size_t index;
  };
  void advance() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
  }
  std::string path() const {
    std::string p;
    for (const Frame& f : frames_) {
      if (f.object) {
        if (!f.current.empty()) p += (p.empty() ? "" : ".") + f.current;
      } else {
        p += fmt::format("[{}]", f.index);
      }
    }
    return p.empty() ? "(top level)" : p;
  }
  // The path of the value where a run of nested arrays starts (its trailing [0][0]... dropped), cut to an
  // excerpt: a value nested too deep is named by the key that holds it.
  std::string nesting_start() const {
    std::string p = path();
    while (!p.empty() && p.back() == ']') {
      const size_t open = p.rfind('[');
      if (open == std::string::npos || open == 0) break;
      p.resize(open);
    }
    if (p.front() == '[') p = "(top level)";
    return text_excerpt(p, 120);
  }
  std::string name_;
  std::vector<Frame> frames_;
};

// The parser's message without the library's "[json.exception...]" prefix, and with the token it quotes
// (the last token read, or a number that overflows a double) cut to an excerpt: it may be a whole string.
std::string parser_message(const json::exception& e) {
  std::string what = e.what();
  if (what.rfind("[json.exception.", 0) == 0 && what.find("] ") != std::string::npos)
    what = what.substr(what.find("] ") + 2);
  const size_t open = what.find('\'');
  const size_t close = what.rfind('\'');
  if (open == std::string::npos || close <= open) return what;
  return what.substr(0, open + 1) + text_excerpt(what.substr(open + 1, close - open - 1)) +
         what.substr(close);
}

}  // namespace

json parse_json_document(const std::string& text, const std::string& name) {
  Guard g(name);
  try {
    return json::parse(
        text, [&g](int depth, json::parse_event_t ev, json& parsed) { return g.event(depth, ev, parsed); });
  } catch (const json::parse_error& e) {
    throw InputError(fmt::format("{}: not valid JSON: {}", name, parser_message(e)));
  } catch (const json::out_of_range& e) {  // a number beyond the range of a double, e.g. 1e400
    throw InputError(fmt::format("{}: not valid JSON: {}", name, parser_message(e)));
  }
}

std::optional<json> parse_json_value(const std::string& text, const std::string& name) {
  Guard g(name);
  try {
    return json::parse(
        text, [&g](int depth, json::parse_event_t ev, json& parsed) { return g.event(depth, ev, parsed); });
  } catch (const json::parse_error&) {  // not JSON: a bare word
    return std::nullopt;
  } catch (const json::out_of_range& e) {  // a number beyond the range of a double, e.g. 1e400
    throw InputError(fmt::format("{}: not valid JSON: {}", name, parser_message(e)));
  }
}

json read_json_document(const std::string& path) {
  switch (io::file_kind(path)) {
    case io::FileKind::kMissing:
      throw InputError(path + ": no such file");
    case io::FileKind::kDirectory:
      throw InputError(path + ": is a directory, expected a JSON file");
    case io::FileKind::kSpecial:
      throw InputError(path + ": " + io::kNotARegularFile + ", expected a JSON file");
    case io::FileKind::kRegular:
      break;
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path + ": cannot open");
  std::ostringstream s;
  s << f.rdbuf();
  if (f.bad()) throw InputError(path + ": cannot read");
  return parse_json_document(s.str(), path);
}

}  // namespace trnsim::config
