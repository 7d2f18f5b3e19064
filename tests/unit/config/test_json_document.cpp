// The JSON reader every user-written document goes through (sim/io/json_document.h).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "sim/base/error.h"
#include "sim/base/json_excerpt.h"
#include "sim/config/json_document.h"

using namespace trnsim;

TEST_CASE("json documents: duplicate keys, deep nesting and bad JSON are errors with a path", "[config]") {
  CHECK(config::parse_json_document(R"({"a": 1, "b": {"c": [1, {"d": 2}]}})", "w.json")["b"]["c"][1]["d"] ==
        2);
  CHECK_THROWS_WITH(config::parse_json_document(R"({"a": 1, "a": 2})", "w.json"),
                    "w.json: a: key appears twice in one object");
  CHECK_THROWS_WITH(config::parse_json_document(R"({"p": [0, {"x": 1, "x": 1}]})", "w.json"),
                    "w.json: p[1].x: key appears twice in one object");
  // The same key in two different objects is fine.
  CHECK_NOTHROW(config::parse_json_document(R"({"a": {"x": 1}, "b": {"x": 1}})", "w.json"));
  // 64 levels are read; the 65th is refused before anything walks it recursively.
  std::string ok(64, '['), deep(100000, '[');
  ok += std::string(64, ']');
  CHECK_NOTHROW(config::parse_json_document(ok, "w.json"));
  CHECK_THROWS_WITH(
      config::parse_json_document("{\"description\": " + deep, "w.json"),
      Catch::StartsWith("w.json: description") && Catch::EndsWith("nested deeper than 64 levels"));
  CHECK_THROWS_WITH(config::parse_json_document("{\"a\": ", "w.json"),
                    Catch::StartsWith("w.json: not valid JSON: parse error at line 1, column 7"));
  CHECK_THROWS_WITH(config::read_json_document("/nonexistent/w.json"), "/nonexistent/w.json: no such file");
}

TEST_CASE("json documents: long keys, control characters in keys and overflowing numbers are errors",
          "[config]") {
  const std::string k256(256, 'k'), k257(257, 'k');
  CHECK_NOTHROW(config::parse_json_document("{\"" + k256 + "\": 1}", "w.json"));
  CHECK_THROWS_WITH(config::parse_json_document("{\"a\": {\"b\": 1, \"" + k257 + "\": 2}}", "w.json"),
                    "w.json: a: key '" + std::string(60, 'k') + "...' has 257 bytes (keys have at most 256)");
  CHECK_THROWS_WITH(config::parse_json_document(R"({"a\u0000b": 1})", "w.json"),
                    "w.json: (top level): key 'a\\x00b' holds a control character");
  CHECK_THROWS_WITH(config::parse_json_document(R"({"p": [1e400]})", "w.json"),
                    "w.json: not valid JSON: number overflow parsing '1e400'");
  // The parser quotes the token it last read: a megabyte string is cut to an excerpt.
  const std::string mega = "{\"a\": \"" + std::string(1 << 20, 'z') + "\n\"}";
  CHECK_THROWS_WITH(
      config::parse_json_document(mega, "w.json"),
      Catch::StartsWith("w.json: not valid JSON: parse error at line 2, column 0: syntax error "
                        "while parsing value - invalid string: control character U+000A (LF) must be "
                        "escaped to \\u000A or \\n; last read: '\"zzzz") &&
          Catch::EndsWith("z...'"));
}

TEST_CASE("json documents: a NUL byte and integers beyond int64 are errors quoting what was written",
          "[config]") {
  // The parser would stop at the NUL and take what came before as the whole document.
  CHECK_THROWS_WITH(config::parse_json_document(std::string("{\"a\": 1}\0garbage", 17), "w.json"),
                    "w.json: not valid JSON: a NUL byte at byte offset 8 (line 1)");
  CHECK_THROWS_WITH(config::parse_json_document(std::string("{\n\"a\": \"x\0\"}", 13), "w.json"),
                    "w.json: not valid JSON: a NUL byte at byte offset 9 (line 2)");
  // 2^63 - 1 and -2^63 are read; 2^63 and 2^64 - 1 once wrapped to negative values, larger ones to doubles.
  CHECK(config::parse_json_document(R"({"a": 9223372036854775807})", "w.json")["a"].get<int64_t>() ==
        INT64_MAX);
  CHECK(config::parse_json_document(R"({"a": -9223372036854775808})", "w.json")["a"].get<int64_t>() ==
        INT64_MIN);
  CHECK_THROWS_WITH(config::parse_json_document(R"({"a": {"b": [1, 9223372036854775808]}})", "w.json"),
                    "w.json: a.b[1]: the integer 9223372036854775808 is out of range (integers are read as "
                    "64-bit signed: at most 9223372036854775807)");
  CHECK_THROWS_WITH(config::parse_json_document(R"({"m": 18446744073709551615})", "w.json"),
                    Catch::StartsWith("w.json: m: the integer 18446744073709551615 is out of range"));
  CHECK_THROWS_WITH(config::parse_json_document(R"({"m": -99999999999999999999})", "w.json"),
                    Catch::StartsWith("w.json: m: the integer -99999999999999999999 is out of range"));
  CHECK(config::parse_json_document(R"({"m": 1e30})", "w.json")["m"].get<double>() ==
        1e30);  // not an integer
  CHECK_THROWS_WITH(config::parse_json_value("18446744073709551615", "--set x"),
                    Catch::StartsWith("--set x: the integer 18446744073709551615 is out of range"));
}

