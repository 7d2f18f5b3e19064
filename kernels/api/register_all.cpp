// The one list of library kernels (explicit: a static library drops self-registering objects).
#include "kernels/api/registry.h"

namespace trnsim::kernels {

void register_all_kernels() {
  Registry& r = registry();
  if (r.find("matmul_bf16") == nullptr) register_matmul_bf16(r);
  if (r.find("matmul_mxfp8") == nullptr) register_matmul_mxfp8(r);
  if (r.find("matmul_mxfp8_backward") == nullptr) register_matmul_mxfp8_backward(r);
}

}  // namespace trnsim::kernels
