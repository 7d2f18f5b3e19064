// Test helper: build a registered kernel and run it through WorkloadRun (kernels/workload/workload_run.h),
// the pipeline `trnsim run` takes.
#pragma once

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/api/registry.h"
#include "kernels/workload/workload_run.h"
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
  Bytes bytes(const std::string& name) const { return outputs.at(name).bytes.to_vector(); }
  std::vector<float> get(const std::string& name) const { return outputs.at(name).values(); }
};

// Runs `r` (the pipeline of `trnsim run`: kernels/workload/workload_run.h) with `inputs` (HBM tensor name ->
// bytes in the tensor's dtype) and returns every output.
inline KernelRun run_given(workload::WorkloadRun r, const std::map<std::string, Bytes>& inputs) {
  for (const workload::TensorInfo& t : r.prepared().inputs) {
    INFO("input " << t.name);
    REQUIRE(inputs.count(t.name));
    r.set_input(t.name, tensor::HostTensor{t.dtype, t.shape, inputs.at(t.name)});
  }
  r.run({.checks = false});
  KernelRun k;
  k.stats = r.result().stats;
  k.outputs = std::move(r.outputs());
  k.program = std::move(r.prepared().build.program);
  return k;
}

// Runs `build` with `inputs` and returns every output.
inline KernelRun run_build(kernels::KernelBuild b, const std::map<std::string, Bytes>& inputs,
                           const config::HwConfig& hw) {
  return run_given(workload::WorkloadRun::of_build(std::move(b), hw), inputs);
}

inline KernelRun run_kernel(const std::string& kernel, const nlohmann::json& params,
                            const std::map<std::string, Bytes>& inputs, const config::HwConfig& hw,
                            std::optional<int> cores = {}) {
  return run_given(
      workload::WorkloadRun::of_kernel(kernels::registry().bind(kernel, params), hw, cores, kernel), inputs);
}

}  // namespace trnsim::test
