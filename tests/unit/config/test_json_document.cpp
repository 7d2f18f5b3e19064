// The JSON reader every user-written document goes through (sim/config/json_document.h).
#include <catch2/catch.hpp>

#include <string>

#include "sim/base/error.h"
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
