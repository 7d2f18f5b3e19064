#include "kernels/chains/chain_reference.h"

namespace trnsim::kernels {

ChainReference lm_head_backward_reference();

const std::vector<ChainReference>& chain_references() {
  static const std::vector<ChainReference> v = {lm_head_backward_reference()};
  return v;
}

const ChainReference* find_chain_reference(const std::string& name) {
  for (const ChainReference& r : chain_references())
    if (r.name == name) return &r;
  return nullptr;
}

}  // namespace trnsim::kernels
