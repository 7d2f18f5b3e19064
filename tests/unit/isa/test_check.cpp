// Hardware rule checks: every rule has a violating instruction and the exact message
// "<opcode> on <engine>: <rule>: <details>".
#include <catch2/catch.hpp>

#include "sim/base/error.h"
#include "sim/isa/semantics.h"
#include "tests/unit/isa/isa_test_util.h"

using namespace trnsim;
using namespace trnsim::isa;
using namespace trnsim::isa::test;

namespace {

Program prog(Generation g = Generation::Trn2) {
  Program p;
  p.generation = g;
  p.tensors.push_back(TensorDecl{"x", DType::F32, {4, 4}});
  return p;
}

void expect_rule(const Instruction& in, const std::string& msg, const Limits& l = trn2()) {
  const Program p = prog(l.generation);
  CHECK_THROWS_MATCHES(check(in, p, l), RuleError, Catch::Message(msg));
}

Instruction copy_dve(AccessPattern dst, AccessPattern src) {
  return make(Opcode::TensorCopy, Engine::DVE, {dst, src});
}
AccessPattern f32(uint32_t start, uint32_t n, int64_t off = 0, uint32_t f = 4) {
  return sbuf(start, n, off, DType::F32, {{1, f}});
}
Instruction matmul(uint32_t k = 128, uint32_t m = 128, uint32_t n = 512, int64_t dst_off = 0) {
  return make(Opcode::NcMatmul, Engine::PE,
              {psum(0, m > 128 ? 128 : m, dst_off, DType::F32, {{1, n}}),
               sbuf(0, k, 0, DType::BF16, {{1, m}}), sbuf(0, k, 4096, DType::BF16, {{1, n}})});
}
Instruction matmul_mx(uint32_t k = 128) {
  Instruction in =
      make(Opcode::NcMatmulMx, Engine::PE,
           {psum(0, 128, 0, DType::F32, {{1, 512}}), sbuf(0, k, 0, DType::FP8_E4M3FN_X4, {{1, 128}}),
            sbuf(0, k, 1024, DType::FP8_E4M3FN_X4, {{1, 512}}), sbuf(0, k, 4096, DType::E8M0, {{1, 128}}),
            sbuf(0, k, 8192, DType::E8M0, {{1, 512}})});
  return in;
}
Instruction quantize(DType src = DType::BF16) {
  return make(Opcode::QuantizeMx, Engine::DVE,
              {sbuf(0, 32, 0, DType::FP8_E4M3FN_X4, {{1, 8}}), sbuf(0, 32, 64, src, {{1, 32}}),
               sbuf(0, 32, 256, DType::E8M0, {{1, 8}})});
}

}  // namespace

TEST_CASE("valid instructions pass", "[isa][check]") {
  const Program p2 = prog(), p3 = prog(Generation::Trn3);
  CHECK_NOTHROW(check(matmul(), p2, trn2()));
  CHECK_NOTHROW(check(matmul(128, 128, 1024), p3, trn3()));  // Trn3 large N spans two banks
  CHECK_NOTHROW(check(matmul_mx(), p3, trn3()));
  CHECK_NOTHROW(check(quantize(), p3, trn3()));
  Instruction act = make(Opcode::Activation, Engine::POOL, {f32(0, 128), f32(0, 128, 64)});
  CHECK_NOTHROW(check(act, p3, trn3()));
  CHECK_NOTHROW(check(copy_dve(f32(64, 64), psum(0, 64, 0, DType::F32, {{1, 4}})), p2, trn2()));
  CHECK_NOTHROW(check(copy_dve(f32(96, 32), f32(32, 32)), p2, trn2()));
}

