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

// Calls f(address, offset in read's order, bytes) for each byte run of v in row order (a whole row where
// rows are contiguous, else one element); stops and returns false as soon as f does.
template <class F>
bool each_run(OperandView& v, F&& f) {
  const uint32_t es = dtype_size(v.dtype());
  const size_t rb = v.cols() * es;
  size_t o = 0;
  for (uint32_t r = 0; r < v.rows(); ++r) {
    if (v.contiguous_rows() && rb > 0) {  // a row is one byte run
      if (!f(v.at(r, 0), o, rb)) return false;
      o += rb;
      continue;
    }
    for (uint64_t c = 0; c < v.cols(); ++c, o += es)
      if (!f(v.at(r, c), o, es)) return false;
  }
  return true;
}

std::vector<uint8_t> read(OperandView& v) {
  std::vector<uint8_t> out(static_cast<size_t>(v.rows()) * v.cols() * dtype_size(v.dtype()));
  each_run(v, [&](const uint8_t* p, size_t o, size_t n) {
    std::memcpy(&out[o], p, n);
    return true;
  });
  return out;
}

void write(OperandView& v, const std::vector<uint8_t>& bytes) {
  each_run(v, [&](uint8_t* p, size_t o, size_t n) {
    std::memcpy(p, &bytes[o], n);
    return true;
  });
}

// Whether v holds `bytes` now (read's order), compared in place.
bool holds(OperandView& v, const std::vector<uint8_t>& bytes) {
  if (bytes.size() != static_cast<size_t>(v.rows()) * v.cols() * dtype_size(v.dtype())) return false;
  return each_run(v, [&](const uint8_t* p, size_t o, size_t n) { return std::memcmp(p, &bytes[o], n) == 0; });
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
