#include "sim/run/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>

#include "sim/base/error.h"
#include "sim/isa/semantics.h"
#include "sim/run/stat_defs.h"

namespace trnsim::run {
namespace {

using nlohmann::json;

constexpr const char* kStatsFormat = "trnsim stats";
constexpr int kStatsVersion = 5;  // 5: wall_seconds moved to host.json
// Neuron profile names of the engines (hardware fact sheet §5), in isa::Engine order.
constexpr std::array<const char*, isa::kNumEngines> kProfileEngine = {"tensor", "vector", "scalar", "gpsimd",
                                                                      "sync"};
constexpr size_t kJsonSourceLines = 50;

double pct(Picoseconds part, Picoseconds total) {
  return total.count() == 0 ? 0.0
                            : 100.0 * static_cast<double>(part.count()) / static_cast<double>(total.count());
}

json finite_or_null(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

std::string source_of(const RunReport& r, const model::LineTime& l) {
  const std::string file = l.file < r.files.size() ? r.files[l.file] : "?";
  return fmt::format("{}:{}", file, l.line);
}

// summary, opcodes and source_lines: model::StatsObserver figures plus RunStats, in profile names.
void add_profile(json& j, const RunReport& r) {
  const double t = r.stats.total_time.ns();
  const int cores = std::max(1, r.cores);
  const model::ProfileStats& p = r.profile;
  json sm = json::object();
  sm["total_time_ns"] = t;
  std::array<double, isa::kNumEngines> engine_busy{};
  for (int e = 0; e < isa::kNumEngines; ++e) {
    double wait = 0;
    uint64_t n = 0;
    for (int c = 0; c < r.cores; ++c) {
      const auto& es = r.stats.cores[c].engines[e];
      engine_busy[e] += es.busy.ns();
      wait += es.semaphore_wait.ns();
      n += es.instructions;
    }
    const std::string name = std::string(kProfileEngine[e]) + "_engine_";
    sm[name + "active_time_ns"] = engine_busy[e] / cores;
    sm[name + "active_time_percent"] = t > 0 ? 100.0 * engine_busy[e] / cores / t : 0.0;
    sm[name + "instruction_count"] = n;
    sm[name + "semaphore_wait_ns"] = wait / cores;
  }
  double ls = 0, throttled = 0;
  uint64_t rd = 0, wr = 0, dma_n = 0, dma_bytes = 0, triggers = 0;
  for (const auto& cs : r.stats.cores) {
    ls += cs.pe_ls_busy.ns();
    throttled += cs.pe_throttled.ns();
    rd += cs.hbm_bytes_read;
    wr += cs.hbm_bytes_written;
    dma_n += cs.dma_transfers;
    dma_bytes += cs.dma_bytes;
    triggers += cs.dma_triggers;
  }
  sm["tensor_engine_load_stationary_time_ns"] = ls / cores;
  sm["pe_throttled_time_ns"] = throttled / cores;
  uint64_t engagements = 0;
  for (const auto& cs : r.stats.cores) engagements += cs.pe_throttle_engagements;
  sm["pe_throttle_engagements"] = engagements;
  sm["pe_flops"] = p.pe_flops;
  sm["pe_flops_bf16_equivalent"] = p.pe_flops_bf16_equivalent;
  sm["pe_peak_bf16_tflops"] = p.bf16_peak_flops_per_ns / 1e3;
  sm["mfu_estimated_percent"] = (t > 0 && p.bf16_peak_flops_per_ns > 0)
                                    ? 100.0 * p.pe_flops_bf16_equivalent / t / p.bf16_peak_flops_per_ns
                                    : 0.0;
  const double hbm_avg = t > 0 ? static_cast<double>(rd + wr) / t : 0.0;
  sm["hbm_read_bytes"] = rd;
  sm["hbm_write_bytes"] = wr;
  sm["hbm_read_bandwidth_GBps"] = t > 0 ? static_cast<double>(rd) / t : 0.0;
  sm["hbm_write_bandwidth_GBps"] = t > 0 ? static_cast<double>(wr) / t : 0.0;
  sm["hbm_average_bandwidth_GBps"] = hbm_avg;
  sm["mbu_estimated_percent"] = r.hbm_bandwidth_GBps > 0 ? 100.0 * hbm_avg / r.hbm_bandwidth_GBps : 0.0;
  sm["dma_instruction_count"] = triggers;
  sm["dma_transfer_count"] = dma_n;
  sm["dma_transfer_total_bytes"] = dma_bytes;
  sm["dma_transfer_average_bytes"] =
      dma_n ? static_cast<double>(dma_bytes) / static_cast<double>(dma_n) : 0.0;
  for (const auto& [name, m] : {std::pair{"sbuf", &p.sbuf}, std::pair{"psum", &p.psum}}) {
    const std::string k = std::string(name) + "_peak_usage_";
    sm[k + "bytes_per_partition"] = m->bytes_per_partition;
    sm[k + "percent"] = m->capacity_per_partition ? 100.0 * static_cast<double>(m->bytes_per_partition) /
                                                        static_cast<double>(m->capacity_per_partition)
                                                  : 0.0;
    sm[k + "time_ns"] = m->at.ns();
    sm[k + "bytes_per_quadrant"] = m->quadrant;
    sm[std::string(name) + "_capacity_bytes_per_partition"] = m->capacity_per_partition;
  }
  sm["memory_usage_source"] = "instruction operands over time";
  j["summary"] = sm;

  json ops = json::array();
  for (int e = 0; e < isa::kNumEngines; ++e) {
    std::vector<std::pair<std::string, model::OpcodeTime>> rows;
    for (int o = 0; o < isa::kNumOpcodes; ++o)
      if (p.opcodes[e][o].count)
        rows.emplace_back(isa::opcode_name(static_cast<isa::Opcode>(o)), p.opcodes[e][o]);
    if (e == static_cast<int>(isa::Engine::PE) && p.pe_load_stationary.count)
      rows.emplace_back("load_stationary", p.pe_load_stationary);
    std::stable_sort(rows.begin(), rows.end(),
                     [](const auto& a, const auto& b) { return a.second.total > b.second.total; });
    for (const auto& [name, ot] : rows)
      ops.push_back(
          {{"engine", isa::engine_name(static_cast<isa::Engine>(e))},
           {"opcode", name},
           {"count", ot.count},
           {"total_ns", ot.total.ns()},
           {"mean_ns", static_cast<double>(ot.total.count()) / static_cast<double>(ot.count) / 1e3}});
  }
  j["opcodes"] = ops;

  json lines = json::array();
  for (size_t i = 0; i < p.lines.size() && i < kJsonSourceLines; ++i) {
    const model::LineTime& l = p.lines[i];
    const double eb = engine_busy[static_cast<int>(l.engine)];
    lines.push_back({{"source", source_of(r, l)},
                     {"engine", isa::engine_name(l.engine)},
                     {"instructions", l.instructions},
                     {"busy_ns", l.busy.ns()},
                     {"engine_busy_percent", eb > 0 ? 100.0 * l.busy.ns() / eb : 0.0},
                     {"semaphore_wait_ns", l.semaphore_wait.ns()}});
  }
  j["source_lines"] = lines;
  j["source_lines_total"] = p.lines.size();

  if (!p.phases.empty()) {
    json phases = json::object();
    for (const model::PhaseTime& ph : p.phases) {
      json busy = json::object();
      for (int e = 0; e < isa::kNumEngines; ++e)
        busy[isa::engine_name(static_cast<isa::Engine>(e))] = ph.busy[e].ns();
      phases[ph.name] = {{"start_ns", ph.start.ns()},
                         {"end_ns", ph.end.ns()},
                         {"span_ns", ph.end.ns() - ph.start.ns()},
                         {"instructions", ph.instructions},
                         {"dma_transfers", ph.dma_transfers},
                         {"dma_bytes", ph.dma_bytes},
                         {"busy_ns", busy}};
    }
    j["phases"] = phases;
  }
}

// Where an engine's time went (model::EngineTimeSplit), parts that are not zero, in ns; they sum to the
// total time.
json time_split_json(const model::EngineTimeSplit& sp) {
  json t = json::object();
  const auto put = [&](const std::string& k, Picoseconds v) {
    if (v.count() > 0) t[k] = v.ns();
  };
  put("busy", sp.work);
  put("throttled", sp.throttled);
  put("launch", sp.launch);
  for (int e = 0; e < isa::kNumEngines; ++e)
    put(std::string("wait_") + isa::engine_name(static_cast<isa::Engine>(e)), sp.engine[e]);
  for (size_t q = 0; q < sp.queue.size(); ++q) put(fmt::format("wait_dma_queue_{}", q), sp.queue[q]);
  put("wait_peer_core", sp.peer);
  put("wait_dge", sp.dge);
  put("wait_pe_pipeline", sp.pe_pipeline);
  put("finished", sp.finished);
  put("other", sp.other);
  return t;
}

constexpr size_t kJsonCriticalSegments = 400;

json critical_path_json(const RunReport& r) {
  const model::CriticalPathSummary& cp = r.profile.critical_path;
  json time = json::object();
  for (const auto& [k, v] : cp.time) time[k] = v.ns();
  json segs = json::array();
  for (size_t i = 0; i < cp.segments.size() && i < kJsonCriticalSegments; ++i) {
    const model::CriticalSegment& s = cp.segments[i];
    const std::string file = s.loc.file < r.files.size() ? r.files[s.loc.file] : "?";
    segs.push_back({{"resource", s.resource},
                    {"opcode", s.opcode},
                    {"source", fmt::format("{}:{}", file, s.loc.line)},
                    {"steps", s.steps},
                    {"start_ns", s.start.ns()},
                    {"end_ns", s.end.ns()},
                    {"active_ns", s.active.ns()},
                    {"link_ns", s.link.ns()},
                    {"via", s.via}});
  }
  return {{"length_ns", cp.length.ns()},
          {"steps", cp.steps},
          {"time_ns", time},
          {"segments", segs},
          {"segments_total", cp.segments.size()}};
}

// The leaf key paths of `j` (objects are walked, arrays of objects as name[i]); `params` is opaque.
void walk(const json& j, const std::string& path, std::vector<std::string>& out) {
  if (path == "params" || path == "nki" ||
      (!j.is_object() && !(j.is_array() && !j.empty() && j[0].is_object()))) {
    out.push_back(path);
    return;
  }
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) walk(v, path.empty() ? k : path + "." + k, out);
  } else {
    for (size_t i = 0; i < j.size(); ++i)
      for (const auto& [k, v] : j[i].items()) walk(v, fmt::format("{}[{}].{}", path, i, k), out);
  }
}

}  // namespace

