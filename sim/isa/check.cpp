// Hardware rule checks (check) and work accounting (work_of). Facts: docs/facts/trainium-hardware.md
// §2.1-§2.7.
#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "sim/base/error.h"
#include "sim/isa/alu.h"
#include "sim/isa/element.h"
#include "sim/isa/names.h"
#include "sim/isa/opcode_table.h"
#include "sim/isa/operand_view.h"
#include "sim/isa/partition_start.h"
#include "sim/isa/semantics.h"
#include "sim/isa/top8.h"

namespace trnsim::isa {
namespace {

constexpr int64_t kMaxSpan = int64_t{1} << 40;

// Byte range [lo, hi) of an operand's free pattern relative to its row base; false if a stride or size is
// absurd (so the arithmetic below cannot overflow).
bool free_range(const AccessPattern& ap, int64_t& lo, int64_t& hi) {
  const int64_t ds = dtype_size(ap.dtype);
  lo = ap.offset_bytes;
  hi = ap.offset_bytes + ds;
  if (ap.offset_bytes > kMaxSpan || ap.offset_bytes < -kMaxSpan) return false;
  for (int d = 0; d < std::min<int>(ap.ndim, 4); ++d) {
    if (ap.strides[d] > kMaxSpan || ap.strides[d] < -kMaxSpan) return false;
    const int64_t span = ap.strides[d] * static_cast<int64_t>(ap.sizes[d] == 0 ? 0 : ap.sizes[d] - 1) * ds;
    lo += std::min<int64_t>(0, span);
    hi += std::max<int64_t>(0, span);
  }
  return true;
}

bool is_float_matmul_input(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::FP16 || is_fp8(t);
}

class Checker {
 public:
  Checker(const Instruction& inst, const Program& program, const Limits& limits)
      : inst_(inst), info_(opcode_info(inst.op)), program_(program), limits_(limits) {}

  void run();

 private:
  [[noreturn]] void fail(const char* rule, const std::string& details) const {
    throw RuleError(
        fmt::format("{} on {}: {}: {}", opcode_name(inst_.op), engine_name(inst_.engine), rule, details));
  }
  const AccessPattern& op(int slot) const { return inst_.ops[slot]; }
  bool has(int slot) const { return inst_.ops[slot].present(); }
  const char* name(int slot) const { return slot < info_.num_slots ? info_.slots[slot].name : "operand"; }
  void require(int slot) const {
    if (!has(slot)) fail("operand missing", name(slot));
  }
  uint64_t elements(int slot) const {
    return static_cast<uint64_t>(op(slot).partitions) * op(slot).free_elements();
  }
  void engine_allowed() const;
  void dtype_in(int slot, std::initializer_list<DType> types, const char* what) const {
    for (DType t : types)
      if (op(slot).dtype == t) return;
    fail("dtype", fmt::format("{} must be {}, got {}", name(slot), what, dtype_name(op(slot).dtype)));
  }
  void same_shape(int a, int b) const {
    if (op(a).partitions != op(b).partitions || op(a).free_elements() != op(b).free_elements())
      fail("shape", fmt::format("{} is [{}, {}] but {} is [{}, {}]", name(a), op(a).partitions,
                                op(a).free_elements(), name(b), op(b).partitions, op(b).free_elements()));
  }
  void vector_of(int slot, int data) const {
    require(slot);
    if (op(slot).partitions != op(data).partitions || op(slot).free_elements() != 1)
      fail("shape", fmt::format("{} must be [{}, 1], got [{}, {}]", name(slot), op(data).partitions,
                                op(slot).partitions, op(slot).free_elements()));
  }
  void no_cast_x4(int a, int b) const {
    if (op(a).dtype != op(b).dtype && (is_x4(op(a).dtype) || is_x4(op(b).dtype)))
      fail("dtype", fmt::format("cannot cast {} {} to {} {} (MX x4 dtypes are never cast)", name(b),
                                dtype_name(op(b).dtype), name(a), dtype_name(op(a).dtype)));
  }

  void operand(int slot) const;
  void connectivity() const;
  void psum_bank(int slot, uint64_t n) const;
  void scalar_offset() const;
  void matmul() const;
  void matmul_mx() const;
  void quantize_mx() const;
  void bitvec_ops(int first_vector_slot) const;
  void top8_rules() const;
  void scan_rules() const;
  void partition_reduce_rules() const;
  void shuffle_rules() const;
  void mx_scale(int scale_slot, int data_slot, uint32_t offset, const char* offset_name) const;
  uint64_t max_moving(DType dst) const;

