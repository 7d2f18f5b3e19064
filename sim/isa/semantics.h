// Functional semantics and hardware rule checks of the ISA (contract; implemented in sim/isa/*.cpp).
// Plain C++: the SystemC model calls check() when an instruction issues and execute() when it completes.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "sim/base/host_bytes.h"

#include "sim/isa/instruction.h"
#include "sim/isa/opcodes.h"  // opcode_name, operand_names

namespace trnsim::isa {

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
  std::vector<HostBytes> hbm;  // large ones in scratch files when a scratch folder is set (host_bytes.h)
};

// Allocates and poisons memory for `program` under `limits`; a tensor in `initial` (by index) starts with
// those bytes instead, taken without a copy (their size must be the tensor's: Error otherwise).
MachineState make_machine_state(const Program& program, const Limits& limits,
                                std::map<uint32_t, HostBytes> initial = {});

// Throws RuleError if `inst` breaks a hardware rule; the message names the opcode, its engine and the rule.
void check(const Instruction& inst, const Program& program, const Limits& limits);

// Applies `inst` (issued on physical core `core`) to `state`, bit for bit in the simulated dtypes.
// Throws RuleError for data-dependent violations (e.g. an indirect DMA index out of bounds with oob_mode
// error).
void execute(const Instruction& inst, int core, const Program& program, const Limits& limits,
             MachineState& state);

// The scalar_offset of a DMA: the operand slot of an SBUF int32 [1, 1] (dma_copy 3, dma_transpose 2; -1 for
// other opcodes) whose value v, read when the DMA executes, moves the HBM operand in slot
// scalar_offset_target (dma_copy: src, or dst with kScalarOffsetDst; dma_transpose: src) by v rows of its
// tensor's dim 0, i.e. v times the tensor's row bytes (NKI access pattern `scalar_offset`, e.g. one expert's
// slice of a stacked [E, ...] weight picked by an expert id in SBUF); a dma_copy with a nonzero
// scalar_offset_stride (Instruction::iota_steps[0], bytes) moves it by v times that many bytes instead (NKI's
// `indirect_dim` other than 0: that dim's stride). The moved pattern must stay inside the tensor (RuleError
// "scalar_offset ... outside tensor"). Triggered from SP or ACT only (hardware DGE).
int scalar_offset_slot(const Instruction& inst);
int scalar_offset_target(const Instruction& inst);

const char* engine_name(Engine e);  // "PE", "DVE", "ACT", "POOL", "SP"
const char* dtype_name(DType t);    // NKI name, e.g. "bfloat16", "float8_e4m3fn_x4"
uint32_t dtype_size(DType t);       // bytes per element

}  // namespace trnsim::isa