TEST_CASE("partition start and count rules", "[isa][check]") {
  expect_rule(
      copy_dve(f32(32, 65), f32(0, 65)),
      "tensor_copy on DVE: partition start: dst spans 65 partitions from 32 (more than 64 must start at 0)");
  expect_rule(
      copy_dve(f32(0, 40), f32(32, 40)),
      "tensor_copy on DVE: partition start: src spans 40 partitions from 32 (33-64 must start at 0 or 64)");
  expect_rule(
      copy_dve(f32(16, 8), f32(0, 8)),
      "tensor_copy on DVE: partition start: dst spans 8 partitions from 16 (up to 32 must start at 0, 32, "
      "64 or 96)");
  expect_rule(copy_dve(f32(0, 129), f32(0, 129)),
              "tensor_copy on DVE: partition count: dst spans partitions [0, 129) (at most 128 partitions)");
  expect_rule(copy_dve(f32(0, 64), f32(96, 64)),
              "tensor_copy on DVE: partition count: src spans partitions [96, 160) (at most 128 partitions)");
  // The start rule is the compute engines'; a DMA starts at any partition (a masked store of rows 3..127, a
  // load into partitions 100..127), within the partition count.
  const Program p = prog();
  CHECK_NOTHROW(check(make(Opcode::DmaCopy, Engine::SP, {hbm(0, 0, DType::F32, 4, 4, {{1, 4}}), f32(3, 4)}),
                      p, trn2()));
  CHECK_NOTHROW(check(make(Opcode::DmaCopy, Engine::SP, {f32(100, 28), f32(3, 28, 64)}), p, trn2()));
  expect_rule(make(Opcode::DmaCopy, Engine::SP, {f32(100, 29), f32(0, 29, 64)}),
              "dma_copy on SP: partition count: dst spans partitions [100, 129) (at most 128 partitions)");
}

TEST_CASE("free dims: at most 4, no empty dim", "[isa][check]") {
  Instruction in = copy_dve(f32(0, 1), f32(0, 1));
  in.ops[0].ndim = 5;
  expect_rule(in, "tensor_copy on DVE: free dims: dst has 5 free dims (at most 4)");
  in = copy_dve(f32(0, 1), sbuf(0, 1, 0, DType::F32, {{4, 1}, {1, 0}}));
  expect_rule(in, "tensor_copy on DVE: free dims: src dim 1 has size 0");
}

TEST_CASE("SBUF, PSUM and HBM bounds", "[isa][check]") {
  expect_rule(
      copy_dve(f32(0, 1, 229372, 2), f32(0, 1, 0, 2)),
      "tensor_copy on DVE: SBUF bounds: dst bytes [229372, 229380) outside the 229376 bytes of a partition");
  expect_rule(copy_dve(f32(0, 1, 0, 2), sbuf(0, 1, 0, DType::F32, {{-1, 2}})),
              "tensor_copy on DVE: SBUF bounds: src bytes [-4, 4) outside the 229376 bytes of a partition");
  expect_rule(
      copy_dve(psum(0, 1, 16380, DType::F32, {{1, 2}}), f32(0, 1, 0, 2)),
      "tensor_copy on DVE: PSUM bounds: dst bytes [16380, 16388) outside the 16384 bytes of a partition");
  Instruction dma = make(Opcode::DmaCopy, Engine::SP, {f32(0, 5), hbm(0, 0, DType::F32, 4, 5, {{1, 4}})});
  expect_rule(dma, "dma_copy on SP: HBM bounds: src bytes [0, 80) outside tensor 'x' of 64 bytes");
  // execute() is safe without check(): the same rule comes back as an error, not a crash.
  Program p = prog();
  Limits l = trn2();
  MachineState s = make_machine_state(p, l);
  CHECK_THROWS_MATCHES(
      execute(dma, 0, p, l, s), RuleError,
      Catch::Message("dma_copy on SP: HBM bounds: src bytes [0, 80) outside tensor 'x' of 64 bytes"));
  CHECK_THROWS_MATCHES(execute(copy_dve(f32(0, 1, 229372, 2), f32(0, 1, 0, 2)), 0, p, l, s), RuleError,
                       Catch::Message("tensor_copy on DVE: SBUF bounds: dst bytes [229372, 229380) outside "
                                      "the 229376 bytes of a partition"));
}

