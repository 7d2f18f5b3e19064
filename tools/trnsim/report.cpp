#include "tools/trnsim/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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

std::string format_summary(const RunSummary& s) {
  const double t = s.stats.total_time.ns();
  const double tflops = t > 0 ? s.useful_flops / t / 1e3 : 0;
  const double peak = s.peak_flops_per_ns / 1e3;
  std::string o;
  o += fmt::format("workload {}: kernel {} on {} ({} core{})\n", s.workload, s.kernel, s.hardware, s.cores,
                   s.cores == 1 ? "" : "s");
  o += fmt::format("  {:<28}{}\n", "simulated time", time_str(t));
  o += fmt::format("  {:<28}{} (ratio {:.3f})\n", "roofline lower bound", time_str(s.roofline_ns),
                   s.roofline_ns > 0 ? t / s.roofline_ns : 0.0);
  o += fmt::format("  {:<28}{:.2f} TFLOP/s = {:.1f} % of peak {:.1f} TFLOP/s ({}, x{})\n", "achieved", tflops,
                   peak > 0 ? 100 * tflops / peak : 0.0, peak, s.dtype_label, s.dtype_factor);
  o += fmt::format("  {:<28}{:.4g} ({})\n", "useful FLOPs", s.useful_flops,
                   s.flops_from_reference ? "2MNK per output" : "PE FLOPs counted by the model");
  const double hbm = static_cast<double>(s.stats.hbm_bytes());
  o += fmt::format("  {:<28}{} ({:.1f} GB/s of {:.0f} GB/s); compulsory {}\n", "HBM traffic", bytes_str(hbm),
                   t > 0 ? hbm / t : 0.0, s.hbm_bandwidth_GBps, bytes_str(s.compulsory_hbm_bytes));
  o += fmt::format("  {:<28}{}\n", "instructions", s.stats.instructions);
  o += fmt::format("  {:<10}", "busy %");
  for (int c = 0; c < s.cores; ++c) o += fmt::format("{:>10}", fmt::format("core{}", c));
  o += fmt::format("{:>14}\n", "sem wait us");
  for (int e = 0; e < isa::kNumEngines; ++e) {
    o += fmt::format("  {:<10}", isa::engine_name(static_cast<isa::Engine>(e)));
    double wait = 0;
    for (int c = 0; c < s.cores; ++c) {
      o += fmt::format("{:>9.1f}%", pct(s.stats.cores[c].engines[e].busy, s.stats.total_time));
      wait += s.stats.cores[c].engines[e].semaphore_wait.ns();
    }
    o += fmt::format("{:>14.2f}\n", wait / 1e3);
  }
  if (!s.numerics_run) {
    o += fmt::format("numerics: {}\n", s.numerics_note);
    return o;
  }
  o += fmt::format("numerics {:<14}{:>12}{:>14}{:>14}{:>12}{:>12}{:>9}{:>6}\n", "output", "max_abs_err",
                   "rel_l2_exact", "rel_l2_quant", "cos_exact", "norm_eucl", "allclose", "");
  for (const auto& n : s.numerics) {
    o += fmt::format("         {:<14}{:>12.4g}{:>14.4g}{:>14.4g}{:>12.6f}{:>12.4g}{:>9}{:>6}\n", n.output,
                     n.vs_exact.max_abs_err, n.vs_exact.rel_l2, n.vs_quantized.rel_l2, n.vs_exact.cosine,
                     n.vs_exact.norm_euclidean, n.vs_exact.allclose ? "yes" : "no", n.pass ? "PASS" : "FAIL");
  }
  for (const auto& n : s.numerics)
    if (n.rows_compared < n.rows_total)
      o += fmt::format(
          "         {}: references on {} of {} rows (evenly spaced blocks; --full-reference for all)\n",
          n.output, n.rows_compared, n.rows_total);
  for (const auto& n : s.numerics)
    for (const auto& f : n.failures) o += fmt::format("FAIL {}: {}\n", n.output, f);
  return o;
}

nlohmann::json stats_json(const RunSummary& s) {
  using nlohmann::json;
  const double t = s.stats.total_time.ns();
  json j;
  j["workload"] = s.workload;
  j["kernel"] = s.kernel;
  j["hardware"] = s.hardware;
  j["params"] = s.params;
  j["cores"] = s.cores;
  j["total_time_ns"] = t;
  j["roofline_lower_bound_ns"] = s.roofline_ns;
  j["roofline_ratio"] = s.roofline_ns > 0 ? t / s.roofline_ns : 0.0;
  j["useful_flops"] = s.useful_flops;
  j["peak_tflops"] = s.peak_flops_per_ns / 1e3;
  j["peak_dtype_factor"] = s.dtype_factor;
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
  j["definitions"] = {
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
  return j;
}

}  // namespace trnsim::cli
