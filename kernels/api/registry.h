// The kernel registry: every kernel the CLI can run (kernels/kernel_list.h registers each package with one
// line). Registration is explicit: a static library drops self-registering objects.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/api/package.h"

namespace trnsim::kernels {

class Registry {
 public:
  // InputError if the name is empty or already registered, or a parameter default breaks its own spec.
  void add(std::unique_ptr<KernelDef> kernel);
  const KernelDef* find(const std::string& name) const;
  const KernelDef& get(const std::string& name) const;  // InputError listing the known kernels
  std::vector<const KernelDef*> kernels() const;
  // get(name).bind(params): validated parameters, InputError naming the kernel and parameter.
  std::unique_ptr<BoundKernel> bind(const std::string& name, const nlohmann::json& params) const;

 private:
  std::vector<std::unique_ptr<KernelDef>> kernels_;
};

// The process-wide registry with every library kernel (kernels/kernel_list.h) registered.
Registry& registry();

}  // namespace trnsim::kernels
