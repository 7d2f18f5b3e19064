// The opcode table: what each isa::Opcode is, in one row per opcode (opcodes.cpp): its NKI name, its Neuron
// profile name, its operand slots in order (name and role), the sequencers that may issue it on each hardware
// generation, the hardware config feature it needs, and whether it is a DMA. Names, program JSON, the rule
// checks (engine, generation, required operands, connectivity), work accounting, the builder's dependency
// tracking (kernels/api/nki.cpp), the trace and the stats all read it.
//
// Adding an opcode:
//   1. instruction.h: the enumerator (and kNumOpcodes); opcodes.cpp: its row at the same position. New
//      attributes (flags, fields) go in instruction.h too.
//   2. Its semantics: the case in Exec::run (semantics.cpp) and its operand rules (shapes, dtypes) in
//      Checker::run (check.cpp); program_json.cpp reads and writes its attributes besides the operands.
//   3. Its cost: timing::CostModel (sim/timing/cost_model.cpp) on each engine it runs on (engine_cost or
//      dma_cost), and work_of (check.cpp) if it does FLOPs.
//   4. For kernels: the call in kernels/api/nki.h, built with nki.cpp's Op (its dependency tracking follows
//      the slot roles here).
// tests/unit/isa/test_opcodes.cpp walks the table; tests/unit/kernels/test_nki_roles.cpp checks the builder
// against it.
//
// Facts: engines per opcode from the NKI ISA docs (nki.isa, Neuron 2.32, each instruction's `engine`
// argument); activation on GpSimd from NeuronCore-v4 (nki.isa.activation, Neuron 2.33); nc_matmul_mx and
// quantize_mx exist on NeuronCore-v4 (Trn3) only; profile names as Neuron profiles show opcodes (MATMUL,
// ACTIVATE, TENSOR_TENSOR, PSEUDO_CORE_BARRIER, ...: neuron-profile / Neuron Explorer instruction view).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/isa/instruction.h"

namespace trnsim::isa {

inline constexpr int kMaxOperands = 5;  // Instruction::ops slots
static_assert(kMaxOperands == std::tuple_size_v<decltype(Instruction::ops)>);

// What an instruction does with an operand slot.
enum class Role : uint8_t { Read, Write };

struct OperandSlot {
  const char* name = nullptr;  // NKI argument name; also the program JSON key and the trace's label
  Role role = Role::Read;
  bool optional = false;  // may be absent (a required slot that is absent fails isa::check)
  // Write slots: flags (isa::Flag) that make the instruction read the slot too (accumulating into dst).
  uint32_t also_read_if = 0;
};

// Sequencers as a bit set: bit int(Engine).
using EngineSet = uint8_t;
constexpr EngineSet engine_set(std::initializer_list<Engine> engines) {
  EngineSet s = 0;
  for (Engine e : engines) s = static_cast<EngineSet>(s | (1u << static_cast<int>(e)));
  return s;
}
inline constexpr EngineSet kAnySequencer =
    engine_set({Engine::PE, Engine::DVE, Engine::ACT, Engine::POOL, Engine::SP});

struct OpcodeInfo {
  Opcode op = Opcode::TensorCopy;
  const char* name = "?";          // NKI name, e.g. "nc_matmul"
  const char* profile_name = "?";  // as a Neuron profile names it, e.g. "MATMUL"
  uint8_t num_slots = 0;
  std::array<OperandSlot, kMaxOperands> slots{};  // slot 0, when present, is the written dst
  // Sequencers that may issue it, per Generation (Trn2, Trn3); empty: the generation lacks the opcode. A
  // DMA's sequencer only triggers the transfer, which runs on a DMA queue.
  std::array<EngineSet, 2> engines{};
  const char* feature = nullptr;  // key under the hardware config's "features" it needs (null: none)
  bool dma = false;               // a DMA transfer: runs on Instruction::dma_queue, completes on the queue
  const char* description = "";   // one line

  bool allowed(Generation g, Engine e) const {
    return (engines[static_cast<int>(g)] >> static_cast<int>(e)) & 1u;
  }
  // Whether `inst` (of this opcode) reads / writes slot `slot`. Slots past num_slots count as read, as the
  // checks treat any present operand.
  bool writes(int slot) const { return slot < num_slots && slots[slot].role == Role::Write; }
  bool reads(const Instruction& inst, int slot) const {
    return !writes(slot) || (inst.flags & slots[slot].also_read_if) != 0;
  }
};

// The row of `op`; an opcode outside the enum gets a row named "?" with no slots and no engines.
const OpcodeInfo& opcode_info(Opcode op);
// Every row, in Opcode order.
std::span<const OpcodeInfo> opcode_table();

const char* opcode_name(Opcode op);  // NKI name, e.g. "nc_matmul"; "?" outside the enum
// Operand slot names of an opcode, in slot order (e.g. nc_matmul: dst, stationary, moving).
const std::vector<const char*>& operand_names(Opcode op);

}  // namespace trnsim::isa
