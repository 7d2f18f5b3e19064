// Per-instruction cost formulas (plain C++, no SystemC). Every constant comes from config::HwConfig
// (configs/hw/*.json); the formulas follow docs/facts/trainium-hardware.md §2 and §6.
//
// Engine costs are initiation intervals in the engine's own cycles:
//   PE nc_matmul     LS = ceil(N_stationary / ls_columns_per_cycle); MM = passes x max(min(64, N_stat),
//   N_moving)
//                    x dtype factor (FP32 x4, FP32 transpose mode x2); double_row K = 256, nc_matmul_mx K =
//                    512 in one pass; passes = ceil(K / K_per_pass) (1 for legal tiles).
//   PE nc_transpose  data [P, F] loaded as stationary, identity moving: LS = ceil(F / 4), MM = max(P, min(64,
//   F)). DVE              fixed_overhead + ceil(N x inputs / perf mode) (Trn2/Trn3 performance modes, §2.3);
//                    quantize_mx: fixed + ceil(N / 4).
//   ACT              fixed_overhead + ceil(N / perf mode) (+ reduce_extra_cycles for activation with reduce).
//   POOL / SP        fixed_overhead + N x inputs.
//   Inputs are 2 for tensor_tensor, select and scalar_tensor_tensor (data and operand1, the tensor_tensor
//   rule: NKI's scalar_tensor_tensor page, "approximately the same latency as a regular tensor_tensor"), 1
//   elsewhere: bn_stats and bn_aggr (DVE) and affine_select (POOL, NKI 2.21's "150 + N GpSimd cycles" has the
//   same form) read one input.
// DVE, ACT and POOL stream at half rate (x memory.strided_access_slowdown) when an on-chip operand's
// innermost free dim steps more than memory.strided_access_bytes (16 B) between elements (reference §2.6). N
// = elements per partition of the instruction's (first) input, or of dst when there is none.
#pragma once

#include <cstdint>

#include "sim/base/units.h"
#include "sim/config/hw_config.h"
#include "sim/isa/instruction.h"
#include "sim/isa/semantics.h"

namespace trnsim::timing {

// Cost of a compute instruction on its engine.
struct EngineCost {
  Cycles cycles;           // engine occupancy (for the PE: the MultiplyMoving phase)
  Cycles ls_cycles;        // PE only: LoadStationary phase (0 elsewhere)
  uint32_t perf_mode = 1;  // DVE/ACT performance mode applied (1, 2 or 4)
  uint64_t elements = 0;   // N, elements per partition the formula used
  // PE: the fraction of the array's peak MAC rate the MultiplyMoving uses at full rate: rows used / array
  // rows x columns used / array columns x moving columns per cycle (the 64-cycle floor idles it). 1
  // elsewhere.
  double array_utilization = 1.0;
};

// Inputs of a DMA transfer's timing (the SystemC DMA module shares bandwidth between transfers).
struct DmaCost {
  uint64_t bytes = 0;      // payload moved (max of bytes read and written)
  uint64_t hbm_bytes = 0;  // HBM traffic (read + written)
  // Partitions of the on-chip side, or the packets of an HBM -> HBM transfer (dma_spread.h).
  uint64_t partitions = 0;
  double bytes_per_partition = 0;
  double packet_bytes = 0;    // bytes of one packet: one partition's run (bytes_per_partition)
  uint32_t engines = 0;       // DMA engines used (dma_spread.h), <= dma.engines_per_core
  uint32_t first_engine = 0;  // the first of them: the on-chip side's first partition / partitions_per_engine
  // Share of the engines' bandwidth a byte takes: the op factor (transpose, accumulate); with
  // efficiency_curve (packet_ns 0) also the curve's efficiency.
  double efficiency = 1;
  double transfer_efficiency =
      1;                     // op factor x packet-rate efficiency: the share of its engines' peak it gets
  double rate_cap_GBps = 0;  // engines x engine_bandwidth x transfer_efficiency (bytes per ns)
  // How it holds its hardware queue (sim/timing/dma_queue_policy.h): the rate of its bytes while it holds
  // it (bytes per ns), and the least time from its data start to its last byte.
  double queue_rate_cap_GBps = 0;
  Picoseconds latency;
  // The engines whose hardware queue it joins (bit e: engine e): all without queue sets, else its engines.
  uint64_t queue_engines = ~uint64_t{0};
  // Before data moves: dma.setup_ns. A transfer that touches HBM also waits the HBM's access latency, which
  // the HBM module annotates (timing::HbmTiming behind sim/model/memory/hbm.h).
  Picoseconds setup;
  bool touches_hbm = false;  // its source or destination is in HBM
  Picoseconds completion;    // after data: the completion semaphore write (sync.semaphore_latency_ns)
  Picoseconds trigger;       // occupies the issuing sequencer
  bool cross_core = false;   // sendrecv: writes the peer core's SBUF
};

class CostModel {
 public:
  explicit CostModel(const config::HwConfig& hw);

  // Throws RuleError if the generation lacks the instruction or mode (config `features`).
  void check_features(const isa::Instruction& inst) const;

  // Cost of a non-DMA instruction on its issuing engine. CoreBarrier costs 0 (it is a semaphore exchange).
  EngineCost engine_cost(const isa::Instruction& inst) const;

  // Cost inputs of a DMA instruction, given its work (isa::work_of).
  DmaCost dma_cost(const isa::Instruction& inst, const isa::Work& work) const;

  const config::HwConfig& hw() const { return hw_; }

 private:
  EngineCost pe_cost(const isa::Instruction& inst) const;
  EngineCost dve_cost(const isa::Instruction& inst) const;
  EngineCost act_cost(const isa::Instruction& inst) const;
  bool fast_dtype(isa::DType t, bool fp8_counts) const;
  uint32_t stride_factor(const isa::Instruction& inst) const;

  const config::HwConfig& hw_;
  // The config's fixed DMA times in ps, converted once (ns_to_ps per transfer was a tenth of dma_cost).
  Picoseconds dma_setup_, dma_trigger_, semaphore_latency_, cross_core_latency_;
};

// ps from ns, rounded up to a whole ps; 0 for a negative value; 2^63 ps (beyond every time limit, see
// time_limit.h) for a value too large for 64 bits or NaN, so the conversion itself never overflows.
Picoseconds ns_to_ps(double ns);

}  // namespace trnsim::timing
