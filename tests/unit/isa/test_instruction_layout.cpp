// The instruction encoding the timing model streams through (sim/isa/instruction.h): naturally aligned
// fields (no packing: UBSan rejects misaligned references), the fields the sequencer reads for every
// instruction in its first two cache lines and the operand slots last; and the ring queue the PE sequencer
// keeps its pending instructions in (sim/base/ring_queue.h).
#include <catch2/catch.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "sim/base/ring_queue.h"
#include "sim/isa/instruction.h"
#include "sim/isa/opcode_table.h"
#include "sim/isa/opcodes.h"

using namespace trnsim;
using namespace trnsim::isa;

namespace {

ptrdiff_t offset(const Instruction& i, const void* field) {
  return static_cast<const char*>(field) - reinterpret_cast<const char*>(&i);
}

}  // namespace

TEST_CASE("a semaphore update is 8 bytes and is made as {sem, delta, peer}") {
  // delta (4) + sem (2) + peer (1) + 1 byte of tail padding; 12 bytes with sem first.
  CHECK(sizeof(SemUpdate) == 8);
  CHECK(alignof(SemUpdate) == 4);
  const SemUpdate u{7, -3, true};
  CHECK(u.sem == 7);
  CHECK(u.delta == -3);
  CHECK(u.peer);
  const SemUpdate d{5};
  CHECK(d.sem == 5);
  CHECK(d.delta == 1);
  CHECK_FALSE(d.peer);
  // Two inline updates: 4 bytes of 16-bit size and capacity + 16 of values (24 with 32-bit counts and the
  // 8-byte alignment of the heap pointer they replace).
  CHECK(sizeof(SemUpdates) == 20);
  CHECK(alignof(SemUpdates) == 4);
}

TEST_CASE("a semaphore wait list holds three inline in 28 bytes and at most 65535 waits") {
  // sem (2) + 2 of padding + value (4) = 8 bytes a wait; 4 of size and capacity + 3 x 8 = 28.
  CHECK(sizeof(SemWait) == 8);
  CHECK(sizeof(SemWaits) == 28);
  CHECK(SemWaits::max_size() == 65535);
  SemWaits w;
  for (uint32_t k = 0; k < 65535; ++k) w.push_back({static_cast<uint16_t>(k), k + 1});
  // Grown 3, 6, ..., 49152, then to the 16-bit maximum rather than past it.
  CHECK(w.size() == 65535);
  CHECK(w.capacity() == 65535);
  CHECK(w[65534].sem == 65534);
  CHECK(w[65534].value == 65535);
  CHECK(w[3].value == 4);  // moved to the heap intact
  try {
    w.push_back({0, 0});
    FAIL("a 65536th wait was held");
  } catch (const std::length_error& e) {
    CHECK(std::string(e.what()) == "SmallVector: more than 65535 values");
  }
  CHECK(w.size() == 65535);
  const SemWaits copy = w;
  CHECK(copy.size() == 65535);
  CHECK(copy[40000].value == 40001);
}

TEST_CASE("an instruction keeps its per-instruction fields in two cache lines and its operands last") {
  const Instruction i;
  // The sequencer reads op, engine, flags, loc, waits and updates for every instruction.
  CHECK(offset(i, &i.flags) < 64);
  CHECK(offset(i, &i.loc) < 64);
  CHECK(offset(i, &i.waits) + static_cast<ptrdiff_t>(sizeof i.waits) <= 64);
  CHECK(offset(i, &i.updates) + static_cast<ptrdiff_t>(sizeof i.updates) <= 128);
  CHECK(offset(i, i.ops.data()) + static_cast<ptrdiff_t>(sizeof i.ops) == static_cast<ptrdiff_t>(sizeof i));
  // 28 bytes of small fields, 96 of semaphore lists (2 x 28 + 2 x 20), 28 of immediates (imm0-imm2, 4 iota
  // steps): 152, a multiple of 8, then 5 x 80 of operands = 552 (576 with 32-bit list counts: 32 + 112 + 28
  // padded to 176; 656 with operands of four 16-byte Dims; 664 before the fields were reordered and
  // SemUpdate shrunk; 648 before affine_select's imm2).
  CHECK(offset(i, &i.waits) == 28);
  CHECK(offset(i, i.ops.data()) == 152);
  CHECK(sizeof(Instruction) == 552);
}

