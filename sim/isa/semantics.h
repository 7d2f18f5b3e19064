// Functional semantics and hardware rule checks of the ISA (contract; implemented in sim/isa/*.cpp).
// Plain C++: the SystemC model calls check() when an instruction issues and execute() when it completes.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sim/isa/instruction.h"
#include "sim/isa/opcodes.h"  // opcode_name, operand_names

namespace trnsim::isa {

// Memory sizes and generation features the checks need (filled from the hardware config).
struct Limits {
  Generation generation = Generation::Trn2;
  uint32_t partitions = 128;
  uint32_t sbuf_bytes_per_partition = 224 * 1024;  // Trn2 224 KiB, Trn3 256 KiB (reference §1.4)
  uint32_t psum_bytes_per_partition = 16 * 1024;   // 8 banks x 2 KiB (reference §1.4)
  uint32_t psum_bank_bytes = 2048;
  uint32_t num_semaphores = 64;
  uint32_t num_dma_queues = 16;
  uint64_t hbm_bytes = uint64_t{24} << 30;  // one HBM stack per LNC2 pair: Trn2 24 GiB, Trn3 ~36 GiB (§1.5)
};

// On-chip memory of one physical core: partition-major bytes (partition p starts at p * bytes_per_partition).
// Fresh memory is filled with 0xFF, so float reads of never-written bytes give NaN.
struct CoreMemory {
  std::vector<uint8_t> sbuf;
  std::vector<uint8_t> psum;
};

// The whole simulated machine's storage: two cores and the HBM tensors (one byte vector per TensorDecl;
// a tensor private to a core exists once per program entry, as declared).
struct MachineState {
  std::array<CoreMemory, 2> cores;
  std::vector<std::vector<uint8_t>> hbm;
};

// Allocates and poisons memory for `program` under `limits`.
MachineState make_machine_state(const Program& program, const Limits& limits);

// Throws RuleError if `inst` breaks a hardware rule; the message names the opcode, its engine and the rule.
void check(const Instruction& inst, const Program& program, const Limits& limits);

// Applies `inst` (issued on physical core `core`) to `state`, bit for bit in the simulated dtypes.
// Throws RuleError for data-dependent violations (e.g. an indirect DMA index out of bounds with oob_mode
// error).
void execute(const Instruction& inst, int core, const Program& program, const Limits& limits,
             MachineState& state);

// Work an instruction does, for costs, stats and the trace.
struct Work {
  uint64_t flops = 0;       // 2 per multiply-accumulate on the PE
  uint64_t bytes_read = 0;  // all memories
  uint64_t bytes_written = 0;
  uint64_t hbm_bytes_read = 0;
  uint64_t hbm_bytes_written = 0;
};
Work work_of(const Instruction& inst, const Program& program);

const char* engine_name(Engine e);  // "PE", "DVE", "ACT", "POOL", "SP"
const char* dtype_name(DType t);    // NKI name, e.g. "bfloat16", "float8_e4m3fn_x4"
uint32_t dtype_size(DType t);       // bytes per element

}  // namespace trnsim::isa
