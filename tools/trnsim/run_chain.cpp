// trnsim run PIPELINE.json, or a workload whose inputs are other workloads' outputs
// (kernels/workload/chain.h): every stage runs in order, each reading its producers' outputs in memory; then
// the chain reference, if the pipeline names one. Written as one set, all or nothing (sim/io/output_files.h):
// OUT/<stage>/stats.json and the stage's outputs (as `trnsim run` of the stage writes them into its OUT), and
// OUT/chain_stats.json (the stages' figures, their sums, the chain reference's checks). --trace FILE.ext
// writes FILE.<stage>.ext per stage (a device such as /dev/null takes them all). Exit codes as a workload
// run's: 3 if any check failed, 4 if any stage ran below its roofline.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "kernels/workload/chain.h"
#include "sim/base/error.h"
#include "sim/base/host_bytes.h"
#include "sim/base/interrupt.h"
#include "sim/base/log.h"
#include "sim/base/scratch_dir.h"
#include "sim/io/output_files.h"
#include "sim/io/output_name.h"
#include "sim/io/replace_check.h"
#include "sim/run/report.h"
#include "sim/trace/open_trace.h"
#include "tools/trnsim/host_memory.h"
#include "tools/trnsim/out_dir.h"
#include "tools/trnsim/run_log.h"
#include "tools/trnsim/run_options.h"

namespace trnsim::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A stage's trace: FILE.<stage>.EXT for --trace FILE.EXT; a device (/dev/null) takes every stage's.
std::string stage_trace(const std::string& trace, const std::string& stage) {
  if (trace.empty() || io::is_special_file(trace)) return trace;
  const fs::path p(trace);
  return (p.parent_path() / (p.stem().string() + "." + stage + p.extension().string())).string();
}

std::string check_line(const run::CheckResult& c) {
  std::string s =
      fmt::format("  {:<58} {}  rel_l2_vs_exact {:.4g}  cosine {:.8f}", c.output, c.pass ? "pass" : "FAIL",
                  c.metric("rel_l2_vs_exact"), c.metric("cosine_vs_exact"));
  for (const std::string& f : c.failures) s += "\n      " + f;
  return s + "\n";
}

}  // namespace