TEST_CASE("an operand keeps its free dims in two arrays: 80 bytes, no padding between the dims") {
  // 3 one-byte fields + 1 of padding, tensor, partition_start, partitions (4 each), partition_stride and
  // offset_bytes (8 each) = 32; four 8-byte strides = 32; four 4-byte sizes = 16. An array of four Dims
  // (int64 stride + uint32 size, padded to 16 bytes) took 64 for the dims.
  CHECK(sizeof(AccessPattern) == 80);
  CHECK(sizeof(Dim) == 16);
  AccessPattern a;
  // Unset dims read as {stride 1, size 1}, as a default Dim does.
  for (int d = 0; d < AccessPattern::kMaxDims; ++d) {
    CHECK(a.dim(d).stride == Dim{}.stride);
    CHECK(a.dim(d).size == Dim{}.size);
  }
  // set_dim writes the pair dim() reads; a stride beyond 32 bits and a negative one are kept whole.
  a.set_dim(0, {int64_t{3} << 33, 7});
  a.set_dim(3, {-5, 4294967295u});
  CHECK(a.strides[0] == 25769803776);
  CHECK(a.sizes[0] == 7);
  CHECK(a.dim(3).stride == -5);
  CHECK(a.dim(3).size == 4294967295u);
  CHECK(a.dim(1).stride == 1);
  a.ndim = 2;
  CHECK(a.free_elements() == 7);  // 7 x 1: dims past ndim do not count
  a.ndim = 4;
  CHECK(a.free_elements() == uint64_t{7} * 4294967295u);
}

TEST_CASE("is_dma derives from the opcode table's dma column and is false outside the enum") {
  // kDmaOpcodes is computed from the rows at compile time, so a row's `dma` is the one place that says it.
  static_assert(is_dma(Opcode::DmaCopy) && is_dma(Opcode::DmaTranspose) && is_dma(Opcode::SendRecv));
  static_assert(!is_dma(Opcode::NcMatmul) && !is_dma(Opcode::CoreBarrier));
  int dma_rows = 0;
  for (int o = 0; o < kNumOpcodes; ++o) {
    const auto op = static_cast<Opcode>(o);
    CHECK(is_dma(op) == kOpcodeTable[o].dma);
    CHECK(is_dma(op) == opcode_info(op).dma);
    dma_rows += kOpcodeTable[o].dma ? 1 : 0;
  }
  CHECK(dma_rows == 3);  // dma_copy, dma_transpose, sendrecv
  CHECK(kDmaOpcodes == 0b1000000000000011u);
  CHECK_FALSE(is_dma(static_cast<Opcode>(kNumOpcodes)));
  CHECK_FALSE(is_dma(static_cast<Opcode>(255)));
}

TEST_CASE("a ring queue is first in, first out across its growth and wrap-around") {
  RingQueue<std::string> q;
  CHECK(q.empty());
  int next_in = 0, next_out = 0;
  // Push 3, pop 2, repeatedly: the ring wraps and grows (8, 16, ...) while holding elements.
  for (int round = 0; round < 20; ++round) {
    for (int k = 0; k < 3; ++k) q.push_back(std::to_string(next_in++));
    for (int k = 0; k < 2; ++k) {
      REQUIRE(q.front() == std::to_string(next_out++));
      q.pop_front();
    }
  }
  CHECK(q.size() == 20);
  while (!q.empty()) {
    REQUIRE(q.front() == std::to_string(next_out++));
    q.pop_front();
  }
  CHECK(next_out == 60);
}
