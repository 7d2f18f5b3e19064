// Program JSON: round trip and errors that name the JSON path.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <limits>

#include "sim/base/error.h"
#include "sim/isa/program_json.h"
#include "sim/isa/semantics.h"

using namespace trnsim;
using namespace trnsim::isa;
using nlohmann::json;

namespace {

const char* kProgram = R"({
  "generation": "trn3", "num_cores": 2,
  "tensors": [
    {"name": "x", "dtype": "bfloat16", "shape": [128, 512], "init": {"generator": "normal", "seed": 3}},
    {"name": "idx", "dtype": "int32", "shape": [128, 1], "private_to_core": 1, "output": "idx.npy"}
  ],
  "cores": [
    {"SP": [{"op": "dma_copy", "dst": {"mem": "sbuf", "partition": [0, 128], "offset": 0, "dtype": "bfloat16",
                                       "pattern": [[1, 512]]},
             "src": {"tensor": "x", "pattern": [[512, 128], [1, 512]]}, "queue": 3,
             "update": [[2, 16]], "line": 12, "file": "kernel.cpp"}],
     "PE": [{"op": "nc_matmul", "dst": {"mem": "psum", "partition": [0, 128], "dtype": "float32", "pattern": [[1, 512]]},
             "stationary": {"mem": "sbuf", "partition": [0, 128], "dtype": "bfloat16", "pattern": [[1, 128]]},
             "moving": {"mem": "sbuf", "partition": [0, 128], "dtype": "bfloat16", "pattern": [[1, 512]]},
             "accumulate": true, "wait": [[2, 16]], "update": [{"sem": 5, "delta": 1, "peer": true}]}],
     "ACT": [{"op": "activation", "func": "gelu_apprx_tanh", "scale": 0.5, "bias": "-inf",
              "dst": {"mem": "sbuf", "partition": [0, 128], "offset": 4096, "dtype": "float32", "pattern": [[1, 512]]},
              "data": {"mem": "psum", "partition": [0, 128], "dtype": "float32", "pattern": [[1, 512]]},
              "reduce_res": {"mem": "sbuf", "partition": [0, 128], "offset": 8192, "dtype": "float32", "pattern": [[1, 1]]}}],
     "DVE": [{"op": "tensor_scalar", "op0": "left_shift", "op1": "bitwise_and", "operand1": 3, "reverse0": true,
              "operand0": {"mem": "sbuf", "partition": [0, 64], "offset": 16, "dtype": "int32", "pattern": [[1, 1]]},
              "dst": {"mem": "sbuf", "partition": [0, 64], "dtype": "int32", "pattern": [[4, 2], [1, 4]]},
              "data": {"mem": "sbuf", "partition": [0, 64], "offset": 32, "dtype": "int32", "pattern": [[4, 2], [1, 4]]}},
             {"op": "quantize_mx", "scale_offset": 4,
              "dst": {"mem": "sbuf", "partition": [0, 32], "dtype": "float8_e4m3fn_x4", "pattern": [[1, 8]]},
              "src": {"mem": "sbuf", "partition": [0, 32], "offset": 64, "dtype": "bfloat16", "pattern": [[1, 32]]},
              "dst_scale": {"mem": "sbuf", "partition": [0, 32], "offset": 256, "dtype": "float8_e8m0fnu", "pattern": [[1, 8]]}}],
     "POOL": [{"op": "iota", "base": 1, "channel_multiplier": 2, "steps": [3],
               "dst": {"mem": "sbuf", "partition": [0, 4], "dtype": "int32", "pattern": [[1, 5]]}},
              {"op": "dma_copy", "oob_mode": "skip", "queue": 1,
               "dst": {"mem": "sbuf", "partition": [0, 128], "dtype": "bfloat16", "pattern": [[1, 512]]},
               "src": {"tensor": "x", "pattern": [[0, 128], [1, 512]]},
               "vector_offset": {"mem": "sbuf", "partition": [0, 128], "dtype": "int32", "pattern": [[1, 1]]}}]},
    {"POOL": [{"op": "core_barrier", "wait": [[1, 1]]}]}
  ]
})";

