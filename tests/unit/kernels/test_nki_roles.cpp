// The builder's dependency tracking follows the opcode table (sim/isa/opcodes.h): for every nki op, each
// operand lands in the table's slot, and a later access of it waits exactly as the slot's role says. A DMA
// probe on SP that reads the operand waits for the op iff the op wrote it (RAW); one that overwrites it
// always waits (WAR or WAW). A read of dst that an accumulate flag adds cannot change any wait (the write of
// dst already orders everything), so it is checked on the tracker's records. The special cases the table
// cannot express are checked on their own: core_barrier's tracked data, indirect DMA's whole-row regions and
// sendrecv's write recorded with the peer's event.
#include <catch2/catch.hpp>

#include <functional>
#include <set>

#include "kernels/api/nki.h"
#include "sim/isa/opcodes.h"

using namespace trnsim;
using namespace trnsim::kernels;
using isa::Opcode;

namespace {

using Views = std::vector<View>;

struct Case {
  Opcode op;
  // The op's operands in the table's slot order (an invalid View: absent).
  std::function<Views(Kernel&)> operands;
  std::function<InstRef(const Views&)> call;
  // The same call with its accumulate option (ops whose dst slot has also_read_if).
  std::function<InstRef(const Views&)> accumulate = nullptr;
  // An optional slot this case leaves empty (dma_copy's vector_offset and scalar_offset exclude each other:
  // one case each).
  int absent = -1;
};

View scratch_hbm(Kernel& k, const char* name) {
  return k.scratch(name, DType::BF16, {256, 512}, false)(S(0, 128));
}

const std::vector<Case>& cases() {
  using DT = DType;
  static const std::vector<Case> c = {
      {Opcode::NcMatmul,
       [](Kernel& k) -> Views {
         return {k.psum({128, 512}, DT::F32), k.sbuf({128, 128}, DT::BF16), k.sbuf({128, 512}, DT::BF16)};
       },
       [](const Views& v) { return nki::nc_matmul(v[0], v[1], v[2]); },
       [](const Views& v) { return nki::nc_matmul(v[0], v[1], v[2], {.accumulate = true}); }},
      {Opcode::NcMatmulMx,
       [](Kernel& k) -> Views {
         return {k.psum({128, 512}, DT::F32), k.sbuf({128, 128}, DT::FP8_E4M3FN_X4),
                 k.sbuf({128, 512}, DT::FP8_E4M3FN_X4), k.sbuf({128, 128}, DT::U8),
                 k.sbuf({128, 512}, DT::U8)};
       },
       [](const Views& v) { return nki::nc_matmul_mx(v[0], v[1], v[2], v[3], v[4]); },
       [](const Views& v) { return nki::nc_matmul_mx(v[0], v[1], v[2], v[3], v[4], {.accumulate = true}); }},
      {Opcode::QuantizeMx,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 128}, DT::FP8_E4M3FN_X4), k.sbuf({128, 512}, DT::BF16),
                 k.sbuf({128, 128}, DT::U8)};
       },
       [](const Views& v) { return nki::quantize_mx(v[0], v[1], v[2]); }},
      {Opcode::NcTranspose,
       [](Kernel& k) -> Views {
         return {k.psum({128, 128}, DT::BF16), k.sbuf({128, 128}, DT::BF16)};
       },
       [](const Views& v) { return nki::nc_transpose(v[0], v[1]); }},
      {Opcode::Activation,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 512}, DT::BF16), k.sbuf({128, 512}, DT::BF16), k.sbuf({128, 1}, DT::F32),
                 k.sbuf({128, 1}, DT::F32), k.sbuf({128, 1}, DT::F32)};
       },
       // dst, data, bias, reduce_res, scale
       [](const Views& v) { return nki::activation(v[0], nki::ActFunc::Exp, v[1], v[2], v[4], v[3]); }},
      {Opcode::TensorTensor,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 512}, DT::F32), k.sbuf({128, 512}, DT::F32), k.sbuf({128, 512}, DT::F32)};
       },
       [](const Views& v) { return nki::tensor_tensor(v[0], v[1], v[2], nki::AluOp::Add); }},
      {Opcode::TensorScalar,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 512}, DT::F32), k.sbuf({128, 512}, DT::F32), k.sbuf({128, 1}, DT::F32),
                 k.sbuf({128, 1}, DT::F32)};
       },
       [](const Views& v) {
         return nki::tensor_scalar(v[0], v[1], nki::AluOp::Multiply, v[2], false, nki::AluOp::Add, v[3]);
       }},
      {Opcode::TensorReduce,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 4}, DT::F32), k.sbuf({128, 4, 128}, DT::F32)};
       },
       [](const Views& v) { return nki::tensor_reduce(v[0], nki::AluOp::Add, v[1], {2}); }},
      {Opcode::TensorCopy,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 512}, DT::BF16), k.sbuf({128, 512}, DT::F32)};
       },
       [](const Views& v) { return nki::tensor_copy(v[0], v[1]); }},
      {Opcode::Memset,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 512}, DT::BF16)};
       },
       [](const Views& v) { return nki::memset(v[0], 1.0); }},
      {Opcode::Iota,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 8}, DT::I32)};
       },
       [](const Views& v) { return nki::iota(v[0], {1}); }},
      {Opcode::Select,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 512}, DT::F32), k.sbuf({128, 512}, DT::F32), k.sbuf({128, 512}, DT::F32),
                 k.sbuf({128, 512}, DT::F32)};
       },
       [](const Views& v) { return nki::select(v[0], v[1], v[2], v[3]); }},
      {Opcode::ScalarTensorTensor,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 512}, DT::F32), k.sbuf({128, 512}, DT::F32), k.sbuf({128, 1}, DT::F32),
                 k.sbuf({128, 512}, DT::F32)};
       },
       [](const Views& v) {
         return nki::scalar_tensor_tensor(v[0], v[1], nki::AluOp::Subtract, v[2], nki::AluOp::Multiply, v[3]);
       }},
      {Opcode::BnStats,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 6}, DT::F32), k.sbuf({128, 512}, DT::F32)};
       },
       [](const Views& v) { return nki::bn_stats(v[0], v[1]); }},
      {Opcode::BnAggr,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 2}, DT::F32), k.sbuf({128, 12}, DT::F32)};
       },
       [](const Views& v) { return nki::bn_aggr(v[0], v[1]); }},
      {Opcode::AffineSelect,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 512}, DT::F32), k.sbuf({128, 512}, DT::F32)};
       },
       [](const Views& v) {
         return nki::affine_select(v[0], {-1}, 0.0, 1.0, v[1], -9984.0, nki::AluOp::IsGe);
       }},
      {Opcode::Max8,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 8}, DT::F32), k.sbuf({128, 512}, DT::BF16)};
       },
       [](const Views& v) { return nki::max8(v[0], v[1]); }},
      {Opcode::NcFindIndex8,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 8}, DT::U32), k.sbuf({128, 512}, DT::F32), k.sbuf({128, 8}, DT::F32)};
       },
       [](const Views& v) { return nki::nc_find_index8(v[0], v[1], v[2]); }},
      {Opcode::NcMatchReplace8,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 512}, DT::F32), k.sbuf({128, 512}, DT::F32), k.sbuf({128, 8}, DT::F32),
                 k.sbuf({128, 8}, DT::U32)};
       },
       [](const Views& v) { return nki::nc_match_replace8(v[0], v[1], v[2], -1e30, v[3]); }},
      {Opcode::TensorScalarReduce,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 512}, DT::BF16), k.sbuf({128, 512}, DT::BF16), k.sbuf({128, 1}, DT::F32),
                 k.sbuf({128, 1}, DT::F32)};
       },
       [](const Views& v) {
         return nki::tensor_scalar_reduce(v[0], v[1], nki::AluOp::Multiply, v[2], nki::AluOp::Max, v[3]);
       }},
      {Opcode::TensorTensorScan,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 512}, DT::F32), k.sbuf({128, 512}, DT::F32), k.sbuf({128, 512}, DT::F32),
                 k.sbuf({128, 1}, DT::F32)};
       },
       [](const Views& v) {
         return nki::tensor_tensor_scan(v[0], v[1], v[2], v[3], nki::AluOp::Multiply, nki::AluOp::Add);
       }},
      {Opcode::TensorPartitionReduce,
       [](Kernel& k) -> Views {
         return {k.sbuf({1, 512}, DT::F32), k.sbuf({128, 512}, DT::F32)};
       },
       [](const Views& v) { return nki::tensor_partition_reduce(v[0], nki::AluOp::Add, v[1]); }},
      {Opcode::NcNGather,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 64}, DT::F32), k.sbuf({128, 512}, DT::F32), k.sbuf({128, 64}, DT::U32)};
       },
       [](const Views& v) { return nki::nc_n_gather(v[0], v[1], v[2]); }},
      {Opcode::NonzeroWithCount,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 65}, DT::I32), k.sbuf({128, 64}, DT::F32)};
       },
       [](const Views& v) { return nki::nonzero_with_count(v[0], v[1], 3, -1); }},
      {Opcode::NcStreamShuffle,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 64}, DT::F32), k.sbuf({128, 64}, DT::F32)};
       },
       [](const Views& v) { return nki::nc_stream_shuffle(v[0], v[1], std::vector<int>(32, 0)); }},
      {Opcode::DmaCopy,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 512}, DT::BF16), scratch_hbm(k, "x"), k.sbuf({128, 1}, DT::I32), View{}};
       },
       [](const Views& v) { return nki::dma_copy(v[0], v[1], {.vector_offset = v[2]}); },
       [](const Views& v) { return nki::dma_copy(v[0], v[1], {.vector_offset = v[2], .accumulate = true}); },
       3},
      {Opcode::DmaCopy,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 512}, DT::BF16), scratch_hbm(k, "x"), View{}, k.sbuf({1, 1}, DT::I32)};
       },
       [](const Views& v) { return nki::dma_copy(v[0], v[1], {.scalar_offset = v[3]}); },
       [](const Views& v) { return nki::dma_copy(v[0], v[1], {.accumulate = true, .scalar_offset = v[3]}); },
       2},
      {Opcode::DmaTranspose,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 128}, DT::BF16), scratch_hbm(k, "x")(all, S(0, 128)), k.sbuf({1, 1}, DT::I32),
                 View{}};
       },
       [](const Views& v) { return nki::dma_transpose(v[0], v[1], {.scalar_offset = v[2]}); }, nullptr, 3},
      {Opcode::DmaTranspose,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 128}, DT::BF16), scratch_hbm(k, "x")(all, S(0, 128)), View{},
                 k.sbuf({128, 1}, DT::I32)};
       },
       [](const Views& v) { return nki::dma_transpose(v[0], v[1], {.vector_offset = v[3]}); }, nullptr, 2},
      {Opcode::SendRecv,
       [](Kernel& k) -> Views {
         return {k.sbuf({128, 512}, DT::F32), k.sbuf({128, 512}, DT::F32)};
       },
       [](const Views& v) { return nki::sendrecv(v[1], v[0]); }},  // sendrecv(src, dst)
  };
  return c;
}

