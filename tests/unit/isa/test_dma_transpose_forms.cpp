// dma_transpose beyond the 2-D swap: NKI's outer-axes permutation (axes (2, 1, 0) / (3, 1, 2, 0)) and the
// indirect (gather) transpose with a vector_offset, their checks and their program JSON. Every expected
// element is computed here from the definitions in docs/program-format.md.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "sim/base/error.h"
#include "sim/isa/program_json.h"
#include "sim/isa/semantics.h"
#include "tests/unit/isa/isa_test_util.h"

using namespace trnsim;
using namespace trnsim::isa;
using namespace trnsim::isa::test;

namespace {

struct Machine {
  explicit Machine(std::vector<TensorDecl> tensors) : limits(trn3()) {
    program.generation = limits.generation;
    program.tensors = std::move(tensors);
    state = make_machine_state(program, limits);
  }
  void run(const Instruction& in) {
    check(in, program, limits);
    execute(in, 0, program, limits, state);
  }
  uint8_t* h(int64_t byte) { return state.hbm[0].data() + byte; }
  uint8_t* s(uint32_t p, int64_t off) { return sb(state, 0, limits, p, off); }
  Limits limits;
  Program program;
  MachineState state;
};

uint16_t val(int64_t i) {
  return static_cast<uint16_t>(0x3000 + i);
}

}  // namespace

TEST_CASE("dma_transpose with axes (2, 1, 0) writes the MX interleave [p][f][j]", "[isa]") {
  // data [F = 3, K = 8] BF16; src viewed as [j = 4, f = 3, p = 2]: src[j, f, p] = data[f, 2 j + p] (rows: j,
  // stride 2 elements; free: f stride 8, p stride 1). dst [p = 2, f = 3, j = 4] in SBUF.
  Machine m({TensorDecl{"d", DType::BF16, {3, 8}}});
  for (int64_t i = 0; i < 24; ++i) put<uint16_t>(m.h(2 * i), val(i));
  Instruction in =
      make(Opcode::DmaTranspose, Engine::SP,
           {sbuf(0, 2, 0, DType::BF16, {{1, 12}}), hbm(0, 0, DType::BF16, 2, 4, {{8, 3}, {1, 2}})});
  in.flags = kTransposeOuterAxes;
  m.run(in);
  for (uint32_t p = 0; p < 2; ++p)
    for (int64_t f = 0; f < 3; ++f)
      for (int64_t j = 0; j < 4; ++j) {
        INFO("p " << p << " f " << f << " j " << j);
        CHECK(get<uint16_t>(m.s(p, 2 * (f * 4 + j))) == val(f * 8 + 2 * j + p));
      }
}

TEST_CASE("an indirect dma_transpose gathers src rows by index[r % P, r / P], then transposes", "[isa]") {
  // a: 12 rows of 2 BF16 (flattened [24]); the gather picks rows 5, 0, 3 from an index [2, 2] in SBUF whose
  // entry r sits at (r % 2, r / 2); dst [2, 3]: dst[p, r] = a[2 index_r + p].
  Machine m({TensorDecl{"a", DType::BF16, {24}}});
  for (int64_t i = 0; i < 24; ++i) put<uint16_t>(m.h(2 * i), val(i));
  const int32_t idx[2][2] = {{5, 3}, {0, 7}};  // [partition][column]
  for (uint32_t p = 0; p < 2; ++p)
    for (int c = 0; c < 2; ++c) put<int32_t>(m.s(p, 1024 + 4 * c), idx[p][c]);
  const AccessPattern index = sbuf(0, 2, 1024, DType::I32, {{1, 2}});
  Instruction in = make(Opcode::DmaTranspose, Engine::POOL,
                        {sbuf(0, 2, 0, DType::BF16, {{1, 3}}), hbm(0, 0, DType::BF16, 2, 3, {{1, 2}})});
  in.ops[3] = index;
  in.nops = 4;
  in.dge = DgeMode::Swdge;
  m.run(in);
  const int64_t rows[3] = {5, 0, 3};
  for (uint32_t p = 0; p < 2; ++p)
    for (int r = 0; r < 3; ++r) CHECK(get<uint16_t>(m.s(p, 2 * r)) == val(2 * rows[r] + p));

  SECTION("an index outside the tensor is an error") {
    put<int32_t>(m.s(0, 1024), 12);  // row 12 of 12
    CHECK_THROWS_WITH(m.run(in), Catch::Contains("indirect bounds") && Catch::Contains("= 12"));
  }
}

