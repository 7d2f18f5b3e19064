// The PE's LoadStationary latches the stationary operand into the systolic array (the hardware fact sheet
// §2.1): the MultiplyMoving that follows computes with the values loaded, even if the SBUF region is
// overwritten in between (the builder lets a writer of the stationary region wait only for the
// LoadStationary, Instruction::ls_updates). The model keeps the latched bytes and computes the matmul with
// them. Plain C++.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/isa/instruction.h"
#include "sim/isa/semantics.h"

namespace trnsim::isa {

// Operand slots a PE instruction's LoadStationary reads: nc_matmul stationary; nc_matmul_mx stationary and
// stationary_scale; a PE nc_transpose its data (loaded as the stationary operand). Empty for any other
// instruction.
std::vector<int> stationary_slots(const Instruction& inst);

// The bytes of the stationary operands of `inst` on `core`, as loaded now.
struct Latched {
  std::vector<std::vector<uint8_t>> bytes;  // per stationary slot, in OperandView order
};
Latched latch_stationary(const Instruction& inst, int core, const Program& program, const Limits& limits,
                         MachineState& state);

// execute(inst) with its stationary operands holding the latched bytes; the memory keeps its current
// contents afterwards. Throws what execute() throws.
void execute_latched(const Instruction& inst, const Latched& latched, int core, const Program& program,
                     const Limits& limits, MachineState& state);

}  // namespace trnsim::isa
