// trnsim run WORKLOAD.json: prepares the workload (kernels/workload/workload.h), makes its inputs, runs it
// through the session, checks the outputs, prints the summary and writes stats.json, the outputs and
// (--dump-inputs) the inputs, all or nothing. Exit codes: 0 ok, 3 a numerics check failed (everything is
// still written), 4 the simulated time is below the roofline lower bound (a simulator bug).
#include <sys/resource.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>

#include "kernels/workload/workload.h"
#include "kernels/workload/workload_run.h"
#include "sim/base/address_limit.h"
#include "sim/base/error.h"
#include "sim/base/host_bytes.h"
#include "sim/base/interrupt.h"
#include "sim/base/log.h"
#include "sim/base/scratch_dir.h"
#include "sim/io/enclosing_set.h"
#include "sim/io/npy.h"
#include "sim/io/output_files.h"
#include "sim/io/output_name.h"
#include "sim/io/replace_check.h"
#include "sim/run/report.h"
#include "sim/run/session.h"
#include "sim/trace/open_trace.h"
#include "tools/sweep/report_script.h"
#include "tools/trnsim/host_memory.h"
#include "tools/trnsim/out_dir.h"
#include "tools/trnsim/run_log.h"
#include "tools/trnsim/run_options.h"

namespace trnsim::cli {

namespace fs = std::filesystem;

namespace {

double tensor_bytes(isa::DType dtype, const std::vector<int64_t>& shape) {
  return static_cast<double>(tensor::elements_of(shape)) * isa::dtype_size(dtype);
}

uint64_t instruction_count(const isa::Program& program) {
  uint64_t n = 0;
  for (const auto& core : program.streams)
    for (const auto& stream : core) n += stream.size();
  return n;
}

}  // namespace

// A run with numerics holds the host's copy of the inputs (the references read it) and the simulated
// machine's copy of every HBM tensor of the program and of its SBUF and PSUM. Large tensors (sim/base/
// host_bytes.h) are memory the OS can page and count apart: a large .npy input whose bytes are the tensor's
// is its file's pages (and the machine's copy maps them again), other large inputs and HBM tensors are
// scratch files on the output's filesystem (an input's machine copy shares its pages). Every run writes
// stats.json, host.json and its record, with --trace a trace and with --report its HTML report (upper
// estimates: host_memory.h).
HostMemoryNeed host_memory_need(const workload::PreparedWorkload& p, bool dump_inputs,
                                const std::string& trace, const std::string& report) {
  HostMemoryNeed need;
  if (!report.empty() && !io::is_special_file(report))
    need.report = report_bytes(p.build.program.tensors.size());
  size_t files = 2;  // stats.json, host.json
  if (!trace.empty() && !io::is_special_file(trace))
    need.trace = trace_bytes(instruction_count(p.build.program));
  std::set<std::string> input_names;
  for (const workload::TensorInfo& t : p.inputs) {
    input_names.insert(t.name);
    if (!p.w.numerics && !dump_inputs) break;
    const double b = tensor_bytes(t.dtype, t.shape);
    if (dump_inputs) {
      need.anonymous += b;  // the .npy images of --dump-inputs
      need.written += b;    // and their files
      ++files;
    }
    if (!maps_files(static_cast<uint64_t>(b))) {
      need.anonymous += b;
      continue;
    }
    const auto npy = p.npy.find(t.name);
    if (npy != p.npy.end() && tensor::shares_npy_pages(npy->second, t.dtype))
      need.mapped += b;
    else
      need.scratch += b;
  }
  if (p.w.numerics) {
    const std::set<std::string> written(p.written.begin(), p.written.end());
    for (const isa::TensorDecl& t : p.build.program.tensors) {
      const double b = tensor_bytes(t.dtype, t.shape);
      if (written.count(t.name)) {
        need.written += b;  // OUT/<name>.npy
        ++files;
      }
      if (!maps_files(static_cast<uint64_t>(b)))
        need.anonymous += b;
      else if (!input_names.count(t.name))  // an input's machine copy shares the input's pages
        need.scratch += b;
    }
    const isa::Limits l = p.hw.limits();  // each core's SBUF and PSUM
    need.anonymous += 2.0 * l.partitions * (l.sbuf_bytes_per_partition + l.psum_bytes_per_partition);
    // The references' own copies of their operands.
    need.anonymous += workload::reference_host_bytes(p);
    // The simulation's own records of the instructions it runs (the critical path, occupancy and stats
    // observers, events): at most 256 bytes an instruction (timing-only peaks over the resident size at this
    // check: DeepSeek-V3 MoE forward 65 MiB for 384295 instructions, backward 144 MiB for 724419).
    need.anonymous += 256.0 * static_cast<double>(instruction_count(p.build.program));
  }
  need.written += run_files_bytes(p.build.program.tensors.size(), files);
  return need;
}

// Refused now, with the figures, when this machine cannot hold the rest, the scratch files and the files
// written do not fit on that filesystem, or an address-space limit cannot hold both. Returns whether the
// large tensors are memory files (scratch_in_memory), which the check counts as RAM, not disk.
bool check_host_memory(const workload::PreparedWorkload& p, bool dump_inputs, const std::string& out_dir,
                       const std::string& trace, const std::string& report) {
  const HostMemoryNeed need = host_memory_need(p, dump_inputs, trace, report);
  // The figures, to compare with a run's measured peak: the need comes on top of what the process holds now
  // (the built program), which the available memory already excludes.
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  constexpr double kMiB = 1024.0 * 1024.0;
  log::debug(fmt::format(
      "{}: host memory needed besides the {:.0f} MiB resident now: {:.0f} MiB (references {:.0f} MiB), and "
      "{:.0f} MiB the OS can page",
      p.w.name, static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / kMiB,
      (need.anonymous + thread_stack_bytes(p.w.numerics)) / kMiB,
      p.w.numerics ? workload::reference_host_bytes(p) / kMiB : 0.0, (need.scratch + need.mapped) / kMiB));
  return place_and_check_host_memory(need, p.w.file, p.w.numerics, dump_inputs, out_dir, trace, report);
}

void check_out_not_in_a_set(const RunCliOptions& o, const std::string& out_dir) {
  if (o.replace_stage) return;
  if (const std::optional<io::EnclosingSet> s = io::enclosing_set(out_dir))
    throw InputError(io::enclosing_set_refusal(out_dir, *s, "--replace-stage"));
}

int run_workload_file(const RunCliOptions& o) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  log::Record record;  // OUT/trnsim.log: this run's messages up to its write
  workload::Workload w = workload::parse_workload(o.config, o.sets);
  if (o.no_numerics) w.numerics = false;
  const std::string out_dir = o.out.empty() ? (fs::path("out") / w.name).string() : o.out;
  // The folder is this run's before any kernel code runs (a Python kernel's build is in WorkloadRun's
  // constructor): a chain or run that starts meanwhile is refused, not this one at write time.
  OutDir out(out_dir);
  check_out_not_in_a_set(o, out_dir);
  workload::WorkloadRun r(std::move(w));
  const workload::PreparedWorkload& p = r.prepared();
  log::debug(fmt::format("{}: {}: kernel {} on {}, {} instructions, numerics {}", p.w.name, p.w.file,
                         p.w.kernel, p.hw.name, instruction_count(p.build.program),
                         p.w.numerics ? "on" : "off"));
  std::error_code ec;