TEST_CASE("an indirect dma_transpose of many rows with strided elements, and a row partly outside", "[isa]") {
  // a: 400 BF16; src pattern rows of 4 elements at stride 2 (bytes 0, 4, 8, 12 of the row), row stride 5
  // elements, offset 1 element: pattern row i is elements 1 + 5 i + {0, 2, 4, 6}, inside a for i <= 78.
  // 70 entries (more than two 32-entry tiles) from an index [2, 35]: entry r at (r % 2, r / 2) is row
  // (37 r) % 79. dst [4, 70]: dst[p, r] = a[1 + 5 row_r + 2 p].
  Machine m({TensorDecl{"a", DType::BF16, {400}}});
  for (int64_t i = 0; i < 400; ++i) put<uint16_t>(m.h(2 * i), val(i));
  const auto row_of = [](int r) { return (37 * r) % 79; };
  for (int r = 0; r < 70; ++r) put<int32_t>(m.s(r % 2, 1024 + 4 * (r / 2)), row_of(r));
  Instruction in = make(Opcode::DmaTranspose, Engine::POOL,
                        {sbuf(0, 4, 0, DType::BF16, {{1, 70}}), hbm(0, 2, DType::BF16, 5, 70, {{2, 4}})});
  in.ops[3] = sbuf(0, 2, 1024, DType::I32, {{1, 35}});
  in.nops = 4;
  in.dge = DgeMode::Swdge;
  m.run(in);
  for (uint32_t p = 0; p < 4; ++p)
    for (int r = 0; r < 70; ++r) {
      INFO("p " << p << " r " << r);
      CHECK(get<uint16_t>(m.s(p, 2 * r)) == val(1 + 5 * row_of(r) + 2 * p));
    }

  SECTION("a row whose last element lies outside the tensor fails at its entry") {
    // Row 79: elements 396, 398, 400 (outside), 402; entry 41 sits at (1, 20).
    put<int32_t>(m.s(1, 1024 + 4 * 20), 79);
    CHECK_THROWS_WITH(m.run(in), Catch::Contains("vector_offset entry 41 = 79 is outside rows [0, 79)"));
  }
  SECTION("a negative index fails at its entry") {
    put<int32_t>(m.s(0, 1024 + 4 * 3), -1);  // entry 6
    CHECK_THROWS_WITH(m.run(in), Catch::Contains("vector_offset entry 6 = -1 is outside"));
  }
}

TEST_CASE("a large indirect dma_transpose (its 64-entry tiles split over host threads) gathers every entry",
          "[isa]") {
  // a: 330 rows of 128 BF16 (the pattern's rows lie inside), element i = val(i). E entries from an index
  // [2, E / 2] at byte 4096: entry r at (r % 2, r / 2) is row (7 r + 3) % 330. dst [P, E]: dst[p, r] =
  // a[128 row_r + p]. 320 entries: five 64-entry tiles (128 x 320 = 40960 elements, past the 32 Ki of a
  // split) of whole 32 x 32 blocks; 302: a last tile of one block and 14 entries; 96 and 100 partitions:
  // whole blocks, and partitions left over (element by element).
  for (const auto [P, E] : {std::pair<uint32_t, int>{128, 320}, {128, 302}, {96, 302}, {100, 320}}) {
    INFO("P " << P << " E " << E);
    Machine m({TensorDecl{"a", DType::BF16, {330, 128}}});
    for (int64_t i = 0; i < 330 * 128; ++i) put<uint16_t>(m.h(2 * i), val(i));
    const auto row_of = [](int r) { return (7 * r + 3) % 330; };
    for (int r = 0; r < E; ++r) put<int32_t>(m.s(r % 2, 4096 + 4 * (r / 2)), row_of(r));
    Instruction in = make(Opcode::DmaTranspose, Engine::POOL,
                          {sbuf(0, P, 0, DType::BF16, {{1, E}}), hbm(0, 0, DType::BF16, 128, E, {{1, P}})});
    in.ops[3] = sbuf(0, 2, 4096, DType::I32, {{1, E / 2}});
    in.nops = 4;
    in.dge = DgeMode::Swdge;
    m.run(in);
    int wrong = 0;
    for (uint32_t p = 0; p < P; ++p)
      for (int r = 0; r < E; ++r) wrong += get<uint16_t>(m.s(p, 2 * r)) != val(128 * row_of(r) + p);
    CHECK(wrong == 0);
  }
}

