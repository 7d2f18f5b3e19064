// One run of a workload: the one pipeline behind `trnsim run WORKLOAD.json`, trnsim.nki.simulate_kernel /
// benchmark (python/), tools/bench and the kernel tests, for C++ and Python kernels alike.
//
//   WorkloadRun r(parse_workload(path, sets));  // prepare: hardware, kernel, build, every input source
//   r.run({.trace_path = "t.pftrace"});          // make_inputs, simulate, check
//   run::RunReport rep = r.report();            // stats.json's content
//   std::vector<io::OutputFile> files = r.output_files("out/x", dump_inputs);  // then written at once
//
// The stages are public for callers that look between them (tests edit the inputs after make_inputs, or
// the outputs before check). A numerics run binds the inputs (and the outputs the kernel leaves to the
// caller, zeroed), runs the session while the kernel's references are prepared on a second host thread, moves
// the outputs out of the machine state and runs the checks. Without numerics ("numerics": false) no inputs
// are made (unless `dump_inputs`) and no outputs computed.
//
// Errors: prepare_workload's; InputError "<workload>: out of memory while ..." when the host cannot hold the
// inputs or the machine state; a Python kernel's errors (python/src/py_kernel.h); Interrupted (Ctrl-C) from
// simulate. Messages for the user (notes on the inputs, long reference computations, progress) go to
// WorkloadRunOptions::message, without the "trnsim: <name>: " prefix the CLI adds.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/workload/workload.h"
#include "sim/io/output_files.h"
#include "sim/run/report.h"
#include "sim/run/session.h"

namespace trnsim::workload {

struct WorkloadRunOptions {
  bool full_reference = false;  // FP64 references on every output row (else large outputs are sampled)
  bool dump_inputs = false;     // make the inputs even without numerics (they are written)
  std::string trace_path = {};  // .pftrace / .json, written while the model runs
  bool checks = true;           // the kernel's output checks (false: the outputs only, no references)
  // Notes and progress lines for the user; null: none.
  std::function<void(const std::string&)> message = {};
};

// Where the host time went (seconds), for the CLI's host time line and tools/bench.
struct RunTimes {
  double setup = 0;              // parse, prepare, build, inputs (from construction to the simulation)
  double simulation = 0;         // the session run
  double references = 0;         // after the simulation: waiting for the references, reading, comparing
  double reference_thread = -1;  // the reference thread's own time alongside the simulation (-1: none)
};

class WorkloadRun {
 public:
  explicit WorkloadRun(PreparedWorkload p);
  explicit WorkloadRun(Workload w);
  ~WorkloadRun();
  WorkloadRun(WorkloadRun&&) noexcept;

  // A kernel with bound parameters on `hw`, every input given by the caller (set_input): the run of a
  // kernel outside a workload file (tests, trnsim.nki.simulate_kernel). `cores`: the kernel's own, else
  // this, else 2.
  static WorkloadRun of_kernel(std::unique_ptr<kernels::BoundKernel> kernel, config::HwConfig hw,
                               std::optional<int> cores = {}, const std::string& name = "kernel");
  // A program built already (tests): no checks, every input given.
  static WorkloadRun of_build(kernels::KernelBuild build, config::HwConfig hw,
                              const std::string& name = "kernel");

  const PreparedWorkload& prepared() const { return p_; }
  PreparedWorkload& prepared() { return p_; }
  const isa::Program& program() const { return p_.build.program; }
  const std::string& name() const { return p_.w.name; }
  bool numerics() const { return p_.w.numerics; }

  // An input's values given by the caller (an input of the kernel; InputError for another name or a tensor
  // of another dtype or shape). Replaces a made one.
  void set_input(const std::string& name, tensor::HostTensor t);
  // Makes every input not given (generators, .npy files, recipes), once; returns all of them (editable).
  kernels::Tensors& make_inputs();
  kernels::Tensors& inputs() { return inputs_; }
  // Notes on the inputs (NaN/Inf values, outputs the caller zeroes), from simulate on.
  const std::vector<std::string>& notes() const { return notes_; }

  // Runs the model (numerics if the workload asks for them), with the references prepared alongside.
  const run::SessionResult& simulate(const WorkloadRunOptions& o = {});
  const run::SessionResult& result() const { return result_; }
  run::Session* session() { return session_.get(); }  // from simulate on (tests)
  // The outputs of a numerics run, moved out of the machine state (editable until check()).
  kernels::Tensors& outputs() { return outputs_; }
  // The kernel's output checks (empty without numerics or checks).
  const std::vector<tensor::CheckResult>& check(const WorkloadRunOptions& o = {});
  const std::vector<tensor::CheckResult>& checks() const { return check_results_; }

  // make_inputs (when numerics or dump_inputs), simulate, check.
  void run(const WorkloadRunOptions& o = {});

  // The report of the run (stats.json: run::stats_json(report())).
  run::RunReport report() const;
  const RunTimes& times() const { return times_; }
  std::chrono::steady_clock::time_point start() const { return t0_; }  // when it was constructed
  // The build's warnings as a run says them ("warning: k.py:12: ..."): printed by simulate() and
  // `trnsim validate`, and kept in the report's notes.
  static std::vector<std::string> warning_lines(const PreparedWorkload& p);
  // 0, or run_exit_code's 3 (a check failed) / 4 (time below the roofline) for this report.
  static int exit_code(const run::RunReport& rep);

  // stats.json (from `rep`), host.json (its host time, run::host_json_text), each written output (.npy; its
  // bytes move out of outputs()) and, with `dump_inputs`, DIR/inputs/<name>.npy: the files of the run, to be
  // written all at once.
  std::vector<io::OutputFile> output_files(const run::RunReport& rep, const std::string& out_dir,
                                           bool dump_inputs);

 private:
  struct Async;
  std::vector<std::string> make_notes() const;
  PreparedWorkload p_;
  std::chrono::steady_clock::time_point t0_;
  kernels::Tensors inputs_, outputs_;
  std::vector<std::string> given_;  // inputs set by the caller
  bool inputs_made_ = false;
  std::vector<std::string> notes_;
  std::unique_ptr<run::Session> session_;
  std::vector<kernels::OutputCheck> checks_;
  std::unique_ptr<Async> async_;  // the reference thread
  bool big_references_ = false;
  run::SessionResult result_;
  std::vector<tensor::CheckResult> check_results_;
  bool checked_ = false;
  RunTimes times_;
};

// Exit codes of a workload run besides 0 and 1 (bad input).
inline constexpr int kExitNumericsFail = 3;
inline constexpr int kExitBelowRoofline = 4;

}  // namespace trnsim::workload