std::string error_of(const std::string& text) {
  try {
    program_from_json(json::parse(text));
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// kProgram with `from` replaced by `to` (first occurrence).
std::string edit(const std::string& from, const std::string& to) {
  std::string s = kProgram;
  const auto pos = s.find(from);
  REQUIRE(pos != std::string::npos);
  return s.replace(pos, from.size(), to);
}

}  // namespace

TEST_CASE("program JSON loads every field", "[isa][json]") {
  const Program p = program_from_json(json::parse(kProgram));
  CHECK(p.generation == Generation::Trn3);
  REQUIRE(p.tensors.size() == 2);
  CHECK(p.tensors[0].init == R"({"generator":"normal","seed":3})");
  CHECK(p.tensors[1].output == R"("idx.npy")");
  CHECK(p.tensors[1].private_to_core == 1);
  const Instruction& dma = p.streams[0][static_cast<int>(Engine::SP)].at(0);
  CHECK(dma.engine == Engine::SP);
  CHECK(dma.dma_queue == 3);
  CHECK(dma.ops[1].space == MemSpace::HBM);
  CHECK(dma.ops[1].dtype == DType::BF16);  // defaults to the tensor's dtype
  CHECK(dma.ops[1].partition_stride == 512);
  CHECK(dma.ops[1].partitions == 128);
  CHECK(dma.ops[1].ndim == 1);
  CHECK(dma.loc.line == 12);
  CHECK(p.files.at(dma.loc.file) == "kernel.cpp");
  const Instruction& mm = p.streams[0][static_cast<int>(Engine::PE)].at(0);
  CHECK(mm.has(kAccumulate));
  CHECK(mm.updates.at(0).peer);
  const Instruction& act = p.streams[0][static_cast<int>(Engine::ACT)].at(0);
  CHECK(act.act == ActFunc::GeluApproxTanh);
  CHECK(act.imm0 == 0.5f);
  CHECK(act.imm1 == -std::numeric_limits<float>::infinity());
  CHECK(act.has(kReduce));
  const Instruction& ts = p.streams[0][static_cast<int>(Engine::DVE)].at(0);
  CHECK(ts.flags == (kOperand0Vector | kReverse0));
  CHECK(ts.alu1 == AluOp::BitwiseAnd);
  CHECK(ts.imm1 == 3.f);
  CHECK(ts.ops[0].strides[0] == 4);
  CHECK(p.streams[0][static_cast<int>(Engine::DVE)].at(1).scale_offset == 4);
  CHECK(p.streams[0][static_cast<int>(Engine::POOL)].at(0).iota_steps[0] == 3);
  CHECK(p.streams[0][static_cast<int>(Engine::POOL)].at(1).has(kOobSkip));
  CHECK(p.streams[1][static_cast<int>(Engine::POOL)].at(0).op == Opcode::CoreBarrier);
  // Every instruction of this program passes the rule checks on Trn3.
  Limits l;
  l.generation = Generation::Trn3;
  l.sbuf_bytes_per_partition = 256 * 1024;
  for (int c = 0; c < 2; ++c)
    for (const auto& stream : p.streams[c])
      for (const Instruction& in : stream) CHECK_NOTHROW(check(in, p, l));
}

TEST_CASE("program JSON round trip", "[isa][json]") {
  const json first = program_to_json(program_from_json(json::parse(kProgram)));
  const Program again = program_from_json(first);
  CHECK(program_to_json(again) == first);
  CHECK(first["cores"][0]["ACT"][0]["bias"] == "-inf");
  CHECK(first["tensors"][0]["init"]["seed"] == 3);
  // Through a file.
  const std::string path = "test_program_json_roundtrip.json";
  save_program(again, path);
  CHECK(program_to_json(load_program(path)) == first);
  std::remove(path.c_str());
}

TEST_CASE("program JSON keeps an integer memset value FP32 does not hold", "[isa][json]") {
  // 16777217 = 2^24 + 1 into int32: imm0 its FP32 rounding (2^24), imm1 the rest (split_fill); into float32
  // only the FP32 value, as before.
  const Program p = program_from_json(json::parse(R"({"num_cores": 1, "cores": [{"POOL": [
    {"op": "memset", "value": 16777217, "dst": {"mem": "sbuf", "partition": [0, 1], "dtype": "int32", "pattern": [[1, 2]]}},
    {"op": "memset", "value": 16777217, "dst": {"mem": "sbuf", "partition": [0, 1], "dtype": "float32", "pattern": [[1, 2]]}}
  ]}]})"));
  const auto& pool = p.streams[0][static_cast<int>(Engine::POOL)];
  CHECK((pool.at(0).imm0 == 16777216.f && pool.at(0).imm1 == 1.f));
  CHECK((pool.at(1).imm0 == 16777216.f && pool.at(1).imm1 == 0.f));
  const json j = program_to_json(p);
  CHECK(j["cores"][0]["POOL"][0]["value"].get<double>() == 16777217.0);
  CHECK(j["cores"][0]["POOL"][1]["value"].get<double>() == 16777216.0);
  CHECK(program_to_json(program_from_json(j)) == j);
}