TEST_CASE("engine connectivity", "[isa][check]") {
  Instruction mm = matmul();
  mm.ops[2].space = MemSpace::PSUM;
  mm.ops[2].offset_bytes = 0;
  mm.ops[2].sizes[0] = 8;
  expect_rule(mm, "nc_matmul on PE: connectivity: PE cannot read PSUM (moving)");
  mm = matmul();
  mm.ops[0].space = MemSpace::SBUF;
  expect_rule(mm, "nc_matmul on PE: connectivity: PE cannot write SBUF (dst)");
  Instruction pool = make(Opcode::TensorCopy, Engine::POOL, {f32(0, 1), psum(0, 1, 0, DType::F32, {{1, 4}})});
  expect_rule(pool, "tensor_copy on POOL: connectivity: POOL cannot read PSUM (src)");
  pool = make(Opcode::Memset, Engine::POOL, {psum(0, 1, 0, DType::F32, {{1, 4}})});
  expect_rule(pool, "memset on POOL: connectivity: POOL cannot write PSUM (dst)");
  expect_rule(copy_dve(f32(0, 4), hbm(0, 0, DType::F32, 4, 4, {{1, 4}})),
              "tensor_copy on DVE: connectivity: DVE cannot read HBM (src)");
  Instruction tr = make(Opcode::DmaTranspose, Engine::SP,
                        {psum(0, 4, 0, DType::BF16, {{1, 2}}), sbuf(0, 2, 0, DType::BF16, {{1, 4}})});
  expect_rule(tr, "dma_transpose on SP: connectivity: dma_transpose writes SBUF only (dst)");
  Instruction sr = make(Opcode::SendRecv, Engine::POOL, {f32(0, 4), hbm(0, 0, DType::F32, 4, 4, {{1, 4}})});
  expect_rule(sr,
              "sendrecv on POOL: connectivity: sendrecv moves SBUF to SBUF (src and dst must be in SBUF)");
  Instruction ind =
      make(Opcode::DmaCopy, Engine::POOL, {f32(0, 4), f32(0, 4, 64), sbuf(0, 4, 128, DType::I32, {{1, 1}})});
  expect_rule(
      ind, "dma_copy on POOL: connectivity: indirect DMA indexes rows of an HBM tensor; src is not in HBM");
  ind.ops[1] = hbm(0, 0, DType::F32, 4, 4, {{1, 4}});
  ind.ops[2].space = MemSpace::PSUM;
  expect_rule(ind, "dma_copy on POOL: connectivity: vector_offset must be in SBUF");
}

TEST_CASE("no two PSUM inputs; PSUM accumulation groups stay in one bank", "[isa][check]") {
  Instruction tt =
      make(Opcode::TensorTensor, Engine::DVE,
           {f32(0, 1), psum(0, 1, 0, DType::F32, {{1, 4}}), psum(0, 1, 2048, DType::F32, {{1, 4}})});
  expect_rule(tt,
              "tensor_tensor on DVE: PSUM inputs: data1 and data2 are both in PSUM (at most one PSUM input)");
  expect_rule(matmul(128, 128, 512, 1024),
              "nc_matmul on PE: PSUM bank: dst bytes [1024, 3072) cross a 2048-byte PSUM bank boundary");
  expect_rule(matmul(128, 128, 256, 1024 + 512),
              "nc_matmul on PE: PSUM bank: dst bytes [1536, 2560) cross a 2048-byte PSUM bank boundary",
              trn3());
}

TEST_CASE("matmul tile limits", "[isa][check]") {
  expect_rule(matmul(128, 129), "nc_matmul on PE: matmul tile: M = 129 stationary columns (at most 128)");
  expect_rule(matmul(128, 128, 513), "nc_matmul on PE: matmul tile: N = 513 moving columns (at most 512)");
  Instruction big = matmul(128, 128, 4096);
  big.ops[2].sizes[0] = 4097;  // the N limit is checked before dst's shape
  expect_rule(big, "nc_matmul on PE: matmul tile: N = 4097 moving columns (at most 4096)", trn3());
  Instruction mm = matmul();
  mm.ops[2].partitions = 64;
  expect_rule(mm, "nc_matmul on PE: matmul tile: stationary has 128 partitions but moving has 64");
  expect_rule(matmul_mx(48),
              "nc_matmul_mx on PE: matmul tile: K = 48 partitions (a multiple of 32, at most 128)", trn3());
  Instruction t = make(Opcode::NcTranspose, Engine::DVE, {f32(0, 8, 0, 33), f32(0, 33, 256, 8)});
  t.ops[1].partitions = 33;
  t.ops[0] = f32(0, 8, 0, 33);
  expect_rule(t, "nc_transpose on DVE: transpose tile: data is [33, 8] (at most 32x32 on DVE)");
}

