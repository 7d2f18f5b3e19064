#include "kernels/api/package.h"

#include <fmt/format.h>

#include "sim/base/error.h"

namespace trnsim::kernels {

const tensor::HostTensor& RecipeIO::input(const std::string& name) const {
  const auto it = made_.find(name);
  if (it == made_.end())
    throw InputError(
        fmt::format("the recipe reads input '{}', which is not made yet (declare it in reads)", name));
  return it->second;
}

tensor::HostTensor& RecipeIO::output(const std::string& name) {
  const auto it = out_.find(name);
  if (it == out_.end())
    throw Error(fmt::format("the recipe writes input '{}', which it does not declare in produces", name));
  return it->second;
}

}  // namespace trnsim::kernels
