// The PE FLOPs of an instruction: Work::flops of isa::work_of (opcodes.h) alone, without walking its
// operands' bytes (the timing model needs the FLOPs of every PE instruction, the bytes only for a trace).
// Plain C++.
#pragma once

#include <cstdint>

#include "sim/isa/instruction.h"

namespace trnsim::isa {

// 2 per multiply-accumulate of nc_matmul / nc_matmul_mx (transposes: 0); 0 for every other opcode.
uint64_t flops_of(const Instruction& inst);

}  // namespace trnsim::isa
