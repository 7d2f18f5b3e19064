#include "kernels/api/params.h"

#include <algorithm>
#include <cmath>

#include "sim/base/error.h"
#include "sim/base/json_excerpt.h"

namespace trnsim::kernels {
namespace {

std::string range_str(const ParamSpec& p) {
  if (p.min && p.max) return fmt::format(" in [{}, {}]", *p.min, *p.max);
  if (p.min) return fmt::format(" >= {}", *p.min);
  if (p.max) return fmt::format(" <= {}", *p.max);
  return "";
}

bool in_range(const ParamSpec& p, double v) {
  return (!p.min || v >= *p.min) && (!p.max || v <= *p.max);
}

std::string full_name(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

}  // namespace

std::string no_parameter_message(const std::string& kernel, const std::string& name,
                                 const std::vector<std::string>& known, const std::string& object,
                                 const std::string& none) {
  return fmt::format("{} has no parameter '{}{}' ({}: {})", kernel, object.empty() ? "" : object + ".", name,
                     object.empty() ? "its parameters" : "the fields of " + object,
                     known.empty() ? none : fmt::format("{}", fmt::join(known, ", ")));
}

const char* param_type_name(ParamType t) {
  switch (t) {
    case ParamType::Int:
      return "int";
    case ParamType::Float:
      return "float";
    case ParamType::Bool:
      return "bool";
    case ParamType::String:
      return "string";
    case ParamType::Enum:
      return "enum";
    case ParamType::Shape:
      return "shape";
    case ParamType::Object:
      return "object";
  }
  return "?";
}

nlohmann::json check_param_value(const std::string& context, const ParamSpec& p, const nlohmann::json& v,
                                 const std::string& prefix) {
  const std::string name = full_name(prefix, p.name);
  const auto bad = [&](const std::string& expected) {
    return InputError(fmt::format("{}: parameter '{}': expected {}{}, got {}", context, name, expected,
                                  p.nullable ? " or null" : "", json_excerpt(v)));
  };
  if (p.nullable && v.is_null()) return v;
  switch (p.type) {
    case ParamType::Int:
      if (!v.is_number_integer() || !in_range(p, v.get<double>())) throw bad("an integer" + range_str(p));
      return v;
    case ParamType::Float:
      if (!v.is_number() || !std::isfinite(v.get<double>()) || !in_range(p, v.get<double>()))
        throw bad("a number" + range_str(p));
      return v.get<double>();
    case ParamType::Bool:
      if (!v.is_boolean()) throw bad("true or false");
      return v;
    case ParamType::String:
      if (!v.is_string()) throw bad("a string");
      return v;
    case ParamType::Enum: {
      const std::string one_of = fmt::format("one of {}", fmt::join(p.allowed, ", "));
      if (!v.is_string() ||
          std::find(p.allowed.begin(), p.allowed.end(), v.get<std::string>()) == p.allowed.end())
        throw bad(one_of);
      return v;
    }
    case ParamType::Shape: {
      const std::string what =
          "a list of integers" + (p.min || p.max ? " each" + range_str(p) : std::string());
      if (!v.is_array() || v.empty()) throw bad(what);
      for (size_t i = 0; i < v.size(); ++i)
        if (!v[i].is_number_integer() || !in_range(p, v[i].get<double>()))
          throw InputError(fmt::format("{}: parameter '{}[{}]': expected an integer{}, got {}", context, name,
                                       i, range_str(p), json_excerpt(v[i])));
      return v;
    }
    case ParamType::Object:
      if (!v.is_object()) throw bad("a JSON object");
      return check_params(context, p.fields, v, name);
  }
  return v;
}

nlohmann::json check_params(const std::string& context, const std::vector<ParamSpec>& specs,
                            const nlohmann::json& params, const std::string& prefix) {
  if (!params.is_null() && !params.is_object())
    throw InputError(fmt::format("{}: {} must be a JSON object, got {}", context,
                                 prefix.empty() ? "parameters" : "parameter '" + prefix + "'",
                                 json_excerpt(params)));
  nlohmann::json out = nlohmann::json::object();
  if (params.is_object()) {
    for (const auto& [key, value] : params.items()) {
      const auto it =
          std::find_if(specs.begin(), specs.end(), [&](const ParamSpec& p) { return p.name == key; });
      if (it == specs.end()) {
        std::vector<std::string> known;
        for (const ParamSpec& p : specs) known.push_back(p.name);
        throw InputError(
            fmt::format("{}: unknown parameter '{}' (known: {})", context, full_name(prefix, key),
                        known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", "))));
      }
      out[key] = check_param_value(context, *it, value, prefix);
    }
  }
  for (const ParamSpec& p : specs) {
    if (out.contains(p.name)) continue;
    if (p.default_value.is_null() && !p.nullable)
      throw InputError(fmt::format("{}: parameter '{}' is required ({}: {})", context,
                                   full_name(prefix, p.name), param_type_name(p.type), p.doc));
    out[p.name] = p.type == ParamType::Object && !p.default_value.is_null()
                      ? check_params(context, p.fields, p.default_value, full_name(prefix, p.name))
                      : p.default_value;
  }
  return out;
}

}  // namespace trnsim::kernels