  const Instruction& inst_;
  const OpcodeInfo& info_;
  const Program& program_;
  const Limits& limits_;
};

// The sequencers the opcode table allows on this generation; a generation without any lacks the opcode.
void Checker::engine_allowed() const {
  const auto gen_label = [](Generation g) {
    return g == Generation::Trn3 ? "Trn3" : g == Generation::Trn1 ? "Trn1" : "Trn2";
  };
  if (info_.engines[static_cast<int>(limits_.generation)] == 0) {
    std::string gens;
    for (Generation g : {Generation::Trn1, Generation::Trn2, Generation::Trn3})
      if (info_.engines[static_cast<int>(g)] != 0)
        gens += fmt::format("{}{}", gens.empty() ? "" : "/", gen_label(g));
    fail("generation",
         fmt::format("{} exists on {} only (this is {})", info_.name, gens, gen_label(limits_.generation)));
  }
  if (info_.allowed(limits_.generation, inst_.engine)) return;
  std::string list;
  for (int e = 0; e < kNumEngines; ++e)
    if (info_.allowed(limits_.generation, static_cast<Engine>(e)))
      list += fmt::format("{}{}", list.empty() ? "" : "/", engine_name(static_cast<Engine>(e)));
  fail("engine", fmt::format("{} runs on {}", info_.name, list));
}

void Checker::operand(int slot) const {
  const AccessPattern& ap = op(slot);
  if (ap.ndim > 4) fail("free dims", fmt::format("{} has {} free dims (at most 4)", name(slot), ap.ndim));
  for (int d = 0; d < ap.ndim; ++d)
    if (ap.sizes[d] == 0) fail("free dims", fmt::format("{} dim {} has size 0", name(slot), d));
  int64_t lo = 0, hi = 0;
  if (!free_range(ap, lo, hi))
    fail("free dims", fmt::format("{} has an offset or stride beyond any memory", name(slot)));
  if (ap.space == MemSpace::HBM) {
    if (ap.tensor >= program_.tensors.size())
      fail("HBM tensor", fmt::format("{} names tensor index {}, the program has {} tensors", name(slot),
                                     ap.tensor, program_.tensors.size()));
    const TensorDecl& t = program_.tensors[ap.tensor];
    int64_t bytes = dtype_size(t.dtype);
    for (int64_t d : t.shape) bytes *= std::max<int64_t>(d, 0);
    const bool indirect_rows =
        inst_.op == Opcode::DmaCopy && has(2) && ((slot == 0) == inst_.has(kIndirectDst));
    if (!indirect_rows) {
      if (ap.partition_stride > kMaxSpan || ap.partition_stride < -kMaxSpan)
        fail("HBM bounds",
             fmt::format("{} row stride {} is beyond any memory", name(slot), ap.partition_stride));
      const int64_t rows =
          ap.partition_stride * static_cast<int64_t>(ap.partitions - 1) * dtype_size(ap.dtype);
      lo += std::min<int64_t>(0, rows);
      hi += std::max<int64_t>(0, rows);
    }
    if (lo < 0 || hi > bytes)
      fail("HBM bounds", fmt::format("{} bytes [{}, {}) outside tensor '{}' of {} bytes", name(slot), lo, hi,
                                     t.name, bytes));
    return;
  }
  const uint32_t n = ap.partitions, s = ap.partition_start;
  if (n > limits_.partitions || static_cast<uint64_t>(s) + n > limits_.partitions)
    fail("partition count", fmt::format("{} spans partitions [{}, {}) (at most {} partitions)", name(slot), s,
                                        static_cast<uint64_t>(s) + n, limits_.partitions));
  // The start-partition rule binds the compute engines (§2.3, §2.6); no source gives one for DMAs, whose
  // descriptors address each partition (a masked nl.store of rows 3..127, a load into t[5:9, :]).
  if (!is_dma(inst_.op)) {
    if (!engine_start_allowed(n, s))
      fail("partition start",
           fmt::format("{} spans {} partitions from {} ({})", name(slot), n, s, engine_start_rule(n)));
  }
  const bool sbuf = ap.space == MemSpace::SBUF;
  const int64_t bpp = sbuf ? limits_.sbuf_bytes_per_partition : limits_.psum_bytes_per_partition;
  if (lo < 0 || hi > bpp)
    fail(sbuf ? "SBUF bounds" : "PSUM bounds",
         fmt::format("{} bytes [{}, {}) outside the {} bytes of a partition", name(slot), lo, hi, bpp));
}

// Which memories each engine reads and writes (reference §2.6 connectivity table). DMA transfers may use
// HBM, SBUF and PSUM; their own limits are checked per opcode.
void Checker::connectivity() const {
  int first_psum = -1;  // the first PSUM input's slot
  for (int slot = 0; slot < 5; ++slot) {
    if (!has(slot)) continue;
    const MemSpace m = op(slot).space;
    const bool out = info_.writes(slot);
    if (!out && m == MemSpace::PSUM && !is_dma(inst_.op)) {
      if (first_psum >= 0)
        fail("PSUM inputs", fmt::format("{} and {} are both in PSUM (at most one PSUM input)",
                                        name(first_psum), name(slot)));
      first_psum = slot;
    }
    if (is_dma(inst_.op)) continue;
    const char* verb = out ? "write" : "read";
    const char* mem = m == MemSpace::HBM ? "HBM" : (m == MemSpace::SBUF ? "SBUF" : "PSUM");
    bool ok = m != MemSpace::HBM;
    if (inst_.engine == Engine::PE) ok = out ? m == MemSpace::PSUM : m == MemSpace::SBUF;
    if (inst_.engine == Engine::POOL) ok = m == MemSpace::SBUF;
    if (!ok)
      fail("connectivity",
           fmt::format("{} cannot {} {} ({})", engine_name(inst_.engine), verb, mem, name(slot)));
  }
}

// scalar_offset (NKI access pattern `scalar_offset`): an SBUF int32 [1, 1] read when the DMA issues, which
// the hardware DGE adds (times the tensor's row size) to the HBM operand's address; software DGE (POOL, the
// queues of indirect DMAs) has no such register. The pattern must be legal at offset 0 (checked above); the
// moved pattern is bounds-checked when it executes.
void Checker::scalar_offset() const {
  const int slot = scalar_offset_slot(inst_);
  if (slot < 0 || !has(slot)) return;
  const int target = scalar_offset_target(inst_);
  if (op(slot).space != MemSpace::SBUF) fail("connectivity", "scalar_offset must be in SBUF");
  dtype_in(slot, {DType::I32, DType::U32}, "int32 or uint32");
  if (op(slot).partitions != 1 || op(slot).free_elements() != 1)
    fail("shape", fmt::format("scalar_offset must be [1, 1], got [{}, {}]", op(slot).partitions,
                              op(slot).free_elements()));
  if (op(target).space != MemSpace::HBM)
    fail("connectivity",
         fmt::format("scalar_offset moves an HBM access pattern; {} is not in HBM", name(target)));
  if (inst_.engine != Engine::SP && inst_.engine != Engine::ACT)
    fail("engine", fmt::format("scalar_offset needs a hardware-DGE DMA (triggered from SP or ACT), not {}",
                               engine_name(inst_.engine)));
  if (inst_.op == Opcode::DmaCopy && has(2))
    fail("operands",
         "scalar_offset and vector_offset in one DMA: the first is a hardware-DGE register (SP/ACT), the "
         "second needs software DGE (POOL)");
}

// A PE result (an accumulation group) stays inside one PSUM bank; Trn3 lets a large-N matmul span banks.
void Checker::psum_bank(int slot, uint64_t n) const {
  const AccessPattern& ap = op(slot);
  if (ap.space != MemSpace::PSUM || limits_.psum_bank_bytes == 0) return;
  if (limits_.generation == Generation::Trn3 && n * dtype_size(ap.dtype) > limits_.psum_bank_bytes) return;
  int64_t lo = 0, hi = 0;
  free_range(ap, lo, hi);
  const int64_t bank = limits_.psum_bank_bytes;
  if (lo / bank != (hi - 1) / bank)
    fail("PSUM bank",
         fmt::format("{} bytes [{}, {}) cross a {}-byte PSUM bank boundary", name(slot), lo, hi, bank));
}

uint64_t Checker::max_moving(DType dst) const {
  if (limits_.generation == Generation::Trn3) return dst == DType::BF16 ? 8192 : 4096;
  return 512;
}

void Checker::matmul() const {
  const AccessPattern &st = op(1), &mv = op(2), &dst = op(0);
  const uint32_t k = st.partitions;
  if (k > 128) fail("matmul tile", fmt::format("K = {} partitions (at most 128)", k));
  if (mv.partitions != k)
    fail("matmul tile", fmt::format("stationary has {} partitions but moving has {}", k, mv.partitions));
  if (inst_.has(kIsTranspose)) {
    if (dst.dtype != st.dtype || is_x4(st.dtype))
      fail("dtype", fmt::format("transpose mode copies bits: dst {} must equal stationary {}",
                                dtype_name(dst.dtype), dtype_name(st.dtype)));
    if (st.free_elements() > 128)
      fail("matmul tile", fmt::format("M = {} (at most 128)", st.free_elements()));
    if (mv.free_elements() != k) fail("shape", fmt::format("transpose mode needs moving [{}, {}]", k, k));
    if (dst.partitions != st.free_elements() || dst.free_elements() != k)
      fail("shape", fmt::format("dst must be [{}, {}], got [{}, {}]", st.free_elements(), k, dst.partitions,
                                dst.free_elements()));
    psum_bank(0, k);
    return;
  }
  const bool dr = inst_.has(kDoubleRow);
  for (int s : {1, 2}) {
    if (!is_float_matmul_input(op(s).dtype))
      fail("dtype", fmt::format("{} must be float32, bfloat16, float16 or float8, got {}", name(s),
                                dtype_name(op(s).dtype)));
    if (dr && !is_fp8(op(s).dtype))
      fail("dtype",
           fmt::format("double_row needs float8 operands, {} is {}", name(s), dtype_name(op(s).dtype)));
    if (dr && (op(s).ndim < 2 || op(s).sizes[0] != 2))
      fail("shape", fmt::format("double_row needs {} as [K, 2, F] (size-2 outermost free dim)", name(s)));
  }
  const uint64_t m = st.free_elements() / (dr ? 2 : 1), n = mv.free_elements() / (dr ? 2 : 1);
  if (limits_.generation != Generation::Trn3 && dst.dtype != DType::F32)
    fail("dtype",
         fmt::format("dst in PSUM must be float32 on {}, got {}",
                     limits_.generation == Generation::Trn1 ? "Trn1" : "Trn2", dtype_name(dst.dtype)));
  if (dst.dtype != DType::F32 && dst.dtype != DType::BF16)
    fail("dtype", fmt::format("dst must be float32 or bfloat16, got {}", dtype_name(dst.dtype)));
  if (m > 128) fail("matmul tile", fmt::format("M = {} stationary columns (at most 128)", m));
  if (n > max_moving(dst.dtype))
    fail("matmul tile", fmt::format("N = {} moving columns (at most {})", n, max_moving(dst.dtype)));
  if (dst.partitions != m || dst.free_elements() != n)
    fail("shape",
         fmt::format("dst must be [{}, {}], got [{}, {}]", m, n, dst.partitions, dst.free_elements()));
  psum_bank(0, n);
}

void Checker::mx_scale(int scale_slot, int data_slot, uint32_t offset, const char* offset_name) const {
  dtype_in(scale_slot, {DType::E8M0, DType::U8}, "float8_e8m0fnu or uint8");
  if (offset != 0 && offset != 4 && offset != 8 && offset != 12)
    fail("scale offset", fmt::format("{} {} (must be 0, 4, 8 or 12)", offset_name, offset));
  const uint32_t groups = op(data_slot).partitions / 8;
  const uint32_t last = groups == 0 ? 0 : ((groups - 1) / 4) * 32 + (groups - 1) % 4 + offset;
  if (op(scale_slot).partitions <= last || op(scale_slot).free_elements() != op(data_slot).free_elements())
    fail("shape",
         fmt::format("{} must have at least {} partitions (its rows 0..{} hold the scales) and exactly "
                     "{} elements per partition ({}'s), got [{}, {}]",
                     name(scale_slot), last + 1, last, op(data_slot).free_elements(), name(data_slot),
                     op(scale_slot).partitions, op(scale_slot).free_elements()));
  if (op(scale_slot).partition_start != op(data_slot).partition_start)
    fail("shape",
         fmt::format("{} must start at partition {} (the quadrant of its data), got {}", name(scale_slot),
                     op(data_slot).partition_start, op(scale_slot).partition_start));
}

void Checker::matmul_mx() const {
  const AccessPattern &st = op(1), &mv = op(2), &dst = op(0);
  for (int s : {1, 2})
    if (!is_x4(op(s).dtype))
      fail("dtype", fmt::format("{} must be float8_e4m3fn_x4 or float8_e5m2_x4, got {}", name(s),
                                dtype_name(op(s).dtype)));
  dtype_in(0, {DType::F32, DType::BF16}, "float32 or bfloat16");
  const uint32_t k = st.partitions;
  if (k > 128 || k % 32 != 0)
    fail("matmul tile", fmt::format("K = {} partitions (a multiple of 32, at most 128)", k));
  if (mv.partitions != k)
    fail("matmul tile", fmt::format("stationary has {} partitions but moving has {}", k, mv.partitions));
  const uint64_t m = st.free_elements(), n = mv.free_elements();
  if (m > 128) fail("matmul tile", fmt::format("M = {} stationary columns (at most 128)", m));
  if (n > max_moving(dst.dtype))
    fail("matmul tile", fmt::format("N = {} moving columns (at most {})", n, max_moving(dst.dtype)));
  if (dst.partitions != m || dst.free_elements() != n)
    fail("shape",
         fmt::format("dst must be [{}, {}], got [{}, {}]", m, n, dst.partitions, dst.free_elements()));
  mx_scale(3, 1, inst_.scale_offset, "scale_offset");
  mx_scale(4, 2, inst_.moving_scale_offset, "moving_scale_offset");
  psum_bank(0, n);
}

void Checker::quantize_mx() const {
  dtype_in(1, {DType::BF16, DType::FP16}, "bfloat16 or float16");
  dtype_in(0, {DType::FP8_E4M3FN_X4, DType::FP8_E5M2_X4}, "float8_e4m3fn_x4 or float8_e5m2_x4");
  const AccessPattern &src = op(1), &dst = op(0);
  if (dst.partitions % 8 != 0)
    fail("shape", fmt::format("dst spans {} partitions (a multiple of 8: one MX group is 8 partitions)",
                              dst.partitions));
  if (src.partitions != dst.partitions || src.free_elements() != 4 * dst.free_elements())
    fail("shape", fmt::format("src must be [{}, {}] for dst [{}, {}], got [{}, {}]", dst.partitions,
                              4 * dst.free_elements(), dst.partitions, dst.free_elements(), src.partitions,
                              src.free_elements()));
  mx_scale(2, 0, inst_.scale_offset, "scale_offset");
}

// Operator types (NKI ISA docs, Supported Math Operators: bitvec = bitwise_and/or/xor, left_shift,
// right_shift; every other operator is arithmetic). nki.isa.tensor_scalar
// (https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.tensor_scalar.html):
// op0 and op1 are both bitvec or both arithmetic; bitvec operators run on the Vector Engine only, on integer
// input/output dtypes (elements are bit patterns). nki.isa.tensor_tensor (.../nki.isa.tensor_tensor.html)
// and nki.isa.tensor_reduce (.../nki.isa.tensor_reduce.html): bitvec operators need integer input/output
// dtypes, and the Vector Engine is the engine the docs give them (GpSimd runs tensor_tensor for power and
// int32 arithmetic). scalar_tensor_tensor and tensor_scalar_reduce accept arithmetic operators only (their
// own cases). A bypassed op1 is no operator.
void Checker::bitvec_ops(int first_vector_slot) const {
  const AluOp op0 = inst_.alu0;
  const AluOp op1 = inst_.op == Opcode::TensorScalar ? inst_.alu1 : AluOp::Bypass;
  const bool b0 = alu_is_bitwise(op0), b1 = alu_is_bitwise(op1);
  if (b0 != b1 && op0 != AluOp::Bypass && op1 != AluOp::Bypass)
    fail("operator types",
         fmt::format("op0 {} is {} but op1 {} is {} (both must be bitvec or both arithmetic)", alu_name(op0),
                     b0 ? "bitvec" : "arithmetic", alu_name(op1), b1 ? "bitvec" : "arithmetic"));
  if (!b0 && !b1) return;
  const char* bitvec = alu_name(b0 ? op0 : op1);
  if (inst_.engine != Engine::DVE)
    fail("bitvec engine", fmt::format("bitvec operator {} runs on the Vector Engine (DVE) only", bitvec));
  for (int slot = 0; slot < info_.num_slots; ++slot) {
    if (!has(slot) || (slot >= first_vector_slot && inst_.op == Opcode::TensorScalar &&
                       !inst_.has(slot == 2 ? kOperand0Vector : kOperand1Vector)))
      continue;
    if (!is_int(op(slot).dtype))
      fail("bitvec dtype", fmt::format("bitvec operator {} needs integer dtypes (bit patterns), {} is {}",
                                       bitvec, name(slot), dtype_name(op(slot).dtype)));
  }
}

// nki.isa.tensor_tensor_scan (NKI 2.21-2.33): data0, data1 and dst of one shape, not both inputs in PSUM;
// op0 and op1 binary arithmetic operators; initial a number or one element per partition.
void Checker::scan_rules() const {
  same_shape(0, 1);
  same_shape(0, 2);
  if (inst_.has(kOperand0Vector)) vector_of(3, 1);
  for (const AluOp o : {inst_.alu0, inst_.alu1})
    if (alu_is_bitwise(o) || o == AluOp::Bypass || o == AluOp::Abs)
      fail("op", fmt::format("op0 {} and op1 {} must be binary arithmetic operators", alu_name(inst_.alu0),
                             alu_name(inst_.alu1)));
  if (op(1).space == MemSpace::PSUM && op(2).space == MemSpace::PSUM)
    fail("connectivity", "data0 and data1 cannot both be in PSUM");
}

// nki.isa.tensor_partition_reduce (NKI 2.21-2.33): op add, maximum, bitwise_or, bitwise_and or bitwise_xor
// (the bitvec ones on integer dtypes); dst one partition holding data's free elements.
void Checker::partition_reduce_rules() const {
  const AluOp o = inst_.alu0;
  const bool bitvec = o == AluOp::BitwiseOr || o == AluOp::BitwiseAnd || o == AluOp::BitwiseXor;
  if (!bitvec && o != AluOp::Add && o != AluOp::Max)
    fail("op",
         fmt::format("op {} must be add, maximum, bitwise_or, bitwise_and or bitwise_xor", alu_name(o)));
  if (op(0).partitions != 1 || op(0).free_elements() != op(1).free_elements())
    fail("shape", fmt::format("dst must be [1, {}] (data's free elements on one partition), got [{}, {}]",
                              op(1).free_elements(), op(0).partitions, op(0).free_elements()));
  if (bitvec)
    for (int slot = 0; slot < 2; ++slot)
      if (!is_int(op(slot).dtype))
        fail("bitvec dtype", fmt::format("bitvec operator {} needs integer dtypes (bit patterns), {} is {}",
                                         alu_name(o), name(slot), dtype_name(op(slot).dtype)));
}

// max8, nc_find_index8, nc_match_replace8 (NKI's API pages, Neuron 2.26-2.33): src / data hold 8 to 16,384
// values per partition (nc_match_replace8: at most 16,384), numbers (no x4 dtype); the 8 per partition
// (max8's dst, vals, the indices) on the same partitions; indices uint16 or uint32; nc_match_replace8's dst
// is data's shape.
void Checker::top8_rules() const {
  const int in = 1;
  const uint64_t n = op(in).free_elements();
  const uint64_t lo = inst_.op == Opcode::NcMatchReplace8 ? 1 : top8::kMinElements;
  if (n < lo || n > top8::kMaxElements)
    fail("shape", fmt::format("{} has {} elements per partition; {} reads {} to {}", name(in), n,
                              opcode_name(inst_.op), lo, top8::kMaxElements));
  const auto eight = [&](int slot) {
    if (op(slot).partitions != op(in).partitions || op(slot).free_elements() != top8::kWidth)
      fail("shape",
           fmt::format("{} must be [{}, {}] ({} per partition), got [{}, {}]", name(slot), op(in).partitions,
                       top8::kWidth, top8::kWidth, op(slot).partitions, op(slot).free_elements()));
  };
  for (int slot = 0; slot < info_.num_slots; ++slot)
    if (has(slot) && is_x4(op(slot).dtype))
      fail("dtype", fmt::format("{} is {}: {} compares values, and an x4 element is four", name(slot),
                                dtype_name(op(slot).dtype), opcode_name(inst_.op)));
  const int idx = inst_.op == Opcode::NcFindIndex8 ? 0 : 3;
  if (inst_.op == Opcode::NcMatchReplace8) same_shape(0, 1);
  if (inst_.op == Opcode::Max8) eight(0);
  if (inst_.op != Opcode::Max8) eight(2);
  if (inst_.op != Opcode::Max8 && has(idx)) {
    eight(idx);
    dtype_in(idx, {DType::U16, DType::U32}, "uint16 or uint32 (indices)");
  }
}

// nki.isa.nc_stream_shuffle (NKI 2.21-2.33): dst of src's dtype with as many elements per partition; the
// start partitions by the active partitions (the larger tile's rounded up to 32): 96 or 128 start at 0, 64
// at 0 or 64, 32 at 0, 32, 64 or 96.
void Checker::shuffle_rules() const {
  if (op(0).dtype != op(1).dtype)
    fail("dtype", fmt::format("dst is {} but src is {} (nc_stream_shuffle moves elements, no cast)",
                              dtype_name(op(0).dtype), dtype_name(op(1).dtype)));
  if (op(0).free_elements() != op(1).free_elements())
    fail("shape", fmt::format("dst has {} elements per partition, src {}", op(0).free_elements(),
                              op(1).free_elements()));
  const uint32_t active = (std::max(op(0).partitions, op(1).partitions) + 31) / 32 * 32;
  for (int slot = 0; slot < 2; ++slot) {
    const uint32_t s = op(slot).partition_start;
    if (!engine_start_allowed(active, s))
      fail("partition start",
           fmt::format("{} starts at partition {}; with {} active partitions a start must be {}", name(slot),
                       s, active,
                       active > 64    ? "0"
                       : active == 64 ? "0 or 64"
                                      : "0, 32, 64 or 96"));
  }
}

void Checker::run() {
  const Opcode o = inst_.op;
  if (static_cast<int>(o) >= kNumOpcodes)
    fail("opcode", fmt::format("unknown opcode {}", static_cast<int>(o)));
  if (static_cast<int>(inst_.engine) >= kNumEngines)
    fail("engine", fmt::format("unknown engine {}", static_cast<int>(inst_.engine)));
  for (const SemWait& w : inst_.waits)
    if (w.sem >= limits_.num_semaphores)
      fail("semaphore",
           fmt::format("wait on S[{}] but the core has {} semaphores", w.sem, limits_.num_semaphores));
  for (const SemUpdate& u : inst_.updates)
    if (u.sem >= limits_.num_semaphores)
      fail("semaphore",
           fmt::format("update of S[{}] but the core has {} semaphores", u.sem, limits_.num_semaphores));
  if (is_dma(inst_.op) && inst_.dma_queue >= limits_.num_dma_queues)
    fail("dma queue",
         fmt::format("queue {} but the core has {} DMA queues", inst_.dma_queue, limits_.num_dma_queues));

  // Generation and engine first: they explain the instruction is wrong before any operand detail.
  engine_allowed();
  if (info_.num_slots == 0) return;  // core_barrier: ordering only
  require(0);                        // dst
  for (int slot = 0; slot < 5; ++slot)
    if (has(slot)) operand(slot);
  connectivity();
  for (int slot = 1; slot < info_.num_slots; ++slot)
    if (!info_.slots[slot].optional) require(slot);

  switch (o) {
    case Opcode::DmaCopy:
      no_cast_x4(0, 1);
      scalar_offset();
      if (inst_.has(kDmaAccumulate) && (is_x4(op(0).dtype) || is_x4(op(1).dtype)))
        fail("dtype", "DMA accumulate cannot use MX x4 dtypes");
      if (has(2)) {
        const int target = inst_.has(kIndirectDst) ? 0 : 1;
        if (op(target).space != MemSpace::HBM)
          fail("connectivity",
               fmt::format("indirect DMA indexes rows of an HBM tensor; {} is not in HBM", name(target)));
        if (op(2).space != MemSpace::SBUF) fail("connectivity", "vector_offset must be in SBUF");
        dtype_in(2, {DType::I32, DType::U32}, "int32 or uint32");
        same_shape(0, 1);
        vector_of(2, 1);
      } else if (elements(0) != elements(1)) {
        fail("element count", fmt::format("src has {} elements, dst has {}", elements(1), elements(0)));
      }
      break;
    case Opcode::DmaTranspose:
      scalar_offset();
      // The hardware DGE's and the indirect transpose's 2-byte rule (NKI dma_transpose constraints); a direct
      // transpose with other descriptors also moves 4-byte elements (nki-library transposes its int32 token
      // indices so, _load_token_indices_dgt).
      if (op(0).dtype != op(1).dtype ||
          (dtype_size(op(1).dtype) != 2 &&
           (inst_.dge == DgeMode::Hwdge || has(3) || dtype_size(op(1).dtype) != 4)))
        fail("dtype",
             fmt::format("{} moves {} unchanged: src {}, dst {}",
                         inst_.dge == DgeMode::Hwdge ? "a hardware-DGE dma_transpose"
                         : has(3)                    ? "an indirect dma_transpose"
                                                     : "dma_transpose",
                         inst_.dge == DgeMode::Hwdge || has(3) ? "2-byte dtypes" : "2- or 4-byte dtypes",
                         dtype_name(op(1).dtype), dtype_name(op(0).dtype)));
      if (op(0).space != MemSpace::SBUF) fail("connectivity", "dma_transpose writes SBUF only (dst)");
      if (has(3)) {  // indirect: src's rows gathered by index, then the 2-D transpose
        if (inst_.has(kTransposeOuterAxes))
          fail("shape", "an indirect dma_transpose (vector_offset) has axes (1, 0) only");
        if (has(2)) fail("connectivity", "dma_transpose takes a vector_offset or a scalar_offset, not both");
        if (op(1).space != MemSpace::HBM)
          fail("connectivity", "an indirect dma_transpose gathers rows of an HBM tensor; src is not in HBM");
        if (op(3).space != MemSpace::SBUF) fail("connectivity", "vector_offset must be in SBUF");
        dtype_in(3, {DType::I32, DType::U32}, "int32 or uint32");
        if (static_cast<uint64_t>(op(3).partitions) * op(3).free_elements() < op(1).partitions)
          fail("shape", fmt::format("vector_offset [{}, {}] holds fewer indices than src's {} rows",
                                    op(3).partitions, op(3).free_elements(), op(1).partitions));
      }
      if (inst_.has(kTransposeOuterAxes)) {
        const uint64_t A = op(1).partitions, D = op(0).partitions, F = op(1).free_elements();
        if (F % D != 0 || op(0).free_elements() != (F / D) * A)
          fail("shape", fmt::format("axes (2, 1, 0): src [{}, {}] and dst [{}, {}] are not [A, C, D] and "
                                    "[D, C, A]",
                                    A, F, D, op(0).free_elements()));
      } else if (op(0).partitions != op(1).free_elements() || op(0).free_elements() != op(1).partitions) {
        fail("shape",
             fmt::format("dst must be [{}, {}] (src transposed), got [{}, {}]", op(1).free_elements(),
                         op(1).partitions, op(0).partitions, op(0).free_elements()));
      }
      break;
    case Opcode::NcMatmul:
      matmul();
      break;
    case Opcode::NcMatmulMx:
      matmul_mx();
      break;
    case Opcode::QuantizeMx:
      quantize_mx();
      break;
    case Opcode::NcTranspose: {
      const uint32_t lim = inst_.engine == Engine::PE ? 128 : 32;
      if (op(1).partitions > lim || op(1).free_elements() > lim)
        fail("transpose tile", fmt::format("data is [{}, {}] (at most {}x{} on {})", op(1).partitions,
                                           op(1).free_elements(), lim, lim, engine_name(inst_.engine)));
      if (op(0).dtype != op(1).dtype)
        fail("dtype", fmt::format("transpose keeps the dtype: data {}, dst {}", dtype_name(op(1).dtype),
                                  dtype_name(op(0).dtype)));
      if (op(0).partitions != op(1).free_elements() || op(0).free_elements() != op(1).partitions)
        fail("shape",
             fmt::format("dst must be [{}, {}] (data transposed), got [{}, {}]", op(1).free_elements(),
                         op(1).partitions, op(0).partitions, op(0).free_elements()));
      if (inst_.engine == Engine::PE) psum_bank(0, op(0).free_elements());
      break;
    }
    case Opcode::Activation:
      same_shape(0, 1);
      if (inst_.has(kOperand0Vector)) vector_of(4, 1);
      if (inst_.has(kBiasVector)) vector_of(2, 1);
      if (inst_.has(kReduce)) vector_of(3, 1);
      break;
    case Opcode::TensorTensor:
      same_shape(0, 1);
      same_shape(0, 2);
      bitvec_ops(kMaxOperands);
      break;
    case Opcode::TensorScalar:
      same_shape(0, 1);
      if (inst_.has(kOperand0Vector)) vector_of(2, 1);
      if (inst_.has(kOperand1Vector)) vector_of(3, 1);
      bitvec_ops(2);
      break;
    case Opcode::TensorReduce: {
      const int nd = op(1).ndim;
      if (inst_.reduce_axes < 1 || inst_.reduce_axes > nd)
        fail("shape",
             fmt::format("reduce_axes {} must be 1..{} (the free dims of data)", inst_.reduce_axes, nd));
      uint64_t inner = 1;
      for (int d = nd - inst_.reduce_axes; d < nd; ++d) inner *= op(1).sizes[d];
      if (op(0).partitions != op(1).partitions || op(0).free_elements() * inner != op(1).free_elements())
        fail("shape", fmt::format("dst must be [{}, {}], got [{}, {}]", op(1).partitions,
                                  op(1).free_elements() / inner, op(0).partitions, op(0).free_elements()));
      bitvec_ops(kMaxOperands);
      break;
    }
    case Opcode::TensorCopy:
      same_shape(0, 1);
      no_cast_x4(0, 1);
      break;
    case Opcode::Select:
      same_shape(0, 1);
      same_shape(0, 2);
      if (has(3)) same_shape(0, 3);
      no_cast_x4(0, 2);
      if (has(3)) no_cast_x4(0, 3);
      break;
    case Opcode::SendRecv:
      if (op(0).space != MemSpace::SBUF || op(1).space != MemSpace::SBUF)
        fail("connectivity", "sendrecv moves SBUF to SBUF (src and dst must be in SBUF)");
      no_cast_x4(0, 1);
      if (elements(0) != elements(1))
        fail("element count", fmt::format("src has {} elements, dst has {}", elements(1), elements(0)));
      break;
    case Opcode::ScalarTensorTensor:
      same_shape(0, 1);
      same_shape(0, 3);
      if (inst_.has(kOperand0Vector)) vector_of(2, 1);
      if (alu_is_bitwise(inst_.alu0) || alu_is_bitwise(inst_.alu1))
        fail("op",
             fmt::format("op0 {} and op1 {} must be arithmetic operators (NKI: bitvec operators are not "
                         "supported)",
                         alu_name(inst_.alu0), alu_name(inst_.alu1)));
      if (op(1).space == MemSpace::PSUM && op(3).space == MemSpace::PSUM)
        fail("connectivity", "data and operand1 cannot both be in PSUM");
      break;
    case Opcode::BnStats: {
      constexpr uint64_t kFmax = 512;  // nl.tile_size.bn_stats_fmax
      if (op(0).partitions != op(1).partitions || op(0).free_elements() != 6)
        fail("shape", fmt::format("dst must be [{}, 6] (count, mean, variance * count of the even and of the "
                                  "odd elements), got [{}, {}]",
                                  op(1).partitions, op(0).partitions, op(0).free_elements()));
      if (op(1).free_elements() > kFmax)
        fail("shape", fmt::format("data has {} elements per partition; bn_stats takes at most {} "
                                  "(nl.tile_size.bn_stats_fmax)",
                                  op(1).free_elements(), kFmax));
      break;
    }
    case Opcode::BnAggr:
      if (op(0).partitions != op(1).partitions || op(0).free_elements() != 2)
        fail("shape", fmt::format("dst must be [{}, 2] (mean, variance), got [{}, {}]", op(1).partitions,
                                  op(0).partitions, op(0).free_elements()));
      if (op(1).free_elements() % 3 != 0)
        fail("shape",
             fmt::format("data has {} elements per partition; bn_aggr reads (count, mean, variance * "
                         "count) triples, a multiple of 3",
                         op(1).free_elements()));
      break;
    case Opcode::AffineSelect:
      same_shape(0, 1);
      no_cast_x4(0, 1);
      break;
    case Opcode::Max8:
    case Opcode::NcFindIndex8:
    case Opcode::NcMatchReplace8:
      top8_rules();
      break;
    case Opcode::TensorScalarReduce: {
      // nki.isa.tensor_scalar_reduce (NKI 2.33): one arithmetic operator; reduce_op add, subtract, multiply,
      // max or min; reduce_res one element per partition of data.
      same_shape(0, 1);
      if (inst_.has(kOperand0Vector)) vector_of(2, 1);
      vector_of(3, 1);
      if (alu_is_bitwise(inst_.alu0) || inst_.alu0 == AluOp::Bypass)
        fail("op",
             fmt::format("op0 {} must be an arithmetic operator (NKI: bitvec operators are not supported)",
                         alu_name(inst_.alu0)));
      const AluOp r = inst_.alu1;
      if (r != AluOp::Add && r != AluOp::Subtract && r != AluOp::Multiply && r != AluOp::Max &&
          r != AluOp::Min)
        fail("op",
             fmt::format("reduce_op {} must be add, subtract, multiply, maximum or minimum", alu_name(r)));
      break;
    }
    case Opcode::TensorTensorScan:
      scan_rules();
      break;
    case Opcode::TensorPartitionReduce:
      partition_reduce_rules();
      break;
    case Opcode::NcNGather:
      // nki.isa.nc_n_gather (NKI 2.29-2.33): dst of data's dtype, uint32 indices, dst as many elements per
      // partition as indices, all on the same partitions.
      if (op(0).dtype != op(1).dtype)
        fail("dtype", fmt::format("dst is {} but data is {} (nc_n_gather copies elements, no cast)",
                                  dtype_name(op(0).dtype), dtype_name(op(1).dtype)));
      dtype_in(2, {DType::U32}, "uint32");
      same_shape(0, 2);
      if (op(1).partitions != op(0).partitions)
        fail("shape", fmt::format("data has {} partitions, dst {}", op(1).partitions, op(0).partitions));
      break;
    case Opcode::NonzeroWithCount:
      // nki.isa.nonzero_with_count (NKI 2.33): src float32 or int32, dst int32 on the same partitions with
      // one more element per partition (the count).
      dtype_in(1, {DType::F32, DType::I32}, "float32 or int32");
      dtype_in(0, {DType::I32}, "int32");
      if (op(0).partitions != op(1).partitions || op(0).free_elements() != op(1).free_elements() + 1)
        fail("shape", fmt::format("dst must be [{}, {}] (src's {} elements and the count), got [{}, {}]",
                                  op(1).partitions, op(1).free_elements() + 1, op(1).free_elements(),
                                  op(0).partitions, op(0).free_elements()));
      break;
    case Opcode::NcStreamShuffle:
      shuffle_rules();
      break;
    default:
      break;
  }
}

}  // namespace

void check(const Instruction& inst, const Program& program, const Limits& limits) {
  Checker(inst, program, limits).run();
}

}  // namespace trnsim::isa
