// trnsim run PROGRAM.json [--out DIR] [--no-numerics] [--set path=value ...] [--hw trn2|trn3|FILE]
//            [--trace FILE.pftrace|FILE.json]
//
// Runs an instruction-stream program (docs/program-format.md) on the SystemC model, prints the simulated time
// and per-engine busy time, and writes the tensors marked "output" as .npy into --out (all or nothing), then
// DIR/stats.json when --out is given (tools/trnsim/report.h).
// Tensor "init" (applied before the run, numerics only):
//   {"generator": "normal", "mean": 0, "std": 1, "seed": 1}   {"generator": "uniform", "lo": -1, "hi": 1,
//   "seed": 1}
//   {"generator": "zeros"}   "file.npy" or {"npy": "file.npy"} (relative paths: from the program's folder;
//   float32 values are converted to the tensor dtype, raw bits are copied when the .npy dtype matches its
//   size)
// Tensor "output": true (writes <name>.npy) or "file.npy". Output dtype: float32 for FP32, raw bits otherwise
// (uint16 for BF16/FP16, uint8 for FP8/E8M0, int32 for 32-bit ints).
// --hw defaults to the program's generation. A workload config (top-level "kernel" key) is run by
// run_workload (tools/trnsim/workload.h): there --out defaults to out/<name> and --set overrides workload
// keys.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/base/error.h"
#include "sim/config/hw_config.h"
#include "sim/io/generators.h"
#include "sim/io/npy.h"
#include "sim/isa/names.h"
#include "sim/isa/operand_view.h"
#include "sim/isa/patterns.h"
#include "sim/isa/program_json.h"
#include "sim/isa/semantics.h"
#include "sim/model/run.h"
#include "sim/model/stats_observer.h"
#include "sim/model/trace_observer.h"
#include "sim/trace/open_trace.h"
#include "tools/trnsim/commands.h"
#include "tools/trnsim/report.h"
#include "tools/trnsim/workload.h"

namespace trnsim::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct RunCliOptions {
  std::string program;
  std::string out = ".";
  bool out_given = false;  // --out on the command line: stats.json goes there too
  std::string hw;
  bool no_numerics = false;
  std::vector<std::string> sets;
  bool dump_inputs = false;     // workload configs only
  bool full_reference = false;  // workload configs only
  std::string trace;            // .pftrace / .json, written while the model runs
};

int64_t elements_of(const isa::TensorDecl& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return n;
}

// The whole tensor as an HBM operand [rows, cols] (cols = product of the other dims).
isa::AccessPattern whole(uint32_t index, const isa::TensorDecl& t) {
  const int64_t rows = t.shape.empty() ? 1 : t.shape[0];
  const int64_t cols = rows == 0 ? 0 : elements_of(t) / rows;
  return isa::hbm_rows(index, t.dtype, static_cast<uint32_t>(rows), static_cast<uint32_t>(cols));
}

void store_floats(const std::vector<float>& v, uint32_t index, const isa::Program& p,
                  const isa::Limits& limits, isa::MachineState& st, const std::string& what) {
  const auto& t = p.tensors[index];
  if (v.empty()) return;
  isa::OperandView view(whole(index, t), 0, p, limits, st, what, "init");
  for (uint32_t r = 0; r < view.rows(); ++r)
    for (uint64_t c = 0; c < view.cols(); ++c) view.store(r, c, v[r * view.cols() + c]);
}

void init_tensor(uint32_t index, const isa::Program& p, const isa::Limits& limits, isa::MachineState& st,
                 const fs::path& base) {
  const auto& t = p.tensors[index];
  if (t.init.empty()) return;
  const std::string what = "tensor " + t.name + " init";
  json spec = json::parse(t.init, nullptr, false);
  const int64_t n = elements_of(t);
  std::string npy;
  if (spec.is_string()) npy = spec.get<std::string>();
  if (spec.is_object() && spec.contains("npy") && spec["npy"].is_string())
    npy = spec["npy"].get<std::string>();
  if (!npy.empty()) {
    fs::path path = fs::path(npy).is_absolute() ? fs::path(npy) : base / npy;
    io::NpyArray a = io::read_npy(path.string());
    if (a.elements() != n)
      throw InputError(what + ": " + path.string() + " has " + std::to_string(a.elements()) +
                       " elements, the tensor " + io::shape_str(t.shape) + " has " + std::to_string(n));
    auto& bytes = st.hbm[index];
    if (a.dtype != io::NpyDType::F32 &&
        static_cast<uint32_t>(io::npy_itemsize(a.dtype)) == isa::dtype_size(t.dtype)) {
      std::memcpy(bytes.data(), a.bytes.data(), bytes.size());  // raw bits
    } else if (a.dtype == io::NpyDType::F32) {
      std::vector<float> v(a.data<float>(), a.data<float>() + n);
      store_floats(v, index, p, limits, st, what);
    } else {
      throw InputError(what + ": " + path.string() + " is " + io::npy_dtype_name(a.dtype) +
                       "; expected float32 or raw bits of " + isa::dtype_name(t.dtype));
    }
    return;
  }
  if (!spec.is_object() || !spec.contains("generator") || !spec["generator"].is_string())
    throw InputError(what +
                     ": expected a .npy path or {\"generator\": \"normal\" | \"uniform\" | \"zeros\", ...}");
  auto num = [&](const char* key, double dflt) {
    if (!spec.contains(key)) return dflt;
    if (!spec[key].is_number()) throw InputError(what + "." + key + ": expected a number");
    return spec[key].get<double>();
  };
  const std::string g = spec["generator"].get<std::string>();
  uint64_t seed = 1;
  if (spec.contains("seed")) {  // a non-negative integer, as in workloads (a double cast would be undefined)
    if (!spec["seed"].is_number_unsigned())
      throw InputError(what + ".seed: expected a non-negative integer, found " + spec["seed"].dump());
    seed = spec["seed"].get<uint64_t>();
  }
  std::vector<float> v;
  if (g == "normal")
    v = io::normal(n, num("mean", 0), num("std", 1), seed);
  else if (g == "uniform")
    v = io::uniform(n, num("lo", -1), num("hi", 1), seed);
  else if (g == "zeros")
    v.assign(n, 0.f);
  else
    throw InputError(what + ".generator: expected normal, uniform or zeros, found " + g);
  store_floats(v, index, p, limits, st, what);
}

