// Test helper for the cross-entropy kernels: runs a workload (JSON built in the test) through the same path
// as `trnsim run` (WorkloadRun: parse, prepare, make inputs with the kernel's recipes, run with numerics, the
// kernel's checks) and returns the inputs, outputs and check results.
#pragma once

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kernels/workload/workload_run.h"
#include "sim/numerics/float_formats.h"

namespace trnsim::test {

struct CeRun {
  kernels::Tensors inputs, outputs;
  std::vector<tensor::CheckResult> checks;
  double time_ns = 0;
  std::map<isa::Opcode, int64_t> ops;  // instructions of both cores by opcode

  const tensor::HostTensor& out(const std::string& n) const { return outputs.at(n); }
  const tensor::HostTensor& in(const std::string& n) const { return inputs.at(n); }
  const tensor::CheckResult& check(const std::string& n) const {
    for (const auto& c : checks)
      if (c.output == n) return c;
    FAIL("no check of " << n);
    return checks.front();
  }
  // Every check passed; prints the failures otherwise.
  bool all_pass() const {
    bool ok = true;
    for (const auto& c : checks)
      for (const auto& f : c.failures) {
        UNSCOPED_INFO(c.output << ": " << f);
        ok = false;
      }
    return ok;
  }
  uint16_t bf16(const std::string& n, int64_t i) const {
    uint16_t v;
    std::memcpy(&v, outputs.at(n).bytes.data() + 2 * i, 2);
    return v;
  }
};

// A workload of `kernel` with `params` and `inputs` ("inputs" key of the workload format) on `hw`; `tamper`
// (optional) changes the outputs before the checks run.
inline CeRun run_ce(const std::string& kernel, const nlohmann::json& params, const nlohmann::json& inputs,
                    const std::string& hw = "trn3",
                    const std::function<void(kernels::Tensors&)>& tamper = nullptr) {
  nlohmann::json w = {
      {"name", "test"}, {"hardware", hw}, {"kernel", kernel}, {"params", params}, {"inputs", inputs}};
  const auto dir = std::filesystem::temp_directory_path() / "trnsim_test_ce";
  std::filesystem::create_directories(dir);
  const auto path = dir / (kernel + "_" + std::to_string(std::hash<std::string>{}(w.dump())) + ".json");
  std::ofstream(path) << w.dump();
  workload::WorkloadRun run(workload::parse_workload(path.string()));
  const workload::WorkloadRunOptions o{.full_reference = true};
  CeRun r;
  r.inputs = run.make_inputs();
  r.time_ns = run.simulate(o).stats.total_time.ns();
  for (const auto& core : run.program().streams)
    for (const auto& stream : core)
      for (const auto& in : stream) ++r.ops[in.op];
  if (tamper) tamper(run.outputs());
  r.checks = run.check(o);
  r.outputs = std::move(run.outputs());
  std::filesystem::remove(path);
  return r;
}

// The usual inputs of a backward test: recipe logits/targets, forward statistics, grad_output.
inline nlohmann::json bwd_inputs(const nlohmann::json& logits_args,
                                 const nlohmann::json& grad_output = {{"generator", "constant"},
                                                                      {"value", 1.0}}) {
  nlohmann::json gen = logits_args;
  gen["recipe"] = "lm_logits";
  return {{"gen", gen}, {"stats", {{"recipe", "forward_stats"}}}, {"grad_output", grad_output}};
}

}  // namespace trnsim::test