json check_json(const CheckResult& c) {
  json n = {{"check", c.kind}, {"dtype", c.dtype}, {"elements", c.elements}, {"nonfinite", c.nonfinite}};
  for (const CheckMetric& m : c.metrics) {
    const StatDef* d = find_stat_def("numerics.x." + m.name);
    if (d != nullptr && d->unit == "bool" && !std::isnan(m.value))
      n[m.name] = m.value != 0;
    else
      n[m.name] = finite_or_null(m.value);
  }
  n["pass"] = c.pass;
  n["failures"] = c.failures;
  n["notes"] = c.notes;
  return n;
}

int peak_dtype_factor(const isa::Program& program, std::string* label) {
  int f = 1;
  for (int c = 0; c < program.num_cores; ++c)
    for (const isa::Instruction& i : program.streams[c][static_cast<int>(isa::Engine::PE)])
      f = std::max(f, static_cast<int>(isa::pe_rate(i).factor));
  if (label) *label = f == 4 ? "mx" : f == 2 ? "fp8_double_row" : "bf16";
  return f;
}

double program_compulsory_bytes(const isa::Program& program) {
  double bytes = 0;
  for (const isa::TensorDecl& t : program.tensors) {
    const bool output = !t.output.empty() && t.output != "false";
    if (t.init.empty() && !output) continue;
    double n = isa::dtype_size(t.dtype);
    for (int64_t d : t.shape) n *= static_cast<double>(d);
    bytes += n;
  }
  return bytes;
}

