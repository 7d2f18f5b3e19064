// Short, bounded descriptions of user data for error messages: never more than about 60 characters and never
// a recursive walk (a value nested 100,000 deep or a string of a megabyte must not crash or flood the message
// that rejects it).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace trnsim {

// A JSON value: "an array of 1000000 elements", "an object with 3 keys", or the value as JSON text, cut to
// 60 characters ("..." marks a cut). Bytes that are not UTF-8 print as U+FFFD.
inline std::string json_excerpt(const nlohmann::json& v) {
  if (v.is_array())
    return "an array of " + std::to_string(v.size()) + (v.size() == 1 ? " element" : " elements");
  if (v.is_object()) return "an object with " + std::to_string(v.size()) + (v.size() == 1 ? " key" : " keys");
  if (v.is_string() && v.get_ref<const std::string&>().size() > 240)  // dump only what can be shown
    return json_excerpt(nlohmann::json(v.get_ref<const std::string&>().substr(0, 240)));
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

// Like json_excerpt, but a small array or object is shown as compact JSON text when that fits in 60
// characters ("[32,1e-300]"). It is printed only after an iterative walk of at most 60 values has shown it
// is small (printing is recursive).
inline std::string short_json(const nlohmann::json& v) {
  constexpr size_t kMax = 60;
  if (!v.is_structured()) return json_excerpt(v);
  size_t values = 0, text = 0;
  std::vector<const nlohmann::json*> todo{&v};
  while (!todo.empty() && values <= kMax && text <= kMax) {
    const nlohmann::json* x = todo.back();
    todo.pop_back();
    ++values;
    if (x->is_structured())
      for (const auto& e : *x) todo.push_back(&e);
    if (x->is_string()) text += x->get_ref<const std::string&>().size();
  }
  if (todo.empty() && values <= kMax && text <= kMax) {
    std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (s.size() <= kMax) return s;
  }
  return json_excerpt(v);
}

// A name or word the user wrote, for quoting in a message ('...'): itself when it has at most `max_bytes`
// bytes and no control characters; else control characters escaped (\n, \x00) and the text cut to
// `max_bytes` at a character boundary, with "..." marking the cut.
inline std::string text_excerpt(std::string_view s, size_t max_bytes = 60) {
  const size_t kMax = max_bytes;
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (out.size() >= kMax) {
      // Back up to the start of a UTF-8 character, so a cut never splits one.
      while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
      if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
      return out + "...";
    }
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace trnsim