TEST_CASE("dtype limits", "[isa][check]") {
  Instruction mm = matmul();
  mm.ops[0].dtype = DType::BF16;
  expect_rule(mm, "nc_matmul on PE: dtype: dst in PSUM must be float32 on Trn2, got bfloat16");
  mm = matmul();
  mm.flags = kDoubleRow;
  expect_rule(mm, "nc_matmul on PE: dtype: double_row needs float8 operands, stationary is bfloat16");
  mm.flags = 0;
  mm.ops[2].dtype = DType::I32;
  expect_rule(mm, "nc_matmul on PE: dtype: moving must be float32, bfloat16, float16 or float8, got int32");
  Instruction tr = make(Opcode::DmaTranspose, Engine::SP, {f32(0, 4, 0, 2), f32(0, 2, 64, 4)});
  tr.dge = DgeMode::Hwdge;
  expect_rule(tr,
              "dma_transpose on SP: dtype: a hardware-DGE dma_transpose moves 2-byte dtypes unchanged: src "
              "float32, dst float32");
  tr.dge = DgeMode::None;
  tr.ops[0].dtype = tr.ops[1].dtype = DType::FP8_E4M3FN;
  expect_rule(
      tr,
      "dma_transpose on SP: dtype: dma_transpose moves 2- or 4-byte dtypes unchanged: src float8_e4m3fn, dst "
      "float8_e4m3fn");
  expect_rule(quantize(DType::F32), "quantize_mx on DVE: dtype: src must be bfloat16 or float16, got float32",
              trn3());
  Instruction cast =
      make(Opcode::DmaCopy, Engine::SP,
           {sbuf(0, 1, 0, DType::FP8_E4M3FN_X4, {{1, 4}}), hbm(0, 0, DType::F32, 4, 1, {{1, 4}})});
  expect_rule(
      cast,
      "dma_copy on SP: dtype: cannot cast src float32 to dst float8_e4m3fn_x4 (MX x4 dtypes are never cast)");
  Instruction ind =
      make(Opcode::DmaCopy, Engine::POOL,
           {f32(0, 4), hbm(0, 0, DType::F32, 4, 4, {{1, 4}}), sbuf(0, 4, 128, DType::F32, {{1, 1}})});
  expect_rule(ind, "dma_copy on POOL: dtype: vector_offset must be int32 or uint32, got float32");
}

TEST_CASE("generation and engine per opcode", "[isa][check]") {
  expect_rule(matmul_mx(), "nc_matmul_mx on PE: generation: nc_matmul_mx exists on Trn3 only (this is Trn2)");
  expect_rule(quantize(), "quantize_mx on DVE: generation: quantize_mx exists on Trn3 only (this is Trn2)");
  Instruction mm = matmul();
  mm.engine = Engine::DVE;
  expect_rule(mm, "nc_matmul on DVE: engine: nc_matmul runs on PE");
  expect_rule(make(Opcode::Activation, Engine::POOL, {f32(0, 1), f32(0, 1, 64)}),
              "activation on POOL: engine: activation runs on ACT");
  expect_rule(make(Opcode::TensorTensor, Engine::ACT, {f32(0, 1), f32(0, 1, 64), f32(0, 1, 128)}),
              "tensor_tensor on ACT: engine: tensor_tensor runs on DVE/POOL");
  expect_rule(make(Opcode::Iota, Engine::DVE, {f32(0, 1)}), "iota on DVE: engine: iota runs on POOL");
  Instruction q = quantize();
  q.engine = Engine::ACT;
  expect_rule(q, "quantize_mx on ACT: engine: quantize_mx runs on DVE", trn3());
}

