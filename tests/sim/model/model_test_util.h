// Small builders for hand-written programs in the model tests.
#pragma once

#include <initializer_list>
#include <vector>

#include "sim/config/hw_config.h"
#include "sim/isa/instruction.h"
#include "sim/isa/patterns.h"
#include "sim/model/run.h"

namespace trnsim::test {

// On-chip operand: `parts` partitions from `start`, contiguous free dims (outermost first).
inline isa::AccessPattern onchip(isa::MemSpace space, isa::DType t, uint32_t parts,
                                 std::initializer_list<uint32_t> dims, int64_t offset_bytes = 0,
                                 uint32_t start = 0) {
  isa::AccessPattern a;
  a.space = space;
  a.dtype = t;
  a.partition_start = start;
  a.partitions = parts;
  a.offset_bytes = offset_bytes;
  std::vector<uint32_t> d(dims);
  a.ndim = static_cast<uint8_t>(d.size());
  int64_t stride = 1;
  for (int i = a.ndim - 1; i >= 0; --i) {
    a.set_dim(i, {stride, d[i]});
    stride *= d[i];
  }
  return a;
}
inline isa::AccessPattern sbuf(isa::DType t, uint32_t parts, std::initializer_list<uint32_t> dims,
                               int64_t off = 0) {
  return onchip(isa::MemSpace::SBUF, t, parts, dims, off);
}
inline isa::AccessPattern psum(isa::DType t, uint32_t parts, std::initializer_list<uint32_t> dims,
                               int64_t off = 0) {
  return onchip(isa::MemSpace::PSUM, t, parts, dims, off);
}

// The whole of a 2-D HBM tensor [rows, cols].
inline isa::AccessPattern hbm(uint32_t tensor, isa::DType t, uint32_t rows, uint32_t cols) {
  return isa::hbm_rows(tensor, t, rows, cols);
}

// A one-core program whose only tensor is x [rows, cols] of `t` in HBM (tensor 0).
inline isa::Program with_hbm_x(isa::DType t, uint32_t rows, uint32_t cols) {
  isa::Program p;
  p.num_cores = 1;
  isa::TensorDecl x;
  x.name = "x";
  x.dtype = t;
  x.shape = {rows, cols};
  p.tensors.push_back(x);
  return p;
}

inline isa::Instruction make(isa::Opcode op, isa::Engine e, std::initializer_list<isa::AccessPattern> ops,
                             std::vector<isa::SemWait> waits = {}, std::vector<isa::SemUpdate> updates = {}) {
  isa::Instruction i;
  i.op = op;
  i.engine = e;
  for (const auto& a : ops) i.ops[i.nops++] = a;
  i.waits = std::move(waits);
  i.updates = std::move(updates);
  return i;
}

inline void push(isa::Program& p, int core, const isa::Instruction& i) {
  p.streams[core][static_cast<int>(i.engine)].push_back(i);
}

// Declares HBM tensors `names`, each of dtype `t` and shape `shape`, in that order (tensor indices from 0).
inline void declare(isa::Program& p, std::initializer_list<const char*> names, isa::DType t,
                    std::vector<int64_t> shape) {
  for (const char* name : names) {
    isa::TensorDecl d;
    d.name = name;
    d.dtype = t;
    d.shape = shape;
    p.tensors.push_back(d);
  }
}

// A POOL iota over [128, 512] int32: 150 + 512 = 662 cycles, 551667 ps at trn2's 1.2 GHz.
inline isa::Instruction pool_iota() {
  return make(isa::Opcode::Iota, isa::Engine::POOL, {sbuf(isa::DType::I32, 128, {512})});
}

inline isa::Instruction core_barrier() {
  return make(isa::Opcode::CoreBarrier, isa::Engine::POOL, {});
}

// Core 0: core_barrier, then pool_iota(). Core 1: pool_iota(), then its core_barrier, which arrives last.
inline isa::Program barrier_after_iota() {
  isa::Program p;
  push(p, 0, core_barrier());
  push(p, 0, pool_iota());
  push(p, 1, pool_iota());
  push(p, 1, core_barrier());
  return p;
}

// trn2 as the model tests derive DMA times in: the PE throttle and the launch delay off, a DMA packet rate of
// dma.packet_ns = 44 (the mechanism, not the shipped value), a precomputed-descriptor DMA's trigger
// dma.trigger_ns alone (dma.precomputed_issue_ns 0); `o` adds or replaces overrides.
inline config::HwConfig trn2_dma_packets(config::Overrides o = {}) {
  o.emplace("pe.throttle.enabled", false);
  o.emplace("sync.kernel_launch_ns", 0);
  o.emplace("dma.packet_ns", 44);
  o.emplace("dma.precomputed_issue_ns", 0);
  return config::load_hw_config("trn2", o);
}

inline Picoseconds ps(uint64_t n) {
  return Picoseconds(n);
}

}  // namespace trnsim::test
