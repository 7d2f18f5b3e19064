// nonzero_with_count (GpSimd) and nc_stream_shuffle (Vector): numerics from their NKI pages, the rules'
// messages, and their program JSON; the exact integer immediates of iota and affine_select (imm3).
#include <catch2/catch.hpp>

#include <cstring>
#include <nlohmann/json.hpp>

#include "sim/base/error.h"
#include "sim/isa/element.h"
#include "sim/isa/program_json.h"
#include "sim/isa/semantics.h"
#include "sim/isa/shuffle_mask.h"
#include "tests/unit/isa/isa_test_util.h"

using namespace trnsim;
using namespace trnsim::isa;
using namespace trnsim::isa::test;
using nlohmann::json;

namespace {

struct Machine {
  explicit Machine(Limits l = trn2()) : limits(l) {
    program.generation = l.generation;
    state = make_machine_state(program, limits);
  }
  void run(const Instruction& in) {
    check(in, program, limits);
    execute(in, 0, program, limits, state);
  }
  uint8_t* s(uint32_t p, int64_t off) { return sb(state, 0, limits, p, off); }
  Limits limits;
  Program program;
  MachineState state;
};

void expect_rule(const Instruction& in, const std::string& msg, const Limits& l = trn2()) {
  Program p;
  p.generation = l.generation;
  CHECK_THROWS_MATCHES(check(in, p, l), RuleError, Catch::Message(msg));
}

}  // namespace

TEST_CASE("nonzero_with_count: positions + index_offset, padding, count on partitions 0, 16, ...", "[isa]") {
  Machine m;
  // src [32, 8] FP32 at byte 0; dst [32, 9] int32 at byte 1024, filled with 7 first (rows not written stay
  // 7).
  const float rows[2][8] = {{0, 1, 1, 0, 0, 1, 0, 0}, {-0.f, NAN, 2, 0, 0, 0, 0, 3}};
  for (uint32_t p = 0; p < 32; ++p) std::memcpy(m.s(p, 0), rows[p % 16 == 0 ? p / 16 : 0], sizeof rows[0]);
  for (uint32_t p = 0; p < 32; ++p)
    for (int j = 0; j < 9; ++j) put(m.s(p, 1024 + 4 * j), int32_t{7});
  Instruction in = make(Opcode::NonzeroWithCount, Engine::POOL,
                        {sbuf(0, 32, 1024, DType::I32, {{1, 9}}), sbuf(0, 32, 0, DType::F32, {{1, 8}})});
  in.iota_steps[0] = 16;  // index_offset (the page's example)
  in.iota_steps[1] = -1;  // padding_val
  m.run(in);
  // The page's example: [0, 1, 1, 0, 0, 1, 0, 0] + 16 -> [17, 18, 21, -1 x 5, 3].
  const int32_t want0[9] = {17, 18, 21, -1, -1, -1, -1, -1, 3};
  // -0 is zero, NaN is not: positions 1, 2, 7.
  const int32_t want16[9] = {17, 18, 23, -1, -1, -1, -1, -1, 3};
  for (int j = 0; j < 9; ++j) {
    CHECK(get<int32_t>(m.s(0, 1024 + 4 * j)) == want0[j]);
    CHECK(get<int32_t>(m.s(16, 1024 + 4 * j)) == want16[j]);
    CHECK(get<int32_t>(m.s(1, 1024 + 4 * j)) == 7);
    CHECK(get<int32_t>(m.s(31, 1024 + 4 * j)) == 7);
  }
  // int32 immediates are exact past FP32's 24 bits: 2^24 + 1 and INT32_MIN.
  in.iota_steps[0] = 16777217;
  in.iota_steps[1] = INT32_MIN;
  m.run(in);
  CHECK(get<int32_t>(m.s(0, 1024)) == 16777218);
  CHECK(get<int32_t>(m.s(0, 1024 + 4 * 3)) == INT32_MIN);
}

