// scalar_offset on dma_copy and dma_transpose: an SBUF int32 [1, 1] value v, read at execution, moves the HBM
// operand by v rows of its tensor's dim 0. Semantics on a stacked [E, R, C] tensor, the rule checks with
// their exact messages, the run-time bounds check, the unchanged work (so the DMA cost is unchanged) and the
// program JSON keys.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/base/error.h"
#include "sim/isa/program_json.h"
#include "sim/isa/semantics.h"
#include "tests/unit/isa/isa_test_util.h"

using namespace trnsim;
using namespace trnsim::isa;
using namespace trnsim::isa::test;

namespace {

// A stacked weight [E=3, R=4, C=8] F32: element (e, r, c) = 100 e + 10 r + c.
struct Stacked {
  Stacked() {
    program.generation = Generation::Trn3;
    program.tensors.push_back(TensorDecl{"w", DType::F32, {3, 4, 8}});
    program.tensors.push_back(TensorDecl{"wb", DType::BF16, {3, 4, 8}});
    state = make_machine_state(program, limits);
    for (int e = 0; e < 3; ++e)
      for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 8; ++c) {
          const float v = static_cast<float>(100 * e + 10 * r + c);
          put(state.hbm[0].data() + 4 * (32 * e + 8 * r + c), v);
          put(state.hbm[1].data() + 2 * (32 * e + 8 * r + c), bf16_exact(v));
        }
  }
  void run(const Instruction& in) {
    check(in, program, limits);
    execute(in, 0, program, limits, state);
  }
  void set_offset(int32_t v) { put<int32_t>(sb(state, 0, limits, 0, 0), v); }
  float at(uint32_t p, int64_t off) { return get<float>(sb(state, 0, limits, p, off)); }
  Limits limits = trn3();
  Program program;
  MachineState state;
};

// Rows [1, 3) of expert 0's [4, 8] slice (the row-0 placement), columns 2..5.
AccessPattern slice_rows_1_3() {
  return hbm(0, 4 * (8 + 2), DType::F32, 8, 2, {{1, 4}});
}
AccessPattern offset_reg(uint32_t partitions = 1, DType t = DType::I32) {
  return sbuf(0, partitions, 0, t, {{1, 1}});
}

Instruction copy_with_offset(Engine e = Engine::SP) {
  Instruction in = make(Opcode::DmaCopy, e, {sbuf(0, 2, 64, DType::F32, {{1, 4}}), slice_rows_1_3()});
  in.ops[3] = offset_reg();
  in.nops = 4;
  return in;
}

}  // namespace

TEST_CASE("scalar_offset: dma_copy reads the expert the SBUF value names", "[isa]") {
  Stacked m;
  for (int32_t e : {0, 2, 1}) {
    INFO("expert " << e);
    m.set_offset(e);
    m.run(copy_with_offset());
    for (uint32_t r = 0; r < 2; ++r)
      for (int c = 0; c < 4; ++c)
        REQUIRE(m.at(r, 64 + 4 * c) == static_cast<float>(100 * e + 10 * (r + 1) + c + 2));
  }
  // The same offset on the destination: SBUF rows land in expert 2's slice.
  m.set_offset(2);
  for (int c = 0; c < 4; ++c) {
    put(sb(m.state, 0, m.limits, 0, 256 + 4 * c), -1.0f - c);
    put(sb(m.state, 0, m.limits, 1, 256 + 4 * c), -5.0f - c);
  }
  Instruction st =
      make(Opcode::DmaCopy, Engine::ACT, {slice_rows_1_3(), sbuf(0, 2, 256, DType::F32, {{1, 4}})});
  st.ops[3] = offset_reg();
  st.nops = 4;
  st.flags = kScalarOffsetDst;
  m.run(st);
  CHECK(get<float>(m.state.hbm[0].data() + 4 * (64 + 8 + 2)) == -1.0f);
  CHECK(get<float>(m.state.hbm[0].data() + 4 * (64 + 16 + 5)) == -8.0f);
  CHECK(get<float>(m.state.hbm[0].data() + 4 * (8 + 2)) == 12.0f);  // expert 0 untouched
}

TEST_CASE("scalar_offset: dma_transpose of one expert's slice", "[isa]") {
  Stacked m;
  m.set_offset(1);
  // src: expert e's [4, 8] BF16 rows -> dst [8, 4].
  Instruction t = make(Opcode::DmaTranspose, Engine::SP,
                       {sbuf(0, 8, 64, DType::BF16, {{1, 4}}), hbm(1, 0, DType::BF16, 8, 4, {{1, 8}})});
  t.ops[2] = offset_reg();
  t.nops = 3;
  m.run(t);
  for (uint32_t c = 0; c < 8; ++c)
    for (int r = 0; r < 4; ++r)
      REQUIRE(get<uint16_t>(sb(m.state, 0, m.limits, c, 64 + 2 * r)) ==
              bf16_exact(static_cast<float>(100 + 10 * r + static_cast<int>(c))));
}

