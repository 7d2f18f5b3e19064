// Kernel registry: parameter validation errors, defaults, and the library's matmul_bf16.
#include <catch2/catch.hpp>

#include "kernels/api/registry.h"
#include "sim/base/error.h"

using namespace trnsim;
using namespace trnsim::kernels;
using nlohmann::json;

namespace {

Registry toy_registry() {
  Registry r;
  KernelInfo k;
  k.name = "toy";
  k.params = {
      {.name = "M", .type = ParamType::Int, .min = 1, .max = 4096, .doc = "rows"},
      {.name = "alpha", .type = ParamType::Float, .default_value = 1.0, .doc = "scale"},
      {.name = "fast", .type = ParamType::Bool, .default_value = false, .doc = "fast path"},
      {.name = "label", .type = ParamType::String, .default_value = "x", .doc = "a label"},
      {.name = "order",
       .type = ParamType::Enum,
       .default_value = "mnk",
       .allowed = {"mnk", "nmk"},
       .doc = "loop"},
      {.name = "shape",
       .type = ParamType::Shape,
       .default_value = json::array({1, 2}),
       .min = 1,
       .doc = "dims"},
  };
  k.build = [](const json& p, const BuildOptions& o) {
    return build_program(
        [&](Kernel& kern) {
          kern.input("in", DType::F32, {p.at("M").get<int64_t>(), 4});
        },
        o);
  };
  r.add(std::move(k));
  return r;
}

std::string error_of(const Registry& r, const json& params) {
  try {
    r.validate("toy", params);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("registry: defaults are filled and values normalised", "[kernels][registry]") {
  Registry r = toy_registry();
  json v = r.validate("toy", {{"M", 128}, {"alpha", 2}});
  CHECK(v.at("M") == 128);
  CHECK(v.at("alpha").is_number_float());
  CHECK(v.at("alpha").get<double>() == 2.0);
  CHECK(v.at("fast") == false);
  CHECK(v.at("order") == "mnk");
  CHECK(v.at("shape") == json::array({1, 2}));
  KernelBuild b = r.build("toy", {{"M", 96}}, {});
  REQUIRE(b.program.tensors.size() == 1);
  CHECK(b.program.tensors[0].shape == std::vector<int64_t>{96, 4});
  CHECK(b.inputs == std::vector<std::string>{"in"});
}

TEST_CASE("registry: errors name the kernel and the parameter", "[kernels][registry]") {
  Registry r = toy_registry();
  CHECK(error_of(r, {{"M", 1}, {"bogus", 3}}) ==
        "kernel 'toy': unknown parameter 'bogus' (known: M, alpha, fast, label, order, shape)");
  CHECK(error_of(r, {{"M", -3}}) == "kernel 'toy': parameter 'M': expected an integer in [1, 4096], got -3");
  CHECK(error_of(r, {{"M", 2.5}}) ==
        "kernel 'toy': parameter 'M': expected an integer in [1, 4096], got 2.5");
  CHECK(error_of(r, json::object()) == "kernel 'toy': parameter 'M' is required (int: rows)");
  CHECK(error_of(r, {{"M", 1}, {"order", "kmn"}}) ==
        "kernel 'toy': parameter 'order': expected one of mnk, nmk, got \"kmn\"");
  CHECK(error_of(r, {{"M", 1}, {"fast", 1}}) ==
        "kernel 'toy': parameter 'fast': expected true or false, got 1");
  CHECK(error_of(r, {{"M", 1}, {"shape", {1, 0}}}) ==
        "kernel 'toy': parameter 'shape': expected a list of integers each >= 1, got [1,0]");
  CHECK(error_of(r, {{"M", 1}, {"label", 5}}) == "kernel 'toy': parameter 'label': expected a string, got 5");
  CHECK(error_of(r, json::array()) == "kernel 'toy': parameters must be a JSON object, got []");
  CHECK_THROWS_WITH(r.validate("nope", {}), "unknown kernel 'nope' (known: toy)");

  KernelInfo dup;
  dup.name = "toy";
  dup.build = [](const json&, const BuildOptions&) { return KernelBuild{}; };
  CHECK_THROWS_WITH(r.add(dup), Catch::Contains("registered twice"));
  KernelInfo bad_default;
  bad_default.name = "bad";
  bad_default.params = {{.name = "n", .type = ParamType::Int, .default_value = 0, .min = 1}};
  bad_default.build = dup.build;
  CHECK_THROWS_WITH(r.add(bad_default), Catch::Contains("parameter 'n'"));
}

TEST_CASE("matmul_bf16: registered, builds per-core streams under LNC2", "[kernels][registry][matmul]") {
  register_all_kernels();
  register_all_kernels();  // idempotent
  const KernelInfo& info = registry().get("matmul_bf16");
  CHECK(info.params.size() >= 3);
  BuildOptions o{default_limits(Generation::Trn2), 2};
  // M = 256 (2 tiles), N = 1024 (2 tiles of 512), K = 256 (2 tiles): N split, one N tile per core.
  KernelBuild b = registry().build("matmul_bf16", {{"M", 256}, {"N", 1024}, {"K", 256}}, o);
  CHECK(b.inputs == std::vector<std::string>{"x", "w"});
  CHECK(b.outputs == std::vector<std::string>{"y"});
  for (int core = 0; core < 2; ++core) {
    const auto& pe = b.program.streams[core][static_cast<int>(Engine::PE)];
    REQUIRE(pe.size() == 2 * 2);  // 2 M tiles x 2 K tiles
    CHECK_FALSE(pe[0].has(isa::kAccumulate));
    CHECK(pe[1].has(isa::kAccumulate));
    CHECK(pe[0].ops[2].partitions == 128);
    CHECK(pe[0].ops[2].free_elements() == 512);
    // Core c's stores write columns [512c, 512c + 512) of y.
    const auto& sp = b.program.streams[core][static_cast<int>(Engine::SP)];
    const isa::Instruction& store = sp.back();
    CHECK(store.op == isa::Opcode::DmaCopy);
    CHECK(store.ops[0].space == isa::MemSpace::HBM);
    CHECK(store.ops[0].offset_bytes == (128 * 1024 + 512 * core) * 2);
    // The first matmul waits for both transposed loads it reads.
    CHECK(pe[0].waits.size() == 2);
  }
  // Ragged shapes, PE transposes, FP32 output, one core.
  KernelBuild r = registry().build("matmul_bf16",
                                   {{"M", 200},
                                    {"N", 300},
                                    {"K", 160},
                                    {"transpose_load", "pe"},
                                    {"output_dtype", "float32"},
                                    {"tile_n", 256}},
                                   {default_limits(Generation::Trn3), 1});
  // 8 matmuls (2 N x 2 M x 2 K tiles); W transposes: (2 + 1 chunks of 128 rows) x 2 K tiles; X: 2 x 2 x 2.
  CHECK(r.program.streams[0][static_cast<int>(Engine::PE)].size() == 8 + 3 * 2 + 8);
  CHECK_THROWS_WITH(registry().build("matmul_bf16", {{"M", 4}, {"N", 4}, {"K", 4}, {"tile_n", 1024}}, o),
                    Catch::Contains("parameter 'tile_n'"));
}

TEST_CASE("matmul_bf16: a large build stays fast", "[kernels][registry][matmul]") {
  register_all_kernels();
  // 16 x 8 x 16 = 2048 matmuls plus ~3k loads, copies and stores per core.
  KernelBuild b = registry().build("matmul_bf16", {{"M", 2048}, {"N", 8192}, {"K", 2048}},
                                   {default_limits(Generation::Trn2), 2});
  CHECK(b.program.streams[0][static_cast<int>(Engine::PE)].size() == 16 * 8 * 16);
  CHECK(b.program.streams[1][static_cast<int>(Engine::PE)].size() == 16 * 8 * 16);
}