RunReport make_report(const isa::Program& program, const config::HwConfig& hw, const SessionResult& res,
                      double useful_flops, double compulsory_hbm_bytes) {
  RunReport r;
  r.hardware = hw.name;
  if (!hw.source_file.empty()) {
    std::error_code ec;
    const std::filesystem::path abs = std::filesystem::absolute(hw.source_file, ec);
    r.hardware_config = (ec ? std::filesystem::path(hw.source_file) : abs).lexically_normal().string();
  }
  r.hardware_config_sha256 = hw.source_sha256;
  r.stats = res.stats;
  r.profile = res.profile;
  r.trace = res.trace;
  r.files = program.files;
  r.cores = program.num_cores;
  r.dtype_factor = peak_dtype_factor(program, &r.dtype_label);
  r.peak_flops_per_ns = 128.0 * 128.0 * 2.0 * hw.pe.clock_GHz * r.dtype_factor * r.cores;
  r.flops_from_reference = useful_flops >= 0;
  if (r.flops_from_reference) {
    r.useful_flops = useful_flops;
  } else {
    for (const auto& c : r.stats.cores) r.useful_flops += static_cast<double>(c.pe_flops);
  }
  r.compulsory_hbm_bytes = compulsory_hbm_bytes;
  r.hbm_bandwidth_GBps = hw.hbm.bandwidth_GBps;
  r.roofline_ns =
      std::max(r.useful_flops / r.peak_flops_per_ns, r.compulsory_hbm_bytes / r.hbm_bandwidth_GBps);
  return r;
}

