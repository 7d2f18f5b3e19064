#include "sim/isa/latch.h"

#include <cstring>

#include "sim/isa/operand_view.h"

namespace trnsim::isa {
namespace {

OperandView view_of(const Instruction& inst, int slot, int core, const Program& program, const Limits& limits,
                    MachineState& state) {
  return OperandView(inst.ops[slot], core, program, limits, state, opcode_name(inst.op),
                     "stationary operand");
}

std::vector<uint8_t> read(OperandView& v) {
  const uint32_t es = dtype_size(v.dtype());
  std::vector<uint8_t> out(static_cast<size_t>(v.rows()) * v.cols() * es);
  size_t o = 0;
  const size_t rb = v.cols() * es;
  for (uint32_t r = 0; r < v.rows(); ++r) {
    if (v.contiguous_rows() && rb > 0) {  // a row is one byte run
      std::memcpy(&out[o], v.at(r, 0), rb);
      o += rb;
      continue;
    }
    for (uint64_t c = 0; c < v.cols(); ++c, o += es) std::memcpy(&out[o], v.at(r, c), es);
  }
  return out;
}

void write(OperandView& v, const std::vector<uint8_t>& bytes) {
  const uint32_t es = dtype_size(v.dtype());
  size_t o = 0;
  const size_t rb = v.cols() * es;
  for (uint32_t r = 0; r < v.rows(); ++r) {
    if (v.contiguous_rows() && rb > 0) {
      std::memcpy(v.at(r, 0), &bytes[o], rb);
      o += rb;
      continue;
    }
    for (uint64_t c = 0; c < v.cols(); ++c, o += es) std::memcpy(v.at(r, c), &bytes[o], es);
  }
}

// Whether v holds `bytes` now (read's order), compared in place.
bool holds(OperandView& v, const std::vector<uint8_t>& bytes) {
  const uint32_t es = dtype_size(v.dtype());
  size_t o = 0;
  const size_t rb = v.cols() * es;
  if (bytes.size() != v.rows() * rb) return false;
  for (uint32_t r = 0; r < v.rows(); ++r) {
    if (v.contiguous_rows() && rb > 0) {
      if (std::memcmp(v.at(r, 0), &bytes[o], rb) != 0) return false;
      o += rb;
      continue;
    }
    for (uint64_t c = 0; c < v.cols(); ++c, o += es)
      if (std::memcmp(v.at(r, c), &bytes[o], es) != 0) return false;
  }
  return true;
}

}  // namespace

std::vector<int> stationary_slots(const Instruction& inst) {
  if (inst.engine != Engine::PE) return {};
  switch (inst.op) {
    case Opcode::NcMatmul:
    case Opcode::NcTranspose:
      return {1};
    case Opcode::NcMatmulMx:
      return {1, 3};
    default:
      return {};
  }
}

Latched latch_stationary(const Instruction& inst, int core, const Program& program, const Limits& limits,
                         MachineState& state) {
  Latched l;
  for (int slot : stationary_slots(inst)) {
    if (!inst.ops[slot].present()) {
      l.bytes.emplace_back();
      continue;
    }
    OperandView v = view_of(inst, slot, core, program, limits, state);
    l.bytes.push_back(read(v));
  }
  return l;
}

void execute_latched(const Instruction& inst, const Latched& latched, int core, const Program& program,
                     const Limits& limits, MachineState& state) {
  const std::vector<int> slots = stationary_slots(inst);
  // Swap the latched bytes in where they differ from memory now (compared in place: the usual case, nothing
  // wrote the region since the LoadStationary, copies nothing), run, swap the current bytes back.
  std::vector<std::vector<uint8_t>> now(slots.size());
  std::vector<bool> swapped(slots.size());
  bool differ = false;
  for (size_t i = 0; i < slots.size() && i < latched.bytes.size(); ++i) {
    if (!inst.ops[slots[i]].present()) continue;
    OperandView v = view_of(inst, slots[i], core, program, limits, state);
    if (holds(v, latched.bytes[i])) continue;
    now[i] = read(v);
    swapped[i] = differ = true;
    write(v, latched.bytes[i]);
  }
  if (!differ) return execute(inst, core, program, limits, state);
  const auto restore = [&] {
    for (size_t i = 0; i < slots.size() && i < latched.bytes.size(); ++i) {
      if (!swapped[i]) continue;
      OperandView v = view_of(inst, slots[i], core, program, limits, state);
      write(v, now[i]);
    }
  };
  try {
    execute(inst, core, program, limits, state);
  } catch (...) {
    restore();
    throw;
  }
  restore();
}

}  // namespace trnsim::isa
