// trnsim list: the registered kernels, their parameters (name, type, default, allowed values, doc; nested
// config objects indented) and the input recipes they offer.
//   trnsim list [KERNEL] [--json]
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "kernels/api/registry.h"
#include "tools/trnsim/commands.h"

namespace trnsim::cli {
namespace {

struct ListOptions {
  std::string kernel;
  bool json = false;
};

std::string bounds(const kernels::ParamSpec& p) {
  if (p.min && p.max) return fmt::format(" [{}, {}]", *p.min, *p.max);
  if (p.min) return fmt::format(" >= {}", *p.min);
  if (p.max) return fmt::format(" <= {}", *p.max);
  return "";
}

nlohmann::json spec_json(const kernels::ParamSpec& p) {
  nlohmann::json j = {{"name", p.name}, {"type", kernels::param_type_name(p.type)}, {"doc", p.doc}};
  j["required"] = p.default_value.is_null() && !p.nullable;
  if (p.nullable) j["nullable"] = true;
  if (!p.default_value.is_null()) j["default"] = p.default_value;
  if (!p.allowed.empty()) j["allowed"] = p.allowed;
  const bool integral = p.type == kernels::ParamType::Int || p.type == kernels::ParamType::Shape;
  const auto bound = [&](double v) {
    return integral ? nlohmann::json(static_cast<int64_t>(v)) : nlohmann::json(v);
  };
  if (p.min) j["min"] = bound(*p.min);
  if (p.max) j["max"] = bound(*p.max);
  if (!p.fields.empty()) {
    j["fields"] = nlohmann::json::array();
    for (const auto& f : p.fields) j["fields"].push_back(spec_json(f));
  }
  return j;
}

nlohmann::json to_json(const kernels::KernelDef& k) {
  nlohmann::json params = nlohmann::json::array(), recipes = nlohmann::json::array();
  for (const kernels::ParamSpec& p : k.params()) params.push_back(spec_json(p));
  for (const auto& r : k.recipes()) {
    nlohmann::json args = nlohmann::json::array();
    for (const auto& a : r.args) args.push_back(spec_json(a));
    recipes.push_back({{"name", r.name}, {"doc", r.doc}, {"args", args}});
  }
  nlohmann::json j = {{"name", k.name()}, {"doc", k.doc()}, {"params", params}};
  if (!k.cores_param().empty()) j["cores_param"] = k.cores_param();
  if (!recipes.empty()) j["recipes"] = recipes;
  return j;
}

void print_specs(const std::vector<kernels::ParamSpec>& specs, int indent) {
  for (const kernels::ParamSpec& p : specs) {
    std::string type = kernels::param_type_name(p.type);
    if (!p.allowed.empty()) type = fmt::format("{}", fmt::join(p.allowed, "|"));
    type += bounds(p);
    const std::string def = !p.default_value.is_null() && !p.default_value.is_object()
                                ? "default " + p.default_value.dump()
                            : p.nullable || p.default_value.is_object() ? "optional"
                                                                        : "required";
    const std::string name = std::string(static_cast<size_t>(indent), ' ') + p.name;
    // Long names or types get their own line so the columns stay aligned.
    if (name.size() > 20 || type.size() > 28)
      std::printf("  %s\n  %-20s %-28s %-16s %s\n", name.c_str(), "", type.c_str(), def.c_str(),
                  p.doc.c_str());
    else
      std::printf("  %-20s %-28s %-16s %s\n", name.c_str(), type.c_str(), def.c_str(), p.doc.c_str());
    if (!p.fields.empty()) print_specs(p.fields, indent + 2);
  }
}

void print_text(const kernels::KernelDef& k) {
  std::printf("%s\n  %s\n", k.name().c_str(), k.doc().c_str());
  if (!k.cores_param().empty())
    std::printf("  (physical cores: set by '%s'; a workload's \"lnc\" must agree)\n",
                k.cores_param().c_str());
  print_specs(k.params(), 0);
  for (const auto& r : k.recipes()) {
    std::printf("  recipe %s: %s\n", r.name.c_str(), r.doc.c_str());
    print_specs(r.args, 4);
  }
}

void run_list(const ListOptions& o) {
  const kernels::Registry& r = kernels::registry();
  if (!o.kernel.empty()) {
    const kernels::KernelDef& k = r.get(o.kernel);  // InputError for an unknown name
    if (o.json)
      std::printf("%s\n", to_json(k).dump(2).c_str());
    else
      print_text(k);
    return;
  }
  if (o.json) {
    nlohmann::json all = nlohmann::json::array();
    for (const kernels::KernelDef* k : r.kernels()) all.push_back(to_json(*k));
    std::printf("%s\n", all.dump(2).c_str());
    return;
  }
  bool first = true;
  for (const kernels::KernelDef* k : r.kernels()) {
    if (!first) std::printf("\n");
    first = false;
    print_text(*k);
  }
}

}  // namespace

void add_list_command(CLI::App& app) {
  auto opts = std::make_shared<ListOptions>();
  CLI::App* cmd = app.add_subcommand("list", "List the kernels, their parameters and input recipes");
  cmd->add_option("kernel", opts->kernel, "Only this kernel");
  cmd->add_flag("--json", opts->json, "Print JSON instead of a table");
  cmd->callback([opts] { run_list(*opts); });
}

}  // namespace trnsim::cli