TEST_CASE("dma_transpose forms: the checks name what is wrong", "[isa]") {
  Program p;
  p.generation = Generation::Trn3;
  p.tensors = {TensorDecl{"a", DType::BF16, {64}}};
  const Limits l = trn3();
  const auto fails = [&](const Instruction& in, const std::string& what) {
    CHECK_THROWS_WITH(check(in, p, l), Catch::Contains(what));
  };
  SECTION("axes (2, 1, 0) with shapes that are not [A, C, D] and [D, C, A]") {
    Instruction in =
        make(Opcode::DmaTranspose, Engine::SP,
             {sbuf(0, 2, 0, DType::BF16, {{1, 10}}), hbm(0, 0, DType::BF16, 2, 4, {{8, 3}, {1, 2}})});
    in.flags = kTransposeOuterAxes;
    fails(in, "are not [A, C, D] and [D, C, A]");
  }
  const AccessPattern dst = sbuf(0, 2, 0, DType::BF16, {{1, 3}}),
                      src = hbm(0, 0, DType::BF16, 2, 3, {{1, 2}});
  SECTION("a vector_offset in HBM") {
    Instruction in = make(Opcode::DmaTranspose, Engine::POOL, {dst, src});
    in.ops[3] = hbm(0, 0, DType::I32, 1, 3, {{1, 1}});
    in.nops = 4;
    fails(in, "vector_offset must be in SBUF");
  }
  SECTION("a vector_offset with a scalar_offset") {
    Instruction in = make(Opcode::DmaTranspose, Engine::SP, {dst, src, sbuf(0, 1, 64, DType::I32, {{1, 1}})});
    in.ops[3] = sbuf(0, 3, 128, DType::I32, {{1, 1}});
    in.nops = 4;
    fails(in, "a vector_offset or a scalar_offset, not both");
  }
  SECTION("fewer indices than rows to gather") {
    Instruction in = make(Opcode::DmaTranspose, Engine::POOL, {dst, src});
    in.ops[3] = sbuf(0, 2, 128, DType::I32, {{1, 1}});
    in.nops = 4;
    fails(in, "holds fewer indices than src's 3 rows");
  }
  SECTION("a vector_offset with axes (2, 1, 0)") {
    Instruction in = make(Opcode::DmaTranspose, Engine::POOL, {dst, src});
    in.ops[3] = sbuf(0, 3, 128, DType::I32, {{1, 1}});
    in.nops = 4;
    in.flags = kTransposeOuterAxes;
    fails(in, "axes (1, 0) only");
  }
}

TEST_CASE("program JSON: dma_transpose axes round-trip; other permutations are refused", "[isa]") {
  Program p;
  p.generation = Generation::Trn3;
  p.tensors = {TensorDecl{"d", DType::BF16, {3, 8}}};
  Instruction in =
      make(Opcode::DmaTranspose, Engine::SP,
           {sbuf(0, 2, 0, DType::BF16, {{1, 12}}), hbm(0, 0, DType::BF16, 2, 4, {{8, 3}, {1, 2}})});
  in.flags = kTransposeOuterAxes;
  p.streams[0][static_cast<int>(Engine::SP)].push_back(in);
  nlohmann::json j = program_to_json(p);
  const std::string text = j.dump();
  CHECK(text.find("\"axes\":[2,1,0]") != std::string::npos);
  CHECK(program_from_json(j).streams[0][static_cast<int>(Engine::SP)][0].has(kTransposeOuterAxes));
  std::string bad = text;
  bad.replace(bad.find("[2,1,0]"), 7, "[0,2,1]");
  CHECK_THROWS_WITH(program_from_json(nlohmann::json::parse(bad)), Catch::Contains("[3, 1, 2, 0]"));
}