TEST_CASE("element counts, shapes, operands, semaphores, DMA queues, scale offsets", "[isa][check]") {
  expect_rule(make(Opcode::DmaCopy, Engine::SP, {f32(0, 2), f32(0, 1, 64, 7)}),
              "dma_copy on SP: element count: src has 7 elements, dst has 8");
  expect_rule(make(Opcode::SendRecv, Engine::POOL, {f32(0, 2), f32(0, 1, 64, 7)}),
              "sendrecv on POOL: element count: src has 7 elements, dst has 8");
  expect_rule(make(Opcode::TensorTensor, Engine::DVE, {f32(0, 2), f32(0, 2, 64), f32(0, 2, 128, 3)}),
              "tensor_tensor on DVE: shape: dst is [2, 4] but data2 is [2, 3]");
  Instruction mm = matmul();
  mm.ops[2] = AccessPattern{};
  expect_rule(mm, "nc_matmul on PE: operand missing: moving");
  Instruction act = make(Opcode::Activation, Engine::ACT, {f32(0, 2), f32(0, 2, 64)});
  act.flags = kBiasVector;
  expect_rule(act, "activation on ACT: operand missing: bias");
  Instruction c = copy_dve(f32(0, 1), f32(0, 1, 64));
  c.waits.push_back(SemWait{64, 1});
  expect_rule(c, "tensor_copy on DVE: semaphore: wait on S[64] but the core has 64 semaphores");
  c.waits.clear();
  c.updates.push_back(SemUpdate{70, 1, true});
  expect_rule(c, "tensor_copy on DVE: semaphore: update of S[70] but the core has 64 semaphores");
  Instruction d = make(Opcode::DmaCopy, Engine::SP, {f32(0, 1), f32(0, 1, 64)});
  d.dma_queue = 16;
  expect_rule(d, "dma_copy on SP: dma queue: queue 16 but the core has 16 DMA queues");
  Instruction q = quantize();
  q.scale_offset = 3;
  expect_rule(q, "quantize_mx on DVE: scale offset: scale_offset 3 (must be 0, 4, 8 or 12)", trn3());
  q.scale_offset = 4;
  q.ops[2].partitions = 4;
  expect_rule(q,
              "quantize_mx on DVE: shape: dst_scale must have at least 8 partitions (its rows 0..7 hold the "
              "scales) and exactly 8 elements per partition (dst's), got [4, 8]",
              trn3());
  // Too many columns: "exactly", not "at least" (a tester read "16 columns" as a minimum).
  q.ops[2].partitions = 8;
  q.ops[2].sizes[0] = 16;
  expect_rule(q,
              "quantize_mx on DVE: shape: dst_scale must have at least 8 partitions (its rows 0..7 hold the "
              "scales) and exactly 8 elements per partition (dst's), got [8, 16]",
              trn3());
}

