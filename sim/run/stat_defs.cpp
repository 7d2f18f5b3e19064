#include "sim/run/stat_defs.h"

#include <array>

namespace trnsim::run {
namespace {

StatDef row(std::string key, std::string unit, std::string desc, std::string label = "",
            Better b = Better::None, bool table = false, bool compare = false) {
  return {std::move(key), std::move(unit), std::move(desc), std::move(label), b, table, compare};
}
// A headline figure: printed in the table and compared.
StatDef headline(std::string key, std::string unit, std::string desc, std::string label, Better b) {
  return row(std::move(key), std::move(unit), std::move(desc), std::move(label), b, true, true);
}
StatDef compared(std::string key, std::string unit, std::string desc, std::string label, Better b) {
  return row(std::move(key), std::move(unit), std::move(desc), std::move(label), b, false, true);
}

// Neuron profile names of the engines, in isa::Engine order.
constexpr std::array<const char*, 5> kProfileEngine = {"tensor", "vector", "scalar", "gpsimd", "sync"};
constexpr std::array<const char*, 5> kEngine = {"PE", "DVE", "ACT", "POOL", "SP"};

std::vector<StatDef> build() {
  std::vector<StatDef> d = {
      row("stats_format", "text", "identifies a trnsim stats.json"),
      row("stats_version", "count", "layout version of this file"),
      row("workload", "text", "the workload's name (workload runs)"),
      row("kernel", "text", "the kernel run (workload runs)"),
      row("program", "text", "the program file run (program runs)"),
      row("hardware", "text", "the hardware config's name"),
      row("hardware_config", "text",
          "the hardware config file read (absolute path; names are looked up in $TRNSIM_CONFIG_DIR, then the "
          "source tree's configs/hw)"),
      row("hardware_config_sha256", "text", "SHA-256 of that file's bytes as read (as sha256sum prints it)"),
      row("params", "text", "the kernel's parameters, defaults filled in"),
      row("cores", "count", "physical cores the program uses"),
      headline("total_time_ns", "ns", "simulated time from start to the last instruction or DMA completion",
               "simulated time", Better::Lower),
      headline("roofline_lower_bound_ns", "ns",
               "max(useful_flops / peak, compulsory_hbm_bytes / hbm_bandwidth_GBps); a simulated time below "
               "it is a "
               "simulator bug",
               "roofline lower bound", Better::None),
      headline("roofline_ratio", "ratio", "total_time_ns / roofline_lower_bound_ns (>= 1)", "roofline ratio",
               Better::Lower),
      row("useful_flops", "FLOP",
          "the kernel's useful FLOPs (2*M*N*K per matmul output of its host reference), else the PE FLOPs "
          "the model "
          "counted",
          "useful FLOPs", Better::None, true),
      row("useful_flops_source", "text",
          "reference (the kernel's declared FLOPs) or model (PE FLOPs counted)"),
      row("peak_tflops", "TFLOP/s", "128*128 PE MACs * 2 * PE clock (GHz) * peak_dtype_factor * cores / 1000",
          "peak", Better::None, true),
      row("peak_dtype_factor", "count",
          "1 BF16/FP16 nc_matmul, 2 FP8 double_row, 4 nc_matmul_mx: the fastest matmul the program issues"),
      row("peak_dtype", "text", "label of peak_dtype_factor: bf16, fp8_double_row or mx"),
      headline("achieved_tflops", "TFLOP/s", "useful_flops / total_time_ns / 1000", "achieved",
               Better::Higher),
      headline("mfu_percent", "%", "achieved_tflops / peak_tflops * 100", "MFU of useful FLOPs",
               Better::Higher),
      headline("hbm_bytes", "bytes", "bytes read plus written in HBM by all DMA transfers of both cores",
               "HBM traffic", Better::Lower),
      row("hbm_bytes_read", "bytes", "bytes read from HBM by all DMA transfers, both cores"),
      row("hbm_bytes_written", "bytes", "bytes written to HBM by all DMA transfers, both cores"),
      headline("hbm_GBps", "GB/s", "hbm_bytes / total_time_ns (bytes per ns)", "HBM bandwidth used",
               Better::None),
      row("hbm_bandwidth_GBps", "GB/s", "the HBM stack's bandwidth from the hardware config", "HBM bandwidth",
          Better::None, true),
      row("compulsory_hbm_bytes", "bytes",
          "every kernel input and output tensor read or written once (of a data-dependent loop, the part "
          "that runs; of a Python kernel, the inputs its instructions touch and the outputs they write)",
          "compulsory HBM bytes", Better::None, true),
      row("dma_transfers", "count", "DMA transfers completed, both cores"),
      row("dma_bytes", "bytes", "payload of all DMA transfers, both cores"),
      row("dma_average_bytes", "bytes", "payload bytes per DMA transfer"),
      row("instructions", "count", "instructions completed, both cores (DMA instructions included)",
          "instructions", Better::None, true),
      row("pe_throttled_ns", "ns", "PE time added by the dI/dt throttle, both cores"),
      row("engines", "text",
          "per physical core and engine: busy_ns, busy_percent, semaphore_wait_ns, instructions"),
      row("engines.*.*.busy_ns", "ns",
          "time the engine was occupied by instructions (PE: MultiplyMoving phases)"),
      row("engines.*.*.busy_percent", "%", "busy_ns / total_time_ns * 100"),
      row("engines.*.*.semaphore_wait_ns", "ns", "time the engine's sequencer waited on semaphores"),
      row("engines.*.*.instructions", "count", "instructions the engine issued (DMA triggers included)"),
      row("engines.*.*.time_ns", "text",
          "where the engine's time went, from 0 to total_time_ns (the parts sum to it; parts that are 0 are "
          "left "
          "out): busy (occupied at full rate), throttled (PE: occupied longer because of the dI/dt "
          "throttle), "
          "launch (the kernel launch delay), wait_<ENGINE> (waiting for a semaphore an instruction of that "
          "engine "
          "of this core writes), wait_dma_queue_<q> (for a transfer of this core's DMA queue q), "
          "wait_peer_core "
          "(for the other core: core_barrier, sendrecv), wait_dge (for the DMA issue resource: a busy DGE "
          "block), "
          "wait_pe_pipeline (PE: a MultiplyMoving waiting for its LoadStationary), finished (after its last "
          "instruction), other. A wait is charged to the semaphore that released the instruction last"),
      row("engines.*.*.time_ns.*", "ns", "one part of the engine's time (see engines.*.*.time_ns)"),
      row("critical_path", "text",
          "the chain of instructions, DMA transfers and waits that sets total_time_ns: walked back from the "
          "last "
          "completion through what held each step's start back last (the previous instruction of its engine, "
          "the "
          "writer of the semaphore it waited for, the DMA instruction of a transfer, the transfer ahead of "
          "it in "
          "its DMA queue, a busy DGE block). Each step is charged the time from its predecessor's end to its "
          "own "
          "end, so the charges sum to total_time_ns (trnsim stats --critical-path prints it)"),
      row("critical_path.length_ns", "ns", "sum of the path's charges (= total_time_ns)"),
      row("critical_path.steps", "count", "instructions, LoadStationaries and DMA transfers on the path"),
      row("critical_path.time_ns", "text",
          "time charged per resource on the path (\"core0 PE\", \"core0 DMA q3\", \"core0 PE "
          "LoadStationary\", ...) "
          "and per kind of link between steps (\"link: semaphore latency\": from a semaphore writer's end to "
          "the "
          "waiter's start; \"link: dma setup\": from a DMA instruction's end to its transfer's first byte; "
          "\"link: launch\": the kernel launch delay)"),
      row("critical_path.time_ns.*", "ns", "time of one resource or link kind on the critical path"),
      row("critical_path.segments", "text",
          "the path in time order as runs of consecutive steps on one resource, of one opcode and source "
          "line "
          "(the first 400)"),
      row("critical_path.segments[].resource", "text", "core, engine or DMA queue"),
      row("critical_path.segments[].opcode", "text", "NKI opcode (load_stationary: a PE LoadStationary)"),
      row("critical_path.segments[].source", "text", "file:line of the kernel code that emitted it"),
      row("critical_path.segments[].steps", "count", "steps in the run"),
      row("critical_path.segments[].start_ns", "ns", "start of its first step"),
      row("critical_path.segments[].end_ns", "ns", "end of its last step"),
      row("critical_path.segments[].active_ns", "ns", "time charged to its steps' activity"),
      row("critical_path.segments[].link_ns", "ns", "time charged to the links into its steps"),
      row("critical_path.segments[].via", "text",
          "how its first step was reached: program order, S[n] <- the semaphore's writer, its trigger, queue "
          "order, DGE busy <- the DMA instruction holding the DGE block, launch"),
      row("critical_path.segments_total", "count", "segments of the whole path"),
      row("summary", "text",
          "profile-style counters, named like a Neuron profile's Summary table; engine times are per "
          "physical core "
          "(the mean over the cores the program uses), counts and bytes are summed over both cores"),
      row("summary.total_time_ns", "ns", "= total_time_ns"),
      row("summary.tensor_engine_load_stationary_time_ns", "ns",
          "per core: PE LoadStationary phases (Neuron's LDWEIGHTS), which overlap the MultiplyMoving time "
          "that "
          "tensor_engine_active_time_ns counts"),
      compared("summary.pe_throttled_time_ns", "ns", "per core: PE time added by the dI/dt throttle",
               "PE throttled per core", Better::Lower),
      row("summary.pe_throttle_engagements", "count",
          "times the dI/dt throttle's cap engaged, both cores (the first PE work and every re-engagement "
          "after "
          "utilisation fell below pe.throttle.rearm_utilization over a window)"),
      row("summary.pe_flops", "FLOP",
          "2 per multiply-accumulate of every nc_matmul(_mx) the PE ran, both cores"),
      row("summary.pe_flops_bf16_equivalent", "FLOP",
          "pe_flops scaled to the BF16 rate (Neuron's adjusted_flops): nc_matmul_mx / 4, FP8 double_row / 2, "
          "FP32 x "
          "pe.fp32_factor, others x 1"),
      row("summary.pe_peak_bf16_tflops", "TFLOP/s", "128*128 PE MACs * 2 * PE clock (GHz) * cores / 1000"),
      compared(
          "summary.mfu_estimated_percent", "%",
          "achieved over peak FLOP/s for the generation and the dtypes used = pe_flops_bf16_equivalent / "
          "total_time_ns / (pe_peak_bf16_tflops * 1000) * 100",
          "MFU estimated", Better::Higher),
      compared("summary.hbm_read_bytes", "bytes", "bytes read from HBM by all DMA transfers, both cores",
               "HBM read", Better::Lower),
      compared("summary.hbm_write_bytes", "bytes", "bytes written to HBM by all DMA transfers, both cores",
               "HBM written", Better::Lower),
      row("summary.hbm_read_bandwidth_GBps", "GB/s", "hbm_read_bytes / total_time_ns"),
      row("summary.hbm_write_bandwidth_GBps", "GB/s", "hbm_write_bytes / total_time_ns"),
      row("summary.hbm_average_bandwidth_GBps", "GB/s", "(read + written) / total_time_ns"),
      row("summary.mbu_estimated_percent", "%", "hbm_average_bandwidth_GBps / hbm_bandwidth_GBps * 100"),
      row("summary.dma_instruction_count", "count", "DMA instructions (triggers) issued, both cores"),
      compared("summary.dma_transfer_count", "count", "DMA transfers completed, both cores", "DMA transfers",
               Better::None),
      row("summary.dma_transfer_total_bytes", "bytes", "payload of all DMA transfers"),
      compared("summary.dma_transfer_average_bytes", "bytes",
               "payload per transfer: dma_transfer_total_bytes / dma_transfer_count", "DMA average size",
               Better::Higher),
      compared("summary.sbuf_peak_usage_bytes_per_partition", "bytes/partition",
               "the most SBUF in use at any time in one partition quadrant of one core. Derived from the "
               "instruction "
               "operands (not the builder's allocations): a byte range is in use from the first to the last "
               "instruction or DMA transfer that touches it, so reuse after a gap counts during the gap",
               "SBUF peak", Better::None),
      row("summary.sbuf_peak_usage_percent", "%",
          "sbuf_peak_usage_bytes_per_partition / sbuf_capacity_bytes_per_partition"),
      row("summary.sbuf_peak_usage_time_ns", "ns",
          "when sbuf_peak_usage_bytes_per_partition is first reached"),
      row("summary.sbuf_peak_usage_bytes_per_quadrant", "bytes/partition",
          "per quadrant (partitions 0, 32, 64, 96), max over cores"),
      row("summary.sbuf_capacity_bytes_per_partition", "bytes/partition",
          "SBUF size from the hardware config"),
      compared("summary.psum_peak_usage_bytes_per_partition", "bytes/partition",
               "as sbuf_peak_usage_bytes_per_partition, for PSUM", "PSUM peak", Better::None),
      row("summary.psum_peak_usage_percent", "%",
          "psum_peak_usage_bytes_per_partition / psum_capacity_bytes_per_partition"),
      row("summary.psum_peak_usage_time_ns", "ns",
          "when psum_peak_usage_bytes_per_partition is first reached"),
      row("summary.psum_peak_usage_bytes_per_quadrant", "bytes/partition", "per quadrant, as for SBUF"),
      row("summary.psum_capacity_bytes_per_partition", "bytes/partition",
          "PSUM size from the hardware config"),
      row("summary.memory_usage_source", "text", "what the SBUF/PSUM peaks are derived from"),
      row("opcodes", "text", "per engine and opcode, both cores, busiest first within an engine"),
      row("opcodes[].engine", "text", "the issuing engine"),
      row("opcodes[].opcode", "text",
          "NKI opcode name; load_stationary is the PE LoadStationary phase, DMA opcodes count the trigger"),
      row("opcodes[].count", "count", "instructions"),
      row("opcodes[].total_ns", "ns", "summed engine occupancy"),
      row("opcodes[].mean_ns", "ns", "total_ns / count"),
      row("source_lines", "text", "the busiest kernel source lines (up to 50)"),
      row("source_lines[].source", "text", "file:line of the kernel code that emitted the instructions"),
      row("source_lines[].engine", "text", "the engine"),
      row("source_lines[].instructions", "count", "instructions from that line"),
      row("source_lines[].busy_ns", "ns", "engine occupancy, both cores"),
      row("source_lines[].engine_busy_percent", "%", "% of that engine's busy_ns over both cores"),
      row("source_lines[].semaphore_wait_ns", "ns", "time its instructions waited on semaphores"),
      row("source_lines_total", "count", "distinct (source line, engine) pairs that ran"),
      row("phases", "text",
          "per kernel phase (the kernel tags its instructions with a phase name), both cores; phases may "
          "overlap "
          "in time"),
      row("phases.*.start_ns", "ns", "first start of the phase's instructions or DMA transfers"),
      row("phases.*.end_ns", "ns", "last end of the phase's instructions or DMA transfers"),
      row("phases.*.span_ns", "ns", "end_ns - start_ns"),
      row("phases.*.instructions", "count", "instructions of the phase (DMA triggers included)"),
      row("phases.*.dma_transfers", "count", "DMA transfers of the phase"),
      row("phases.*.dma_bytes", "bytes", "payload of the phase's DMA transfers"),
      row("phases.*.busy_ns.*", "ns", "engine occupancy of the phase's instructions, per engine, both cores"),
      row("allocations", "text",
          "the kernel's in-loop tile allocation sites (core 0) and the buffers each rotates over: chosen by "
          "the "
          "compiler's allocation rule (kernels/api/alloc_rule.h) or an explicit bufs"),
      row("allocations[].name", "text", "the site's tile name"),
      row("allocations[].source", "text", "file:line of the kernel code that declared it"),
      row("allocations[].space", "text", "sbuf or psum"),
      row("allocations[].bytes_per_partition", "bytes", "one buffer: all the tiles one iteration declares"),
      row("allocations[].tiles", "count", "tiles one iteration declares together (one buffer)"),
      row("allocations[].trip_count", "count",
          "times the declaration runs while its buffers live (0: not stated)"),
      row("allocations[].bufs", "count", "buffers the site rotates over"),
      row("allocations[].chosen_by", "text",
          "rule (the allocation rule) or explicit (bufs set by the kernel)"),
      row("allocations[].reason", "text", "the clause of the rule that decided"),
      row("allocations[].declarations", "count",
          "times the site was declared (a pool made again per outer loop)"),
      row("allocations[].scope", "text",
          "what one pool of the site lives for: the kernel, or one iteration of the outermost loop its tiles "
          "do not cross (kernels/api/alloc_rule.h)"),
      row("nki", "text",
          "what the NKI front end recorded while a Python kernel built (its schedule and choices; "
          "docs/nki.md)"),
      row("kernel_stats", "text",
          "figures the kernel computes from its inputs; each has its own value, unit and "
          "description"),
      row("kernel_stats.*.value", "(its unit)", "the figure"),
      row("kernel_stats.*.unit", "text", "its unit"),
      row("kernel_stats.*.description", "text", "what it means"),
      row("numerics", "text",
          "per checked output: how it was checked (check: tolerance, bit_exact or scalar), its metrics, pass "
          "and "
          "failures; null with numerics_note when there is no check"),
      row("numerics_note", "text", "why there is no numerics report"),
      row("notes", "text", "what the reader should know about the run, e.g. inputs that hold NaN or Inf"),
      row("numerics.*.check", "text",
          "tolerance (FP64 references), bit_exact (a host emulation's bytes) or scalar"),
      row("numerics.*.dtype", "text", "the output's dtype"),
      row("numerics.*.elements", "count", "elements of the output"),
      row("numerics.*.nonfinite", "count",
          "NaN or Inf elements in the kernel's output (sampled rows for large outputs)"),
      row("numerics.*.pass", "bool", "every criterion of the check holds"),
      row("numerics.*.failures", "text", "one line per failed criterion"),
      row("numerics.*.notes", "text", "how the check was done (e.g. rows sampled)"),
      row("numerics.*.max_abs_err", "output units", "max |kernel - exact reference|"),
      row("numerics.*.max_abs_err_vs_quantized", "output units", "max |kernel - quantized reference|"),
      row("numerics.*.max_abs_golden", "output units", "max |exact reference|"),
      row("numerics.*.rel_l2_vs_exact", "ratio",
          "||kernel - exact|| / ||exact||; exact = FP64 math on the unquantized inputs"),
      row("numerics.*.rel_l2_vs_quantized", "ratio",
          "||kernel - quantized|| / ||quantized||; quantized = FP64 math on the inputs MX-quantized as the "
          "kernel "
          "does (scale rule, group scheme along each operand's contraction axis, FP8 format), or the exact "
          "reference "
          "for kernels without MX quantization"),
      row("numerics.*.rel_l2_bound", "ratio",
          "pass bound on rel_l2_vs_quantized: 1e-5 for float32 outputs; 2^-8 = 3.9e-3 for bfloat16 outputs, "
          "because "
          "rounding to bfloat16 alone moves each element by up to 2^-9 of its value (rel L2 ~1e-3), and 2^-8 "
          "leaves "
          "as much again for the FP32 accumulation order"),
      row("numerics.*.cosine_vs_exact", "ratio", "<kernel, exact> / (||kernel|| ||exact||)"),
      row("numerics.*.cosine_vs_quantized", "ratio", "<kernel, quantized> / (||kernel|| ||quantized||)"),
      row("numerics.*.normalized_euclidean_vs_exact", "ratio",
          "||kernel - exact|| / (||kernel|| + ||exact||)"),
      row("numerics.*.allclose_vs_exact", "bool",
          "nki-library allclose: |k - g| <= 0.2*max|g| + 1e-3*|g| for every element"),
      row("numerics.*.quantized_reference", "bool", "the quantized reference applies MX quantization"),
      row("numerics.*.reference_rows_compared", "count",
          "output rows both references were computed for: all rows, or for outputs whose FP64 reference "
          "costs more than 32 GFLOP an evenly spaced sample of 32-row blocks (trnsim run --full-reference: "
          "all); for an MoE weight gradient, experts instead of rows"),
      row("numerics.*.reference_rows_total", "count",
          "rows of the output (experts, for an MoE weight gradient)"),
      row("numerics.*.reference_nonfinite", "count",
          "NaN or Inf reference values (the inputs hold NaN or Inf); the metrics are over the elements both "
          "the "
          "output and the reference hold finite"),
      row("numerics.*.bytes_total", "bytes", "bytes of the output"),
      row("numerics.*.bytes_differing", "bytes", "bytes that differ from the host emulation"),
      row("numerics.*.elements_differing", "count", "elements with at least one differing byte"),
      row("numerics.*.first_difference_index", "count",
          "row-major index of the first differing element (-1: none)"),
      row("numerics.*.value", "output units", "the scalar the kernel wrote"),
      row("numerics.*.expected", "output units", "the reference value"),
      row("numerics.*.abs_err", "output units", "|value - expected|"),
      row("numerics.*.rel_err", "ratio", "|value - expected| / |expected|"),
      row("numerics.*.abs_tol", "output units", "pass if abs_err <= abs_tol ..."),
      row("numerics.*.rel_tol", "ratio", "... or rel_err <= rel_tol"),
      row("trace", "text", "the trace written during the run: path, slices, flows, counter samples, bytes"),
      row("trace.path", "text", "trace file"),
      row("trace.slices", "count", "instruction, LoadStationary and DMA transfer slices"),
      row("trace.flows", "count", "semaphore dependency arrows"),
      row("trace.counter_samples", "count", "counter track samples"),
      row("trace.bytes", "bytes", "file size"),
      row("definitions", "text", "unit: meaning of every key of this file"),
  };
  // Per-engine summary counters, named like a Neuron profile's.
  for (size_t e = 0; e < kProfileEngine.size(); ++e) {
    const std::string k = std::string("summary.") + kProfileEngine[e] + "_engine_";
    d.push_back(
        row(k + "active_time_ns", "ns",
            std::string("per core: time the ") + kProfileEngine[e] + " engine was occupied by instructions"));
    d.push_back(compared(k + "active_time_percent", "%",
                         std::string(kProfileEngine[e]) + "_engine_active_time_ns / total_time_ns * 100",
                         std::string(kEngine[e]) + " busy", Better::None));
    d.push_back(row(k + "instruction_count", "count",
                    "instructions the engine issued (DMA triggers included), both cores"));
    d.push_back(compared(k + "semaphore_wait_ns", "ns",
                         "per core: time the engine's sequencer waited on semaphores",
                         std::string(kEngine[e]) + " semaphore wait per core", Better::Lower));
  }
  return d;
}

bool matches(std::string_view pattern, std::string_view path) {
  while (true) {
    const size_t pd = pattern.find('.'), qd = path.find('.');
    const std::string_view pc = pattern.substr(0, pd), qc = path.substr(0, qd);
    if (pc != "*" && pc != qc) {
      // "name[]" matches "name[<index>]".
      if (!(pc.ends_with("[]") && qc.starts_with(pc.substr(0, pc.size() - 1)) && qc.ends_with("]")))
        return false;
    }
    if ((pd == std::string_view::npos) != (qd == std::string_view::npos)) return false;
    if (pd == std::string_view::npos) return true;
    pattern = pattern.substr(pd + 1);
    path = path.substr(qd + 1);
  }
}

}  // namespace

const std::vector<StatDef>& stat_defs() {
  static const std::vector<StatDef> defs = build();
  return defs;
}

const StatDef* find_stat_def(std::string_view path) {
  for (const StatDef& d : stat_defs())
    if (d.key == path) return &d;
  for (const StatDef& d : stat_defs())
    if (matches(d.key, path)) return &d;
  return nullptr;
}

}  // namespace trnsim::run
