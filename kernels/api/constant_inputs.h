// Inputs whose values a kernel gives itself while it builds (a Python kernel's nl.shared_constant), for
// WorkloadRun to bind as given inputs. A bound kernel that has them implements this beside BoundKernel.
#pragma once

#include "kernels/api/package.h"

namespace trnsim::kernels {

class ConstantInputs {
 public:
  virtual ~ConstantInputs() = default;
  // By name; valid after BoundKernel::build.
  virtual Tensors constant_inputs() const = 0;
};

// The kernel's constant inputs (none unless it implements ConstantInputs).
inline Tensors constant_inputs_of(const BoundKernel* k) {
  const auto* c = dynamic_cast<const ConstantInputs*>(k);
  return c != nullptr ? c->constant_inputs() : Tensors{};
}

}  // namespace trnsim::kernels
