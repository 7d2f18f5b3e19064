// Test helper: build a registered kernel and run it through the run session (sim/run/session.h), the same
// path `trnsim run` takes.
#pragma once

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/api/registry.h"
#include "sim/config/hw_config.h"
#include "sim/run/session.h"
#include "sim/tensor/host_tensor.h"

namespace trnsim::test {

using Bytes = std::vector<uint8_t>;

inline const config::HwConfig& hw_named(const std::string& name) {
  static std::map<std::string, config::HwConfig> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, config::load_hw_config(name)).first;
  return it->second;
}

// The program of `kernel` with `params` on `hw`; `cores` defaults to the kernel's own choice, else 2.
inline kernels::KernelBuild build_kernel(const std::string& kernel, const nlohmann::json& params,
                                         const config::HwConfig& hw, std::optional<int> cores = {}) {
  const auto bound = kernels::registry().bind(kernel, params);
  kernels::BuildOptions o;
  o.limits = hw.limits();
  o.num_programs = cores.value_or(bound->cores().value_or(2));
  return bound->build(o);
}

struct KernelRun {
  isa::Program program;
  std::map<std::string, tensor::HostTensor> outputs;
  model::RunStats stats;
  const Bytes& bytes(const std::string& name) const { return outputs.at(name).bytes; }
  std::vector<float> get(const std::string& name) const { return outputs.at(name).values(); }
};

// Runs `build` with `inputs` (HBM tensor name -> bytes in the tensor's dtype) and returns every output.
inline KernelRun run_build(kernels::KernelBuild b, const std::map<std::string, Bytes>& inputs,
                           const config::HwConfig& hw) {
  KernelRun r;
  r.program = std::move(b.program);
  run::Session s(r.program, hw);
  for (const auto& name : b.inputs) {
    INFO("input " << name);
    REQUIRE(inputs.count(name));
    const isa::TensorDecl& d = r.program.tensors[s.tensor_index(name)];
    tensor::HostTensor t;
    t.dtype = d.dtype;
    t.shape = d.shape;
    t.bytes = inputs.at(name);
    s.set_input(name, t);
  }
  r.stats = s.run({.numerics = true}).stats;
  for (const auto& name : b.outputs) r.outputs.emplace(name, s.read(name));
  return r;
}

inline KernelRun run_kernel(const std::string& kernel, const nlohmann::json& params,
                            const std::map<std::string, Bytes>& inputs, const config::HwConfig& hw,
                            std::optional<int> cores = {}) {
  return run_build(build_kernel(kernel, params, hw, cores), inputs, hw);
}

}  // namespace trnsim::test