// NKI ISA docs, nki.isa.tensor_scalar / tensor_tensor / tensor_reduce: bitvec and arithmetic operators do not
// mix, bitvec operators run on DVE only and need integer dtypes.
TEST_CASE("bitvec operator rules", "[isa][check]") {
  const Program p = prog();
  auto i32 = [](int64_t off) { return sbuf(0, 4, off, DType::I32, {{1, 4}}); };
  auto ts = [&](Engine e, AluOp op0, AluOp op1, DType t = DType::I32) {
    Instruction in = make(Opcode::TensorScalar, e, {sbuf(0, 4, 0, t, {{1, 4}}), sbuf(0, 4, 64, t, {{1, 4}})});
    in.alu0 = op0;
    in.alu1 = op1;
    return in;
  };
  // Legal: both bitvec on DVE with int dtypes; arithmetic anywhere on any dtype; a bypassed op1.
  CHECK_NOTHROW(check(ts(Engine::DVE, AluOp::ShiftRight, AluOp::BitwiseAnd), p, trn2()));
  CHECK_NOTHROW(check(ts(Engine::DVE, AluOp::BitwiseAnd, AluOp::Bypass), p, trn2()));
  CHECK_NOTHROW(check(ts(Engine::ACT, AluOp::Add, AluOp::Min), p, trn2()));
  CHECK_NOTHROW(check(ts(Engine::POOL, AluOp::Add, AluOp::Bypass, DType::F32), p, trn2()));
  expect_rule(ts(Engine::DVE, AluOp::ShiftRight, AluOp::Min),
              "tensor_scalar on DVE: operator types: op0 right_shift is bitvec but op1 minimum is arithmetic "
              "(both must be bitvec or both arithmetic)");
  expect_rule(
      ts(Engine::ACT, AluOp::Add, AluOp::BitwiseAnd),
      "tensor_scalar on ACT: operator types: op0 add is arithmetic but op1 bitwise_and is bitvec (both "
      "must be bitvec or both arithmetic)");
  expect_rule(
      ts(Engine::ACT, AluOp::BitwiseAnd, AluOp::Bypass),
      "tensor_scalar on ACT: bitvec engine: bitvec operator bitwise_and runs on the Vector Engine (DVE) "
      "only");
  expect_rule(
      ts(Engine::POOL, AluOp::ShiftLeft, AluOp::BitwiseOr),
      "tensor_scalar on POOL: bitvec engine: bitvec operator left_shift runs on the Vector Engine (DVE) "
      "only");
  Instruction f = ts(Engine::DVE, AluOp::ShiftRight, AluOp::Bypass);
  f.ops[1].dtype = DType::F32;
  expect_rule(f,
              "tensor_scalar on DVE: bitvec dtype: bitvec operator right_shift needs integer dtypes (bit "
              "patterns), data is float32");
  f = ts(Engine::DVE, AluOp::BitwiseXor, AluOp::Bypass, DType::BF16);
  expect_rule(f,
              "tensor_scalar on DVE: bitvec dtype: bitvec operator bitwise_xor needs integer dtypes (bit "
              "patterns), dst is bfloat16");
  // A vector operand is an input too.
  f = ts(Engine::DVE, AluOp::BitwiseAnd, AluOp::Bypass);
  f.flags = kOperand0Vector;
  f.ops[2] = sbuf(0, 4, 128, DType::F32, {{1, 1}});
  expect_rule(f,
              "tensor_scalar on DVE: bitvec dtype: bitvec operator bitwise_and needs integer dtypes (bit "
              "patterns), operand0 is float32");
  Instruction tt = make(Opcode::TensorTensor, Engine::POOL, {i32(0), i32(64), i32(128)});
  tt.alu0 = AluOp::BitwiseOr;
  expect_rule(
      tt,
      "tensor_tensor on POOL: bitvec engine: bitvec operator bitwise_or runs on the Vector Engine (DVE) "
      "only");
  tt.engine = Engine::DVE;
  CHECK_NOTHROW(check(tt, p, trn2()));
  tt.ops[2].dtype = DType::F32;
  expect_rule(tt,
              "tensor_tensor on DVE: bitvec dtype: bitvec operator bitwise_or needs integer dtypes (bit "
              "patterns), data2 is float32");
  Instruction red = make(Opcode::TensorReduce, Engine::DVE,
                         {sbuf(0, 4, 0, DType::F32, {{1, 1}}), sbuf(0, 4, 64, DType::I32, {{1, 4}})});
  red.alu0 = AluOp::BitwiseAnd;
  expect_rule(red,
              "tensor_reduce on DVE: bitvec dtype: bitvec operator bitwise_and needs integer dtypes (bit "
              "patterns), dst is float32");
  red.ops[0].dtype = DType::I32;
  CHECK_NOTHROW(check(red, p, trn2()));
}

TEST_CASE("work_of counts FLOPs and bytes per memory", "[isa]") {
  const Program p = prog();
  const Work w = work_of(matmul(), p);
  CHECK(w.flops == 2ull * 128 * 128 * 512);
  CHECK(w.bytes_read == 128ull * 128 * 2 + 128ull * 512 * 2);
  CHECK(w.bytes_written == 128ull * 512 * 4);
  CHECK(w.hbm_bytes_read == 0);
  const Work d =
      work_of(make(Opcode::DmaCopy, Engine::SP, {f32(0, 4), hbm(0, 0, DType::F32, 4, 4, {{1, 4}})}), p);
  CHECK(d.hbm_bytes_read == 64);
  CHECK(d.bytes_written == 64);
  CHECK(d.flops == 0);
}

