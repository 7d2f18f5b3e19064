#include "sim/config/json_document.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "sim/base/error.h"

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
          throw InputError(fmt::format("{}: {}: nested deeper than {} levels", name_, path(), kMaxJsonDepth));
        frames_.push_back({ev == json::parse_event_t::object_start, {}, "", 0});
        break;
      case json::parse_event_t::key: {
        Frame& f = frames_.back();
        const std::string key = parsed.get<std::string>();
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
  std::string name_;
  std::vector<Frame> frames_;
};

}  // namespace

json parse_json_document(const std::string& text, const std::string& name) {
  Guard g(name);
  try {
    return json::parse(
        text, [&g](int depth, json::parse_event_t ev, json& parsed) { return g.event(depth, ev, parsed); });
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    const size_t cut = what.find("parse error");
    throw InputError(
        fmt::format("{}: not valid JSON: {}", name, cut == std::string::npos ? what : what.substr(cut)));
  }
}

json read_json_document(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw InputError(path + ": is a directory, expected a JSON file");
  if (!fs::exists(path, ec)) throw InputError(path + ": no such file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path + ": cannot open");
  std::ostringstream s;
  s << f.rdbuf();
  if (f.bad()) throw InputError(path + ": cannot read");
  return parse_json_document(s.str(), path);
}

}  // namespace trnsim::config
