// Common access patterns and instructions, for programs written by hand (the CLI's tensor initialisation,
// tests, benchmarks).
#pragma once

#include <cstdint>
#include <initializer_list>

#include "sim/isa/instruction.h"

namespace trnsim::isa {

// The whole of an HBM tensor viewed as [rows, cols] row-major: `rows` rows of `cols` contiguous elements.
inline AccessPattern hbm_rows(uint32_t tensor, DType dtype, uint32_t rows, uint32_t cols) {
  AccessPattern a;
  a.space = MemSpace::HBM;
  a.dtype = dtype;
  a.tensor = tensor;
  a.partitions = rows;
  a.partition_stride = cols;
  a.ndim = 1;
  a.set_dim(0, {1, cols});
  return a;
}

// An instruction with its operands in slot order (opcodes.h: slot 0 is dst), nops = operands.size().
inline Instruction make_instruction(Opcode op, Engine engine, std::initializer_list<AccessPattern> operands) {
  Instruction in;
  in.op = op;
  in.engine = engine;
  for (const AccessPattern& a : operands) in.ops[in.nops++] = a;
  return in;
}

}  // namespace trnsim::isa
