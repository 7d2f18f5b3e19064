// Helpers for the ISA tests: access-pattern builders and raw memory pokes that do not go through the code
// under test.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "sim/isa/instruction.h"
#include "sim/isa/patterns.h"
#include "sim/isa/semantics.h"

namespace trnsim::isa::test {

inline AccessPattern onchip(MemSpace m, uint32_t start, uint32_t count, int64_t offset, DType t,
                            std::initializer_list<std::pair<int64_t, uint32_t>> dims) {
  AccessPattern a;
  a.space = m;
  a.partition_start = start;
  a.partitions = count;
  a.offset_bytes = offset;
  a.dtype = t;
  for (auto [stride, size] : dims) a.set_dim(a.ndim++, Dim{stride, size});
  return a;
}
inline AccessPattern sbuf(uint32_t start, uint32_t count, int64_t offset, DType t,
                          std::initializer_list<std::pair<int64_t, uint32_t>> dims) {
  return onchip(MemSpace::SBUF, start, count, offset, t, dims);
}
inline AccessPattern psum(uint32_t start, uint32_t count, int64_t offset, DType t,
                          std::initializer_list<std::pair<int64_t, uint32_t>> dims) {
  return onchip(MemSpace::PSUM, start, count, offset, t, dims);
}
inline AccessPattern hbm(uint32_t tensor, int64_t offset, DType t, int64_t row_stride, uint32_t rows,
                         std::initializer_list<std::pair<int64_t, uint32_t>> dims) {
  AccessPattern a;
  a.space = MemSpace::HBM;
  a.tensor = tensor;
  a.offset_bytes = offset;
  a.dtype = t;
  a.partition_stride = row_stride;
  a.partitions = rows;
  for (auto [stride, size] : dims) a.set_dim(a.ndim++, Dim{stride, size});
  return a;
}

inline Instruction make(Opcode op, Engine e, std::initializer_list<AccessPattern> ops) {
  return make_instruction(op, e, ops);
}

// Raw bytes of partition p at byte offset `off`.
inline uint8_t* sb(MachineState& s, int core, const Limits& l, uint32_t p, int64_t off) {
  return s.cores[core].sbuf.data() + static_cast<size_t>(p) * l.sbuf_bytes_per_partition + off;
}
inline uint8_t* ps(MachineState& s, int core, const Limits& l, uint32_t p, int64_t off) {
  return s.cores[core].psum.data() + static_cast<size_t>(p) * l.psum_bytes_per_partition + off;
}

template <typename T>
void put(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
template <typename T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// BF16 bits of a float that is exactly representable in BF16 (truncation is exact then).
inline uint16_t bf16_exact(float f) {
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16);
}
inline float from_bf16(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline Limits trn2() {
  return Limits{};
}
inline Limits trn3() {
  Limits l;
  l.generation = Generation::Trn3;
  l.sbuf_bytes_per_partition = 256 * 1024;
  return l;
}

}  // namespace trnsim::isa::test
