// Hardware configuration of one LNC=2 pair (configs/hw/*.json), typed and validated.
//
// Every leaf in the JSON is {"value": ..., "source": "..."}; the source note cites
// docs/facts/trainium-hardware.md or says why a value was chosen. Units are in the field names
// (_GHz, _ns, _GBps = bytes per ns, _bytes, _cycles in the engine's own clock).
//
// Lookup of a config by name ("trn2" -> trn2.json), first hit wins, and nowhere else:
//   1. $TRNSIM_CONFIG_DIR/<name>.json, when the environment variable is set and not empty (InputError
//      "TRNSIM_CONFIG_DIR=<dir>: no such directory" or "...: not a directory" when it names no folder: the
//      source tree's config is then not read instead)
//   2. <source tree>/configs/hw/<name>.json: the source tree trnsim was built from (recorded at build time,
//      compile definition TRNSIM_SOURCE_DIR)
// Never a folder found relative to the executable: a binary built or copied under a folder other users can
// write must not take a config someone planted there. A spec containing '/' or ending in ".json" is a file
// path (a workload's is relative to the workload's folder). stats.json records the file read and its
// SHA-256 ("hardware_config", "hardware_config_sha256").
//
// Every number has an accepted range (parse_hw_config lists them with the reasons): wide enough for what-if
// studies, but no zero or near-zero clock, bandwidth, efficiency or throttle cap, since those make a run
// meaningless or effectively endless.
//
// Errors: InputError naming the file and the JSON path, e.g.
//   configs/hw/trn2.json: pe.clock_GHz.value: expected a number in [0.01, 100], found -1
//   configs/hw/trn3.json: hbm.bandwidth_GBps.value: expected a number in [0.01, 1e+06], found 1e-11 (from the
//   override hbm.bandwidth_GBps=1e-11)
// for unknown keys, wrong types, missing values, out-of-range numbers and bad override paths.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/base/units.h"
#include "sim/isa/instruction.h"
#include "sim/isa/semantics.h"

