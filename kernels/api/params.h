// Typed kernel parameters, declared once. A kernel's parameter struct lists its fields in a static
// describe(); everything else (JSON validation with defaults, `trnsim list`, stats.json's "params", the
// builder, the reference and the checks) sees the same struct:
//
//   struct Params {
//     int64_t M = 0, K = 0, N = 0;
//     LoopOrder order = LoopOrder::MNK;
//     std::optional<int64_t> tile_n;
//     static void describe(Schema<Params>& s) {
//       s.dim(&Params::M, "M", "rows of x");
//       s.choice(&Params::order, "tile_loop_order", "tile order inside a block",
//                {{"mnk", LoopOrder::MNK}, {"nmk", LoopOrder::NMK}}, LoopOrder::MNK);
//       s.add(&Params::tile_n, "tile_n", "moving tile size; null: auto").range(32, 512);
//     }
//   };
//
// Field kinds: int64_t, double, bool, std::string, an enum (choice), std::optional of those (JSON null is a
// value, the default unless one is given), std::optional<std::vector<int64_t>> (a shape), and a nested struct
// with its own describe() (a JSON object; optional or not). Errors: InputError
// "<context>: parameter '<name>': expected <what>, got <excerpt>" (nested fields as 'config.tile_m').
#pragma once

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace trnsim::kernels {

enum class ParamType { Int, Float, Bool, String, Enum, Shape, Object };
const char* param_type_name(ParamType t);  // "int", "float", "bool", "string", "enum", "shape", "object"

// "<kernel> has no parameter '<name>' (its parameters: a, b)": a params key that names none of the kernel's
// parameters, or (`object` "config") none of the fields of its object parameter ("... no parameter
// 'config.x' (the fields of config: ...)"); `none` when the list is empty. One wording for the workload's
// check of a Python kernel (trnsim._runner.binding_problem, through the bindings) and a sweep's axis path
// (tools/sweep/spec.cpp).
std::string no_parameter_message(const std::string& kernel, const std::string& name,
                                 const std::vector<std::string>& known, const std::string& object = "",
                                 const std::string& none = "none");

// What `trnsim list` shows and what JSON validation checks, for one field.
struct ParamSpec {
  std::string name{};
  ParamType type = ParamType::Int;
  nlohmann::json default_value{};      // null: required (unless nullable)
  std::vector<std::string> allowed{};  // Enum: the names
  std::optional<double> min{}, max{};  // Int/Float: inclusive bounds; Shape: bounds of every entry
  std::string doc{};
  bool nullable = false;            // JSON null is a valid value
  std::vector<ParamSpec> fields{};  // Object: its fields

  ParamSpec& range(double lo, double hi) {
    min = lo;
    max = hi;
    return *this;
  }
  ParamSpec& at_least(double lo) {
    min = lo;
    return *this;
  }
};

// Checks `v` against `spec` and returns it normalised (a float parameter given as an integer becomes a
// float; objects get their defaults). `context` prefixes messages ("kernel 'matmul_bf16'"); `prefix` is the
// dotted parent of nested fields.
nlohmann::json check_param_value(const std::string& context, const ParamSpec& spec, const nlohmann::json& v,
                                 const std::string& prefix = "");
// Checks a whole JSON object against `specs` (unknown keys, required fields) and fills in the defaults.
nlohmann::json check_params(const std::string& context, const std::vector<ParamSpec>& specs,
                            const nlohmann::json& params, const std::string& prefix = "");

template <class P>
class Schema;

// The schema of P, built once from P::describe.
template <class P>
const Schema<P>& schema_of();

template <class P>
class Schema {
 public:
  // A required shape dimension: an integer in [1, 2^20] (larger tensors do not fit an HBM stack anyway).
  ParamSpec& dim(int64_t P::*m, const char* name, const char* doc) {
    return add(m, name, doc).range(1, 1 << 20);
  }
  ParamSpec& add(int64_t P::*m, const char* name, const char* doc, std::optional<int64_t> def = {}) {
    return field(
        {.name = name, .type = ParamType::Int, .default_value = json_of(def), .doc = doc},
        [m](P& p, const nlohmann::json& v) { p.*m = v.get<int64_t>(); },
        [m](const P& p) { return nlohmann::json(p.*m); });
  }
  ParamSpec& add(std::optional<int64_t> P::*m, const char* name, const char* doc,
                 std::optional<int64_t> def = {}) {
    return field(
        {.name = name, .type = ParamType::Int, .default_value = json_of(def), .doc = doc, .nullable = true},
        [m](P& p, const nlohmann::json& v) {
          p.*m = v.is_null() ? std::nullopt : std::optional(v.get<int64_t>());
        },
        [m](const P& p) { return json_of(p.*m); });
  }
  ParamSpec& add(double P::*m, const char* name, const char* doc, std::optional<double> def = {}) {
    return field(
        {.name = name, .type = ParamType::Float, .default_value = json_of(def), .doc = doc},
        [m](P& p, const nlohmann::json& v) { p.*m = v.get<double>(); },
        [m](const P& p) { return nlohmann::json(p.*m); });
  }
  ParamSpec& add(std::optional<double> P::*m, const char* name, const char* doc) {
    return field(
        {.name = name, .type = ParamType::Float, .doc = doc, .nullable = true},
        [m](P& p, const nlohmann::json& v) {
          p.*m = v.is_null() ? std::nullopt : std::optional(v.get<double>());
        },
        [m](const P& p) { return json_of(p.*m); });
  }
  ParamSpec& add(bool P::*m, const char* name, const char* doc, bool def) {
    return field(
        {.name = name, .type = ParamType::Bool, .default_value = def, .doc = doc},
        [m](P& p, const nlohmann::json& v) { p.*m = v.get<bool>(); },
        [m](const P& p) { return nlohmann::json(p.*m); });
  }
  ParamSpec& add(std::optional<bool> P::*m, const char* name, const char* doc, std::optional<bool> def = {}) {
    return field(
        {.name = name, .type = ParamType::Bool, .default_value = json_of(def), .doc = doc, .nullable = true},
        [m](P& p, const nlohmann::json& v) {
          p.*m = v.is_null() ? std::nullopt : std::optional(v.get<bool>());
        },
        [m](const P& p) { return json_of(p.*m); });
  }
  ParamSpec& add(std::string P::*m, const char* name, const char* doc, std::optional<std::string> def = {}) {
    return field(
        {.name = name, .type = ParamType::String, .default_value = json_of(def), .doc = doc},
        [m](P& p, const nlohmann::json& v) { p.*m = v.get<std::string>(); },
        [m](const P& p) { return nlohmann::json(p.*m); });
  }
  // A shape (list of integers, each in the spec's range); null by default.
  ParamSpec& add(std::optional<std::vector<int64_t>> P::*m, const char* name, const char* doc) {
    return field(
        {.name = name, .type = ParamType::Shape, .doc = doc, .nullable = true},
        [m](P& p, const nlohmann::json& v) {
          p.*m = v.is_null() ? std::nullopt : std::optional(v.get<std::vector<int64_t>>());
        },
        [m](const P& p) { return json_of(p.*m); });
  }
  // An enum: JSON strings `values[i].first` map to `values[i].second`.
  template <class E>
  ParamSpec& choice(E P::*m, const char* name, const char* doc,
                    std::vector<std::pair<std::string, std::type_identity_t<E>>> values,
                    std::optional<std::type_identity_t<E>> def = {}) {
    ParamSpec s{.name = name, .type = ParamType::Enum, .doc = doc};
    for (const auto& [n, e] : values) s.allowed.push_back(n);
    if (def) s.default_value = name_of(values, *def);
    return field(
        std::move(s),
        [m, values](P& p, const nlohmann::json& v) {
          for (const auto& [n, e] : values)
            if (v == n) p.*m = e;
        },
        [m, values](const P& p) { return nlohmann::json(name_of(values, p.*m)); });
  }
  // The same with JSON null allowed (std::nullopt).
  template <class E>
  ParamSpec& choice(std::optional<E> P::*m, const char* name, const char* doc,
                    std::vector<std::pair<std::string, std::type_identity_t<E>>> values) {
    ParamSpec s{.name = name, .type = ParamType::Enum, .doc = doc, .nullable = true};
    for (const auto& [n, e] : values) s.allowed.push_back(n);
    return field(
        std::move(s),
        [m, values](P& p, const nlohmann::json& v) {
          p.*m = std::nullopt;
          for (const auto& [n, e] : values)
            if (v == n) p.*m = e;
        },
        [m, values](const P& p) {
          return (p.*m) ? nlohmann::json(name_of(values, *(p.*m))) : nlohmann::json(nullptr);
        });
  }
  // A nested struct S (with S::describe) given as a JSON object; missing fields take S's defaults.
  template <class S>
  ParamSpec& object(S P::*m, const char* name, const char* doc) {
    ParamSpec s{
        .name = name, .type = ParamType::Object, .default_value = nlohmann::json::object(), .doc = doc};
    s.fields = schema_of<S>().specs();
    return field(
        std::move(s), [m](P& p, const nlohmann::json& v) { p.*m = schema_of<S>().read(v); },
        [m](const P& p) { return schema_of<S>().write(p.*m); });
  }
  // The same, with JSON null (the default) for "not given".
  template <class S>
  ParamSpec& object(std::optional<S> P::*m, const char* name, const char* doc) {
    ParamSpec s{.name = name, .type = ParamType::Object, .doc = doc, .nullable = true};
    s.fields = schema_of<S>().specs();
    return field(
        std::move(s),
        [m](P& p, const nlohmann::json& v) {
          p.*m = v.is_null() ? std::nullopt : std::optional<S>(schema_of<S>().read(v));
        },
        [m](const P& p) { return (p.*m) ? schema_of<S>().write(*(p.*m)) : nlohmann::json(nullptr); });
  }

  // The fields of struct S (a member of P) as parameters of P itself, at the same level: parameters two
  // kernels share are declared once.
  template <class S>
  void include(S P::*m) {
    for (const auto& f : schema_of<S>().fields_)
      field(
          f.spec, [m, read = f.read](P& p, const nlohmann::json& v) { read(p.*m, v); },
          [m, write = f.write](const P& p) { return write(p.*m); });
  }

  std::vector<ParamSpec> specs() const {
    std::vector<ParamSpec> v;
    for (const Field& f : fields_) v.push_back(f.spec);
    return v;
  }
  // JSON (already checked by check_params: complete, normalised) -> P.
  P read(const nlohmann::json& j) const {
    P p{};
    for (const Field& f : fields_)
      if (j.contains(f.spec.name)) f.read(p, j.at(f.spec.name));
    return p;
  }
  // Validates `j` (InputError naming `context`) and reads it.
  P parse(const std::string& context, const nlohmann::json& j) const {
    return read(check_params(context, specs(), j));
  }
  nlohmann::json write(const P& p) const {
    nlohmann::json j = nlohmann::json::object();
    for (const Field& f : fields_) j[f.spec.name] = f.write(p);
    return j;
  }

 private:
  struct Field {
    ParamSpec spec;
    std::function<void(P&, const nlohmann::json&)> read;
    std::function<nlohmann::json(const P&)> write;
  };
  template <class T>
  static nlohmann::json json_of(const std::optional<T>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  }
  template <class E>
  static std::string name_of(const std::vector<std::pair<std::string, E>>& values, E e) {
    for (const auto& [n, v] : values)
      if (v == e) return n;
    return "?";
  }
  ParamSpec& field(ParamSpec spec, std::function<void(P&, const nlohmann::json&)> read,
                   std::function<nlohmann::json(const P&)> write) {
    fields_.push_back({std::move(spec), std::move(read), std::move(write)});
    return fields_.back().spec;
  }
  std::deque<Field> fields_;  // deque: the ParamSpec& handed out stay valid
  template <class>
  friend class Schema;
};

template <class P>
const Schema<P>& schema_of() {
  static const Schema<P> s = [] {
    Schema<P> x;
    P::describe(x);
    return x;
  }();
  return s;
}

}  // namespace trnsim::kernels
