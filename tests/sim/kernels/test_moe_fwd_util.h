// Helpers of the MoE forward tests: a workload of blockwise_mm_fwd_mxfp8 on small shapes, run the way
// `trnsim run` runs it (parse, prepare, make inputs with the routing recipe, run with numerics, the kernel's
// checks with full references).
#pragma once

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "kernels/workload/workload.h"
#include "kernels/workload/workload_run.h"
#include "sim/run/session.h"

namespace trnsim::test {

using json = nlohmann::json;

// A scratch directory for one test process, removed at exit.
inline const std::filesystem::path& moe_tmp_dir() {
  static const struct Dir {
    std::filesystem::path p;
    Dir() {
      p = std::filesystem::temp_directory_path() / ("trnsim_moe_test_" + std::to_string(::getpid()));
      std::filesystem::create_directories(p);
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(p, ec);
    }
  } dir;
  return dir.p;
}

// The default inputs: normal hidden states, small normal weights and biases, the routing recipe.
inline json moe_inputs(double zipf = 0.5, int64_t seed = 4) {
  return {{"hidden_states", {{"generator", "normal"}, {"seed", 1}}},
          {"gate_up_proj_weight", {{"generator", "normal"}, {"seed", 2}, {"std", 0.05}}},
          {"down_proj_weight", {{"generator", "normal"}, {"seed", 3}, {"std", 0.05}}},
          {"routing", {{"recipe", "routing"}, {"seed", seed}, {"zipf", zipf}}}};
}

struct MoeRun {
  workload::PreparedWorkload prepared;
  kernels::Tensors inputs = {}, outputs = {};
  run::SessionResult result = {};
  std::vector<tensor::CheckResult> checks = {};
  std::vector<kernels::KernelStat> stats = {};

  const tensor::CheckResult& check(const std::string& output) const {
    for (const auto& c : checks)
      if (c.output == output) return c;
    FAIL("no check of " << output);
    return checks.front();
  }
  double stat(const std::string& name) const {
    for (const auto& s : stats)
      if (s.name == name) return s.value;
    FAIL("no kernel stat " << name);
    return 0;
  }
  bool all_pass() const {
    for (const auto& c : checks)
      if (!c.pass) return false;
    return !checks.empty();
  }
};

inline constexpr const char* kMoeFwd = "blockwise_mm_fwd_mxfp8";
inline constexpr const char* kMoeBwd = "blockwise_mm_bwd_mxfp8";

// The small layer both kernels' tests start from: T = 256 tokens, top-2 over E = 4 experts, blocks of 128:
// N = ceil(509 / 128) + 3 = 7 blocks; both cores.
inline json small(json extra = json::object()) {
  json p = {{"T", 256},
            {"H", 512},
            {"I_TP", 256},
            {"E", 4},
            {"top_k", 2},
            {"block_size", 128},
            {"skip_dma", {{"skip_token", true}}}};
  p.merge_patch(extra);
  return p;
}

// Writes the workload of `kernel` to a file and prepares it (what `trnsim run` and `trnsim validate` do
// first). Parameters without a "schedule" run trnsim_optimized, the stream the cases of test_moe_fwd.cpp and
// test_moe_bwd.cpp test; the cases of the library schedule name it ("schedule": "nki_library"), and
// prepare_moe_as_given tests the kernels' own default.
inline workload::PreparedWorkload prepare_moe_as_given(const json& params, const json& inputs = moe_inputs(),
                                                       const std::string& kernel = kMoeFwd) {
  static std::atomic<int> n{0};
  const json w = {
      {"name", "moe_test"}, {"hardware", "trn3"}, {"kernel", kernel}, {"params", params}, {"inputs", inputs}};
  const auto path = moe_tmp_dir() / fmt::format("w{}.json", n++);
  std::ofstream(path) << w.dump(1);
  return workload::prepare_workload(workload::parse_workload(path.string()));
}
inline workload::PreparedWorkload prepare_moe(const json& params, const json& inputs = moe_inputs(),
                                              const std::string& kernel = kMoeFwd) {
  json p = params;
  if (!p.contains("schedule")) p["schedule"] = "trnsim_optimized";
  return prepare_moe_as_given(p, inputs, kernel);
}

// Runs with numerics and full references; `edit` may replace inputs after the recipes (e.g. pre-quantized
// weights made on the host).
// The checks run in one step after the simulation (run_moe_references_alongside: as `trnsim run`, their
// references prepared while it runs).
inline MoeRun run_moe(const json& params, const json& inputs = moe_inputs(),
                      const std::function<void(kernels::Tensors&)>& edit = {},
                      const std::string& kernel = kMoeFwd) {
  workload::WorkloadRun run(prepare_moe(params, inputs, kernel));
  if (edit) edit(run.make_inputs());
  run.simulate({.checks = false});
  MoeRun r{std::move(run.prepared())};
  r.inputs = std::move(run.inputs());
  r.outputs = std::move(run.outputs());
  r.result = run.result();
  r.checks = workload::evaluate_checks(r.prepared, r.inputs, r.outputs, true);
  r.stats = r.prepared.kernel->input_stats(r.inputs);
  return r;
}

// As run_moe, the way `trnsim run` checks: the references prepared on a second thread while the simulation
// runs, then the comparisons.
inline MoeRun run_moe_references_alongside(const json& params, const json& inputs = moe_inputs(),
                                           const std::string& kernel = kMoeFwd) {
  workload::WorkloadRun run(prepare_moe(params, inputs, kernel));
  REQUIRE(workload::has_prepare_step(workload::make_checks(run.prepared())));
  const workload::WorkloadRunOptions o{.full_reference = true};
  run.simulate(o);
  REQUIRE(run.times().reference_thread >= 0);  // the references were prepared alongside
  // As trnsim run, the outputs moved out of the machine state: then reading one again, or running, is an
  // error.
  run::Session& s = *run.session();
  const std::string first = run.prepared().outputs.front().name;
  CHECK_THROWS_WITH(s.read(first), "tensor '" + first + "' was taken already");
  CHECK_THROWS_WITH(s.take(first), "tensor '" + first + "' was taken already");
  CHECK_THROWS_WITH(s.run({.numerics = true}),
                    "Session::run: tensors were taken out of this session's state");
  run.check(o);
  MoeRun r{std::move(run.prepared())};
  r.inputs = std::move(run.inputs());
  r.outputs = std::move(run.outputs());
  r.result = run.result();
  r.checks = run.checks();
  return r;
}

// The same check results, metric for metric (the bits of every value).
inline void expect_same_checks(const MoeRun& a, const MoeRun& b) {
  REQUIRE(a.checks.size() == b.checks.size());
  for (size_t i = 0; i < a.checks.size(); ++i) {
    INFO(a.checks[i].output);
    CHECK(a.checks[i].output == b.checks[i].output);
    CHECK(a.checks[i].pass == b.checks[i].pass);
    REQUIRE(a.checks[i].metrics.size() == b.checks[i].metrics.size());
    for (size_t m = 0; m < a.checks[i].metrics.size(); ++m) {
      INFO(a.checks[i].metrics[m].name);
      CHECK(std::memcmp(&a.checks[i].metrics[m].value, &b.checks[i].metrics[m].value, sizeof(double)) == 0);
    }
  }
}

// The error message of preparing (building) a workload with these parameters.
inline std::string moe_error(const json& params, const json& inputs = moe_inputs(),
                             const std::string& kernel = kMoeFwd) {
  try {
    prepare_moe(params, inputs, kernel);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace trnsim::test