TEST_CASE("nonzero_with_count rules: dtypes, dst one element wider, GpSimd, Trn2 and newer", "[isa][check]") {
  Instruction in = make(Opcode::NonzeroWithCount, Engine::POOL,
                        {sbuf(0, 32, 1024, DType::I32, {{1, 9}}), sbuf(0, 32, 0, DType::I32, {{1, 8}})});
  CHECK_NOTHROW(check(in, Program{}, trn2()));
  in.ops[1].dtype = DType::BF16;
  expect_rule(in, "nonzero_with_count on POOL: dtype: src must be float32 or int32, got bfloat16");
  in.ops[1].dtype = DType::F32;
  in.ops[0].dtype = DType::F32;
  expect_rule(in, "nonzero_with_count on POOL: dtype: dst must be int32, got float32");
  in.ops[0] = sbuf(0, 32, 1024, DType::I32, {{1, 8}});
  expect_rule(in,
              "nonzero_with_count on POOL: shape: dst must be [32, 9] (src's 8 elements and the count), got "
              "[32, 8]");
  in.ops[0] = sbuf(0, 32, 1024, DType::I32, {{1, 9}});
  in.engine = Engine::DVE;
  expect_rule(in, "nonzero_with_count on DVE: engine: nonzero_with_count runs on POOL");
  in.engine = Engine::POOL;
  Limits v2 = trn2();
  v2.generation = Generation::Trn1;
  expect_rule(in,
              "nonzero_with_count on POOL: generation: nonzero_with_count exists on Trn2/Trn3 only (this is "
              "Trn1)",
              v2);
}

TEST_CASE("nc_stream_shuffle: each quadrant's dst partitions from src's by the mask; 255 keeps", "[isa]") {
  Machine m;
  // src [64, 3] int32 at byte 0: element (p, j) = 100 p + j; dst at byte 512 holds -1.
  for (uint32_t p = 0; p < 64; ++p)
    for (int j = 0; j < 3; ++j) {
      put(m.s(p, 4 * j), static_cast<int32_t>(100 * p + j));
      put(m.s(p, 512 + 4 * j), int32_t{-1});
    }
  ShuffleMask mask{};
  for (int i = 0; i < 32; ++i) mask[i] = static_cast<uint8_t>(31 - i);
  mask[5] = kShuffleKeep;
  mask[6] = 0;
  Instruction in = make(Opcode::NcStreamShuffle, Engine::DVE,
                        {sbuf(0, 64, 512, DType::I32, {{1, 3}}), sbuf(0, 64, 0, DType::I32, {{1, 3}})});
  set_shuffle_mask(in, mask);
  CHECK(shuffle_mask(in) == mask);
  m.run(in);
  for (uint32_t q = 0; q < 2; ++q)
    for (uint32_t i = 0; i < 32; ++i)
      for (int j = 0; j < 3; ++j) {
        const int32_t want =
            mask[i] == kShuffleKeep ? -1 : static_cast<int32_t>(100 * (32 * q + mask[i]) + j);
        CHECK(get<int32_t>(m.s(32 * q + i, 512 + 4 * j)) == want);
      }
  // In place (the NKI library's [16, 255 x 31]): partition 16 of each quadrant to its partition 0.
  ShuffleMask lib{};
  lib.fill(kShuffleKeep);
  lib[0] = 16;
  in.ops[0] = in.ops[1];
  set_shuffle_mask(in, lib);
  m.run(in);
  CHECK(get<int32_t>(m.s(0, 4)) == 1601);
  CHECK(get<int32_t>(m.s(32, 4)) == 4801);
  CHECK(get<int32_t>(m.s(1, 4)) == 101);
}

TEST_CASE("nc_stream_shuffle rules: one dtype, equal rows, start partitions by the active ones",
          "[isa][check]") {
  Instruction in = make(Opcode::NcStreamShuffle, Engine::DVE,
                        {sbuf(0, 64, 512, DType::F32, {{1, 3}}), sbuf(0, 32, 0, DType::F32, {{1, 3}})});
  CHECK_NOTHROW(check(in, Program{}, trn2()));
  in.ops[1].dtype = DType::BF16;
  expect_rule(in,
              "nc_stream_shuffle on DVE: dtype: dst is float32 but src is bfloat16 (nc_stream_shuffle moves "
              "elements, no cast)");
  in.ops[1] = sbuf(0, 32, 0, DType::F32, {{1, 4}});
  expect_rule(in, "nc_stream_shuffle on DVE: shape: dst has 3 elements per partition, src 4");
  // 64 active partitions (dst's): src's 32 may start at 0 or 64 only, though 32 alone would allow 32.
  in.ops[1] = sbuf(32, 32, 0, DType::F32, {{1, 3}});
  expect_rule(
      in,
      "nc_stream_shuffle on DVE: partition start: src starts at partition 32; with 64 active partitions "
      "a start must be 0 or 64");
  in.ops[1] = sbuf(64, 32, 0, DType::F32, {{1, 3}});
  CHECK_NOTHROW(check(in, Program{}, trn2()));
}

