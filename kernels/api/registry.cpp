#include "kernels/api/registry.h"

#include <fmt/format.h>

#include "sim/base/error.h"

namespace trnsim::kernels {
namespace {

void check_specs(const std::string& kernel, const std::vector<ParamSpec>& specs, const std::string& prefix) {
  for (size_t i = 0; i < specs.size(); ++i) {
    const ParamSpec& p = specs[i];
    for (size_t j = 0; j < i; ++j)
      if (specs[j].name == p.name)
        throw InputError(fmt::format("kernel '{}': parameter '{}{}' declared twice", kernel, prefix, p.name));
    if (p.type == ParamType::Enum && p.allowed.empty())
      throw InputError(
          fmt::format("kernel '{}': enum parameter '{}{}' has no allowed values", kernel, prefix, p.name));
    if (!p.default_value.is_null()) check_param_value("kernel '" + kernel + "'", p, p.default_value);
    if (p.type == ParamType::Object) check_specs(kernel, p.fields, prefix + p.name + ".");
  }
}

}  // namespace

void Registry::add(std::unique_ptr<KernelDef> k) {
  if (!k || k->name().empty()) throw InputError("a kernel needs a name");
  if (find(k->name()) != nullptr) throw InputError(fmt::format("kernel '{}' is registered twice", k->name()));
  check_specs(k->name(), k->params(), "");
  kernels_.push_back(std::move(k));
}

const KernelDef* Registry::find(const std::string& name) const {
  for (const auto& k : kernels_)
    if (k->name() == name) return k.get();
  return nullptr;
}

const KernelDef& Registry::get(const std::string& name) const {
  if (const KernelDef* k = find(name)) return *k;
  std::vector<std::string> names;
  for (const auto& k : kernels_) names.push_back(k->name());
  throw InputError(
      fmt::format("unknown kernel '{}' (known: {})", name,
                  names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
}

std::vector<const KernelDef*> Registry::kernels() const {
  std::vector<const KernelDef*> v;
  for (const auto& k : kernels_) v.push_back(k.get());
  return v;
}

std::unique_ptr<BoundKernel> Registry::bind(const std::string& name, const nlohmann::json& params) const {
  return get(name).bind(params);
}

}  // namespace trnsim::kernels
