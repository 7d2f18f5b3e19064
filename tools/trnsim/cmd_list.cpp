// trnsim list: the registered kernels and their parameters (name, type, default, allowed values, doc).
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

nlohmann::json to_json(const kernels::KernelInfo& k) {
  nlohmann::json params = nlohmann::json::array();
  for (const kernels::ParamSpec& p : k.params) {
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
    params.push_back(std::move(j));
  }
  return {{"name", k.name}, {"doc", k.doc}, {"params", std::move(params)}};
}

void print_text(const kernels::KernelInfo& k) {
  std::printf("%s\n  %s\n", k.name.c_str(), k.doc.c_str());
  for (const kernels::ParamSpec& p : k.params) {
    std::string type = kernels::param_type_name(p.type);
    if (!p.allowed.empty()) type = fmt::format("{}", fmt::join(p.allowed, "|"));
    type += bounds(p);
    const std::string def = !p.default_value.is_null() ? "default " + p.default_value.dump()
                            : p.nullable               ? "optional"
                                                       : "required";
    std::printf("  %-16s %-28s %-20s %s\n", p.name.c_str(), type.c_str(), def.c_str(), p.doc.c_str());
  }
}

void run_list(const ListOptions& o) {
  kernels::register_all_kernels();
  const kernels::Registry& r = kernels::registry();
  if (!o.kernel.empty()) {
    const kernels::KernelInfo& k = r.get(o.kernel);  // InputError for an unknown name
    if (o.json)
      std::printf("%s\n", to_json(k).dump(2).c_str());
    else
      print_text(k);
    return;
  }
  if (o.json) {
    nlohmann::json all = nlohmann::json::array();
    for (const kernels::KernelInfo& k : r.kernels()) all.push_back(to_json(k));
    std::printf("%s\n", all.dump(2).c_str());
    return;
  }
  for (size_t i = 0; i < r.kernels().size(); ++i) {
    if (i > 0) std::printf("\n");
    print_text(r.kernels()[i]);
  }
}

}  // namespace

void add_list_command(CLI::App& app) {
  auto opts = std::make_shared<ListOptions>();
  CLI::App* cmd = app.add_subcommand("list", "List the kernels and their parameters");
  cmd->add_option("kernel", opts->kernel, "Only this kernel");
  cmd->add_flag("--json", opts->json, "Print JSON instead of a table");
  cmd->callback([opts] { run_list(*opts); });
}

}  // namespace trnsim::cli
