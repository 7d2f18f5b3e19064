// trnsim run PROGRAM.json: runs a hand-written instruction-stream program (docs/program-format.md) through
// the run session, prints its summary and writes the tensors marked "output" as .npy (all or nothing), then
// DIR/stats.json and DIR/host.json (the host time, as a workload run's) when --out is given.
// Tensor "init" takes the generators and .npy sources of sim/tensor/input_source.h (relative paths from the
// program's folder). Tensor "output": true (writes <name>.npy) or a plain file name, written into --out; the
// .npy dtype follows sim/tensor/host_tensor.h. --hw defaults to the program's generation.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/base/error.h"
#include "sim/base/json_excerpt.h"
#include "sim/base/log.h"
#include "sim/config/hw_config.h"
#include "sim/io/output_files.h"
#include "sim/io/output_name.h"
#include "sim/io/replace_check.h"
#include "sim/isa/names.h"
#include "sim/isa/program_json.h"
#include "sim/isa/semantics.h"
#include "sim/run/report.h"
#include "sim/run/session.h"
#include "sim/tensor/input_source.h"
#include "sim/trace/open_trace.h"
#include "tools/sweep/report_script.h"
#include "tools/trnsim/out_dir.h"
#include "tools/trnsim/run_log.h"
#include "tools/trnsim/run_options.h"

namespace trnsim::cli {

namespace fs = std::filesystem;
using nlohmann::json;

int run_program_file(const RunCliOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  log::Record record;  // with --out, OUT/trnsim.log: this run's messages up to its write
  isa::Program program = isa::load_program(o.config);
  config::Overrides overrides;
  // Applied in order, so a path set twice takes the later value, as a workload's --set does.
  for (const auto& s : o.sets) {
    auto [path, value] = config::parse_override(s);
    overrides.insert_or_assign(std::move(path), std::move(value));
  }
  const std::string hw_spec = o.hw.empty() ? isa::generation_name(program.generation) : o.hw;
  const config::HwConfig hw = config::load_hw_config(hw_spec, overrides);
  const std::string out_dir = o.out.empty() ? "." : o.out;
  // The program's HBM tensors live in one HBM stack (the pair's, or the one core's).
  double hbm_bytes = 0;
  for (const isa::TensorDecl& t : program.tensors) {
    double b = isa::dtype_size(t.dtype);
    for (int64_t d : t.shape) b *= static_cast<double>(d);
    hbm_bytes += b;
  }
  if (hbm_bytes > static_cast<double>(hw.limits().hbm_bytes))
    throw InputError(
        fmt::format("{}: the program's HBM tensors need {:.4g} GiB; the HBM stack {} holds {:.4g} GiB "
                    "(hbm.capacity_GiB)",
                    o.config, hbm_bytes / (1 << 30),
                    program.num_cores == 2 ? "of the LNC2 pair" : "of the core (num_cores 1)",
                    static_cast<double>(hw.limits().hbm_bytes) / (1 << 30)));

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
    if (!spec.is_string() && !spec.is_boolean())
      throw InputError(o.config + ": tensor " + t.name + " output: expected true or a file name");
    const std::string file = spec.is_string()
                                 ? spec.get<std::string>()
                                 : io::output_npy_path("", t.name, o.config + ": tensor " + t.name);
    // Outputs stay inside --out: a bare file name, no directories.
    if (file.empty() || file.size() > 255 || fs::path(file).filename() != fs::path(file) || file == "." ||
        file == ".." || file.find('\0') != std::string::npos)
      throw InputError(o.config + ": tensor " + t.name + " output: '" + text_excerpt(file) +
                       "' must be a plain file name of at most 255 bytes (it is written into --out)");
    outs.push_back({i, (fs::path(out_dir) / file).string()});
  }
  // Each tensor's init, parsed and checked once: its .npy is never written over, then it gives the values.
  std::vector<std::optional<tensor::InputSource>> inits(program.tensors.size());
  const auto init_error = [&](const isa::TensorDecl& t, const InputError& e) {
    return InputError(o.config + ": tensor " + t.name + ": " + e.what());
  };
  if (!o.no_numerics)
    for (uint32_t i = 0; i < program.tensors.size(); ++i) {
      const isa::TensorDecl& t = program.tensors[i];
      if (t.init.empty()) continue;
      try {
        inits[i] = tensor::parse_input_source(json::parse(t.init, nullptr, false), "init",
                                              fs::path(o.config).parent_path().string());
        if (!inits[i]->is_npy) tensor::check_generator_fits(inits[i]->generator, t.dtype, t.shape, "init");
      } catch (const InputError& e) {
        throw init_error(t, e);
      }
    }
  std::vector<std::string> read_files;  // what this run reads
  {
    std::vector<io::NamedPath> paths;
    for (const auto& out : outs)
      paths.push_back({out.path, fmt::format("output of tensor '{}'", program.tensors[out.index].name)});
    if (o.out_given) {
      paths.push_back({(fs::path(out_dir) / "stats.json").string(), "stats.json"});
      paths.push_back({(fs::path(out_dir) / run::kHostFileName).string(), run::kHostFileName});
      paths.push_back(
          {(fs::path(out_dir) / log::kFileName).string(), fmt::format("the log {}", log::kFileName)});
    }
    if (!o.trace.empty()) paths.push_back({o.trace, "--trace"});
    if (!o.report.empty()) paths.push_back({o.report, "--report"});
    // What the run reads is never written over (nor removed as an earlier run's output).
    paths.push_back({o.config, "the program file", true});
    read_files.push_back(o.config);
    paths.push_back({config::resolve_config_path(hw_spec), "the hardware config", true});
    for (uint32_t i = 0; i < program.tensors.size(); ++i)
      if (inits[i] && inits[i]->is_npy) {
        paths.push_back({inits[i]->npy, fmt::format("tensor '{}' init", program.tensors[i].name), true});
        read_files.push_back(inits[i]->npy);
      }
    io::check_distinct_files(paths);
    io::check_not_directories(paths);
    io::check_no_links(paths, out_dir);
    io::check_may_replace(paths);
    if (!o.trace.empty()) trace::check_trace_path(o.trace);
  }
  // Created if missing and checked now, as for workloads; removed again if the run fails.
  std::optional<OutDir> out;
  if ((!outs.empty() && !o.no_numerics) || o.out_given) {
    out.emplace(out_dir);
    check_out_not_in_a_set(o, out_dir);
  }

