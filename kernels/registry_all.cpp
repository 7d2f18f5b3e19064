// The process-wide registry: every package of kernels/kernel_list.h.
#include <memory>

#include "kernels/api/registry.h"

namespace trnsim::kernels {

#define TRNSIM_KERNEL(name) std::unique_ptr<KernelDef> name##_kernel();
#include "kernels/kernel_list.h"
#undef TRNSIM_KERNEL

Registry& registry() {
  static Registry r = [] {
    Registry all;
#define TRNSIM_KERNEL(name) all.add(name##_kernel());
#include "kernels/kernel_list.h"
#undef TRNSIM_KERNEL
    return all;
  }();
  return r;
}

}  // namespace trnsim::kernels