KernelBuild build(const KernelFn& fn) {
  return build_program(fn, {.limits = default_limits(isa::Generation::Trn3), .num_programs = 2});
}

bool same_ap(const isa::AccessPattern& a, const isa::AccessPattern& b) {
  bool same = a.space == b.space && a.dtype == b.dtype && a.tensor == b.tensor &&
              a.partition_start == b.partition_start && a.partitions == b.partitions &&
              a.partition_stride == b.partition_stride && a.offset_bytes == b.offset_bytes &&
              a.ndim == b.ndim;
  for (int d = 0; same && d < a.ndim; ++d) same = a.strides[d] == b.strides[d] && a.sizes[d] == b.sizes[d];
  return same;
}

bool waits_for(const isa::Instruction& in, const Event& ev) {
  for (const isa::SemWait& w : in.waits)
    if (w.sem == ev.sem && w.value >= ev.value) return true;
  return false;
}

// A DMA on SP after `v`'s last access: reads it into a fresh tile, or overwrites it from one.
InstRef probe(Kernel& k, const View& v, bool write) {
  View t = k.sbuf(v.shape(), v.dtype());
  return write ? nki::dma_copy(v, t, {.engine = Engine::SP}) : nki::dma_copy(t, v, {.engine = Engine::SP});
}