TEST_CASE("scalar_offset: a value that moves the pattern out of the tensor is a run-time error", "[isa]") {
  Stacked m;
  for (int32_t bad : {3, -1, 1 << 30}) {
    INFO(bad);
    m.set_offset(bad);
    CHECK_THROWS_MATCHES(
        execute(copy_with_offset(), 0, m.program, m.limits, m.state), RuleError,
        Catch::Message(fmt::format("dma_copy on SP: scalar_offset bounds: scalar_offset = {} moves src by {} "
                                   "rows of 128 bytes, outside tensor 'w' [3 rows]",
                                   bad, bad)));
  }
}

TEST_CASE("scalar_offset: oob_mode skip skips the rows moved out of the tensor", "[isa]") {
  // tester23ag F2: rows 0 of three experts ([3, 8] F32, 128 B apart) moved by v experts; with oob_mode skip
  // the rows outside the tensor are skipped (their destination keeps its value), as vector_offset rows are;
  // it was a RuleError for any row outside (nki-library's indexed_flatten relies on the skip).
  const auto hbm_rows = [] { return hbm(0, 0, DType::F32, 32, 3, {{1, 8}}); };
  const auto sb_rows = [] { return sbuf(0, 3, 512, DType::F32, {{1, 8}}); };
  for (int32_t v : {1, -2, 3, -7}) {  // scatter: SBUF rows into experts v, v + 1, v + 2
    INFO(v);
    Stacked m;
    for (uint32_t p = 0; p < 3; ++p)
      for (int c = 0; c < 8; ++c) put(sb(m.state, 0, m.limits, p, 512 + 4 * c), -1.0f - 10.0f * p - c);
    m.set_offset(v);
    Instruction st = make(Opcode::DmaCopy, Engine::ACT, {hbm_rows(), sb_rows()});
    st.ops[3] = offset_reg();
    st.nops = 4;
    st.flags = kScalarOffsetDst | kOobSkip;
    m.run(st);
    for (int e = 0; e < 3; ++e)
      for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 8; ++c) {
          const int p = e - v;  // the SBUF row that lands on expert e
          const float want = r == 0 && p >= 0 && p < 3 ? -1.0f - 10.0f * p - c : 100.0f * e + 10.0f * r + c;
          REQUIRE(get<float>(m.state.hbm[0].data() + 4 * (32 * e + 8 * r + c)) == want);
        }
  }
  {  // gather: experts 2, 3, 4 -> SBUF rows 0, 1, 2: only row 0 is inside; rows 1 and 2 keep their values
    Stacked m;
    for (uint32_t p = 0; p < 3; ++p) put(sb(m.state, 0, m.limits, p, 512), -3.0f);
    m.set_offset(2);
    Instruction ld = make(Opcode::DmaCopy, Engine::SP, {sb_rows(), hbm_rows()});
    ld.ops[3] = offset_reg();
    ld.nops = 4;
    ld.flags = kOobSkip;
    m.run(ld);
    for (int c = 0; c < 8; ++c) REQUIRE(m.at(0, 512 + 4 * c) == 200.0f + c);
    CHECK(m.at(1, 512) == -3.0f);
    CHECK(m.at(2, 512) == -3.0f);
  }
  // Sides whose rows do not pair up: the run-time error, saying why skip did not apply.
  Stacked m;
  m.set_offset(3);
  Instruction in =
      make(Opcode::DmaCopy, Engine::SP, {sbuf(0, 1, 64, DType::F32, {{1, 8}}), slice_rows_1_3()});
  in.ops[3] = offset_reg();
  in.nops = 4;
  in.flags = kOobSkip;
  CHECK_THROWS_MATCHES(
      execute(in, 0, m.program, m.limits, m.state), RuleError,
      Catch::Message(
          "dma_copy on SP: scalar_offset bounds: scalar_offset = 3 moves src by 3 rows of 128 bytes, "
          "outside tensor 'w' [3 rows] (oob_mode skip skips the rows outside only when both sides of "
          "a dma_copy have the same rows and elements per row)"));
}

