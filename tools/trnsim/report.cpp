#include "tools/trnsim/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "sim/base/error.h"
#include "sim/isa/semantics.h"

namespace trnsim::cli {
namespace {

double pct(Picoseconds part, Picoseconds total) {
  return total.count() == 0 ? 0.0
                            : 100.0 * static_cast<double>(part.count()) / static_cast<double>(total.count());
}

std::string bytes_str(double b) {
  if (b >= 1e9) return fmt::format("{:.3f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.3f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.3f} kB", b / 1e3);
  return fmt::format("{:.0f} B", b);
}

std::string time_str(double ns) {
  if (ns >= 1e6) return fmt::format("{:.3f} ms", ns / 1e6);
  if (ns >= 1e3) return fmt::format("{:.3f} us", ns / 1e3);
  return fmt::format("{:.1f} ns", ns);
}

nlohmann::json metric_json(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

constexpr const char* kStatsFormat = "trnsim stats";
// Neuron profile names of the engines (reference §5), in isa::Engine order.
constexpr std::array<const char*, isa::kNumEngines> kProfileEngine = {"tensor", "vector", "scalar", "gpsimd",
                                                                      "sync"};
constexpr size_t kJsonSourceLines = 50;

std::string source_of(const RunSummary& s, const model::LineTime& l) {
  const std::string file = l.file < s.files.size() ? s.files[l.file] : "?";
  return fmt::format("{}:{}", file, l.line);
}

// summary, opcodes and source_lines (model::StatsObserver figures plus RunStats in profile names).
void add_profile(nlohmann::json& j, const RunSummary& s) {
  using nlohmann::json;
  const double t = s.stats.total_time.ns();
  const int cores = std::max(1, s.cores);
  const model::ProfileStats& p = s.profile;
  json sm = json::object();
  sm["total_time_ns"] = t;
  std::array<double, isa::kNumEngines> engine_busy{};
  for (int e = 0; e < isa::kNumEngines; ++e) {
    double wait = 0;
    uint64_t n = 0;
    for (int c = 0; c < s.cores; ++c) {
      const auto& es = s.stats.cores[c].engines[e];
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
  for (int c = 0; c < 2; ++c) {
    const auto& cs = s.stats.cores[c];
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
  sm["mbu_estimated_percent"] = s.hbm_bandwidth_GBps > 0 ? 100.0 * hbm_avg / s.hbm_bandwidth_GBps : 0.0;
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
    lines.push_back({{"source", source_of(s, l)},
                     {"engine", isa::engine_name(l.engine)},
                     {"instructions", l.instructions},
                     {"busy_ns", l.busy.ns()},
                     {"engine_busy_percent", eb > 0 ? 100.0 * l.busy.ns() / eb : 0.0},
                     {"semaphore_wait_ns", l.semaphore_wait.ns()}});
  }
  j["source_lines"] = lines;
  j["source_lines_total"] = p.lines.size();
}

nlohmann::json profile_definitions() {
  nlohmann::json d = {
      {"summary",
       "profile-style counters, named like a Neuron profile's Summary table; engine times are per physical "
       "core "
       "(the mean over the cores the program uses), counts and bytes are summed over both cores"},
      {"summary.total_time_ns", "ns: = total_time_ns"},
      {"summary.tensor_engine_load_stationary_time_ns",
       "ns per core: PE LoadStationary phases (Neuron's LDWEIGHTS), which overlap the MultiplyMoving time "
       "that "
       "tensor_engine_active_time_ns counts"},
      {"summary.pe_throttled_time_ns", "ns per core: PE time added by the dI/dt throttle"},
      {"summary.pe_flops", "FLOP: 2 per multiply-accumulate of every nc_matmul(_mx) the PE ran, both cores"},
      {"summary.pe_flops_bf16_equivalent",
       "FLOP: pe_flops scaled to the BF16 rate (Neuron's adjusted_flops): nc_matmul_mx / 4, FP8 double_row / "
       "2, "
       "FP32 x pe.fp32_factor, others x 1"},
      {"summary.pe_peak_bf16_tflops", "TFLOP/s: 128*128 PE MACs * 2 * PE clock (GHz) * cores / 1000"},
      {"summary.mfu_estimated_percent",
       "%: achieved over peak FLOP/s for the generation and the dtypes used = pe_flops_bf16_equivalent / "
       "total_time_ns / (pe_peak_bf16_tflops * 1000) * 100"},
      {"summary.hbm_read_bytes", "bytes read from HBM by all DMA transfers, both cores"},
      {"summary.hbm_write_bytes", "bytes written to HBM by all DMA transfers, both cores"},
      {"summary.hbm_read_bandwidth_GBps", "GB/s (bytes per ns): hbm_read_bytes / total_time_ns"},
      {"summary.hbm_write_bandwidth_GBps", "GB/s (bytes per ns): hbm_write_bytes / total_time_ns"},
      {"summary.hbm_average_bandwidth_GBps", "GB/s (bytes per ns): (read + written) / total_time_ns"},
      {"summary.mbu_estimated_percent", "%: hbm_average_bandwidth_GBps / hbm_bandwidth_GBps * 100"},
      {"summary.dma_instruction_count", "count: DMA instructions (triggers) issued, both cores"},
      {"summary.dma_transfer_count", "count: DMA transfers completed, both cores"},
      {"summary.dma_transfer_total_bytes", "bytes: payload of all DMA transfers"},
      {"summary.dma_transfer_average_bytes",
       "bytes per transfer: dma_transfer_total_bytes / dma_transfer_count"},
      {"summary.sbuf_peak_usage_bytes_per_partition",
       "bytes per partition: the most SBUF in use at any time in one partition quadrant of one core. Derived "
       "from the instruction operands (not the builder's allocations): a byte range is in use from the first "
       "to the last instruction or DMA transfer that touches it, so reuse after a gap counts during the gap"},
      {"summary.sbuf_peak_usage_percent",
       "%: sbuf_peak_usage_bytes_per_partition / sbuf_capacity_bytes_per_partition"},
      {"summary.sbuf_peak_usage_time_ns", "ns: when sbuf_peak_usage_bytes_per_partition is first reached"},
      {"summary.sbuf_peak_usage_bytes_per_quadrant",
       "bytes per partition, for the quadrants starting at partitions 0, 32, 64, 96 (max over cores)"},
      {"summary.sbuf_capacity_bytes_per_partition",
       "bytes per partition: SBUF size from the hardware config"},
      {"summary.psum_peak_usage_bytes_per_partition",
       "bytes per partition: as sbuf_peak_usage_bytes_per_partition, for PSUM"},
      {"summary.psum_peak_usage_percent",
       "%: psum_peak_usage_bytes_per_partition / psum_capacity_bytes_per_partition"},
      {"summary.psum_peak_usage_time_ns", "ns: when psum_peak_usage_bytes_per_partition is first reached"},
      {"summary.psum_peak_usage_bytes_per_quadrant", "bytes per partition, per quadrant, as for SBUF"},
      {"summary.psum_capacity_bytes_per_partition",
       "bytes per partition: PSUM size from the hardware config"},
      {"summary.memory_usage_source", "what the SBUF/PSUM peaks are derived from"},
      {"opcodes",
       "per engine and opcode, both cores: count (instructions), total_ns (engine occupancy: PE nc_matmul "
       "its "
       "MultiplyMoving phase, DMA opcodes the trigger on the issuing engine, load_stationary the PE "
       "LoadStationary phases), mean_ns = total_ns / count; busiest first within an engine"},
      {"source_lines",
       "the busiest kernel source lines (up to 50): source (file:line), engine, instructions (count), "
       "busy_ns "
       "(engine occupancy, both cores), engine_busy_percent (% of that engine's busy_ns over both cores), "
       "semaphore_wait_ns (ns its instructions waited on semaphores, core_barrier waits included)"},
      {"source_lines_total", "count: distinct (source line, engine) pairs that ran"},
      {"peak_dtype", "label of peak_dtype_factor: bf16, fp8_double_row or mx"},
      {"useful_flops_source", "reference (2*M*N*K of the host reference) or model (PE FLOPs counted)"},
      {"stats_format", "identifies a trnsim stats.json; stats_version is its layout version"},
  };
  for (const char* e : kProfileEngine) {
    const std::string k = std::string("summary.") + e + "_engine_";
    d[k + "active_time_ns"] = fmt::format("ns per core: time the {} engine was occupied by instructions", e);
    d[k + "active_time_percent"] = "%: " + std::string(e) + "_engine_active_time_ns / total_time_ns * 100";
    d[k + "instruction_count"] = "count: instructions the engine issued (DMA triggers included), both cores";
    d[k + "semaphore_wait_ns"] = "ns per core: time the engine's sequencer waited on semaphores";
  }
  return d;
}
}  // namespace

int peak_dtype_factor(const isa::Program& program, std::string* label) {
  int f = 1;
  for (int c = 0; c < program.num_cores; ++c)
    for (const isa::Instruction& i : program.streams[c][static_cast<int>(isa::Engine::PE)]) {
      if (i.op == isa::Opcode::NcMatmulMx) f = std::max(f, 4);
      if (i.op == isa::Opcode::NcMatmul && (i.flags & isa::kDoubleRow)) f = std::max(f, 2);
    }
  if (label) *label = f == 4 ? "mx" : f == 2 ? "fp8_double_row" : "bf16";
  return f;
}

void compute_roofline(RunSummary& s, const isa::Program& program, const config::HwConfig& hw) {
  s.cores = program.num_cores;
  s.dtype_factor = peak_dtype_factor(program, &s.dtype_label);
  s.peak_flops_per_ns = 128.0 * 128.0 * 2.0 * hw.pe.clock_GHz * s.dtype_factor * s.cores;
  if (!s.flops_from_reference) {
    s.useful_flops = 0;
    for (const auto& c : s.stats.cores) s.useful_flops += static_cast<double>(c.pe_flops);
  }
  s.hbm_bandwidth_GBps = hw.hbm.bandwidth_GBps;
  s.roofline_ns =
      std::max(s.useful_flops / s.peak_flops_per_ns, s.compulsory_hbm_bytes / s.hbm_bandwidth_GBps);
}

nlohmann::json stats_json(const RunSummary& s) {
  using nlohmann::json;
  const double t = s.stats.total_time.ns();
  json j;
  j["stats_format"] = kStatsFormat;
  j["stats_version"] = 2;
  j["workload"] = s.workload;
  j["kernel"] = s.kernel;
  j["hardware"] = s.hardware;
  j["params"] = s.params;
  if (!s.program.empty()) j["program"] = s.program;
  j["cores"] = s.cores;
  j["total_time_ns"] = t;
  j["roofline_lower_bound_ns"] = s.roofline_ns;
  j["roofline_ratio"] = s.roofline_ns > 0 ? t / s.roofline_ns : 0.0;
  j["useful_flops"] = s.useful_flops;
  j["peak_tflops"] = s.peak_flops_per_ns / 1e3;
  j["peak_dtype_factor"] = s.dtype_factor;
  j["peak_dtype"] = s.dtype_label;
  j["useful_flops_source"] = s.flops_from_reference ? "reference" : "model";
  j["achieved_tflops"] = t > 0 ? s.useful_flops / t / 1e3 : 0.0;
  j["mfu_percent"] =
      (t > 0 && s.peak_flops_per_ns > 0) ? 100.0 * s.useful_flops / t / s.peak_flops_per_ns : 0.0;
  uint64_t rd = 0, wr = 0, dma_bytes = 0, dma_transfers = 0;
  double throttled = 0;
  for (int c = 0; c < 2; ++c) {
    rd += s.stats.cores[c].hbm_bytes_read;
    wr += s.stats.cores[c].hbm_bytes_written;
    dma_bytes += s.stats.cores[c].dma_bytes;
    dma_transfers += s.stats.cores[c].dma_transfers;
    throttled += s.stats.cores[c].pe_throttled.ns();
  }
  j["hbm_bytes"] = rd + wr;
  j["hbm_bytes_read"] = rd;
  j["hbm_bytes_written"] = wr;
  j["hbm_GBps"] = t > 0 ? static_cast<double>(rd + wr) / t : 0.0;
  j["hbm_bandwidth_GBps"] = s.hbm_bandwidth_GBps;
  j["compulsory_hbm_bytes"] = s.compulsory_hbm_bytes;
  j["dma_transfers"] = dma_transfers;
  j["dma_bytes"] = dma_bytes;
  j["dma_average_bytes"] = dma_transfers ? static_cast<double>(dma_bytes) / dma_transfers : 0.0;
  j["instructions"] = s.stats.instructions;
  j["pe_throttled_ns"] = throttled;
  json engines = json::object();
  for (int c = 0; c < s.cores; ++c) {
    json core = json::object();
    for (int e = 0; e < isa::kNumEngines; ++e) {
      const auto& es = s.stats.cores[c].engines[e];
      core[isa::engine_name(static_cast<isa::Engine>(e))] = {
          {"busy_ns", es.busy.ns()},
          {"busy_percent", pct(es.busy, s.stats.total_time)},
          {"semaphore_wait_ns", es.semaphore_wait.ns()},
          {"instructions", es.instructions}};
    }
    engines[fmt::format("core{}", c)] = core;
  }
  j["engines"] = engines;
  add_profile(j, s);
  if (s.numerics_run) {
    json num = json::object();
    for (const auto& n : s.numerics) {
      num[n.output] = {{"dtype", n.bf16_output ? "bfloat16" : "float32"},
                       {"quantized_reference", n.quantized},
                       {"max_abs_err", metric_json(n.vs_exact.max_abs_err)},
                       {"max_abs_err_vs_quantized", metric_json(n.vs_quantized.max_abs_err)},
                       {"max_abs_golden", metric_json(n.vs_exact.max_abs_golden)},
                       {"rel_l2_vs_exact", metric_json(n.vs_exact.rel_l2)},
                       {"rel_l2_vs_quantized", metric_json(n.vs_quantized.rel_l2)},
                       {"rel_l2_bound", n.rel_l2_bound},
                       {"cosine_vs_exact", metric_json(n.vs_exact.cosine)},
                       {"cosine_vs_quantized", metric_json(n.vs_quantized.cosine)},
                       {"normalized_euclidean_vs_exact", metric_json(n.vs_exact.norm_euclidean)},
                       {"allclose_vs_exact", n.vs_exact.allclose},
                       {"nonfinite", n.vs_exact.nonfinite},
                       {"pass", n.pass},
                       {"reference_rows_compared", n.rows_compared},
                       {"reference_rows_total", n.rows_total},
                       {"failures", n.failures}};
    }
    j["numerics"] = num;
  } else {
    j["numerics"] = nullptr;
    j["numerics_note"] = s.numerics_note;
  }
  json defs = {
      {"total_time_ns", "ns: simulated time from start to the last instruction or DMA completion"},
      {"roofline_lower_bound_ns",
       "ns: max(useful_flops / peak, compulsory_hbm_bytes / hbm_bandwidth_GBps); a simulated time below it "
       "is a "
       "simulator bug"},
      {"roofline_ratio", "total_time_ns / roofline_lower_bound_ns (>= 1)"},
      {"useful_flops",
       "FLOP: 2*M*N*K per matmul output of the host reference, else the PE FLOPs the model counted"},
      {"peak_tflops", "TFLOP/s: 128*128 PE MACs * 2 * PE clock (GHz) * peak_dtype_factor * cores / 1000"},
      {"peak_dtype_factor",
       "1 BF16/FP16 nc_matmul, 2 FP8 double_row, 4 nc_matmul_mx: the fastest the program issues"},
      {"achieved_tflops", "TFLOP/s: useful_flops / total_time_ns / 1000"},
      {"mfu_percent", "%: achieved_tflops / peak_tflops * 100"},
      {"hbm_bytes", "bytes read plus written in HBM by all DMA transfers of both cores"},
      {"hbm_GBps", "bytes per ns (= GB/s): hbm_bytes / total_time_ns"},
      {"compulsory_hbm_bytes", "bytes: every kernel input and output tensor read or written once"},
      {"dma_average_bytes", "bytes per DMA transfer (payload)"},
      {"pe_throttled_ns", "ns: PE time added by the dI/dt throttle, both cores"},
      {"engines",
       "per core and engine: busy_ns (ns occupied), busy_percent (% of total_time_ns), "
       "semaphore_wait_ns (ns the sequencer waited on semaphores), instructions (count)"},
      {"numerics.max_abs_err", "max |kernel - exact reference| (output units)"},
      {"numerics.rel_l2_vs_exact",
       "||kernel - exact|| / ||exact||; exact = FP64 matmul of the unquantized inputs"},
      {"numerics.rel_l2_vs_quantized",
       "||kernel - quantized|| / ||quantized||; quantized = FP64 matmul of the inputs MX-quantized as the "
       "kernel "
       "does (scale rule, group scheme along each operand's contraction axis, FP8 format), or the exact "
       "reference "
       "for kernels without MX quantization"},
      {"numerics.rel_l2_bound",
       "pass bound on rel_l2_vs_quantized: 1e-5 for float32 outputs; 2^-8 = 3.9e-3 for bfloat16 outputs, "
       "because "
       "rounding to bfloat16 alone moves each element by up to 2^-9 of its value (rel L2 ~1e-3), and 2^-8 "
       "leaves "
       "as much again for the FP32 accumulation order"},
      {"numerics.cosine_vs_exact", "<kernel, exact> / (||kernel|| ||exact||)"},
      {"numerics.normalized_euclidean_vs_exact", "||kernel - exact|| / (||kernel|| + ||exact||)"},
      {"numerics.allclose_vs_exact",
       "nki-library allclose: |k - g| <= 0.2*max|g| + 1e-3*|g| for every element"},
      {"numerics.reference_rows_compared",
       "output rows both references were computed for: all rows, or for outputs whose FP64 reference costs "
       "more than 32 GFLOP an evenly spaced sample of 32-row blocks (trnsim run --full-reference: all)"},
      {"numerics.pass",
       "nki-library tolerances against the exact reference (allclose, cosine >= 0.995, normalized Euclidean "
       "<= "
       "0.10) and rel_l2_vs_quantized <= rel_l2_bound"}};
  const json profile_defs = profile_definitions();
  for (const auto& [k, v] : profile_defs.items()) defs[k] = v;
  j["definitions"] = defs;
  return j;
}

namespace {

using nlohmann::json;

const json& member(const json& o, const char* key) {
  static const json kNull;
  if (!o.is_object()) return kNull;
  auto it = o.find(key);
  return it == o.end() ? kNull : *it;
}
double num(const json& o, const char* key) {
  const json& v = member(o, key);
  return v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN();
}
std::string str(const json& o, const char* key, const std::string& dflt = "?") {
  const json& v = member(o, key);
  return v.is_string() ? v.get<std::string>() : dflt;
}
// A count, or "-" when absent (an older stats.json).
std::string count_str(double v) {
  return std::isfinite(v) ? fmt::format("{:.0f}", v) : "-";
}

// The last two components of a source path ("lib/matmul.cpp:42").
std::string short_source(const std::string& src) {
  size_t cut = src.rfind('/');
  if (cut != std::string::npos && cut > 0) cut = src.rfind('/', cut - 1);
  return cut == std::string::npos ? src : src.substr(cut + 1);
}

}  // namespace

std::string format_stats(const json& j, size_t top_lines) {
  const double t = num(j, "total_time_ns");
  const double roof = num(j, "roofline_lower_bound_ns");
  const int cores = std::isfinite(num(j, "cores")) ? static_cast<int>(num(j, "cores")) : 2;
  const json& sm = member(j, "summary");
  std::string o;
  if (member(j, "program").is_string())
    o += fmt::format("program {} on {} ({} core{})\n", str(j, "program"), str(j, "hardware"), cores,
                     cores == 1 ? "" : "s");
  else
    o += fmt::format("workload {}: kernel {} on {} ({} core{})\n", str(j, "workload"), str(j, "kernel"),
                     str(j, "hardware"), cores, cores == 1 ? "" : "s");
  o += fmt::format("  {:<28}{}\n", "simulated time", time_str(t));
  o += fmt::format("  {:<28}{} (ratio {:.3f})\n", "roofline lower bound", time_str(roof),
                   roof > 0 ? t / roof : 0.0);
  const double peak = num(j, "peak_tflops");
  const double tflops = num(j, "achieved_tflops");
  o += fmt::format("  {:<28}{:.2f} TFLOP/s = {:.1f} % of peak {:.1f} TFLOP/s ({}, x{})\n", "achieved", tflops,
                   peak > 0 ? 100 * tflops / peak : 0.0, peak, str(j, "peak_dtype"),
                   count_str(num(j, "peak_dtype_factor")));
  if (sm.is_object())
    o += fmt::format("  {:<28}{:.1f} % (PE FLOPs at the BF16-equivalent peak {:.1f} TFLOP/s)\n",
                     "MFU (estimated)", num(sm, "mfu_estimated_percent"), num(sm, "pe_peak_bf16_tflops"));
  o += fmt::format(
      "  {:<28}{:.4g} ({})\n", "useful FLOPs", num(j, "useful_flops"),
      str(j, "useful_flops_source", "") == "reference" ? "2MNK per output" : "PE FLOPs counted by the model");
  const double hbm = num(j, "hbm_bytes");
  o += fmt::format("  {:<28}{} ({:.1f} GB/s of {:.0f} GB/s); compulsory {}\n", "HBM traffic", bytes_str(hbm),
                   num(j, "hbm_GBps"), num(j, "hbm_bandwidth_GBps"),
                   bytes_str(num(j, "compulsory_hbm_bytes")));
  if (sm.is_object()) {
    o += fmt::format("  {:<28}read {} ({:.1f} GB/s), written {} ({:.1f} GB/s)\n", "",
                     bytes_str(num(sm, "hbm_read_bytes")), num(sm, "hbm_read_bandwidth_GBps"),
                     bytes_str(num(sm, "hbm_write_bytes")), num(sm, "hbm_write_bandwidth_GBps"));
    o += fmt::format("  {:<28}{} transfers, average {}\n", "DMA", count_str(num(sm, "dma_transfer_count")),
                     bytes_str(num(sm, "dma_transfer_average_bytes")));
    o += fmt::format("  {:<28}{} per core\n", "PE throttled", time_str(num(sm, "pe_throttled_time_ns")));
    for (const char* m : {"sbuf", "psum"}) {
      const std::string k = std::string(m) + "_peak_usage_";
      o += fmt::format("  {:<28}{} per partition ({:.1f} % of {}) at {}\n",
                       std::string(m == std::string("sbuf") ? "SBUF" : "PSUM") + " peak use",
                       bytes_str(num(sm, (k + "bytes_per_partition").c_str())),
                       num(sm, (k + "percent").c_str()),
                       bytes_str(num(sm, (std::string(m) + "_capacity_bytes_per_partition").c_str())),
                       time_str(num(sm, (k + "time_ns").c_str())));
    }
  }
  o += fmt::format("  {:<28}{}\n", "instructions", count_str(num(j, "instructions")));

  // Per core and engine: busy % and semaphore wait.
  const json& engines = member(j, "engines");
  o += fmt::format("  {:<10}", "busy %");
  for (int c = 0; c < cores; ++c) o += fmt::format("{:>10}", fmt::format("core{}", c));
  for (int c = 0; c < cores; ++c) o += fmt::format("{:>16}", fmt::format("core{} wait us", c));
  o += "\n";
  for (int e = 0; e < isa::kNumEngines; ++e) {
    const char* en = isa::engine_name(static_cast<isa::Engine>(e));
    o += fmt::format("  {:<10}", en);
    for (int c = 0; c < cores; ++c)
      o += fmt::format("{:>9.1f}%",
                       num(member(member(engines, fmt::format("core{}", c).c_str()), en), "busy_percent"));
    for (int c = 0; c < cores; ++c)
      o += fmt::format(
          "{:>16.2f}",
          num(member(member(engines, fmt::format("core{}", c).c_str()), en), "semaphore_wait_ns") / 1e3);
    o += "\n";
  }

  const json& ops = member(j, "opcodes");
  if (ops.is_array() && !ops.empty()) {
    o += fmt::format("  {:<8}{:<18}{:>10}{:>14}{:>12}\n", "engine", "opcode", "count", "total us", "mean ns");
    for (const json& r : ops)
      o += fmt::format("  {:<8}{:<18}{:>10}{:>14.3f}{:>12.1f}\n", str(r, "engine"), str(r, "opcode"),
                       count_str(num(r, "count")), num(r, "total_ns") / 1e3, num(r, "mean_ns"));
  }
  const json& lines = member(j, "source_lines");
  if (lines.is_array() && !lines.empty() && top_lines > 0) {
    o += fmt::format("  busiest source lines ({} of {})\n", std::min(top_lines, lines.size()),
                     count_str(num(j, "source_lines_total")));
    o += fmt::format("  {:<40}{:<6}{:>8}{:>14}{:>9}{:>14}\n", "source", "engine", "count", "busy us",
                     "engine%", "sem wait us");
    for (size_t i = 0; i < lines.size() && i < top_lines; ++i) {
      const json& r = lines[i];
      o += fmt::format("  {:<40}{:<6}{:>8}{:>14.3f}{:>8.1f}%{:>14.3f}\n", short_source(str(r, "source")),
                       str(r, "engine"), count_str(num(r, "instructions")), num(r, "busy_ns") / 1e3,
                       num(r, "engine_busy_percent"), num(r, "semaphore_wait_ns") / 1e3);
    }
  }

  const json& numerics = member(j, "numerics");
  if (!numerics.is_object()) {
    o += fmt::format("numerics: {}\n", str(j, "numerics_note", "none"));
    return o;
  }
  o += fmt::format("numerics {:<14}{:>12}{:>14}{:>14}{:>12}{:>12}{:>9}{:>6}\n", "output", "max_abs_err",
                   "rel_l2_exact", "rel_l2_quant", "cos_exact", "norm_eucl", "allclose", "");
  for (const auto& [name, n] : numerics.items()) {
    const bool pass = member(n, "pass").is_boolean() && member(n, "pass").get<bool>();
    const bool allclose =
        member(n, "allclose_vs_exact").is_boolean() && member(n, "allclose_vs_exact").get<bool>();
    o += fmt::format("         {:<14}{:>12.4g}{:>14.4g}{:>14.4g}{:>12.6f}{:>12.4g}{:>9}{:>6}\n", name,
                     num(n, "max_abs_err"), num(n, "rel_l2_vs_exact"), num(n, "rel_l2_vs_quantized"),
                     num(n, "cosine_vs_exact"), num(n, "normalized_euclidean_vs_exact"),
                     allclose ? "yes" : "no", pass ? "PASS" : "FAIL");
  }
  for (const auto& [name, n] : numerics.items())
    if (num(n, "reference_rows_compared") < num(n, "reference_rows_total"))
      o += fmt::format(
          "         {}: references on {} of {} rows (evenly spaced blocks; --full-reference for all)\n", name,
          count_str(num(n, "reference_rows_compared")), count_str(num(n, "reference_rows_total")));
  for (const auto& [name, n] : numerics.items())
    if (member(n, "failures").is_array())
      for (const json& f : member(n, "failures"))
        if (f.is_string()) o += fmt::format("FAIL {}: {}\n", name, f.get<std::string>());
  return o;
}

std::string format_summary(const RunSummary& s) {
  return format_stats(stats_json(s));
}

std::string format_compare(const json& a, const json& b, const std::string& name_a,
                           const std::string& name_b) {
  struct Row {
    std::string label;
    double a, b;
    int decimals;
  };
  std::vector<Row> rows;
  const json &sa = member(a, "summary"), &sb = member(b, "summary");
  auto top = [&](const std::string& label, const char* key, int dec) {
    rows.push_back({label, num(a, key), num(b, key), dec});
  };
  auto sum = [&](const std::string& label, const std::string& key, int dec) {
    rows.push_back({label, num(sa, key.c_str()), num(sb, key.c_str()), dec});
  };
  top("total time (ns)", "total_time_ns", 1);
  top("roofline ratio", "roofline_ratio", 3);
  sum("MFU estimated (%)", "mfu_estimated_percent", 2);
  top("MFU of useful FLOPs (%)", "mfu_percent", 2);
  for (int e = 0; e < isa::kNumEngines; ++e)
    sum(fmt::format("{} busy (%)", isa::engine_name(static_cast<isa::Engine>(e))),
        std::string(kProfileEngine[e]) + "_engine_active_time_percent", 1);
  top("HBM bytes", "hbm_bytes", 0);
  sum("HBM read bytes", "hbm_read_bytes", 0);
  sum("HBM write bytes", "hbm_write_bytes", 0);
  top("HBM bandwidth (GB/s)", "hbm_GBps", 1);
  sum("DMA transfers", "dma_transfer_count", 0);
  sum("DMA average size (bytes)", "dma_transfer_average_bytes", 1);
  for (int e = 0; e < isa::kNumEngines; ++e)
    sum(fmt::format("{} semaphore wait (ns/core)", isa::engine_name(static_cast<isa::Engine>(e))),
        std::string(kProfileEngine[e]) + "_engine_semaphore_wait_ns", 1);
  sum("PE throttled (ns/core)", "pe_throttled_time_ns", 1);
  sum("SBUF peak (bytes/partition)", "sbuf_peak_usage_bytes_per_partition", 0);
  sum("PSUM peak (bytes/partition)", "psum_peak_usage_bytes_per_partition", 0);

  std::string o = fmt::format("A: {}\nB: {}\n", name_a, name_b);
  o += fmt::format("  {:<32}{:>18}{:>18}{:>10}\n", "", "A", "B", "B/A");
  for (const Row& r : rows) {
    auto cell = [&](double v) { return std::isfinite(v) ? fmt::format("{:.{}f}", v, r.decimals) : "-"; };
    std::string ratio = "-";
    if (std::isfinite(r.a) && std::isfinite(r.b)) {
      if (r.a != 0)
        ratio = fmt::format("{:.3f}", r.b / r.a);
      else if (r.b == 0)
        ratio = "1.000";
    }
    o += fmt::format("  {:<32}{:>18}{:>18}{:>10}\n", r.label, cell(r.a), cell(r.b), ratio);
  }
  return o;
}

json load_stats(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InputError(path + ": no such file");
  if (fs::is_directory(path, ec)) throw InputError(path + ": is a directory, expected a stats.json");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path + ": cannot open");
  json j;
  try {
    j = json::parse(f);
  } catch (const json::parse_error& e) {
    throw InputError(fmt::format("{}: not JSON (parse error at byte {})", path, e.byte));
  }
  const json& fmt_key = member(j, "stats_format");
  const bool ok = j.is_object() && member(j, "total_time_ns").is_number() &&
                  member(j, "engines").is_object() && (fmt_key.is_null() || fmt_key == kStatsFormat);
  if (!ok)
    throw InputError(
        path +
        ": not a trnsim stats.json (expected an object with \"total_time_ns\" and \"engines\", as "
        "`trnsim run ... --out DIR` writes)");
  return j;
}

void write_stats(const std::string& dir, const json& j) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw InputError(fmt::format("{}: cannot create the output directory", dir));
  const fs::path stats = fs::path(dir) / "stats.json";
  const fs::path tmp = fs::path(dir) / ".stats.json.partial";
  {
    std::ofstream f(tmp);
    f << j.dump(2) << "\n";
    f.close();
    if (!f) {
      fs::remove(tmp, ec);
      throw InputError(fmt::format("{}: cannot write", stats.string()));
    }
  }
  fs::rename(tmp, stats, ec);
  if (ec) throw InputError(fmt::format("{}: cannot write ({})", stats.string(), ec.message()));
}

RunSummary program_summary(const std::string& path, const isa::Program& program, const config::HwConfig& hw,
                           const model::RunStats& stats, const model::ProfileStats& profile) {
  RunSummary s;
  s.program = path;
  s.hardware = hw.name;
  s.stats = stats;
  s.profile = profile;
  s.files = program.files;
  for (const isa::TensorDecl& t : program.tensors) {
    const bool output = !t.output.empty() && t.output != "false";
    if (t.init.empty() && !output) continue;
    double n = isa::dtype_size(t.dtype);
    for (int64_t d : t.shape) n *= static_cast<double>(d);
    s.compulsory_hbm_bytes += n;
  }
  compute_roofline(s, program, hw);
  s.numerics_note = "program run: no host reference (outputs are written as .npy)";
  return s;
}

}  // namespace trnsim::cli