const isa::Instruction& at(const KernelBuild& b, const InstRef& r) {
  return b.program.streams[0][static_cast<int>(r.engine)][r.index];
}

}  // namespace

TEST_CASE("every nki op puts its operands in the table's slots and tracks them by the slots' roles",
          "[kernels][opcodes]") {
  std::set<Opcode> covered;
  for (const Case& c : cases()) {
    const isa::OpcodeInfo& info = isa::opcode_info(c.op);
    covered.insert(c.op);
    for (int slot = 0; slot < info.num_slots; ++slot)
      for (const bool write_probe : {false, true}) {
        if (slot == c.absent) continue;
        InstRef op_ref, probe_ref;
        Event recorded;
        std::vector<isa::AccessPattern> aps;
        const KernelBuild b = build([&](Kernel& k) {
          const Views v = c.operands(k);
          REQUIRE(v.size() == info.num_slots);
          const InstRef r = c.call(v);
          const InstRef p = probe(k, v[slot], write_probe);
          if (k.program_id() != 0) return;
          op_ref = r;
          probe_ref = p;
          for (const View& x : v) aps.push_back(x.ap());
          // sendrecv: this core's dst is written by the peer's transfer, which counts on this core's
          // sendrecv-done semaphore (nki.h); every other access is recorded with the op's completion.
          recorded = c.op == Opcode::SendRecv && slot == 0 ? Event{kSendRecvDoneSem, 1} : r.done;
          // A slot the PE's LoadStationary reads is released when the stationary is latched, by the first
          // LoadStationary's count (deps.h kPeLoadStationarySem), not at the op's completion.
          const bool stationary =
              r.engine == Engine::PE && slot > 0 && (slot == 1 || (c.op == Opcode::NcMatmulMx && slot == 3));
          if (stationary) recorded = Event{kPeLoadStationarySem, 1};
        });
        const isa::Instruction& in = at(b, op_ref);
        REQUIRE(in.op == c.op);
        for (int s = 0; s < info.num_slots; ++s) {
          INFO(info.name << " slot " << s << " " << info.slots[s].name);
          CHECK(in.ops[s].present() == (s != c.absent));
          if (s != c.absent) CHECK(same_ap(in.ops[s], aps[s]));
        }
        INFO(info.name << ": " << (write_probe ? "overwriting " : "reading ") << info.slots[slot].name);
        // RAW only after a write; WAR / WAW after any access.
        CHECK(waits_for(at(b, probe_ref), recorded) == (write_probe || info.writes(slot)));
      }
  }
  // Every opcode with operands has its nki op here.
  for (const isa::OpcodeInfo& info : isa::opcode_table())
    if (info.num_slots > 0) CHECK(covered.count(info.op) == 1);
}

