// One run of a program on the simulated machine: bind the inputs, run the model with the stats observer
// (and the trace observer and a progress callback when asked), read the outputs. The one pipeline behind
// `trnsim run PROGRAM.json`, `trnsim run WORKLOAD.json`, the benchmarks and the tests. Plain C++ header.
//
//   run::Session s(program, hw);
//   s.set_input("x", x);                       // numerics runs: every tensor not set stays poisoned (NaN)
//   run::SessionResult r = s.run({.numerics = true, .trace_path = "t.pftrace"});
//   tensor::HostTensor y = s.read("y");
//
// Errors: InputError for a tensor name the program lacks, a dtype or shape that differs from the program's
// declaration, reading without a numerics run; model errors propagate (sim/model/run.h). A trace file is
// written while the model runs (its folder is created if missing), to a temporary renamed into place when it
// is closed (sim/trace/output_file.h); if the run fails, the trace so far is kept, marked incomplete (an
// instant "trace incomplete: the run failed" on a "trnsim" track), and the error's message says where it
// is. A run that ends at once (a second Ctrl-C) leaves whatever was at the trace path as it was.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "sim/config/hw_config.h"
#include "sim/isa/instruction.h"
#include "sim/isa/semantics.h"
#include "sim/model/run.h"
#include "sim/model/stats_observer.h"
#include "sim/tensor/host_tensor.h"

namespace trnsim::run {

struct SessionOptions {
  bool numerics = true;
  std::string trace_path =
      {};  // .pftrace / .perfetto-trace / .pb (Perfetto) or .json (Chrome JSON); "" = none
  // Called every `progress_every` completed instructions: (simulated time, completed, total).
  std::function<void(Picoseconds, uint64_t, uint64_t)> progress = {};
  uint64_t progress_every = 20000;
};

struct TraceSummary {
  std::string path;
  uint64_t slices = 0, flows = 0, counter_samples = 0;
  uint64_t bytes = 0;  // file size
};

struct SessionResult {
  model::RunStats stats;
  model::ProfileStats profile;
  TraceSummary trace;  // path empty when no trace was written
};

class Session {
 public:
  // `program` and `hw` must outlive the session.
  Session(const isa::Program& program, const config::HwConfig& hw);
  ~Session();

  const isa::Program& program() const { return program_; }
  const config::HwConfig& hw() const { return hw_; }

  // Index of the HBM tensor called `name` (shared, or the first private one); InputError if none.
  uint32_t tensor_index(const std::string& name) const;
  // Initial contents of an HBM tensor (used by numerics runs). A file-backed tensor (sim/base/host_bytes.h)
  // is mapped again privately, not copied: the machine and the caller share its pages until one writes.
  void set_input(const std::string& name, const tensor::HostTensor& t);
  void set_input(uint32_t index, const tensor::HostTensor& t);
  // The same, its bytes moved into the machine (e.g. outputs the caller zeroes).
  void set_input(const std::string& name, tensor::HostTensor&& t);

  SessionResult run(const SessionOptions& options);

  // A tensor after a numerics run.
  tensor::HostTensor read(const std::string& name) const;
  tensor::HostTensor read(uint32_t index) const;
  // The same, moved out of the machine state instead of copied (a 1 GB output is not duplicated); reading
  // or taking it again is an InputError, and so is another run().
  tensor::HostTensor take(const std::string& name);

 private:
  isa::MachineState& state();
  void check_input(uint32_t index, const tensor::HostTensor& t) const;
  void bind(uint32_t index, HostBytes bytes);
  const isa::Program& program_;
  const config::HwConfig& hw_;
  std::unique_ptr<isa::MachineState> state_;
  std::map<uint32_t, HostBytes> initial_;  // inputs set before the state exists
  bool ran_numerics_ = false;
  std::set<uint32_t> taken_;  // tensors moved out by take()
};

}  // namespace trnsim::run
