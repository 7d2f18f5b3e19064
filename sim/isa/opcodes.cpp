#include "sim/isa/opcodes.h"

#include "sim/isa/flops.h"
#include "sim/isa/opcode_table.h"
#include "sim/isa/semantics.h"

namespace trnsim::isa {
namespace {

constexpr OpcodeInfo unknown() {
  OpcodeInfo i;
  i.op = static_cast<Opcode>(kNumOpcodes);
  return i;
}
constexpr OpcodeInfo kUnknown = unknown();

}  // namespace

PeRate pe_rate(const Instruction& inst) {
  const OpcodeInfo& info = opcode_info(inst.op);
  if ((inst.flags & info.pe_rate_doubled_by) != 0) return {2u * info.pe_rate, 2};
  return {info.pe_rate, 1};
}

namespace {

uint64_t bytes_of(const AccessPattern& ap) {
  return ap.present() ? static_cast<uint64_t>(ap.partitions) * ap.free_elements() * dtype_size(ap.dtype) : 0;
}

}  // namespace

Work work_of(const Instruction& inst, const Program&) {
  Work w;
  const auto& ops = inst.ops;
  auto read = [&](const AccessPattern& ap) {
    const uint64_t b = bytes_of(ap);
    w.bytes_read += b;
    if (ap.space == MemSpace::HBM) w.hbm_bytes_read += b;
  };
  auto write = [&](const AccessPattern& ap) {
    const uint64_t b = bytes_of(ap);
    w.bytes_written += b;
    if (ap.space == MemSpace::HBM) w.hbm_bytes_written += b;
  };
  const OpcodeInfo& info = opcode_info(inst.op);
  if (info.num_slots == 0) return w;  // core_barrier
  // By the slots' roles; an accumulating dst (matmul accumulate, DMA-side add) is read and written. A DMA's
  // scalar_offset is a descriptor register, not data the DMA moves.
  const int offset_slot = scalar_offset_slot(inst);
  for (int slot = 0; slot < kMaxOperands; ++slot) {
    if (!ops[slot].present() || slot == offset_slot) continue;
    if (info.writes(slot)) write(ops[slot]);
    if (info.reads(inst, slot)) read(ops[slot]);
  }
  w.flops = flops_of(inst);
  return w;
}

uint64_t flops_of(const Instruction& inst) {
  // 2 * K * M * N with the logical K (pe_rate: double_row 2x partitions, MX 4x); transposes count none.
  const PeRate r = pe_rate(inst);
  if (r.factor == 0 || (inst.op == Opcode::NcMatmul && inst.has(kIsTranspose))) return 0;
  const auto& ops = inst.ops;
  return uint64_t{2} * ops[1].partitions * r.factor * (ops[1].free_elements() / r.free_axis) *
         (ops[2].free_elements() / r.free_axis);
}

const OpcodeInfo& opcode_info(Opcode op) {
  const auto i = static_cast<size_t>(op);
  return i < kOpcodeTable.size() ? kOpcodeTable[i] : kUnknown;
}

std::span<const OpcodeInfo> opcode_table() {
  return kOpcodeTable;
}

const char* opcode_name(Opcode op) {
  return opcode_info(op).name;
}

const std::vector<const char*>& operand_names(Opcode op) {
  static const auto kNames = [] {
    std::array<std::vector<const char*>, kNumOpcodes + 1> n;  // the last: opcodes outside the enum
    for (int o = 0; o < kNumOpcodes; ++o)
      for (int s = 0; s < kOpcodeTable[o].num_slots; ++s) n[o].push_back(kOpcodeTable[o].slots[s].name);
    return n;
  }();
  const auto i = static_cast<size_t>(op);
  return kNames[i < kOpcodeTable.size() ? i : kOpcodeTable.size()];
}

}  // namespace trnsim::isa