TEST_CASE("program JSON: nonzero_with_count's int32 immediates, the shuffle mask, split iota offsets",
          "[isa][json]") {
  const Program p = program_from_json(json::parse(R"({"num_cores": 1, "cores": [{"POOL": [
    {"op": "nonzero_with_count", "index_offset": 16777217, "dst": {"mem": "sbuf", "partition": [0, 32], "dtype": "int32", "pattern": [[1, 9]]},
     "src": {"mem": "sbuf", "partition": [0, 32], "dtype": "float32", "offset": 64, "pattern": [[1, 8]]}},
    {"op": "iota", "base": 2147483643, "dst": {"mem": "sbuf", "partition": [0, 1], "dtype": "int32", "pattern": [[1, 2]]}}
  ], "DVE": [
    {"op": "nc_stream_shuffle", "shuffle_mask": [16, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
      255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 3, 31],
     "dst": {"mem": "sbuf", "partition": [0, 32], "dtype": "int32", "pattern": [[1, 9]]},
     "src": {"mem": "sbuf", "partition": [0, 32], "dtype": "int32", "pattern": [[1, 9]]}}
  ]}]})"));
  const auto& pool = p.streams[0][static_cast<int>(Engine::POOL)];
  CHECK(pool.at(0).iota_steps[0] == 16777217);
  CHECK(pool.at(0).iota_steps[1] == -1);  // padding_val's default
  CHECK(fill_value(pool.at(1).imm0, pool.at(1).imm3) == 2147483643.0);
  const Instruction& sh = p.streams[0][static_cast<int>(Engine::DVE)].at(0);
  CHECK(shuffle_mask(sh)[0] == 16);
  CHECK(shuffle_mask(sh)[1] == kShuffleKeep);
  CHECK(shuffle_mask(sh)[30] == 3);
  CHECK(shuffle_mask(sh)[31] == 31);
  const json j = program_to_json(p);
  CHECK(j["cores"][0]["POOL"][0]["padding_val"] == -1);
  CHECK(j["cores"][0]["POOL"][1]["base"].get<double>() == 2147483643.0);
  CHECK(j["cores"][0]["DVE"][0]["shuffle_mask"][31] == 31);
  CHECK(program_to_json(program_from_json(j)) == j);
  json bad = j;
  bad["cores"][0]["DVE"][0]["shuffle_mask"][4] = 32;
  CHECK_THROWS_MATCHES(
      program_from_json(bad), InputError,
      Catch::Message("cores[0].DVE[0].shuffle_mask[4]: expected a source partition 0-31 or 255 "
                     "(unmodified), got 32"));
}

TEST_CASE("iota's offset and affine_select's on_false_value past 2^24 are exact for int32", "[isa]") {
  Machine m;
  Instruction io = make(Opcode::Iota, Engine::POOL, {sbuf(0, 2, 0, DType::I32, {{1, 3}})});
  split_fill(DType::I32, 2147483643.0, io.imm0, io.imm3);  // 2^31 - 5: FP32 made it 2^31
  io.imm1 = 1.f;
  io.iota_steps = {1, 0, 0, 0};
  m.run(io);
  CHECK(get<int32_t>(m.s(0, 0)) == 2147483643);
  CHECK(get<int32_t>(m.s(1, 4)) == 2147483645);
  CHECK(get<int32_t>(m.s(1, 8)) == 2147483646);
  Instruction as = make(Opcode::AffineSelect, Engine::POOL,
                        {sbuf(0, 2, 64, DType::I32, {{1, 3}}), sbuf(0, 2, 0, DType::I32, {{1, 3}})});
  as.alu0 = AluOp::IsGe;  // partition - column >= 0 keeps on_true
  as.imm1 = 1.f;
  as.iota_steps = {-1, 0, 0, 0};
  split_fill(DType::I32, 16777217.0, as.imm2, as.imm3);  // FP32 made it 2^24
  m.run(as);
  CHECK(get<int32_t>(m.s(0, 64)) == 2147483643);
  CHECK(get<int32_t>(m.s(0, 64 + 4)) == 16777217);
  CHECK(get<int32_t>(m.s(1, 64 + 8)) == 16777217);
  CHECK(get<int32_t>(m.s(1, 64 + 4)) == 2147483645);
}