json stats_json(const RunReport& r) {
  const double t = r.stats.total_time.ns();
  json j;
  j["stats_format"] = kStatsFormat;
  j["stats_version"] = kStatsVersion;
  if (!r.program.empty()) {
    j["program"] = r.program;
  } else {
    j["workload"] = r.workload;
    j["kernel"] = r.kernel;
  }
  j["hardware"] = r.hardware;
  j["hardware_config"] = r.hardware_config;
  j["hardware_config_sha256"] = r.hardware_config_sha256;
  j["params"] = r.params;
  j["cores"] = r.cores;
  j["total_time_ns"] = t;
  j["roofline_lower_bound_ns"] = r.roofline_ns;
  j["roofline_ratio"] = r.roofline_ns > 0 ? t / r.roofline_ns : 0.0;
  j["useful_flops"] = r.useful_flops;
  j["useful_flops_source"] = r.flops_from_reference ? "reference" : "model";
  j["peak_tflops"] = r.peak_flops_per_ns / 1e3;
  j["peak_dtype_factor"] = r.dtype_factor;
  j["peak_dtype"] = r.dtype_label;
  j["achieved_tflops"] = t > 0 ? r.useful_flops / t / 1e3 : 0.0;
  j["mfu_percent"] =
      (t > 0 && r.peak_flops_per_ns > 0) ? 100.0 * r.useful_flops / t / r.peak_flops_per_ns : 0.0;
  uint64_t rd = 0, wr = 0, dma_bytes = 0, dma_transfers = 0;
  double throttled = 0;
  for (const auto& c : r.stats.cores) {
    rd += c.hbm_bytes_read;
    wr += c.hbm_bytes_written;
    dma_bytes += c.dma_bytes;
    dma_transfers += c.dma_transfers;
    throttled += c.pe_throttled.ns();
  }
  j["hbm_bytes"] = rd + wr;
  j["hbm_bytes_read"] = rd;
  j["hbm_bytes_written"] = wr;
  j["hbm_GBps"] = t > 0 ? static_cast<double>(rd + wr) / t : 0.0;
  j["hbm_bandwidth_GBps"] = r.hbm_bandwidth_GBps;
  j["compulsory_hbm_bytes"] = r.compulsory_hbm_bytes;
  j["dma_transfers"] = dma_transfers;
  j["dma_bytes"] = dma_bytes;
  j["dma_average_bytes"] =
      dma_transfers ? static_cast<double>(dma_bytes) / static_cast<double>(dma_transfers) : 0.0;
  j["instructions"] = r.stats.instructions;
  j["pe_throttled_ns"] = throttled;
  json engines = json::object();
  for (int c = 0; c < r.cores; ++c) {
    json core = json::object();
    for (int e = 0; e < isa::kNumEngines; ++e) {
      const auto& es = r.stats.cores[c].engines[e];
      core[isa::engine_name(static_cast<isa::Engine>(e))] = {
          {"busy_ns", es.busy.ns()},
          {"busy_percent", pct(es.busy, r.stats.total_time)},
          {"semaphore_wait_ns", es.semaphore_wait.ns()},
          {"instructions", es.instructions},
          {"time_ns", time_split_json(es.split)}};
    }
    engines[fmt::format("core{}", c)] = core;
  }
  j["engines"] = engines;
  j["critical_path"] = critical_path_json(r);
  add_profile(j, r);
  if (!r.kernel_stats.empty()) {
    json ks = json::object();
    for (const NamedStat& s : r.kernel_stats)
      ks[s.name] = {{"value", finite_or_null(s.value)}, {"unit", s.unit}, {"description", s.description}};
    j["kernel_stats"] = ks;
  }
  if (!r.allocations.empty()) j["allocations"] = r.allocations;
  if (!r.nki.is_null()) j["nki"] = r.nki;
  if (!r.notes.empty()) j["notes"] = r.notes;
  if (r.numerics_run) {
    json num = json::object();
    for (const CheckResult& c : r.checks) num[c.output] = check_json(c);
    j["numerics"] = num;
  } else {
    j["numerics"] = nullptr;
    j["numerics_note"] = r.numerics_note;
  }
  if (!r.trace.path.empty())
    j["trace"] = {{"path", r.trace.path},
                  {"slices", r.trace.slices},
                  {"flows", r.trace.flows},
                  {"counter_samples", r.trace.counter_samples},
                  {"bytes", r.trace.bytes}};

  // Definitions: every declaration that applies to this file; a key without one is a bug.
  std::vector<std::string> paths;
  for (const auto& [k, v] : j.items()) walk(v, k, paths);
  json defs = json::object();
  for (const char* parent : {"engines", "summary", "opcodes", "source_lines", "numerics", "kernel_stats",
                             "allocations", "trace", "critical_path"})
    if (j.contains(parent)) paths.push_back(parent);
  for (const std::string& p : paths) {
    const StatDef* d = find_stat_def(p);
    if (d == nullptr)
      throw Error(fmt::format("stats.json key '{}' has no declaration in sim/run/stat_defs.cpp", p));
    defs[d->key] = fmt::format("{}: {}", d->unit, d->description);
  }
  defs["definitions"] =
      fmt::format("{}: {}", find_stat_def("definitions")->unit, find_stat_def("definitions")->description);
  j["definitions"] = defs;
  return j;
}

std::string stats_text(const json& j) {
  return j.dump(2) + "\n";
}

std::string host_json_text(const RunReport& r) {
  return json{{"trnsim_host", 1}, {"wall_seconds", r.wall_seconds}}.dump(2) + "\n";
}

}  // namespace trnsim::run