io::NpyDType npy_type(isa::DType t) {
  switch (isa::dtype_size(t)) {
    case 1:
      return io::NpyDType::U8;
    case 2:
      return io::NpyDType::U16;
    default:
      return t == isa::DType::F32 ? io::NpyDType::F32 : io::NpyDType::I32;
  }
}

int run_command(const RunCliOptions& o) {
  isa::Program program = isa::load_program(o.program);
  config::Overrides overrides;
  for (const auto& s : o.sets) overrides.insert(config::parse_override(s));
  std::string hw_spec = o.hw.empty() ? isa::generation_name(program.generation) : o.hw;
  config::HwConfig hw = config::load_hw_config(hw_spec, overrides);
  isa::Limits limits = hw.limits();

  // Outputs are decided before the run so a bad spec fails early.
  struct Out {
    uint32_t index;
    std::string path;
  };
  std::vector<Out> outs;
  for (uint32_t i = 0; i < program.tensors.size(); ++i) {
    const auto& t = program.tensors[i];
    if (t.output.empty()) continue;
    json spec = json::parse(t.output, nullptr, false);
    if (spec.is_boolean() && !spec.get<bool>()) continue;
    std::string file = spec.is_string() ? spec.get<std::string>() : t.name + ".npy";
    if (!spec.is_string() && !spec.is_boolean())
      throw InputError(o.program + ": tensor " + t.name + " output: expected true or a file name");
    // Outputs stay inside --out: a bare file name, no directories.
    if (file.empty() || fs::path(file).filename() != fs::path(file) || file == "." || file == "..")
      throw InputError(o.program + ": tensor " + t.name + " output: '" + file +
                       "' must be a plain file name (it is written into --out)");
    outs.push_back({i, (fs::path(o.out) / file).string()});
  }
  if (!outs.empty() && !o.no_numerics) {  // created if missing, as for workloads
    std::error_code ec;
    if (!fs::exists(o.out, ec)) fs::create_directories(o.out, ec);
    if (!fs::is_directory(o.out, ec)) throw InputError("--out " + o.out + ": not a directory");
  }

  isa::MachineState state;
  if (!o.no_numerics) {
    state = isa::make_machine_state(program, limits);
    fs::path base = fs::path(o.program).parent_path();
    for (uint32_t i = 0; i < program.tensors.size(); ++i) init_tensor(i, program, limits, state, base);
  }

  model::RunOptions ro;
  ro.numerics = !o.no_numerics;
  // --trace: streamed during the run; the file is removed again unless the whole command succeeds.
  std::unique_ptr<trace::TraceSink> sink;
  std::unique_ptr<model::TraceObserver> observer;
  struct TraceGuard {
    std::string path;
    bool keep = false;
    ~TraceGuard() {
      std::error_code ec;
      if (!path.empty() && !keep) fs::remove(path, ec);
    }
  } trace_guard;
  model::StatsObserver profile(program, hw);
  std::unique_ptr<model::TeeObserver> tee;
  ro.observer = &profile;
  if (!o.trace.empty()) {
    sink = trace::open_trace_file(o.trace);
    trace_guard.path = o.trace;
    observer = std::make_unique<model::TraceObserver>(*sink, program, hw);
    tee = std::make_unique<model::TeeObserver>(std::vector<model::ModelObserver*>{observer.get(), &profile});
    ro.observer = tee.get();
  }
  model::RunResult r = model::run_program(program, hw, ro, o.no_numerics ? nullptr : &state);
  if (sink) {
    sink->close();
    trace_guard.keep = true;
    std::printf("wrote trace %s\n", o.trace.c_str());
  }

  const auto& s = r.stats;
  std::printf("simulated time: %.3f ns (%s, %llu instructions)\n", r.end_time.ns(), hw.name.c_str(),
              static_cast<unsigned long long>(s.instructions));
  std::printf("%-6s %-5s %12s %14s %8s %16s\n", "core", "engine", "instructions", "busy_ns", "busy_%",
              "semaphore_wait_ns");
  for (int c = 0; c < program.num_cores; ++c)
    for (int e = 0; e < isa::kNumEngines; ++e) {
      const auto& es = s.cores[c].engines[e];
      double pct = r.end_time.count() ? 100.0 * es.busy.count() / r.end_time.count() : 0.0;
      std::printf("%-6d %-5s %12llu %14.3f %8.1f %16.3f\n", c, isa::engine_name(static_cast<isa::Engine>(e)),
                  static_cast<unsigned long long>(es.instructions), es.busy.ns(), pct,
                  es.semaphore_wait.ns());
    }
  for (int c = 0; c < program.num_cores; ++c)
    std::printf("core %d: DMA transfers %llu, %llu bytes; PE throttled %.3f ns\n", c,
                static_cast<unsigned long long>(s.cores[c].dma_transfers),
                static_cast<unsigned long long>(s.cores[c].dma_bytes), s.cores[c].pe_throttled.ns());
  std::printf("HBM: %llu bytes, %.1f GB/s average\n", static_cast<unsigned long long>(s.hbm_bytes()),
              s.hbm_GBps());

  const auto write_summary = [&] {
    if (!o.out_given) return;
    write_stats(o.out, stats_json(program_summary(o.program, program, hw, s, profile.stats())));
    std::printf("wrote %s\n", (fs::path(o.out) / "stats.json").c_str());
  };
  if (o.no_numerics) {
    if (!outs.empty()) std::printf("outputs not written (--no-numerics)\n");
    write_summary();
    return 0;
  }
  std::vector<io::NpyOutput> files;
  for (const auto& out : outs) {
    const auto& t = program.tensors[out.index];
    files.push_back({out.path, npy_type(t.dtype), t.shape, state.hbm[out.index].data()});
  }
  io::write_npy_all(files);
  for (const auto& f : files) std::printf("wrote %s\n", f.path.c_str());
  write_summary();
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto opts = std::make_shared<RunCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Run a workload (a kernel with its parameters and inputs: configs/workloads/) or an instruction-stream "
      "program (docs/program-format.md) on the simulated LNC=2 pair");
  cmd->add_option("config", opts->program, "workload JSON (has a \"kernel\" key) or program JSON")
      ->required();
  cmd->add_option(
      "--out", opts->out,
      "output directory (created if missing): stats.json and the output tensors (.npy); workloads "
      "default to out/<name>, programs to the current directory");
  cmd->add_option("--hw", opts->hw,
                  "hardware config: trn2, trn3 or a JSON file (default: the program's generation)");
  cmd->add_option("--set", opts->sets,
                  "override a value: for a workload any key, e.g. --set params.M=512 or "
                  "--set hardware.overrides.hbm.bandwidth_GBps=600; for a program a hardware parameter, "
                  "e.g. --set hbm.bandwidth_GBps=600");
  cmd->add_flag("--no-numerics", opts->no_numerics, "timing only: no functional results, no outputs");
  cmd->add_flag("--dump-inputs", opts->dump_inputs,
                "workload configs: also write the inputs used (DIR/inputs/)");
  cmd->add_flag("--full-reference", opts->full_reference,
                "workload configs: compute the FP64 host references on every output row (large outputs are "
                "otherwise checked on an evenly spaced sample of rows)");
  cmd->add_option("--trace", opts->trace,
                  "write a trace while running: FILE.pftrace (Perfetto) or FILE.json");
  cmd->callback([opts, cmd] {
    // Workload configs (a top-level "kernel" key) go through the kernel registry: tools/trnsim/workload.h.
    if (is_workload_file(opts->program)) {
      if (!opts->hw.empty())
        throw InputError(
            "--hw applies to program JSON; a workload names its hardware (use --set hardware=...)");
      RunWorkloadOptions w{opts->program,       cmd->get_option("--out")->count() ? opts->out : std::string(),
                           opts->no_numerics,   opts->dump_inputs,
                           opts->sets,          opts->trace,
                           opts->full_reference};
      if (int rc = run_workload(w); rc != 0) throw CLI::RuntimeError(rc);
      return;
    }
    if (opts->dump_inputs) throw InputError("--dump-inputs applies to workload configs only");
    opts->out_given = cmd->get_option("--out")->count() > 0;
    if (int rc = run_command(*opts); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace trnsim::cli