  // Every file this run writes, decided before it simulates: none may land on another or on an input.
  const auto in_dir = [&](const std::string& rel) { return (fs::path(out_dir) / rel).string(); };
  std::vector<io::NamedPath> paths{{in_dir("stats.json"), "stats.json"},
                                   {in_dir(run::kHostFileName), run::kHostFileName},
                                   {in_dir(log::kFileName), fmt::format("the log {}", log::kFileName)}};
  if (p.w.numerics)
    for (const std::string& n : p.written)
      paths.push_back({io::output_npy_path(out_dir, n, p.w.file), fmt::format("output '{}'", n)});
  if (o.dump_inputs)
    for (const workload::TensorInfo& t : p.inputs)
      paths.push_back({io::output_npy_path(in_dir("inputs"), t.name, p.w.file + ": --dump-inputs"),
                       fmt::format("--dump-inputs of '{}'", t.name)});
  if (!o.trace.empty()) paths.push_back({o.trace, "--trace"});
  if (!o.report.empty()) paths.push_back({o.report, "--report"});
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
  for (const auto* src : {&p.w.kernel_source, &p.w.reference})
    if (*src) {
      paths.push_back({(*src)->file, fmt::format("the Python file {}", (*src)->written), true});
      read_files.push_back((*src)->file);
    }
  try {
    io::check_distinct_files(paths);
    io::check_not_directories(paths);
    io::check_no_links(paths, out_dir);
    io::check_may_replace(paths);
    if (!o.trace.empty()) trace::check_trace_path(o.trace);
    // Every file the renames will replace, with the folder's record.
    paths.push_back({in_dir(io::kManifestName), fmt::format("the record {}", io::kManifestName)});
    check_replaceable(paths);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", p.w.file, e.what()));
  }
  const bool in_memory = check_host_memory(p, o.dump_inputs, out_dir, o.trace, o.report);
  if (o.dump_inputs) out.add_subfolder("inputs");
  // Large tensors from here on: scratch files on the output's filesystem, made through the folder's handle,
  // or memory files when the run fits in RAM with room.
  set_scratch_dir(out.fd());
  set_scratch_in_memory(in_memory);
  log::debug(fmt::format("{}: large tensors in {}", p.w.name,
                         in_memory ? "memory files" : "scratch files in the output folder"));

