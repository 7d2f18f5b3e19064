// The opcode table: what each isa::Opcode is, one row per opcode (opcode_table.h): its NKI name, its Neuron
// profile name, its operand slots in order (name, role, optional, the flags that make a written slot read
// too), its attributes besides the operands as program JSON spells them, the sequencers that may issue it on
// each hardware generation, the hardware config feature it needs, whether it is a DMA, a PE matmul's rate
// factor, and a one-line description. Opcode names and parsing, program JSON's keys, the rule checks
// (generation, engine, required operands, connectivity), work_of, the cost model (feature check, a matmul's
// contraction rows), the stats' BF16-equivalent FLOPs, the roofline's peak, the builder's dependency tracking
// (kernels/api/nki.cpp), the trace's slice names and the stats' opcode names all read it.
//
// Adding an opcode: docs/architecture.md, "Adding an opcode", lists every file it takes.
// tests/unit/isa/test_opcodes.cpp walks the table; tests/unit/kernels/test_nki_roles.cpp checks the builder
// against it.
//
// Facts (docs/facts/trainium-hardware.md §3, §2.4, §5): engines per opcode from the NKI ISA docs (nki.isa,
// Neuron 2.32: each instruction's `engine` argument; DMAs are triggered by any sequencer); activation on
// GpSimd from NeuronCore-v4 (nki.isa.activation, Neuron 2.33); nc_matmul_mx and quantize_mx exist on
// NeuronCore-v4 (Trn3) only; profile names as Neuron profiles show opcodes (MATMUL, ACTIVATE, TENSOR_TENSOR,
// PSEUDO_CORE_BARRIER, ...; the others named in the same style); the PE rate factors (MX 4x, FP8 double_row
// 2x the BF16 rate) from the NKI nc_matmul / nc_matmul_mx docs (the fact sheet §1.3).
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

// An attribute of an instruction besides its operand slots, as program JSON spells it
// (docs/program-format.md): its key, what its value sets in the Instruction and when it is written out.
// program_json.cpp reads and writes every opcode's attributes by kind, in row order (the first bad key is the
// one an error names).
enum class AttrKind : uint8_t {
  Flag,      // true / false: sets `flag`; written when set
  Choice,    // the string `off`, or `on` (sets `flag`); written when set, or always while `slot` is given
  SlotFlag,  // operand `slot` (named `key`) given sets `flag`; the operand is written only with the flag
  Byte,      // an integer in [lo, hi] into `field`; written always
  Alu,       // an ALU op name into `field`; written always
  Func,      // an activation function name; written always
  Number,    // a number or "inf" / "-inf" / "nan" into `field` (`absent` without the key); written always
  NumberOrVector,  // a Number, or an operand into `slot` that sets `flag`; the number is written unless
                   // `flag` is set (`flag` 0: unless the operand is given)
  TransposeAxes,   // dma_transpose's axes [1, 0], or [2, 1, 0] / [3, 1, 2, 0] (sets `flag`); written when set
  IotaSteps,       // iota's step per free dim; written always
  Int32,           // an integer in int32's range into `field` (an exact immediate; `absent` without the key);
                   // written always
  ShuffleMask,     // nc_stream_shuffle's 32 entries, each 0-31 or 255 (shuffle_mask.h); written always
};
// The Instruction field an attribute sets (program_json.cpp maps it).
enum class AttrField : uint8_t {
  None,
  Imm0,
  Imm1,
  Imm2,
  Alu0,
  Alu1,
  ScaleOffset,
  MovingScaleOffset,
  ReduceAxes,
  Int0,  // iota_steps[0] as an int32 immediate (nonzero_with_count's index_offset, dma_copy's
         // scalar_offset_stride)
  Int1,  // iota_steps[1] (nonzero_with_count's padding_val)
};

struct Attr {
  const char* key = nullptr;
  AttrKind kind = AttrKind::Flag;
  AttrField field = AttrField::None;
  uint32_t flag = 0;
  int8_t slot = -1;
  bool required = false;      // Alu, Number: the key must be given
  uint8_t lo = 0, hi = 255;   // Byte's range
  float absent = 0.f;         // Number, NumberOrVector, Int32: the value without the key
  bool omit_absent = false;   // Int32: not written when it has the absent value
  const char* off = nullptr;  // Choice's two strings
  const char* on = nullptr;
};
inline constexpr int kMaxAttrs = 6;

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
  uint8_t num_attrs = 0;
  std::array<Attr, kMaxAttrs> attrs{};
  // PE matmuls' rate factor: contraction rows a PE row takes per element and pass, relative to a BF16
  // nc_matmul (nc_matmul 1; nc_matmul_mx 4, its x4 elements); 0 for the other opcodes. The flags in
  // `pe_rate_doubled_by` double it, the two rows on a size-2 outer free axis of each operand (nc_matmul
  // perf_mode=double_row: FP8 [K, 2, F]).
  uint8_t pe_rate = 0;
  uint32_t pe_rate_doubled_by = 0;

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

// How a PE matmul instruction packs its contraction (the MX x4 / double_row rate factor): K = partitions x
// `factor` rows, `free_axis` of them on a size-`free_axis` outer free axis of each operand (double_row's
// [K, 2, F]; 1 otherwise). factor is 1 for BF16/FP16/FP32 nc_matmul, 2 for perf_mode=double_row, 4 for
// nc_matmul_mx, 0 for an instruction that is not a matmul. The cost model's contraction rows, the FLOP count
// (work_of), the stats' BF16-equivalent FLOPs (FLOPs / factor) and the roofline's peak (x factor) read it.
struct PeRate {
  uint32_t factor = 0;
  uint32_t free_axis = 1;
};
PeRate pe_rate(const Instruction& inst);

// Work an instruction does, for costs, stats and the trace: its operands' bytes by the slots' roles, and its
// PE FLOPs (flops_of, sim/isa/flops.h).
struct Work {
  uint64_t flops = 0;       // 2 per multiply-accumulate on the PE
  uint64_t bytes_read = 0;  // all memories
  uint64_t bytes_written = 0;
  uint64_t hbm_bytes_read = 0;
  uint64_t hbm_bytes_written = 0;
};
Work work_of(const Instruction& inst, const Program& program);

// The row of `op`; an opcode outside the enum gets a row named "?" with no slots and no engines.
const OpcodeInfo& opcode_info(Opcode op);
// Every row, in Opcode order.
std::span<const OpcodeInfo> opcode_table();

const char* opcode_name(Opcode op);  // NKI name, e.g. "nc_matmul"; "?" outside the enum
// Operand slot names of an opcode, in slot order (e.g. nc_matmul: dst, stationary, moving).
const std::vector<const char*>& operand_names(Opcode op);

}  // namespace trnsim::isa