TEST_CASE("max8, nc_find_index8, nc_match_replace8: NKI's shape and dtype rules", "[isa][check][top8]") {
  const auto max8 = [](uint32_t n, uint32_t out = 8, DType src = DType::F32) {
    return make(Opcode::Max8, Engine::DVE,
                {sbuf(0, 4, 0, DType::F32, {{1, out}}), sbuf(0, 4, 64, src, {{1, n}})});
  };
  CHECK_NOTHROW(check(max8(8), prog(), trn2()));
  CHECK_NOTHROW(check(max8(16384), prog(), trn2()));
  expect_rule(max8(7), "max8 on DVE: shape: src has 7 elements per partition; max8 reads 8 to 16384");
  expect_rule(max8(16385), "max8 on DVE: shape: src has 16385 elements per partition; max8 reads 8 to 16384");
  expect_rule(max8(16, 4), "max8 on DVE: shape: dst must be [4, 8] (8 per partition), got [4, 4]");
  expect_rule(max8(16, 8, DType::FP8_E4M3FN_X4),
              "max8 on DVE: dtype: src is float8_e4m3fn_x4: max8 compares values, and an x4 element is four");
  expect_rule(make(Opcode::Max8, Engine::ACT, {f32(0, 4, 0, 8), f32(0, 4, 64, 16)}),
              "max8 on ACT: engine: max8 runs on DVE");

  const auto find = [](DType idx, uint32_t vals = 8) {
    return make(Opcode::NcFindIndex8, Engine::DVE,
                {sbuf(0, 4, 0, idx, {{1, 8}}), f32(0, 4, 64, 32), sbuf(0, 4, 256, DType::F32, {{1, vals}})});
  };
  CHECK_NOTHROW(check(find(DType::U16), prog(), trn2()));
  CHECK_NOTHROW(check(find(DType::U32), prog(), trn2()));
  expect_rule(find(DType::I32),
              "nc_find_index8 on DVE: dtype: dst must be uint16 or uint32 (indices), got int32");
  expect_rule(find(DType::U32, 4),
              "nc_find_index8 on DVE: shape: vals must be [4, 8] (8 per partition), got [4, 4]");

  auto replace =
      make(Opcode::NcMatchReplace8, Engine::DVE,
           {f32(0, 4, 0, 32), f32(0, 4, 0, 32), f32(0, 4, 256, 8), sbuf(0, 4, 512, DType::F32, {{1, 8}})});
  expect_rule(replace,
              "nc_match_replace8 on DVE: dtype: dst_idx must be uint16 or uint32 (indices), got float32");
  replace.ops[3] = {};
  CHECK_NOTHROW(check(replace, prog(), trn2()));
  replace.ops[0] = f32(0, 4, 1024, 16);
  expect_rule(replace, "nc_match_replace8 on DVE: shape: dst is [4, 16] but data is [4, 32]");
}

TEST_CASE("tensor_scalar_reduce: arithmetic op0, a reduction reduce_op, a [P, 1] reduce_res",
          "[isa][check]") {
  Instruction in = make(Opcode::TensorScalarReduce, Engine::DVE,
                        {f32(0, 4, 0, 16), f32(0, 4, 64, 16), {}, f32(0, 4, 256, 1)});
  in.alu0 = AluOp::Multiply;
  in.alu1 = AluOp::Max;
  CHECK_NOTHROW(check(in, prog(), trn2()));
  in.alu1 = AluOp::Divide;
  expect_rule(in,
              "tensor_scalar_reduce on DVE: op: reduce_op divide must be add, subtract, multiply, maximum or "
              "minimum");
  in.alu1 = AluOp::Add;
  in.alu0 = AluOp::BitwiseAnd;
  expect_rule(in,
              "tensor_scalar_reduce on DVE: op: op0 bitwise_and must be an arithmetic operator (NKI: bitvec "
              "operators are not supported)");
  in.alu0 = AluOp::Multiply;
  in.ops[3] = f32(0, 4, 256, 2);
  expect_rule(in, "tensor_scalar_reduce on DVE: shape: reduce_res must be [4, 1], got [4, 2]");
  in.ops[3] = {};
  expect_rule(in, "tensor_scalar_reduce on DVE: operand missing: reduce_res");
  in.ops[3] = f32(0, 4, 256, 1);
  in.engine = Engine::POOL;
  expect_rule(in, "tensor_scalar_reduce on POOL: engine: tensor_scalar_reduce runs on DVE");
}

