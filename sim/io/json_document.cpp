#include "sim/io/json_document.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "sim/base/error.h"
#include "sim/base/json_excerpt.h"
#include "sim/io/file_kind.h"

namespace trnsim::io {
namespace {

using nlohmann::json;

// A parse error the SAX parser reported: the library's exception (id 406: a number beyond a double).
struct SyntaxError {
  int id = 0;
  std::string message;
};

// The parser's message without the library's "[json.exception...]" prefix, and with the token it quotes
// (the last token read, or a number that overflows a double) cut to an excerpt: it may be a whole string.
std::string parser_message(const std::string& full) {
  std::string what = full;
  if (what.rfind("[json.exception.", 0) == 0 && what.find("] ") != std::string::npos)
    what = what.substr(what.find("] ") + 2);
  const size_t open = what.find('\'');
  const size_t close = what.rfind('\'');
  if (open == std::string::npos || close <= open) return what;
  return what.substr(0, open + 1) + text_excerpt(what.substr(open + 1, close - open - 1)) +
         what.substr(close);
}

// Builds the document from the parser's events in one pass (each event does constant work besides the
// key lookup in its object), checking as it goes: the nesting depth, every key (length, control
// characters, duplicates) and every integer (within int64). The JSON path of the value being read names
// what a message is about.
class Builder {
 public:
  Builder(json& root, std::string name, bool value) : root_(root), name_(std::move(name)), value_(value) {}

  bool null() { return put(json(nullptr)); }
  bool boolean(bool v) { return put(json(v)); }
  bool number_integer(json::number_integer_t v) { return put(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) {
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) out_of_range(std::to_string(v));
    return put(json(v));
  }
  bool number_float(json::number_float_t v, const std::string& token) {
    // An integer literal the parser could not hold in 64 bits (it falls back to a double).
    if (token.find_first_of(".eE") == std::string::npos) out_of_range(token);
    return put(json(v));
  }
  bool string(std::string& v) { return put(json(std::move(v))); }
  bool binary(json::binary_t&) { return put(json(nullptr)); }  // not produced by the JSON parser
  bool start_object(size_t) { return open(json::object(), true); }
  bool start_array(size_t) { return open(json::array(), false); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(std::string& k) {
    Frame& f = frames_.back();
    f.key.clear();  // messages about the key itself name the object that holds it
    if (k.size() > kMaxJsonKeyBytes)
      fail(fmt::format("key '{}' has {} bytes (keys have at most {})", text_excerpt(k), k.size(),
                       kMaxJsonKeyBytes));
    if (std::any_of(k.begin(), k.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }))
      fail(fmt::format("key '{}' holds a control character", text_excerpt(k)));
    f.key = k;
    if (f.value->contains(k)) fail("key appears twice in one object");
    slot_ = &(*f.value)[k];
    return true;
  }
  bool parse_error(size_t, const std::string&, const json::exception& e) {
    error_ = SyntaxError{e.id, e.what()};
    return false;
  }
  const std::optional<SyntaxError>& error() const { return error_; }

 private:
  struct Frame {
    json* value;
    bool object;
    std::string key;   // the key being read (objects)
    size_t index = 0;  // the element being read (arrays)
  };

  // Stores a value where the parser is (the top level, the next array element, the current key's slot).
  json* place(json&& v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = frames_.back();
    if (!f.object) {
      f.value->push_back(std::move(v));
      return &f.value->back();
    }
    *slot_ = std::move(v);
    return slot_;
  }
  bool put(json&& v) {
    place(std::move(v));
    advance();
    return true;
  }
  bool open(json&& v, bool object) {
    if (frames_.size() >= static_cast<size_t>(kMaxJsonDepth))
      throw InputError(
          fmt::format("{}: {}: nested deeper than {} levels", name_, nesting_start(), kMaxJsonDepth));
    json* at = place(std::move(v));
    frames_.push_back({at, object, "", 0});
    return true;
  }
  bool close() {
    frames_.pop_back();
    advance();
    return true;
  }
  void advance() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
  }
  [[noreturn]] void out_of_range(const std::string& literal) {
    fail(fmt::format("the integer {} is out of range (integers are read as 64-bit signed: at most {})",
                     text_excerpt(literal), std::numeric_limits<int64_t>::max()));
  }
  [[noreturn]] void fail(const std::string& what) const {
    // A value from the command line is named by its --set path already: no "(top level)" after it.
    if (value_ && frames_.empty()) throw InputError(fmt::format("{}: {}", name_, what));
    throw InputError(fmt::format("{}: {}: {}", name_, path(), what));
  }
  std::string path() const {
    std::string p;
    for (const Frame& f : frames_) {
      if (f.object) {
        if (!f.key.empty()) p += (p.empty() ? "" : ".") + f.key;
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

  json& root_;
  std::string name_;
  bool value_;  // a value given on the command line, not a document
  std::vector<Frame> frames_;
  json* slot_ = nullptr;  // the value of the key just read
  std::optional<SyntaxError> error_;
};

// Parses `text`; nullopt with the syntax error when it is not JSON. InputError for the checks above and for
// a NUL byte (the parser would take it for the end of the text and ignore the rest).
std::optional<SyntaxError> parse(const std::string& text, const std::string& name, json& out, bool value) {
  if (const void* nul = std::memchr(text.data(), '\0', text.size())) {
    const size_t at = static_cast<size_t>(static_cast<const char*>(nul) - text.data());
    const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + at, '\n'));
    throw InputError(
        fmt::format("{}: not valid JSON: a NUL byte at byte offset {} (line {})", name, at, line));
  }
  Builder b(out, name, value);
  json::sax_parse(text, &b);
  return b.error();
}

}  // namespace

json parse_json_document(const std::string& text, const std::string& name) {
  json doc;
  if (const std::optional<SyntaxError> e = parse(text, name, doc, false))
    throw InputError(fmt::format("{}: not valid JSON: {}", name, parser_message(e->message)));
  return doc;
}

std::optional<json> parse_json_value(const std::string& text, const std::string& name) {
  json doc;
  const std::optional<SyntaxError> e = parse(text, name, doc, true);
  if (!e) return doc;
  if (e->id == 406)  // a number beyond the range of a double, e.g. 1e400
    throw InputError(fmt::format("{}: not valid JSON: {}", name, parser_message(e->message)));
  return std::nullopt;  // not JSON: a bare word
}

json read_json_document(const std::string& path) {
  return parse_json_document(read_regular_file(path, "a JSON file"), path);
}

}  // namespace trnsim::io