TEST_CASE("program JSON errors name the JSON path", "[isa][json]") {
  CHECK(error_of(edit(R"("moving": {"mem": "sbuf", "partition": [0, 128])",
                      R"("moving": {"mem": "sbuf", "partition": [0])")) ==
        "cores[0].PE[0].moving.partition: expected [start, count]");
  CHECK(error_of(edit(R"("accumulate": true)", R"("accumulate": true, "bogus": 1)")) ==
        "cores[0].PE[0]: unknown key 'bogus'");
  CHECK(error_of(edit(R"("tensor": "x")", R"("tensor": "y")")) ==
        "cores[0].SP[0].src.tensor: unknown tensor 'y'");
  CHECK(error_of(edit(R"("dtype": "bfloat16", "shape")", R"("dtype": "bf16", "shape")")) ==
        "tensors[0].dtype: unknown dtype 'bf16'");
  CHECK(error_of(edit(R"("op": "iota")", R"("op": "iotta")")) ==
        "cores[0].POOL[0].op: unknown opcode 'iotta'");
  CHECK(error_of(edit(R"("func": "gelu_apprx_tanh")", R"("func": "gelu2")")) ==
        "cores[0].ACT[0].func: unknown activation function 'gelu2'");
  CHECK(error_of(edit(R"("queue": 3)", R"("queue": "3")")) == "cores[0].SP[0].queue: expected an integer");
  CHECK(error_of(edit(R"("wait": [[2, 16]])", R"("wait": [[2]])")) ==
        "cores[0].PE[0].wait[0]: expected [semaphore, value]");
  CHECK(error_of(edit(R"("scale": 0.5)", R"("scale": "half")")) ==
        "cores[0].ACT[0].scale: expected a number (or \"inf\", \"-inf\", \"nan\")");
  CHECK(error_of(edit(R"("pattern": [[4, 2], [1, 4]]})", R"("pattern": [[4, 2], [1]]})")) ==
        "cores[0].DVE[0].dst.pattern[1]: expected [stride, size]");
  CHECK(error_of(edit(R"("num_cores": 2)", R"("num_cores": 1)")) ==
        "cores: expected 1 cores (num_cores), got 2");
  CHECK(error_of(edit(R"("generation": "trn3")", R"("generation": "trn4")")) ==
        "generation: expected \"trn1\", \"trn2\" or \"trn3\", got \"trn4\"");
  CHECK(error_of(edit(R"("private_to_core": 1)", R"("private_to_core": 2)")) ==
        "tensors[1].private_to_core: 2 is outside [-1, 1]");
  CHECK(error_of(edit(R"({"mem": "psum", "partition": [0, 128], "dtype": "float32")",
                      R"({"mem": "hbm", "partition": [0, 128], "dtype": "float32")")) ==
        "cores[0].PE[0].dst.mem: expected \"sbuf\" or \"psum\", got \"hbm\"");
  // An instruction counts its semaphore waits and updates in 16 bits: a longer list is refused by name.
  std::string waits = "[[2, 16]";
  for (int k = 0; k < 65535; ++k) waits += ", [2, 16]";
  CHECK(error_of(edit(R"("wait": [[2, 16]])", R"("wait": )" + waits + "]")) ==
        "cores[0].PE[0].wait: program too big: an instruction holds at most 65535 semaphore waits, found "
        "65536");
  CHECK(error_of(edit(R"("update": [[2, 16]])", R"("update": )" + waits + "]")) ==
        "cores[0].SP[0].update: program too big: an instruction holds at most 65535 semaphore updates, found "
        "65536");
  waits.replace(0, 9, "[");  // 65535: held
  CHECK(program_from_json(json::parse(edit(R"("wait": [[2, 16]])", R"("wait": )" + waits + "]")))
            .streams[0][static_cast<int>(Engine::PE)][0]
            .waits.size() == 65535);
  CHECK(error_of(R"({"cores": [{}], "extra": 1})") == "(root): unknown key 'extra'");
  CHECK(error_of(R"({"num_cores": 1})") == "(root): missing key 'cores'");
}

TEST_CASE("program files are read by the one JSON reader: file and JSON path in every message",
          "[isa][json]") {
  const std::string path = "test_program_json_reader.json";
  const auto load_text = [&](const std::string& text) {
    {
      std::ofstream out(path);
      out << text;
    }
    std::string e;
    try {
      load_program(path);
    } catch (const InputError& x) {
      e = x.what();
    }
    std::remove(path.c_str());
    return e;
  };
  CHECK(load_text(R"({"num_cores": 1, "num_cores": 2, "cores": [{}]})") ==
        path + ": num_cores: key appears twice in one object");
  CHECK(load_text(R"({"cores": [{"SP": [{"op": "memset", "value": )" + std::string(100000, '[')) ==
        path + ": cores[0].SP[0].value: nested deeper than 64 levels");
  CHECK(load_text(R"({"cores": [{}], "tensors": [{"name": "x", "dtype": "float32", "shape": [1e400]}]})") ==
        path + ": not valid JSON: number overflow parsing '1e400'");
  CHECK(load_text("{\"cores\": [{}], \"" + std::string(300, 'k') + "\": 1}") ==
        path + ": (top level): key '" + std::string(60, 'k') + "...' has 300 bytes (keys have at most 256)");
  // Values echoed in messages are cut to an excerpt.
  CHECK(
      load_text(R"({"num_cores": 1, "cores": [{"SP": [{"op": ")" + std::string(100000, 'o') + R"("}]}]})") ==
      path + ": cores[0].SP[0].op: unknown opcode '" + std::string(60, 'o') + "...'");
  CHECK(
      load_text(R"({"cores": [{}], "tensors": [{"name": "a\u0001b", "dtype": "float32", "shape": [1]}]})") ==
      path + ": tensors[0].name: expected a name of 1-200 bytes of printable characters, found 'a\\x01b'");
  CHECK_THROWS_MATCHES(load_program("/nonexistent/p.json"), InputError,
                       Catch::Message("/nonexistent/p.json: no such file"));
  CHECK_THROWS_MATCHES(load_program("."), InputError,
                       Catch::Message(".: is a directory, expected a JSON file"));
}
