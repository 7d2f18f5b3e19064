// trnsim run WORKLOAD.json: prepares the workload (kernels/workload/workload.h), makes its inputs, runs it
// through the session, checks the outputs, prints the summary and writes stats.json, the outputs and
// (--dump-inputs) the inputs, all or nothing. Exit codes: 0 ok, 3 a numerics check failed (everything is
// still written), 4 the simulated time is below the roofline lower bound (a simulator bug).
#include <sys/resource.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <system_error>

#include "kernels/workload/workload.h"
#include "sim/base/address_limit.h"
#include "sim/base/error.h"
#include "sim/base/interrupt.h"
#include "sim/io/npy.h"
#include "sim/io/output_files.h"
#include "sim/run/report.h"
#include "sim/run/session.h"
#include "sim/trace/open_trace.h"
#include "tools/trnsim/host_memory.h"
#include "tools/trnsim/out_dir.h"
#include "tools/trnsim/run_options.h"

namespace trnsim::cli {

namespace fs = std::filesystem;

namespace {

double tensor_bytes(isa::DType dtype, const std::vector<int64_t>& shape) {
  return static_cast<double>(tensor::elements_of(shape)) * isa::dtype_size(dtype);
}

// A run with numerics holds the host's copy of the inputs (the references read it) and the simulated
// machine's copy of every HBM tensor of the program and of its SBUF and PSUM: refused now, with the figures,
// when this machine cannot hold that.
void check_host_memory(const workload::PreparedWorkload& p, bool dump_inputs) {
  if (!p.w.numerics && !dump_inputs) return;
  double need = 0;
  for (const workload::TensorInfo& t : p.inputs) need += tensor_bytes(t.dtype, t.shape);
  if (p.w.numerics) {
    for (const isa::TensorDecl& t : p.build.program.tensors) need += tensor_bytes(t.dtype, t.shape);
    const isa::Limits l = p.hw.limits();  // each core's SBUF and PSUM
    need += 2.0 * l.partitions * (l.sbuf_bytes_per_partition + l.psum_bytes_per_partition);
  }
  // The references' own copies of their operands.
  if (p.w.numerics) need += workload::reference_host_bytes(p);
  const std::optional<uint64_t> have = available_host_bytes();
  if (!have || need <= static_cast<double>(*have)) return;
  const std::string instead = !p.w.numerics ? "run without --dump-inputs"
                              : dump_inputs ? "run with --no-numerics (timing only) and without --dump-inputs"
                                            : "run with --no-numerics (timing only)";
  const auto size = [](double b) {
    return b >= 1e9 ? fmt::format("{:.1f} GB", b / 1e9) : fmt::format("{:.1f} MB", b / 1e6);
  };
  throw InputError(fmt::format(
      "{}: this run needs at least {} of host memory ({}), and {} is available: {}, or on a machine with "
      "more "
      "memory",
      p.w.file, size(need),
      p.w.numerics ? "the host's copy of the inputs, the simulated machine's HBM tensors, SBUF and PSUM, and "
                     "the references' copies of their operands"
                   : "the inputs to dump",
      size(static_cast<double>(*have)), instead));
}

}  // namespace

int run_workload_file(const RunCliOptions& o) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  workload::Workload w = workload::parse_workload(o.config, o.sets);
  if (o.no_numerics) w.numerics = false;
  workload::PreparedWorkload p = workload::prepare_workload(std::move(w));
  const isa::Program& prog = p.build.program;
  const std::string out_dir = o.out.empty() ? (fs::path("out") / p.w.name).string() : o.out;
  std::error_code ec;

  // Every file this run writes, decided before it simulates: none may land on another or on an input.
  const auto in_dir = [&](const std::string& rel) { return (fs::path(out_dir) / rel).string(); };
  std::vector<io::NamedPath> paths{{in_dir("stats.json"), "stats.json"}};
  if (p.w.numerics)
    for (const std::string& n : p.written)
      paths.push_back({in_dir(n + ".npy"), fmt::format("output '{}'", n)});
  if (o.dump_inputs)
    for (const workload::TensorInfo& t : p.inputs)
      paths.push_back({in_dir("inputs/" + t.name + ".npy"), fmt::format("--dump-inputs of '{}'", t.name)});
  if (!o.trace.empty()) paths.push_back({o.trace, "--trace"});
  std::vector<std::string> read_files;  // what this run reads: never written over, never removed
  if (fs::is_regular_file(o.config, ec)) {
    paths.push_back({o.config, "the workload file", true});
    read_files.push_back(o.config);
  }
  try {
    paths.push_back({config::resolve_config_path(p.w.hardware), "the hardware config", true});
  } catch (const InputError&) {
    // loaded already: found
  }
  for (const workload::InputEntry& e : p.w.inputs)
    if (!e.is_recipe && e.source.is_npy) {
      paths.push_back({e.source.npy, fmt::format("input '{}' (inputs.{}.npy)", e.key, e.key), true});
      read_files.push_back(e.source.npy);
    }
  try {
    io::check_distinct_files(paths);
    io::check_not_directories(paths);
    if (!o.trace.empty()) trace::check_trace_path(o.trace);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", p.w.file, e.what()));
  }
  check_host_memory(p, o.dump_inputs);
  OutDir out(out_dir);
  if (o.dump_inputs) out.add_subfolder("inputs");

