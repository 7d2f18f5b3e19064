// trnsim validate WORKLOAD.json: checks a workload without running it (schema, hardware config and overrides,
// kernel parameters and core count, the program build, every input source against the kernel's inputs, the
// outputs).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "kernels/workload/workload.h"
#include "tools/trnsim/commands.h"

namespace trnsim::cli {
namespace {

struct ValidateOptions {
  std::string path;
  std::vector<std::string> sets;
};

void run_validate(const ValidateOptions& o) {
  const workload::PreparedWorkload p = workload::prepare_workload(workload::parse_workload(o.path, o.sets));
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
  CLI::App* sub = app.add_subcommand(
      "validate",
      "Check a workload config (schema, hardware, kernel parameters, inputs, shapes) without running it");
  sub->add_option("workload", opts->path, "workload .json (configs/workloads/)")->required();
  sub->add_option("--set", opts->sets, "override a workload key: PATH=VALUE (e.g. params.M=512)");
  sub->callback([opts] { on_file(opts->path, [&] { run_validate(*opts); }); });
}

}  // namespace trnsim::cli