  run::Session session(program, hw);
  for (uint32_t i = 0; i < program.tensors.size(); ++i) {
    if (!inits[i]) continue;
    const isa::TensorDecl& t = program.tensors[i];
    try {
      session.set_input(i, tensor::make_input(*inits[i], t.dtype, t.shape, "tensor " + t.name,
                                              tensor::generator_threads()));
    } catch (const InputError& e) {
      throw init_error(t, e);
    }
  }

  run::SessionOptions so;
  so.numerics = !o.no_numerics;
  so.trace_path = o.trace;
  const run::SessionResult r = session.run(so);
  if (!r.trace.path.empty()) std::printf("wrote trace %s\n", r.trace.path.c_str());

  const auto& s = r.stats;
  std::printf("simulated time: %.3f ns (%s, %llu instructions)\n", s.total_time.ns(), hw.name.c_str(),
              static_cast<unsigned long long>(s.instructions));
  std::printf("%-6s %-5s %12s %14s %8s %16s\n", "core", "engine", "instructions", "busy_ns", "busy_%",
              "semaphore_wait_ns");
  for (int c = 0; c < program.num_cores; ++c)
    for (int e = 0; e < isa::kNumEngines; ++e) {
      const auto& es = s.cores[c].engines[e];
      const double pct = s.total_time.count() ? 100.0 * es.busy.count() / s.total_time.count() : 0.0;
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

  std::vector<io::OutputFile> files;
  if (!o.no_numerics)
    for (const auto& out : outs) {
      const tensor::HostTensor t = session.read(out.index);
      files.push_back({out.path, io::encode_npy(tensor::npy_dtype_of(t.dtype), t.shape, t.bytes.data())});
    }
  else if (!outs.empty())
    std::printf("outputs not written (--no-numerics)\n");
  if (o.out_given || !o.report.empty()) {
    run::RunReport rep = run::make_report(program, hw, r, -1, run::program_compulsory_bytes(program));
    rep.program = o.config;
    rep.numerics_note = "program run: no host reference (outputs are written as .npy)";
    const std::string text = run::stats_text(run::stats_json(rep));
    if (o.out_given) {
      files.push_back(
          {(fs::path(out_dir) / "stats.json").string(), std::vector<uint8_t>(text.begin(), text.end())});
      rep.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const std::string host = run::host_json_text(rep);
      files.push_back({(fs::path(out_dir) / run::kHostFileName).string(),
                       std::vector<uint8_t>(host.begin(), host.end())});
    }
    // The HTML report of this run's own stats, written with its other files (never a stats.json read back),
    // drawn before anything is written: when it cannot be, every destination stays as it was.
    if (!o.report.empty())
      for (io::OutputFile& f : sweep::draw_run_report(text, out_dir, o.report)) files.push_back(std::move(f));
  }
  // Into --out, the set replaces the folder's earlier one as a workload run's does (OutDir::commit): the
  // manifest records it, and the earlier run's outputs it does not write again are removed.
  std::vector<std::string> stale;
  if (out && o.out_given) {
    log::debug(fmt::format("{}: writing {} files into {}", o.config, files.size() + 1, out_dir));
    files.push_back(run_log_file(out_dir, record));
    stale = out->commit(files, read_files);
  } else {
    io::write_files_atomic(files);
  }
  if (out) out->keep();
  for (const auto& f : files) std::printf("wrote %s\n", f.path.c_str());
  for (const auto& f : stale)
    std::printf("removed %s: an earlier run's output that this run does not write\n", f.c_str());
  return 0;
}

}  // namespace trnsim::cli