TEST_CASE("json documents: a million objects in an array, the checks still applied to each", "[config]") {
  // The reader once rescanned the array after every object (quadratic: minutes at this size).
  std::string text = "{\"rows\": [";
  for (int i = 0; i < 1000000; ++i) text += (i ? ",{\"k\": " : "{\"k\": ") + std::to_string(i) + "}";
  const nlohmann::json j = config::parse_json_document(text + "]}", "w.json");
  CHECK(j["rows"].size() == 1000000);
  CHECK(j["rows"][999999]["k"] == 999999);
  CHECK_THROWS_WITH(config::parse_json_document(text + ", {\"k\": 1, \"k\": 2}]}", "w.json"),
                    "w.json: rows[1000000].k: key appears twice in one object");
}

TEST_CASE("json values on the command line: the same rules, or a bare word", "[config]") {
  CHECK(*config::parse_json_value("[1, {\"a\": 2}]", "--set x") == nlohmann::json::parse("[1, {\"a\": 2}]"));
  CHECK_FALSE(config::parse_json_value("trn3", "--set x").has_value());
  CHECK_FALSE(config::parse_json_value("[1, 2", "--set x").has_value());
  CHECK_THROWS_WITH(config::parse_json_value(R"({"a": 1, "a": 2})", "--set x"),
                    "--set x: a: key appears twice in one object");
  CHECK_THROWS_WITH(config::parse_json_value("1e400", "--set x"),
                    "--set x: not valid JSON: number overflow parsing '1e400'");
}

TEST_CASE("excerpts of values and words for messages are short and printable", "[config]") {
  CHECK(json_excerpt(nlohmann::json::array({1, 2})) == "an array of 2 elements");
  CHECK(json_excerpt(nlohmann::json::array({1})) == "an array of 1 element");
  CHECK(short_json(nlohmann::json::array({1, 2})) == "[1,2]");
  CHECK(short_json(nlohmann::json::parse(R"({"a": [32, 1e-300]})")) == R"({"a":[32,1e-300]})");
  CHECK(short_json(nlohmann::json(std::vector<int>(1000, 7))) == "an array of 1000 elements");
  CHECK(short_json(nlohmann::json::array({std::string(100, 's')})) == "an array of 1 element");
  CHECK(short_json(nlohmann::json::object({{"k", std::vector<int>(30, 1)}})) == "an object with 1 key");
  // A value nested 100,000 deep (built without the reader) is described without a recursive walk.
  nlohmann::json deep = nlohmann::json::array();
  for (int i = 0; i < 100000; ++i) deep = nlohmann::json::array({std::move(deep)});
  CHECK(short_json(deep) == "an array of 1 element");
  CHECK(json_excerpt(nlohmann::json("abc")) == "\"abc\"");
  CHECK(json_excerpt(nlohmann::json(std::string(1000, 'x'))) == "\"" + std::string(56, 'x') + "...");
  CHECK(json_excerpt(nlohmann::json("\xff")) == "\"\xef\xbf\xbd\"");  // not UTF-8: U+FFFD, no exception
  CHECK(text_excerpt("trn3") == "trn3");
  CHECK(text_excerpt(std::string("a\0b\nc", 5)) == "a\\x00b\\nc");
  CHECK(text_excerpt(std::string(61, 'y')) == std::string(60, 'y') + "...");
  // A cut never splits a UTF-8 character: 59 ASCII bytes then a 2-byte character.
  CHECK(text_excerpt(std::string(59, 'y') + "\xc3\xa9" + "tail") == std::string(59, 'y') + "...");
}