TEST_CASE("tensor_tensor_scan and tensor_partition_reduce: NKI's operand rules", "[isa][check]") {
  Instruction scan = make(Opcode::TensorTensorScan, Engine::DVE,
                          {f32(0, 4, 0, 16), f32(0, 4, 64, 16), f32(0, 4, 128, 16), f32(0, 4, 256, 1)});
  scan.alu0 = AluOp::Multiply;
  scan.alu1 = AluOp::Add;
  scan.flags = kOperand0Vector;
  CHECK_NOTHROW(check(scan, prog(), trn2()));
  scan.ops[3] = f32(0, 4, 256, 2);
  expect_rule(scan, "tensor_tensor_scan on DVE: shape: initial must be [4, 1], got [4, 2]");
  scan.ops[3] = f32(0, 4, 256, 1);
  scan.alu1 = AluOp::BitwiseXor;
  expect_rule(scan,
              "tensor_tensor_scan on DVE: op: op0 multiply and op1 bitwise_xor must be binary arithmetic "
              "operators");
  scan.alu1 = AluOp::Add;
  scan.ops[2] = f32(0, 4, 128, 8);
  expect_rule(scan, "tensor_tensor_scan on DVE: shape: dst is [4, 16] but data1 is [4, 8]");
  scan.engine = Engine::POOL;
  scan.ops[2] = f32(0, 4, 128, 16);
  expect_rule(scan, "tensor_tensor_scan on POOL: engine: tensor_tensor_scan runs on DVE");

  Instruction pr = make(Opcode::TensorPartitionReduce, Engine::POOL, {f32(0, 1, 0, 16), f32(0, 4, 64, 16)});
  pr.alu0 = AluOp::Add;
  CHECK_NOTHROW(check(pr, prog(), trn2()));
  pr.alu0 = AluOp::Min;
  expect_rule(
      pr,
      "tensor_partition_reduce on POOL: op: op minimum must be add, maximum, bitwise_or, bitwise_and or "
      "bitwise_xor");
  pr.alu0 = AluOp::BitwiseOr;
  expect_rule(
      pr,
      "tensor_partition_reduce on POOL: bitvec dtype: bitvec operator bitwise_or needs integer dtypes "
      "(bit patterns), dst is float32");
  pr.alu0 = AluOp::Max;
  pr.ops[0] = f32(0, 2, 0, 16);
  expect_rule(pr,
              "tensor_partition_reduce on POOL: shape: dst must be [1, 16] (data's free elements on one "
              "partition), got [2, 16]");
}

TEST_CASE("nc_n_gather: dst of data's dtype, uint32 indices of dst's shape", "[isa][check]") {
  Instruction g = make(Opcode::NcNGather, Engine::POOL,
                       {f32(0, 4, 0, 8), f32(0, 4, 64, 32), sbuf(0, 4, 256, DType::U32, {{1, 8}})});
  CHECK_NOTHROW(check(g, prog(), trn2()));
  g.ops[2] = sbuf(0, 4, 256, DType::U16, {{1, 8}});
  expect_rule(g, "nc_n_gather on POOL: dtype: indices must be uint32, got uint16");
  g.ops[2] = sbuf(0, 4, 256, DType::U32, {{1, 4}});
  expect_rule(g, "nc_n_gather on POOL: shape: dst is [4, 8] but indices is [4, 4]");
  g.ops[2] = sbuf(0, 4, 256, DType::U32, {{1, 8}});
  g.ops[0] = sbuf(0, 4, 0, DType::BF16, {{1, 8}});
  expect_rule(g,
              "nc_n_gather on POOL: dtype: dst is bfloat16 but data is float32 (nc_n_gather copies elements, "
              "no cast)");
  g.ops[0] = f32(0, 4, 0, 8);
  g.engine = Engine::DVE;
  expect_rule(g, "nc_n_gather on DVE: engine: nc_n_gather runs on POOL");
}