  kernels::Tensors inputs;
  try {
    if (p.w.numerics || o.dump_inputs) inputs = workload::make_inputs(p);
  } catch (const std::bad_alloc&) {
    throw InputError(fmt::format("{}: out of memory while making the inputs", p.w.file));
  }
  std::vector<std::string> notes = workload::input_notes(p, inputs);
  // Outputs the kernel accumulates into without zeroing them (e.g. skip_grad_initialization): trnsim, the
  // caller, zeroes them.
  const std::vector<std::string> zeroed = p.kernel->zeroed_outputs();
  if (!zeroed.empty())
    notes.push_back(
        fmt::format("outputs {} start at zero, set by trnsim as the caller (kernel parameters "
                    "leave their initialization to the caller)",
                    fmt::join(zeroed, ", ")));
  for (const std::string& n : notes)
    std::fprintf(stderr, "trnsim: %s: note: %s\n", p.w.name.c_str(), n.c_str());
  run::Session session(prog, p.hw);
  if (p.w.numerics) {
    for (const auto& [name, t] : inputs) session.set_input(name, t);
    for (const std::string& n : zeroed) {
      const workload::TensorInfo* t = p.output(n);
      session.set_input(n, tensor::HostTensor::zeros(t->dtype, t->shape));
    }
  }

  // The references depend on the inputs alone: their prepare steps run on a second host thread while the
  // simulation runs (the same code and thread counts either way, so the same bytes).
  const auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  std::vector<kernels::OutputCheck> checks;
  if (p.w.numerics) checks = workload::make_checks(p);
  const bool big_references = p.w.numerics && workload::reference_flops(p) > 2e10;
  std::future<double> prepared;  // the reference thread's seconds
  if (workload::has_prepare_step(checks)) {
    if (big_references)
      std::fprintf(stderr, "trnsim: %s: computing the FP64 host references on a second thread\n",
                   p.w.name.c_str());
    try {
      prepared = std::async(std::launch::async, [&] {
        const auto a = clock::now();
        workload::prepare_checks(p, checks, inputs, o.full_reference);
        return secs(a, clock::now());
      });
    } catch (const std::system_error&) {
      // No thread to spare (ulimit -u): the checks compute the references after the simulation.
    }
  }