int run_chain_file(const RunCliOptions& o) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  log::Record record;  // OUT/trnsim.log: this run's messages up to its write
  if (!o.report.empty())
    throw InputError("--report draws one run's report: run it on a stage's stats.json (trnsim stats --html)");
  const std::string out_dir =
      o.out.empty() ? (fs::path("out") / workload::chain_name(o.config, o.sets)).string() : o.out;
  // The folder is this run's before any stage is built (a Python kernel's build runs the user's code): a
  // chain or run that starts meanwhile is refused, not this one at write time.
  OutDir out(out_dir);
  check_out_not_in_a_set(o, out_dir);
  workload::Chain chain = workload::load_chain(o.config, o.sets, o.no_numerics);

  // Every file the chain writes and reads, decided before it simulates.
  std::vector<io::NamedPath> paths{
      {(fs::path(out_dir) / "chain_stats.json").string(), "chain_stats.json"},
      {(fs::path(out_dir) / log::kFileName).string(), fmt::format("the log {}", log::kFileName)}};
  std::vector<std::string> read_files;
  std::error_code ec;
  if (chain.pipeline) {
    paths.push_back({o.config, "the pipeline file", true});
    read_files.push_back(o.config);
  }
  for (const workload::ChainStage& s : chain.stages) {
    const workload::PreparedWorkload& p = s.run->prepared();
    const fs::path dir = fs::path(out_dir) / s.name();
    paths.push_back({(dir / "stats.json").string(), fmt::format("stage '{}' stats.json", s.name())});
    paths.push_back(
        {(dir / run::kHostFileName).string(), fmt::format("stage '{}' {}", s.name(), run::kHostFileName)});
    if (p.w.numerics)
      for (const std::string& n : p.written)
        paths.push_back({io::output_npy_path(dir.string(), n, p.w.file),
                         fmt::format("stage '{}' output '{}'", s.name(), n)});
    if (o.dump_inputs)
      for (const workload::TensorInfo& t : p.inputs)
        paths.push_back({io::output_npy_path((dir / "inputs").string(), t.name, p.w.file + ": --dump-inputs"),
                         fmt::format("stage '{}' --dump-inputs of '{}'", s.name(), t.name)});
    if (!o.trace.empty())
      paths.push_back({stage_trace(o.trace, s.name()), fmt::format("--trace of stage '{}'", s.name())});
    if (fs::is_regular_file(s.file, ec)) {
      paths.push_back({s.file, fmt::format("the workload file of stage '{}'", s.name()), true});
      read_files.push_back(s.file);
    }
    for (const workload::InputEntry& e : p.w.inputs)
      if (!e.is_recipe && !e.given && e.source.is_npy) {
        paths.push_back({e.source.npy, fmt::format("stage '{}' input '{}'", s.name(), e.key), true});
        read_files.push_back(e.source.npy);
      }
  }
  try {
    io::check_distinct_files(paths);
    io::check_not_directories(paths);
    io::check_no_links(paths, out_dir);
    io::check_may_replace(paths);
    // Every file the renames will replace, with the chain's record.
    std::vector<io::NamedPath> replaced = paths;
    replaced.push_back(
        {(fs::path(out_dir) / io::kManifestName).string(), fmt::format("the record {}", io::kManifestName)});
    check_replaceable(replaced);
    if (!o.trace.empty()) try {
        trace::check_trace_path(o.trace);
        for (const workload::ChainStage& s : chain.stages)
          trace::check_trace_path(stage_trace(o.trace, s.name()));
      } catch (const InputError& e) {
        throw InputError(fmt::format("--trace {}: a chain writes one trace per stage, {}: {}", o.trace,
                                     stage_trace(o.trace, "<stage>"), e.what()));
      }
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", chain.file, e.what()));
  }
  // The stages are held together until the chain writes (each stage's inputs, machine state and outputs),
  // and every stage's files are new at once: the needs add up, checked once before any stage runs. Besides:
  // chain_stats.json (about 1 KB a stage: counted 64 KiB + 4 KiB a stage).
  HostMemoryNeed need;
  bool numerics = false;
  for (const workload::ChainStage& s : chain.stages) {
    need += host_memory_need(s.run->prepared(), o.dump_inputs, stage_trace(o.trace, s.name()));
    numerics = numerics || s.run->numerics();
  }
  need.written += 64 * 1024.0 + 4096.0 * static_cast<double>(chain.stages.size());
  const bool in_memory = place_and_check_host_memory(need, chain.file, numerics, o.dump_inputs, out_dir,
                                                     stage_trace(o.trace, "<stage>"));
  // Large tensors from here on: scratch files on the output's filesystem, made through the folder's handle,
  // or memory files when the chain fits in RAM with room.
  set_scratch_dir(out.fd());
  set_scratch_in_memory(in_memory);
  for (const workload::ChainStage& s : chain.stages) {
    out.add_subfolder(s.name());
    if (o.dump_inputs) out.add_subfolder((fs::path(s.name()) / "inputs").string());
  }

  for (size_t i = 0; i < chain.stages.size(); ++i) {
    workload::WorkloadRun& r = *chain.stages[i].run;
    workload::WorkloadRunOptions ro;
    ro.full_reference = o.full_reference;
    ro.dump_inputs = o.dump_inputs;
    ro.trace_path = stage_trace(o.trace, r.name());
    ro.message = [&](const std::string& m) { log::run_message(r.name(), m); };
    if (r.numerics()) chain.give_inputs(i);
    if (r.numerics() || o.dump_inputs) r.make_inputs();
    try {
      r.simulate(ro);
    } catch (const Interrupted& e) {
      log::say(spdlog::level::err, fmt::format("trnsim: {}: {}", r.name(), e.what()));
      interrupt::exit_now();
    }
    r.check(ro);
    if (r.numerics()) chain.keep_outputs(i);
  }
  const std::vector<run::CheckResult> refs = chain.run_reference();
  const std::string not_run = chain.reference_not_run();
  if (!not_run.empty())
    log::note(
        fmt::format("{}: the chain reference '{}' did not run: {}", chain.file, chain.reference, not_run));

  // The stages' files, then chain_stats.json first in the set.
  std::vector<io::OutputFile> files(1);
  json stages = json::array();
  double time_ns = 0, bytes = 0, bytes_read = 0, bytes_written = 0;
  int rc = 0;
  std::string summary;
  for (const workload::ChainStage& s : chain.stages) {
    workload::WorkloadRun& r = *s.run;
    run::RunReport rep = r.report();
    const int src = workload::WorkloadRun::exit_code(rep);
    rc = std::max(rc, src);
    for (io::OutputFile& f : r.output_files(rep, (fs::path(out_dir) / s.name()).string(), o.dump_inputs))
      files.push_back(std::move(f));
    const double t = rep.stats.total_time.ns(), b = static_cast<double>(rep.stats.hbm_bytes());
    double rd = 0, wr = 0;
    for (const model::CoreStats& c : rep.stats.cores) {
      rd += static_cast<double>(c.hbm_bytes_read);
      wr += static_cast<double>(c.hbm_bytes_written);
    }
    time_ns += t, bytes += b, bytes_read += rd, bytes_written += wr;
    json from = json::array();
    for (const workload::ChainLink& l : s.links)
      from.push_back(json{{"input", l.input},
                          {"stage", chain.stages[l.producer].name()},
                          {"output", l.output},
                          {"convert", l.convert.empty() ? json(nullptr) : json(l.convert)}});
    bool pass = true;
    for (const run::CheckResult& c : rep.checks) pass &= c.pass;
    const std::string numerics = !rep.numerics_run ? "off" : pass ? "pass" : "fail";
    stages.push_back({{"name", s.name()},
                      {"workload", s.file},
                      {"kernel", r.prepared().w.kernel},
                      {"stats", s.name() + "/stats.json"},
                      {"total_time_ns", t},
                      {"hbm_bytes", b},
                      {"hbm_bytes_read", rd},
                      {"hbm_bytes_written", wr},
                      {"numerics", numerics},
                      {"inputs_from", from}});
    summary += fmt::format("stage {:<40} {:<24} {:>12.3f} us  HBM {:>14.0f} B  numerics {}\n", s.name(),
                           r.prepared().w.kernel, t / 1e3, b, numerics);
  }
  json checks = json::object();
  for (const run::CheckResult& c : refs) {
    checks[c.output] = run::check_json(c);
    if (!c.pass) rc = std::max(rc, workload::kExitNumericsFail);
  }
  const json doc = {
      {"chain", chain.name},
      {"file", chain.file},
      {"description", chain.description},
      {"stages", stages},
      {"total",
       {{"total_time_ns", time_ns},
        {"hbm_bytes", bytes},
        {"hbm_bytes_read", bytes_read},
        {"hbm_bytes_written", bytes_written}}},
      {"reference", chain.reference.empty() ? json(nullptr) : json(chain.reference)},
      {"checks", checks},
      {"reference_not_run", not_run.empty() ? json(nullptr) : json(not_run)},
      {"definitions",
       {{"stages", "the stages in the order they ran; each stage's full report is OUT/<name>/stats.json"},
        {"stages[].inputs_from",
         "kernel inputs read from an earlier stage's output, with the layout "
         "conversion applied on the host (docs/workloads.md \"Chains\")"},
        {"total.total_time_ns", "ns: simulated time of the stages summed (they run one after another)"},
        {"total.hbm_bytes", "bytes: HBM bytes read and written by the stages, summed"},
        {"checks",
         "the chain reference's checks (kernels/chains/chain_reference.h), keyed STAGE.OUTPUT; "
         "metrics as stats.json's numerics"},
        {"reference_not_run",
         "why the chain reference named did not run (null when it ran or none is named)"}}}};
  const std::string text = doc.dump(2) + "\n";
  files[0] = {(fs::path(out_dir) / "chain_stats.json").string(),
              std::vector<uint8_t>(text.begin(), text.end())};
  const size_t stage_files = files.size() - 1;
  log::debug(fmt::format("{}: writing {} files into {}", chain.name, files.size() + 1, out_dir));
  files.push_back(run_log_file(out_dir, record));
  const std::vector<std::string> stale = out.commit(files, read_files);

  std::fputs(summary.c_str(), stdout);
  std::printf("total %.3f us simulated, %.0f HBM bytes (%zu stages)\n", time_ns / 1e3, bytes,
              chain.stages.size());
  if (!refs.empty()) std::printf("chain reference '%s':\n", chain.reference.c_str());
  for (const run::CheckResult& c : refs) std::fputs(check_line(c).c_str(), stdout);
  // Named where the folder is now: moved during the run, it got the files where it went.
  const std::string now_at = out.where_now();
  const auto shown = [&](const std::string& path) { return OutDir::shown(path, out_dir, now_at); };
  std::printf(
      "wrote %s, %s and %zu stage files%s (%.1f s)\n", shown(files[0].path).c_str(), log::kFileName,
      stage_files,
      now_at.empty()
          ? fmt::format(" into the folder given as --out {}, moved or removed during the run", out_dir)
                .c_str()
          : "",
      std::chrono::duration<double>(clock::now() - t0).count());
  for (const auto& f : stale)
    std::printf("removed %s: an earlier run's output that this run does not write\n", shown(f).c_str());
  std::fflush(stdout);  // the note after the summary, also when both go to one file
  if (!now_at.empty() && now_at != out_dir)
    log::note(fmt::format("--out {} was moved during the run: its files are in {}", out_dir, now_at));
  std::fflush(stdout);
  if (rc == workload::kExitBelowRoofline)
    log::error("a stage's simulated time is below its roofline lower bound: a simulator bug");
  return rc;
}

}  // namespace trnsim::cli