namespace trnsim::config {

// Tensor Engine (PE): cost constants of reference §2.1, §2.2.
struct PeConfig {
  double clock_GHz = 2.4;
  uint32_t moving_columns_per_cycle = 1;
  uint32_t mm_init_latency_cycles = 64;  // floor of one MultiplyMoving
  uint32_t k_per_pass = 128;             // contraction rows per pass (BF16/FP16/FP8/TF32)
  uint32_t double_row_k_per_pass = 256;  // FP8 double_row
  uint32_t mx_k_per_pass = 512;          // nc_matmul_mx (x4 packed)
  uint32_t fp32_factor = 4;
  uint32_t fp32_transpose_factor = 2;
  uint32_t ls_columns_per_cycle = 4;  // LoadStationary ~ N_stationary / 4 cycles
  bool ls_overlap = true;             // LS of the next matmul runs in the background of the current MM
  // dI/dt throttle (reference §2.1, §6).
  bool throttle_enabled = true;
  double throttle_cap = 0.5;         // utilisation cap when work starts
  double throttle_ramp_ns = 3000;    // linear ramp from cap to 1
  double throttle_window_ns = 3000;  // re-engage window
  double throttle_rearm_utilization = 0.5;
  bool throttle_count_array_utilization = true;  // utilisation = array fraction in use (else busy time)
};

// Vector Engine (DVE): reference §2.3.
struct DveConfig {
  double clock_GHz = 0.96;
  uint32_t fixed_overhead_cycles = 100;
  uint32_t completion_latency_cycles = 0;  // after its occupancy, until results and semaphores are posted
  uint32_t quantize_mx_elements_per_cycle = 4;
  uint32_t perf_mode_copy_contiguous = 4;  // tensor_copy / tensor_scalar, SBUF->SBUF, 16-bit, stride 1
  uint32_t perf_mode_copy_other = 2;       // same, non-contiguous or one side PSUM
  uint32_t perf_mode_tensor_tensor = 2;    // tensor_tensor, both inputs SBUF, 16-bit
  bool perf_mode_fp8 = false;              // FP8 counts as a fast-path dtype
};

// Scalar Engine (ACT): reference §2.4.
struct ActConfig {
  double clock_GHz = 1.2;
  uint32_t fixed_overhead_cycles = 64;
  uint32_t completion_latency_cycles = 0;
  uint32_t reduce_extra_cycles = 64;
  uint32_t perf_mode_bf16 = 1;  // tensor_scalar / tensor_copy speed-up for 16-bit (and FP8) data
};

// An engine with only a clock and a fixed overhead (POOL, SP): reference §2.5.
struct SimpleEngineConfig {
  double clock_GHz = 1.2;
  uint32_t fixed_overhead_cycles = 150;
  uint32_t completion_latency_cycles = 0;
};

struct MemoryConfig {
  uint32_t partitions = 128;
  uint32_t sbuf_bytes_per_partition = 224 * 1024;
  uint32_t psum_bytes_per_partition = 16 * 1024;
  uint32_t psum_bank_bytes = 2048;
  // An engine's SBUF/PSUM interface moves elements at full rate when the innermost stride is at most this
  // many bytes, and strided_access_slowdown times slower beyond (1: off).
  uint32_t strided_access_bytes = 16;
  uint32_t strided_access_slowdown = 2;
};

struct SyncConfig {
  uint32_t semaphores_per_core = 64;   // the last one is reserved for core_barrier
  double semaphore_latency_ns = 10;    // same core (engine -> engine, DMA completion write)
  double cross_core_latency_ns = 100;  // to the peer core of the LNC2 pair
  double kernel_launch_ns = 0;         // before any sequencer issues its first instruction
  uint32_t barrier_semaphore() const { return semaphores_per_core - 1; }
};

// DMA (reference §1.5, §2.7). One transfer's fixed cost = setup_ns + hbm.latency_ns (if it touches HBM)
// + sync.semaphore_latency_ns (completion write). Issuing it costs, by its descriptor mode (isa::DgeMode):
// trigger_ns on the issuing sequencer (every mode), and precomputed_issue_ns more of it for precomputed
// descriptors (none); hwdge_instruction_ns on a DGE block (hwdge_blocks per
// core, SP uses block 0 and ACT block 1 mod hwdge_blocks), one instruction at a time, the issuing sequencer
// waiting while its block is busy; swdge_instruction_ns of GpSimd time instead of trigger_ns (swdge). A cost
// of 0 switches that mechanism off.
// The engines' packet rate: a DMA engine moves one packet (a partition's contiguous run) at a time and
// takes at least packet_ns for it, so a packet of b bytes runs at efficiency min(1, b / (packet_ns x
// engine_bandwidth_GBps)); packet_ns = 0 uses efficiency_curve instead.
struct DmaConfig {
  uint32_t engines_per_core = 16;
  uint32_t queues_per_core = 16;
  uint32_t partitions_per_engine = 8;
  double engine_bandwidth_GBps = 23;  // bytes per ns per engine
  double trigger_ns = 50;             // occupies the issuing sequencer
  double precomputed_issue_ns = 0;    // more of the issuing sequencer, precomputed descriptors (none) only
  double hwdge_instruction_ns = 600;  // occupies a DGE block
  uint32_t hwdge_blocks = 2;
  // ACT-commanded hwdge: the DGE block starts an instruction's descriptors once ACT has reached the
  // instruction before it (not after the instruction's own semaphore waits): they overlap ACT's earlier work.
  bool hwdge_act_lookahead = false;
  double swdge_instruction_ns = 600;  // occupies GpSimd (replaces trigger_ns)
  double setup_ns = 1050;
  double packet_ns = 0;                    // least engine time per packet; 0: efficiency_curve
  double transpose_efficiency_hbm = 0.9;   // dma_transpose from HBM
  double transpose_efficiency_sbuf = 0.5;  // dma_transpose SBUF -> SBUF
  double accumulate_efficiency = 0.5;      // dma_copy with DMA-side add
  std::vector<std::pair<double, double>> efficiency_curve;  // (bytes per partition, efficiency 0..1]
  // Queue sets (sim/timing/dma_queue_policy.h): true puts every DMA of a trigger engine on one in-order
  // hardware queue whose transfers pipeline, each holding it for its descriptors (descriptor_ns per
  // descriptor on an engine) or its bytes; false keeps the program's queues, one transfer at a time each.
  bool queue_sets = false;
  double descriptor_ns = 0;
};

struct HbmConfig {
  double bandwidth_GBps = 725;  // one stack, shared by both cores
  double latency_ns = 240;
  double capacity_GiB = 24;  // one stack: the kernel's HBM tensors must fit
};

// Which instructions and modes the generation has.
struct Features {
  bool nc_matmul_mx = false;
  bool quantize_mx = false;
  bool double_row = true;
  bool bf16_psum = false;
};

struct HwConfig {
  std::string name;
  std::string source_file;    // where it was loaded from (for messages and stats.json)
  std::string source_sha256;  // SHA-256 of that file's bytes as read (load_hw_config; empty otherwise)
  isa::Generation generation = isa::Generation::Trn2;
  PeConfig pe;
  DveConfig dve;
  ActConfig act;
  SimpleEngineConfig pool;
  SimpleEngineConfig sp{1.2, 64, 0};
  MemoryConfig memory;
  SyncConfig sync;
  DmaConfig dma;
  HbmConfig hbm;
  Features features;

  // Clock of an engine's sequencer.
  double clock_GHz(isa::Engine e) const;
  // Cycles from the end of an instruction's occupancy until its results and semaphore updates are posted
  // (DVE, ACT, POOL: the pipeline behind the initiation interval; 0 for PE and SP).
  uint32_t completion_latency_cycles(isa::Engine e) const;
  ClockDomain clock(isa::Engine e) const { return ClockDomain(clock_GHz(e)); }
  // Limits for isa::check. num_semaphores excludes the reserved core_barrier semaphore.
  isa::Limits limits() const;
  // DMA efficiency at `bytes_per_partition`, in (0, 1]: the packet rate's min(1, b / (packet_ns x
  // engine_bandwidth_GBps)) when packet_ns > 0, else efficiency_curve (linear interpolation, clamped).
  double dma_efficiency(double bytes_per_partition) const;
};

// "dma.engine_bandwidth_GBps" -> new value (the "value" of that leaf).
using Overrides = std::map<std::string, nlohmann::json>;

// Parses "path=value" (value as JSON; a bare word is taken as a string). Throws InputError.
std::pair<std::string, nlohmann::json> parse_override(const std::string& assignment);

// Resolves a name or path to a file (see the lookup order above). Throws InputError if not found.
std::string resolve_config_path(const std::string& name_or_path);

// Loads, applies overrides, validates. Throws InputError.
HwConfig load_hw_config(const std::string& name_or_path, const Overrides& overrides = {});
// Same, from an already parsed document; `file` is used in messages.
HwConfig parse_hw_config(nlohmann::json doc, const std::string& file, const Overrides& overrides = {});

}  // namespace trnsim::config
