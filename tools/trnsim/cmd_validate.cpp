// trnsim validate WORKLOAD.json: checks a workload without running it (schema, hardware config and overrides,
// kernel parameters and core count, the program build, every input source against the kernel's inputs, the
// outputs); a pipeline file or a chained workload: every stage so, and every link (kernels/workload/chain.h).
// trnsim validate PROGRAM.json: reads an instruction-stream program and checks every instruction against the
// hardware's rules (--set: hardware parameters, as for `trnsim run PROGRAM.json`).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/workload/chain.h"
#include "kernels/workload/workload.h"
#include "sim/base/error.h"
#include "sim/base/log.h"
#include "sim/config/hw_config.h"
#include "sim/isa/names.h"
#include "sim/isa/program_json.h"
#include "sim/isa/semantics.h"
#include "tools/trnsim/commands.h"
#include "tools/trnsim/run_log.h"

namespace trnsim::cli {
namespace {

struct ValidateOptions {
  std::string path;
  std::vector<std::string> sets;
};

// A program JSON (no "kernel" key, docs/program-format.md): read, and every instruction checked against the
// hardware's rules as the model would when it issues it.
void validate_program(const ValidateOptions& o) {
  const isa::Program program = isa::load_program(o.path);
  config::Overrides overrides;
  // Applied in order, so a path set twice takes the later value, as a workload's --set does.
  for (const auto& s : o.sets) {
    auto [path, value] = config::parse_override(s);
    overrides.insert_or_assign(std::move(path), std::move(value));
  }
  const config::HwConfig hw = config::load_hw_config(isa::generation_name(program.generation), overrides);
  const isa::Limits limits = hw.limits();
  uint64_t insts = 0;
  for (size_t c = 0; c < program.streams.size(); ++c)
    for (int e = 0; e < isa::kNumEngines; ++e) {
      const auto& stream = program.streams[c][static_cast<size_t>(e)];
      for (size_t i = 0; i < stream.size(); ++i) {
        try {
          isa::check(stream[i], program, limits);
        } catch (const RuleError& err) {
          throw RuleError(fmt::format("{}: cores[{}].{}[{}]: {}", o.path, c,
                                      isa::engine_name(static_cast<isa::Engine>(e)), i, err.what()));
        }
      }
      insts += stream.size();
    }
  std::printf("%s: ok: program on %s, %d core%s, %zu tensor%s, %llu instructions\n", o.path.c_str(),
              hw.name.c_str(), program.num_cores, program.num_cores == 1 ? "" : "s", program.tensors.size(),
              program.tensors.size() == 1 ? "" : "s", static_cast<unsigned long long>(insts));
}

// A chain (a pipeline file, or a workload reading other workloads' outputs): every stage prepared and every
// link checked, as `trnsim run` does before it simulates.
void validate_chain(const ValidateOptions& o) {
  const workload::Chain c = workload::load_chain(o.path, o.sets, false);
  std::vector<std::string> names;
  for (const workload::ChainStage& s : c.stages) {
    names.push_back(s.name());
    for (const std::string& w : workload::WorkloadRun::warning_lines(s.run->prepared()))
      log::run_message(s.name(), w);
  }
  std::printf("%s: ok: chain %s, %zu stage%s (%s)\n", o.path.c_str(), c.name.c_str(), c.stages.size(),
              c.stages.size() == 1 ? "" : "s", fmt::format("{}", fmt::join(names, " -> ")).c_str());
}

void run_validate(const ValidateOptions& o) {
  if (workload::is_pipeline_file(o.path) ||
      (workload::is_workload_file(o.path) && workload::has_chained_inputs(o.path, o.sets)))
    return validate_chain(o);
  if (!workload::is_workload_file(o.path)) return validate_program(o);
  const workload::PreparedWorkload p = workload::prepare_workload(workload::parse_workload(o.path, o.sets));
  for (const std::string& w : workload::WorkloadRun::warning_lines(p)) log::run_message(p.w.name, w);
  uint64_t insts = 0;
  for (const auto& core : p.build.program.streams)
    for (const auto& stream : core) insts += stream.size();
  const int cores = p.build.program.num_cores;
  std::printf("%s: ok: kernel %s on %s, %d core%s, %zu input%s, %zu output%s, %llu instructions\n",
              o.path.c_str(), p.w.kernel.c_str(), p.hw.name.c_str(), cores, cores == 1 ? "" : "s",
              p.inputs.size(), p.inputs.size() == 1 ? "" : "s", p.outputs.size(),
              p.outputs.size() == 1 ? "" : "s", static_cast<unsigned long long>(insts));
}

}  // namespace

void add_validate_command(CLI::App& app) {
  auto opts = std::make_shared<ValidateOptions>();
  CLI::App* sub = app.add_subcommand("validate",
                                     "Check a workload config (schema, hardware, kernel parameters, inputs, "
                                     "shapes) or an instruction-stream "
                                     "program without running it");
  sub->add_option("workload", opts->path, "workload .json (configs/workloads/) or program .json")->required();
  sub->add_option(
      "--set", opts->sets,
      "override a workload key: PATH=VALUE (e.g. params.M=512); for a program a hardware parameter");
  add_log_options(sub);
  sub->callback([opts] { on_file(opts->path, [&] { run_validate(*opts); }); });
}

}  // namespace trnsim::cli