TEST_CASE("an accumulate option adds the read of dst the table's also_read_if names", "[kernels][opcodes]") {
  int accumulating = 0;
  for (const Case& c : cases()) {
    const isa::OpcodeInfo& info = isa::opcode_info(c.op);
    if (info.num_slots == 0 || info.slots[0].also_read_if == 0) {
      CHECK(c.accumulate == nullptr);
      continue;
    }
    ++accumulating;
    INFO(info.name);
    REQUIRE(c.accumulate != nullptr);
    // Records in dst's memory after the op: the accumulating op keeps a read record next to the write.
    size_t records[2] = {0, 0};
    uint32_t flags = 0;
    InstRef ref;
    for (const int acc : {0, 1}) {
      const KernelBuild b = build([&](Kernel& k) {
        const Views v = c.operands(k);
        const InstRef r = acc ? c.accumulate(v) : c.call(v);
        if (k.program_id() != 0) return;
        records[acc] = k.tracker(v[0].space()).live_records();
        ref = r;
      });
      flags = at(b, ref).flags;
    }
    CHECK((flags & info.slots[0].also_read_if) != 0);  // the accumulate build's flags
    CHECK(records[1] > records[0]);
  }
  CHECK(accumulating == 4);  // nc_matmul, nc_matmul_mx, dma_copy (with vector_offset, with scalar_offset)
}

TEST_CASE("core_barrier has no operands and tracks its data as written", "[kernels][opcodes]") {
  CHECK(isa::opcode_info(Opcode::CoreBarrier).num_slots == 0);
  InstRef barrier, read;
  const KernelBuild b = build([&](Kernel& k) {
    View t = k.sbuf({128, 512}, DType::F32);
    const InstRef r = nki::core_barrier(t);
    const InstRef p = probe(k, t, false);
    if (k.program_id() != 0) return;
    barrier = r;
    read = p;
  });
  CHECK(at(b, barrier).nops == 0);
  CHECK(waits_for(at(b, read), barrier.done));
}

TEST_CASE("indirect DMA tracks the indexed HBM side as whole rows", "[kernels][opcodes]") {
  // The other half of the tensor's rows: a gather or scatter may touch them, a direct copy does not.
  const auto other_rows_wait = [](bool indirect, bool scatter) {
    InstRef dma, probe_ref;
    const KernelBuild b = build([&](Kernel& k) {
      View x = k.scratch("x", DType::BF16, {256, 512}, false);
      View t = k.sbuf({128, 512}, DType::BF16);
      View idx = k.sbuf({128, 1}, DType::I32);
      const View none;
      const nki::DmaOpts opts{.vector_offset = indirect ? idx : none,
                              .indirect_dst = indirect && scatter,
                              .engine = Engine::POOL};
      const InstRef r = scatter ? nki::dma_copy(x(S(0, 128)), t, opts) : nki::dma_copy(t, x(S(0, 128)), opts);
      // A gather reads x (probe by overwriting); a scatter writes it (probe by reading).
      const InstRef p = probe(k, x(S(128, 256)), !scatter);
      if (k.program_id() != 0) return;
      dma = r;
      probe_ref = p;
    });
    return waits_for(at(b, probe_ref), dma.done);
  };
  CHECK_FALSE(other_rows_wait(false, false));
  CHECK(other_rows_wait(true, false));
  CHECK_FALSE(other_rows_wait(false, true));
  CHECK(other_rows_wait(true, true));
}
