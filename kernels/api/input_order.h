// The order in which a kernel takes its input tensors, when it has one of its own (a Python kernel: its
// function's parameter order). A bound kernel that has one implements this beside BoundKernel.
#pragma once

#include <string>
#include <vector>

#include "kernels/api/package.h"

namespace trnsim::kernels {

class InputOrder {
 public:
  virtual ~InputOrder() = default;
  virtual std::vector<std::string> input_order() const = 0;
};

// The kernel's input names in its order; empty when it has none (a registered kernel names inputs by key).
inline std::vector<std::string> input_order_of(const BoundKernel* k) {
  const auto* o = dynamic_cast<const InputOrder*>(k);
  return o != nullptr ? o->input_order() : std::vector<std::string>{};
}

}  // namespace trnsim::kernels
