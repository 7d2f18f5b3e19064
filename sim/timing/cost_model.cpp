#include "sim/timing/cost_model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <string_view>

#include "sim/base/error.h"
#include "sim/isa/opcodes.h"
#include "sim/timing/dma_queue_policy.h"
#include "sim/timing/dma_spread.h"

namespace trnsim::timing {
namespace {

using isa::DType;
using isa::MemSpace;
using isa::Opcode;

uint64_t ceil_div(uint64_t a, uint64_t b) {
  return (a + b - 1) / b;
}

constexpr uint64_t kArrayColumns = 128;  // the systolic array is 128 x 128 (reference §2.1)

// min(1, used / size), 1 for an empty size.
double array_fraction(uint64_t used, uint64_t size) {
  return size == 0 ? 1.0 : std::min(1.0, static_cast<double>(used) / static_cast<double>(size));
}

bool contiguous(const isa::AccessPattern& ap) {
  return ap.ndim == 0 || ap.strides[ap.ndim - 1] == 1;
}

bool is_fp8(DType t) {
  return t == DType::FP8_E4M3FN || t == DType::FP8_E5M2 || t == DType::FP8_E4M3;
}

// Elements per partition of the main input (operand 1), or of dst when the instruction has no input.
uint64_t elements_of(const isa::Instruction& inst) {
  if (inst.nops > 1 && inst.ops[1].present()) return inst.ops[1].free_elements();
  return inst.ops[0].present() ? inst.ops[0].free_elements() : 0;
}

// A hardware config feature by its key (the opcode table names the feature an opcode needs).
bool feature_enabled(const config::Features& f, std::string_view key) {
  if (key == "nc_matmul_mx") return f.nc_matmul_mx;
  if (key == "quantize_mx") return f.quantize_mx;
  if (key == "double_row") return f.double_row;
  if (key == "bf16_psum") return f.bf16_psum;
  throw std::logic_error("opcode table names an unknown hardware feature '" + std::string(key) + "'");
}

}  // namespace

Picoseconds ns_to_ps(double ns) {
  const double ps = std::ceil(ns * 1000.0 - 1e-6);
  if (!(ps < 0x1p63)) return Picoseconds(uint64_t{1} << 63);  // out of scale or NaN: beyond any time limit
  return Picoseconds(ps > 0 ? static_cast<uint64_t>(ps) : 0);
}

CostModel::CostModel(const config::HwConfig& hw)
    : hw_(hw),
      dma_setup_(ns_to_ps(hw.dma.setup_ns)),
      dma_trigger_(ns_to_ps(hw.dma.trigger_ns)),
      semaphore_latency_(ns_to_ps(hw.sync.semaphore_latency_ns)),
      cross_core_latency_(ns_to_ps(hw.sync.cross_core_latency_ns)) {}

uint32_t CostModel::stride_factor(const isa::Instruction& inst) const {
  const auto& m = hw_.memory;
  if (m.strided_access_slowdown <= 1) return 1;
  for (int i = 0; i < inst.nops && i < static_cast<int>(inst.ops.size()); ++i) {
    const auto& ap = inst.ops[i];
    if (!ap.present() || ap.space == MemSpace::HBM || ap.ndim == 0) continue;
    const isa::Dim inner = ap.dim(ap.ndim - 1);
    const int64_t stride_bytes =
        (inner.stride < 0 ? -inner.stride : inner.stride) * isa::dtype_size(ap.dtype);
    if (inner.size > 1 && stride_bytes > static_cast<int64_t>(m.strided_access_bytes))
      return m.strided_access_slowdown;
  }
  return 1;
}

bool CostModel::fast_dtype(DType t, bool fp8_counts) const {
  return t == DType::BF16 || t == DType::FP16 || (fp8_counts && is_fp8(t));
}

void CostModel::check_features(const isa::Instruction& inst) const {
  const auto& f = hw_.features;
  auto missing = [&](const char* what, const char* key) {
    throw RuleError(std::string(what) + " is not available on " + hw_.name + " (config features." + key +
                    " = false)");
  };
  const isa::OpcodeInfo& info = isa::opcode_info(inst.op);
  if (info.feature != nullptr && !feature_enabled(f, info.feature)) missing(info.name, info.feature);
  // double_row is a mode of nc_matmul, not an opcode of its own.
  if (inst.op == Opcode::NcMatmul && inst.has(isa::kDoubleRow) && !f.double_row)
    missing("nc_matmul perf_mode=double_row", "double_row");
}

EngineCost CostModel::engine_cost(const isa::Instruction& inst) const {
  if (inst.op == Opcode::CoreBarrier) return {};
  switch (inst.engine) {
    case isa::Engine::PE:
      return pe_cost(inst);
    case isa::Engine::DVE:
      return dve_cost(inst);
    case isa::Engine::ACT:
      return act_cost(inst);
    case isa::Engine::POOL:
    case isa::Engine::SP: {
      const auto& e = inst.engine == isa::Engine::POOL ? hw_.pool : hw_.sp;
      // nc_n_gather: one element per gathered element (dst's), not per element of data (no published cost).
      // nonzero_with_count: the one-input rule over src's elements per partition (no published cost; ours).
      uint64_t n = inst.op == Opcode::NcNGather ? inst.ops[0].free_elements() : elements_of(inst);
      uint64_t inputs = (inst.op == Opcode::TensorTensor || inst.op == Opcode::ScalarTensorTensor ||
                         inst.op == Opcode::Select)
                            ? 2
                            : 1;
      return {Cycles(e.fixed_overhead_cycles + n * inputs * stride_factor(inst)), Cycles(0), 1, n};
    }
  }
  return {};
}

EngineCost CostModel::pe_cost(const isa::Instruction& inst) const {
  const auto& pe = hw_.pe;
  EngineCost c;
  if (inst.op == Opcode::NcTranspose) {
    // Data [P, F] is the stationary operand, an identity [P, P] the moving one (reference §2.1).
    const auto& d = inst.ops[1];
    uint64_t p = d.partitions, f = d.free_elements();
    uint64_t mm = std::max<uint64_t>(p, std::min<uint64_t>(pe.mm_init_latency_cycles, f));
    // The array: p rows x f columns, streaming p identity columns in mm cycles.
    c.array_utilization = array_fraction(p, pe.k_per_pass) * array_fraction(f, kArrayColumns) *
                          (mm > 0 ? static_cast<double>(std::min(p, mm)) / static_cast<double>(mm) : 1.0);
    if (d.dtype == DType::F32) mm *= pe.fp32_transpose_factor;
    c.cycles = Cycles(mm);
    c.ls_cycles = Cycles(ceil_div(f, pe.ls_columns_per_cycle));
    c.elements = f;
    return c;
  }
  if (inst.op != Opcode::NcMatmul && inst.op != Opcode::NcMatmulMx) {
    // Not a PE data-path instruction (e.g. core_barrier is handled above): the MM floor as a minimum II.
    c.cycles = Cycles(pe.mm_init_latency_cycles);
    return c;
  }
  const auto& stat = inst.ops[1];
  const auto& mov = inst.ops[2];
  // The rate factor's contraction rows: double_row's on a size-2 outer free axis ([K, 2, M] and [K, 2, N]),
  // MX's four packed per x4 element; each mode has its rows per pass.
  const isa::PeRate rate = isa::pe_rate(inst);
  const bool double_row = rate.free_axis == 2;
  const bool mx = inst.op == Opcode::NcMatmulMx;
  uint64_t n_mov = ceil_div(mov.free_elements(), rate.free_axis);
  uint64_t n_stat = ceil_div(stat.free_elements(), rate.free_axis);
  uint64_t k = uint64_t{stat.partitions} * rate.factor;
  uint64_t k_pass = double_row ? pe.double_row_k_per_pass : mx ? pe.mx_k_per_pass : pe.k_per_pass;
  uint64_t passes = std::max<uint64_t>(1, ceil_div(k, k_pass));
  uint64_t cols = ceil_div(n_mov, pe.moving_columns_per_cycle);
  uint64_t mm = std::max<uint64_t>(std::min<uint64_t>(pe.mm_init_latency_cycles, n_stat), cols);
  // Rows in use per pass, columns in use, and the moving stream's share of the MM cycles (FP32's extra passes
  // keep the array busy).
  c.array_utilization = array_fraction(k, passes * k_pass) * array_fraction(n_stat, kArrayColumns) *
                        (mm > 0 ? static_cast<double>(std::min(cols, mm)) / static_cast<double>(mm) : 1.0);
  if (!mx && (stat.dtype == DType::F32 || mov.dtype == DType::F32))
    mm *= inst.has(isa::kIsTranspose) ? pe.fp32_transpose_factor : pe.fp32_factor;
  c.cycles = Cycles(mm * passes);
  c.ls_cycles = Cycles(ceil_div(n_stat, pe.ls_columns_per_cycle) * passes);
  c.elements = n_mov;
  return c;
}

EngineCost CostModel::dve_cost(const isa::Instruction& inst) const {
  const auto& dve = hw_.dve;
  const bool fp8 = dve.perf_mode_fp8;
  uint64_t n = elements_of(inst);
  uint64_t work = n;  // element-cycles before the performance mode
  uint32_t mode = 1;
  uint64_t extra = 0;  // cycles after the elements
  const auto& dst = inst.ops[0];
  switch (inst.op) {
    case Opcode::TensorCopy:
    case Opcode::TensorScalar: {
      const auto& src = inst.ops[1];
      if (fast_dtype(src.dtype, fp8) && fast_dtype(dst.dtype, fp8)) {
        bool sbuf = src.space == MemSpace::SBUF && dst.space == MemSpace::SBUF;
        mode = (sbuf && contiguous(src) && contiguous(dst)) ? dve.perf_mode_copy_contiguous
                                                            : dve.perf_mode_copy_other;
      }
      break;
    }
    case Opcode::TensorTensor:
    case Opcode::ScalarTensorTensor: {
      // scalar_tensor_tensor costs as tensor_tensor on its two tiles, data and operand1 (NKI: "the scalar
      // broadcasting in the first operation is performed at no additional performance cost").
      const auto& a = inst.ops[1];
      const auto& b = inst.ops[inst.op == Opcode::TensorTensor ? 2 : 3];
      bool a_psum = a.space == MemSpace::PSUM, b_psum = b.space == MemSpace::PSUM;
      if (a_psum != b_psum) {
        work = n;  // one input per port: PSUM and SBUF read in parallel (reference §2.3 v2 table)
      } else {
        work = 2 * n;
        if (!a_psum && fast_dtype(a.dtype, fp8) && fast_dtype(b.dtype, fp8) && fast_dtype(dst.dtype, fp8))
          mode = dve.perf_mode_tensor_tensor;
      }
      break;
    }
    case Opcode::TensorReduce: {
      const auto& src = inst.ops[1];
      bool fast_op = inst.alu0 == isa::AluOp::Add || inst.alu0 == isa::AluOp::Max;
      if (fast_op && src.dtype == DType::BF16 && dst.dtype == DType::BF16) mode = 2;  // N/2 (reference §2.3)
      break;
    }
    case Opcode::Memset:
      if (inst.imm0 == 0.f && (dst.dtype == DType::BF16 || dst.dtype == DType::FP16)) mode = 2;  // N/2
      break;
    case Opcode::Select: {
      bool any_psum = false;
      for (int i = 1; i < 4; ++i) any_psum |= inst.ops[i].present() && inst.ops[i].space == MemSpace::PSUM;
      work = any_psum ? n : 2 * n;  // copy_predicated rule (reference §2.3)
      break;
    }
    case Opcode::QuantizeMx:
      mode = dve.quantize_mx_elements_per_cycle;
      break;
    case Opcode::Max8:
    case Opcode::NcFindIndex8:
    case Opcode::NcMatchReplace8:
      // "N engine cycles" for N elements per partition of src / data (the Estimated instruction cost of NKI
      // 2.21-2.26's max8 and nc_find_index8 pages; nc_match_replace8 reads the same), plus the fixed
      // overhead: the one-input rule, no performance mode.
      break;
    case Opcode::TensorScalarReduce:
      // "max(MIN_II, N) + MIN_II" (nki.isa.tensor_scalar_reduce, NKI 2.21-2.26): the one-input rule with no
      // performance mode, plus the reduction's MIN_II, taken as one more fixed_overhead_cycles (the DVE's
      // MIN_II-like static overhead).
      extra = dve.fixed_overhead_cycles;
      break;
    case Opcode::TensorTensorScan:
      // "max(MIN_II, 2N)" (nki.isa.tensor_tensor_scan, NKI 2.21-2.26): the two-input rule, no performance
      // mode (the recurrence takes one element per step whatever the dtypes).
      work = 2 * n;
      break;
    case Opcode::NcStreamShuffle:
      // No published cost (nki.isa.nc_stream_shuffle, NKI 2.21-2.33): the one-input rule over src's elements
      // per partition, no performance mode (ours).
      break;
    default:
      break;
  }
  return {Cycles(dve.fixed_overhead_cycles + ceil_div(work, mode) * stride_factor(inst) + extra), Cycles(0),
          mode, n};
}

EngineCost CostModel::act_cost(const isa::Instruction& inst) const {
  const auto& act = hw_.act;
  uint64_t n = elements_of(inst);
  uint32_t mode = 1;
  uint64_t extra = 0;
  if (inst.op == Opcode::TensorScalar || inst.op == Opcode::TensorCopy) {
    if (act.perf_mode_bf16 > 1 && fast_dtype(inst.ops[1].dtype, true) && fast_dtype(inst.ops[0].dtype, true))
      mode = act.perf_mode_bf16;
  } else if (inst.op == Opcode::Activation && inst.has(isa::kReduce)) {
    extra = act.reduce_extra_cycles;
  }
  return {Cycles(act.fixed_overhead_cycles + ceil_div(n, mode) * stride_factor(inst) + extra), Cycles(0),
          mode, n};
}

DmaCost CostModel::dma_cost(const isa::Instruction& inst, const isa::Work& work) const {
  const auto& dma = hw_.dma;
  const auto& dst = inst.ops[0];
  const auto& src = inst.ops[1];
  DmaCost c;
  c.bytes = std::max(work.bytes_read, work.bytes_written);
  c.hbm_bytes = work.hbm_bytes_read + work.hbm_bytes_written;
  const bool touches_hbm = dst.space == MemSpace::HBM || src.space == MemSpace::HBM;
  const DmaSpread spread = dma_spread(inst, dma);
  c.partitions = spread.packets;
  c.bytes_per_partition = static_cast<double>(c.bytes) / static_cast<double>(c.partitions);
  c.engines = spread.engines;
  c.first_engine = spread.first_engine;
  // A packet is one partition's run (the documented efficiency thresholds are per partition, S11, S12), or
  // an HBM -> HBM transfer's contiguous piece (dma_spread.h); how a run made of scattered elements costs (a
  // transposing access pattern) is not documented and not modelled.
  c.packet_bytes = c.bytes_per_partition;
  double op_factor = 1;
  if (inst.op == Opcode::DmaTranspose)
    op_factor = touches_hbm ? dma.transpose_efficiency_hbm : dma.transpose_efficiency_sbuf;
  if (inst.op == Opcode::DmaCopy && inst.has(isa::kDmaAccumulate)) op_factor *= dma.accumulate_efficiency;
  double eff = hw_.dma_efficiency(c.packet_bytes);
  // With the packet rate modelled, each engine of the transfer also writes the completion semaphore, one
  // more packet (NKI DMA overview: every engine posts a 4 B semaphore write): engine time per byte grows
  // from 1 / eff to (bytes / eff + engines x packet_ns x bandwidth) / bytes.
  if (dma.packet_ns > 0 && c.bytes > 0) {
    const double payload = static_cast<double>(c.bytes);
    eff = payload / (payload / eff + c.engines * dma.packet_ns * dma.engine_bandwidth_GBps);
  }
  // The packet rate bounds this transfer (a packet's setup latency, which other queues' packets overlap);
  // the op factor also takes the engines' bandwidth (a transpose or an accumulate moves bytes slower).
  c.efficiency = dma.packet_ns > 0 ? op_factor : op_factor * eff;
  c.transfer_efficiency = op_factor * eff;
  c.rate_cap_GBps = c.engines * dma.engine_bandwidth_GBps * c.transfer_efficiency;
  c.setup = dma_setup_;
  c.touches_hbm = touches_hbm;
  c.completion = inst.op == Opcode::SendRecv ? cross_core_latency_ : semaphore_latency_;
  c.trigger = dma_trigger_;
  c.cross_core = inst.op == Opcode::SendRecv;
  set_queue_occupancy(dma, c);
  return c;
}

}  // namespace trnsim::timing
