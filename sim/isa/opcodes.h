// The opcode table: what each isa::Opcode is, one row per opcode (opcodes.cpp): its NKI name, its Neuron
// profile name, its operand slots in order (name, role, optional, the flags that make a written slot read
// too), the sequencers that may issue it on each hardware generation, the hardware config feature it needs,
// whether it is a DMA, and a one-line description. Opcode names and parsing, program JSON's operand keys, the
// rule checks (generation, engine, required operands, connectivity), work_of, the cost model's feature check,
// the builder's dependency tracking (kernels/api/nki.cpp), the trace's slice names and the stats' opcode
// names all read it.
//
// Adding an opcode touches the table, its semantics and its cost:
//   1. The table: the enumerator in instruction.h (bump kNumOpcodes) and its row here in opcodes.cpp, at the
//      same position. New attributes (flags, fields) go in Instruction.
//   2. Its semantics: Exec::run's case (semantics.cpp) and its operand rules (shapes, dtypes) in Checker::run
//      (check.cpp); attributes besides the operands need their program JSON keys (program_json.cpp) and a
//      line in docs/program-format.md.
//   3. Its cost: timing::CostModel (sim/timing/cost_model.cpp) on the engines it runs on, and its FLOPs in
//      work_of (check.cpp) if it computes on the PE.
// Kernels call it through a function in kernels/api/nki.h whose body builds it with nki.cpp's Op, which
// tracks its operands by the roles here. A feature key that is new needs its config flag too
// (config::Features, configs/hw/*.json, cost_model.cpp's feature_enabled). tests/unit/isa/test_opcodes.cpp
// walks the table; tests/unit/kernels/test_nki_roles.cpp checks the builder against it.
//
// Facts (docs/facts/trainium-hardware.md §3, §2.4, §5): engines per opcode from the NKI ISA docs (nki.isa,
// Neuron 2.32: each instruction's `engine` argument; DMAs are triggered by any sequencer); activation on
// GpSimd from NeuronCore-v4 (nki.isa.activation, Neuron 2.33); nc_matmul_mx and quantize_mx exist on
// NeuronCore-v4 (Trn3) only; profile names as Neuron profiles show opcodes (MATMUL, ACTIVATE, TENSOR_TENSOR,
// PSEUDO_CORE_BARRIER, ...; the others named in the same style).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
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
  // Sequencers that may issue it, per Generation (Trn2, Trn3, Trn1); empty: the generation lacks the opcode.
  // A DMA's sequencer only triggers the transfer, which runs on a DMA queue.
  std::array<EngineSet, 3> engines{};
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
