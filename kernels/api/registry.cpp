#include "kernels/api/registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sim/base/error.h"

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

// Checks one value against its spec; returns it normalised (e.g. an integral float for a float parameter).
nlohmann::json check_value(const std::string& kernel, const ParamSpec& p, const nlohmann::json& v) {
  const auto bad = [&](const std::string& expected) {
    return InputError(
        fmt::format("kernel '{}': parameter '{}': expected {}, got {}", kernel, p.name, expected, v.dump()));
  };
  if (p.nullable && v.is_null()) return v;
  switch (p.type) {
    case ParamType::Int: {
      if (!v.is_number_integer() || !in_range(p, v.get<double>())) throw bad("an integer" + range_str(p));
      return v;
    }
    case ParamType::Float: {
      if (!v.is_number() || !std::isfinite(v.get<double>()) || !in_range(p, v.get<double>()))
        throw bad("a number" + range_str(p));
      return v.get<double>();
    }
    case ParamType::Bool:
      if (!v.is_boolean()) throw bad("true or false");
      return v;
    case ParamType::String:
      if (!v.is_string()) throw bad("a string");
      return v;
    case ParamType::Enum: {
      const std::string one_of = fmt::format("one of {}", fmt::join(p.allowed, ", "));
      if (!v.is_string()) throw bad(one_of);
      if (std::find(p.allowed.begin(), p.allowed.end(), v.get<std::string>()) == p.allowed.end())
        throw bad(one_of);
      return v;
    }
    case ParamType::Shape: {
      const std::string what =
          "a list of integers" + (p.min || p.max ? " each" + range_str(p) : std::string());
      if (!v.is_array() || v.empty()) throw bad(what);
      for (const auto& e : v)
        if (!e.is_number_integer() || !in_range(p, e.get<double>())) throw bad(what);
      return v;
    }
    case ParamType::Object:
      if (!v.is_object()) throw bad("a JSON object");
      return v;
  }
  return v;
}

}  // namespace

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

void Registry::add(KernelInfo info) {
  if (info.name.empty()) throw InputError("a kernel needs a name");
  if (find(info.name) != nullptr) throw InputError(fmt::format("kernel '{}' is registered twice", info.name));
  if (!info.build) throw InputError(fmt::format("kernel '{}' has no builder", info.name));
  for (size_t i = 0; i < info.params.size(); ++i) {
    const ParamSpec& p = info.params[i];
    for (size_t j = 0; j < i; ++j)
      if (info.params[j].name == p.name)
        throw InputError(fmt::format("kernel '{}': parameter '{}' declared twice", info.name, p.name));
    if (p.type == ParamType::Enum && p.allowed.empty())
      throw InputError(
          fmt::format("kernel '{}': enum parameter '{}' has no allowed values", info.name, p.name));
    if (!p.default_value.is_null()) check_value(info.name, p, p.default_value);
  }
  kernels_.push_back(std::move(info));
}

const KernelInfo* Registry::find(const std::string& name) const {
  for (const KernelInfo& k : kernels_)
    if (k.name == name) return &k;
  return nullptr;
}

const KernelInfo& Registry::get(const std::string& name) const {
  if (const KernelInfo* k = find(name)) return *k;
  std::vector<std::string> names;
  for (const KernelInfo& k : kernels_) names.push_back(k.name);
  throw InputError(
      fmt::format("unknown kernel '{}' (known: {})", name,
                  names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
}

nlohmann::json Registry::validate(const std::string& name, const nlohmann::json& params) const {
  const KernelInfo& k = get(name);
  if (!params.is_null() && !params.is_object())
    throw InputError(
        fmt::format("kernel '{}': parameters must be a JSON object, got {}", name, params.dump()));
  nlohmann::json out = nlohmann::json::object();
  if (params.is_object()) {
    for (const auto& [key, value] : params.items()) {
      const auto it =
          std::find_if(k.params.begin(), k.params.end(), [&](const ParamSpec& p) { return p.name == key; });
      if (it == k.params.end()) {
        std::vector<std::string> known;
        for (const ParamSpec& p : k.params) known.push_back(p.name);
        throw InputError(fmt::format("kernel '{}': unknown parameter '{}' (known: {})", name, key,
                                     fmt::join(known, ", ")));
      }
      out[key] = check_value(name, *it, value);
    }
  }
  for (const ParamSpec& p : k.params) {
    if (out.contains(p.name)) continue;
    if (p.default_value.is_null() && !p.nullable)
      throw InputError(fmt::format("kernel '{}': parameter '{}' is required ({}: {})", name, p.name,
                                   param_type_name(p.type), p.doc));
    out[p.name] = p.default_value;
  }
  return out;
}

KernelBuild Registry::build(const std::string& name, const nlohmann::json& params,
                            const BuildOptions& options) const {
  const nlohmann::json valid = validate(name, params);
  return get(name).build(valid, options);
}

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace trnsim::kernels