  workload::WorkloadRunOptions ro;
  ro.full_reference = o.full_reference;
  ro.dump_inputs = o.dump_inputs;
  ro.trace_path = o.trace;
  ro.message = [&](const std::string& m) { log::run_message(p.w.name, m); };
  if (p.w.numerics || o.dump_inputs) r.make_inputs();
  try {
    r.simulate(ro);
  } catch (const Interrupted& e) {
    // Now, not after unwinding: that would wait for the reference thread.
    log::say(spdlog::level::err, fmt::format("trnsim: {}: {}", p.w.name, e.what()));
    interrupt::exit_now();
  }
  r.check(ro);
  const auto t_write = clock::now();
  run::RunReport rep = r.report();
  rep.wall_seconds = std::chrono::duration<double>(clock::now() - t0).count();

  // stats.json, the outputs (when computed), the inputs (--dump-inputs): all or nothing.
  // With --report, the HTML page drawn from this run's own stats joins the set (a run below the roofline, a
  // simulator bug, gets none). It is drawn before anything is written: when it cannot be, the run stops with
  // the error and every destination stays as it was (the earlier set, its report included).
  const int rc = workload::WorkloadRun::exit_code(rep);
  std::vector<io::OutputFile> files = r.output_files(rep, out_dir, o.dump_inputs);
  std::vector<io::OutputFile> report;
  if (!o.report.empty() && rc != workload::kExitBelowRoofline) {
    const std::string text(files.at(0).bytes.begin(), files.at(0).bytes.end());
    // Named from the run folder when it lies there under another name (--report Al/r.html, Al -> OUT; a
    // bind mount; OUT/../OUT), so that it joins the run's set as OUT/r.html does.
    const std::string path = io::lies_in_folder(o.report, out_dir)
                                 ? (fs::path(out_dir) / fs::path(o.report).filename()).string()
                                 : o.report;
    report = sweep::draw_run_report(text, out_dir, path, run::host_json_text(rep));
  }
  log::debug(
      fmt::format("{}: writing {} files into {}", p.w.name, files.size() + report.size() + 1, out_dir));
  files.push_back(run_log_file(out_dir, record));  // the last of the run's own, before the report
  const size_t run_files = files.size();
  for (io::OutputFile& f : report) files.push_back(std::move(f));
  const std::vector<std::string> stale = out.commit(files, read_files);

  // The summary of this run's report, not of the file read back (a device, or another run's by now), without
  // its notes: the run said them as it went.
  nlohmann::json summary = nlohmann::json::parse(files.at(0).bytes);
  summary.erase("notes");
  std::fputs(run::format_stats(summary).c_str(), stdout);
  // Named where the folder is now: moved during the run, it got the files where it went.
  const std::string now_at = out.where_now();
  const auto shown = [&](const std::string& path) { return OutDir::shown(path, out_dir, now_at); };
  std::printf("wrote %s", shown(files[0].path).c_str());
  for (size_t i = 1; i < run_files; ++i)
    std::printf(", %s", fs::path(files[i].path).lexically_relative(out_dir).c_str());
  if (now_at.empty())
    std::printf(" into the folder given as --out %s, moved or removed during the run", out_dir.c_str());
  std::printf(" (%.1f s)\n", rep.wall_seconds);
  for (const auto& f : stale)
    std::printf("removed %s: an earlier run's output that this run does not write\n", shown(f).c_str());
  std::fflush(stdout);  // the note after the summary, also when both go to one file
  if (!now_at.empty() && now_at != out_dir)
    log::note(fmt::format("--out {} was moved during the run: its files are in {}", out_dir, now_at));
  std::fflush(stdout);
  // Where the host time went (the workload benchmark reads this line): setup = parse, build, inputs;
  // references = after the simulation (waiting for the reference thread, reading the outputs, comparing);
  // the reference thread's own time overlapped the simulation.
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const workload::RunTimes& tm = r.times();
  const std::string thread_note =
      tm.reference_thread < 0
          ? ""
          : fmt::format("; reference thread {:.3f} alongside the simulation", tm.reference_thread);
  const double setup = tm.setup + std::chrono::duration<double>(r.start() - t0).count();
  log::info(
      fmt::format("{}: host time {:.3f} s (setup {:.3f}, simulation {:.3f}, references {:.3f}, write "
                  "{:.3f}{}), peak memory "
                  "{:.0f} MiB",
                  p.w.name, std::chrono::duration<double>(clock::now() - t0).count(), setup, tm.simulation,
                  tm.references, std::chrono::duration<double>(clock::now() - t_write).count(), thread_note,
                  static_cast<double>(ru.ru_maxrss) / 1024.0));

  if (run_files < files.size()) std::printf("wrote %s\n", o.report.c_str());
  if (rc == workload::kExitBelowRoofline)
    log::error(fmt::format(
        "simulated time {:.1f} ns is below the roofline lower bound {:.1f} ns (max(useful FLOPs / "
        "peak, compulsory HBM bytes / HBM bandwidth)): a simulator bug",
        rep.stats.total_time.ns(), rep.roofline_ns));
  return rc;
}

}  // namespace trnsim::cli