TEST_CASE("scalar_offset: rule checks", "[isa][check]") {
  const Stacked m;
  const auto rule = [&](const Instruction& in, const std::string& msg) {
    CHECK_THROWS_MATCHES(check(in, m.program, m.limits), RuleError, Catch::Message(msg));
  };
  CHECK_NOTHROW(check(copy_with_offset(), m.program, m.limits));
  CHECK_NOTHROW(check(copy_with_offset(Engine::ACT), m.program, m.limits));
  rule(copy_with_offset(Engine::POOL),
       "dma_copy on POOL: engine: scalar_offset needs a hardware-DGE DMA (triggered from SP or ACT), not "
       "POOL");
  Instruction in = copy_with_offset();
  in.ops[3] = offset_reg(2);
  rule(in, "dma_copy on SP: shape: scalar_offset must be [1, 1], got [2, 1]");
  in.ops[3] = offset_reg(1, DType::F32);
  rule(in, "dma_copy on SP: dtype: scalar_offset must be int32 or uint32, got float32");
  in.ops[3] = hbm(0, 0, DType::I32, 1, 1, {{1, 1}});
  rule(in, "dma_copy on SP: connectivity: scalar_offset must be in SBUF");
  in = copy_with_offset();
  in.flags = kScalarOffsetDst;  // dst is SBUF
  rule(in, "dma_copy on SP: connectivity: scalar_offset moves an HBM access pattern; dst is not in HBM");
  in = copy_with_offset();
  in.ops[2] = sbuf(0, 2, 128, DType::I32, {{1, 1}});
  rule(in,
       "dma_copy on SP: operands: scalar_offset and vector_offset in one DMA: the first is a hardware-DGE "
       "register (SP/ACT), the second needs software DGE (POOL)");
  // The row-0 placement itself must be inside the tensor.
  in = copy_with_offset();
  in.ops[1].offset_bytes = 4 * 3 * 32;
  rule(in, "dma_copy on SP: HBM bounds: src bytes [384, 432) outside tensor 'w' of 384 bytes");
}

TEST_CASE("scalar_offset: work and program JSON", "[isa][json]") {
  const Stacked m;
  Instruction plain = copy_with_offset();
  plain.ops[3] = AccessPattern{};
  plain.nops = 2;
  const Work a = work_of(copy_with_offset(), m.program), b = work_of(plain, m.program);
  CHECK(a.bytes_read == b.bytes_read);  // the 4-byte register is not data the DMA moves
  CHECK(a.bytes_read == 32);
  CHECK(a.hbm_bytes_read == b.hbm_bytes_read);

  Program p = m.program;
  Instruction st = copy_with_offset(Engine::ACT);
  std::swap(st.ops[0], st.ops[1]);
  st.flags = kScalarOffsetDst;
  p.streams[0][static_cast<int>(Engine::ACT)].push_back(st);
  const nlohmann::json j = program_to_json(p);
  const nlohmann::json& ji = j["cores"][0]["ACT"][0];
  CHECK(ji.at("scalar_offset_dst") == true);
  CHECK(ji.at("scalar_offset").at("partition") == nlohmann::json::array({0, 1}));
  const Program back = program_from_json(j);
  const Instruction& r = back.streams[0][static_cast<int>(Engine::ACT)].at(0);
  CHECK(r.has(kScalarOffsetDst));
  CHECK(r.ops[3].present());
  CHECK(r.ops[3].dtype == DType::I32);
  CHECK(r.nops == 4);
}

TEST_CASE("scalar_offset: a scalar_offset_stride moves by that many bytes a unit", "[isa][json]") {
  // NKI's `indirect_dim=2` of w [3, 4, 8] F32: the offset steps columns (4 bytes), not experts.
  Stacked m;
  for (int32_t v : {0, 1, 2}) {
    INFO(v);
    m.set_offset(v);
    Instruction in = copy_with_offset();
    in.iota_steps[0] = 4;
    m.run(in);
    for (uint32_t r = 0; r < 2; ++r)
      for (int c = 0; c < 4; ++c)
        REQUIRE(m.at(r, 64 + 4 * c) == static_cast<float>(10 * (r + 1) + c + 2 + v));
  }
  // Past the tensor's 96 elements: rows 1..2 at column 2 + v end at element 8 * 2 + 5 + v.
  m.set_offset(75);
  Instruction in = copy_with_offset();
  in.iota_steps[0] = 4;
  CHECK_THROWS_MATCHES(
      execute(in, 0, m.program, m.limits, m.state), RuleError,
      Catch::Message("dma_copy on SP: scalar_offset bounds: scalar_offset = 75 moves src by 75 "
                     "steps of 4 bytes (scalar_offset_stride), outside tensor 'w' [384 bytes]"));
  Program p = m.program;
  p.streams[0][static_cast<int>(Engine::SP)].push_back(in);
  p.streams[0][static_cast<int>(Engine::SP)].push_back(copy_with_offset());
  const nlohmann::json j = program_to_json(p);
  CHECK(j["cores"][0]["SP"][0].at("scalar_offset_stride") == 4);
  CHECK_FALSE(j["cores"][0]["SP"][1].contains("scalar_offset_stride"));  // 0 (a tensor row) is not written
  const Program back = program_from_json(j);
  CHECK(back.streams[0][static_cast<int>(Engine::SP)].at(0).iota_steps[0] == 4);
  CHECK(back.streams[0][static_cast<int>(Engine::SP)].at(1).iota_steps[0] == 0);
}
