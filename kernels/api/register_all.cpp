// The one list of library kernels (explicit: a static library drops self-registering objects).
#include "kernels/api/registry.h"

namespace trnsim::kernels {

void register_all_kernels() {
  Registry& r = registry();
  if (r.find("matmul_bf16") == nullptr) register_matmul_bf16(r);
  if (r.find("matmul_mxfp8") == nullptr) register_matmul_mxfp8(r);
  if (r.find("matmul_mxfp8_backward") == nullptr) register_matmul_mxfp8_backward(r);
  if (r.find("nki_tutorial_matmul") == nullptr) register_nki_tutorial_matmul(r);
  if (r.find("matmul_lhsT_blocked") == nullptr) register_matmul_lhsT_blocked(r);
  if (r.find("matmul_lhs_dma_transpose") == nullptr) register_matmul_lhs_dma_transpose(r);
  if (r.find("cs149_vector_add") == nullptr) register_cs149_vector_add(r);
  if (r.find("transpose_2d") == nullptr) register_transpose_2d(r);
}

}  // namespace trnsim::kernels