  run::SessionOptions so;
  so.numerics = p.w.numerics;
  so.trace_path = o.trace;
  auto last = t0;
  so.progress = [&](Picoseconds sim, uint64_t done, uint64_t total) {
    const auto now = clock::now();
    if (now - t0 < std::chrono::seconds(3) || now - last < std::chrono::seconds(2)) return;
    last = now;
    std::fprintf(stderr, "trnsim: %s: %.0f %% (%llu of %llu instructions), simulated %.3f us, %.0f s\n",
                 p.w.name.c_str(),
                 total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 0.0,
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total),
                 sim.ns() / 1e3, std::chrono::duration<double>(now - t0).count());
  };
  const auto t_sim = clock::now();
  run::SessionResult res;
  try {
    res = session.run(so);
  } catch (const Interrupted& e) {
    // Now, not after unwinding: that would wait for the reference thread.
    std::fprintf(stderr, "trnsim: %s: %s\n", p.w.name.c_str(), e.what());
    interrupt::exit_now();
  } catch (const std::bad_alloc&) {
    throw InputError(
        fmt::format("{}: out of memory while running the model{}", p.w.file,
                    p.w.numerics ? " with numerics (the machine state holds every HBM tensor)" : ""));
  }
  const auto t_ref = clock::now();
  double reference_thread = -1;  // seconds, when the references ran alongside the simulation
  if (prepared.valid()) {
    if (big_references && prepared.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
      std::fprintf(stderr, "trnsim: %s: waiting for the FP64 host references\n", p.w.name.c_str());
    reference_thread = prepared.get();
  }

  const kernels::RooflineWork work = workload::roofline_work(p);
  run::RunReport rep = run::make_report(prog, p.hw, res, work.useful_flops, work.compulsory_hbm_bytes);
  rep.workload = p.w.name;
  rep.kernel = p.w.kernel;
  rep.params = p.kernel->params();
  rep.notes = notes;
  if (!inputs.empty())
    for (const kernels::KernelStat& s : p.kernel->input_stats(inputs))
      rep.kernel_stats.push_back({s.name, s.value, s.unit, s.description});

  kernels::Tensors outputs;
  if (p.w.numerics) {
    for (const workload::TensorInfo& t : p.outputs) outputs.emplace(t.name, session.take(t.name));
    // The machine's copies of the inputs are not read again: released before the checks, whose host
    // references may need as much memory again on the largest layers.
    for (const auto& [name, t] : inputs)
      if (!outputs.count(name)) session.take(name);
  }
  if (!p.w.numerics) {
    rep.numerics_note = "off (--no-numerics or \"numerics\": false): timing only, no outputs computed";
  } else if (p.kernel->checks().empty()) {
    rep.numerics_note = fmt::format("no host reference for kernel '{}' with these parameters", p.w.kernel);
  } else {
    if (big_references && reference_thread < 0)
      std::fprintf(stderr, "trnsim: %s: computing the FP64 host references\n", p.w.name.c_str());
    rep.checks = workload::evaluate_checks(p, checks, inputs, outputs, o.full_reference);
    rep.numerics_run = true;
  }
  const auto t_write = clock::now();
  rep.wall_seconds = std::chrono::duration<double>(clock::now() - t0).count();

  // stats.json, the outputs (when computed), the inputs (--dump-inputs): all or nothing.
  std::vector<io::OutputFile> files;
  const std::string text = run::stats_text(run::stats_json(rep));
  files.push_back(
      {(fs::path(out_dir) / "stats.json").string(), std::vector<uint8_t>(text.begin(), text.end())});
  if (p.w.numerics)  // the checks are done: each output's bytes move into its file's image, uncopied
    for (const std::string& n : p.written) {
      tensor::HostTensor& t = outputs.at(n);
      files.push_back({(fs::path(out_dir) / (n + ".npy")).string(),
                       io::npy_header(tensor::npy_dtype_of(t.dtype), t.shape), std::move(t.bytes)});
    }
  if (o.dump_inputs)
    for (const workload::TensorInfo& ti : p.inputs) {
      const tensor::HostTensor& t = inputs.at(ti.name);
      files.push_back({(fs::path(out_dir) / "inputs" / (ti.name + ".npy")).string(),
                       io::encode_npy(tensor::npy_dtype_of(t.dtype), t.shape, t.bytes.data())});
    }
  const std::vector<std::string> stale = out.commit(files, read_files);

  // The summary of this run's report, not of the file read back (a device, or another run's by now).
  std::fputs(run::format_stats(nlohmann::json::parse(text)).c_str(), stdout);
  std::printf("wrote %s/stats.json", out_dir.c_str());
  for (size_t i = 1; i < files.size(); ++i)
    std::printf(", %s", fs::path(files[i].path).lexically_relative(out_dir).c_str());
  std::printf(" (%.1f s)\n", rep.wall_seconds);
  for (const auto& f : stale)
    std::printf("removed %s: an earlier run's output that this run does not write\n", f.c_str());
  std::fflush(stdout);
  // Where the host time went (the workload benchmark reads this line): setup = parse, build, inputs;
  // references = after the simulation (waiting for the reference thread, reading the outputs, comparing);
  // the reference thread's own time overlapped the simulation.
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const std::string thread_note =
      reference_thread < 0
          ? ""
          : fmt::format("; reference thread {:.3f} alongside the simulation", reference_thread);
  std::fprintf(
      stderr,
      "trnsim: %s: host time %.3f s (setup %.3f, simulation %.3f, references %.3f, write %.3f%s), peak "
      "memory %.0f MiB\n",
      p.w.name.c_str(), secs(t0, clock::now()), secs(t0, t_sim), secs(t_sim, t_ref), secs(t_ref, t_write),
      secs(t_write, clock::now()), thread_note.c_str(), static_cast<double>(ru.ru_maxrss) / 1024.0);

  const double t = rep.stats.total_time.ns();
  if (t < rep.roofline_ns * (1 - 1e-9)) {
    std::fprintf(
        stderr,
        "trnsim: error: simulated time %.1f ns is below the roofline lower bound %.1f ns (max(useful FLOPs / "
        "peak, compulsory HBM bytes / HBM bandwidth)): a simulator bug\n",
        t, rep.roofline_ns);
    return kExitBelowRoofline;
  }
  for (const run::CheckResult& c : rep.checks)
    if (!c.pass) return kExitNumericsFail;
  return 0;
}

}  // namespace trnsim::cli
