// Kernel packages and the registry: typed parameters (defaults, nested objects, shared includes, enums,
// nullable fields), validation errors, recipes, and the library's matmul_bf16 build.
#include <catch2/catch.hpp>

#include "kernels/api/registry.h"
#include "sim/base/error.h"

using namespace trnsim;
using namespace trnsim::kernels;
using nlohmann::json;

namespace {

enum class Order { MNK, NMK };

struct Tiles {
  std::optional<int64_t> tile_m;
  int64_t bufs = 2;
  static void describe(Schema<Tiles>& s) {
    s.add(&Tiles::tile_m, "tile_m", "tile rows; null: auto").range(32, 128);
    s.add(&Tiles::bufs, "bufs", "buffers", 2).range(1, 4);
  }
};

struct Shared {
  bool fast = false;
  static void describe(Schema<Shared>& s) { s.add(&Shared::fast, "fast", "fast path", false); }
};

struct ToyParams {
  int64_t M = 0;
  double alpha = 1.0;
  std::string label = "x";
  Order order = Order::MNK;
  std::optional<std::vector<int64_t>> shape;
  std::optional<Tiles> config;
  Shared shared;
  static void describe(Schema<ToyParams>& s) {
    s.add(&ToyParams::M, "M", "rows").range(1, 4096);
    s.add(&ToyParams::alpha, "alpha", "scale", 1.0);
    s.add(&ToyParams::label, "label", "a label", std::string("x"));
    s.choice(&ToyParams::order, "order", "loop", {{"mnk", Order::MNK}, {"nmk", Order::NMK}}, Order::MNK);
    s.add(&ToyParams::shape, "shape", "dims").at_least(1);
    s.object(&ToyParams::config, "config", "tiling");
    s.include(&ToyParams::shared);
  }
};

struct SeedArgs {
  int64_t seed = 0;
  static void describe(Schema<SeedArgs>& s) { s.add(&SeedArgs::seed, "seed", "seed").at_least(0); }
};

Registry toy_registry() {
  KernelPackage<ToyParams> k;
  k.name = "toy";
  k.doc = "a toy";
  k.kernel = [](Kernel& kern, const ToyParams& p) {
    kern.input("in", DType::F32, {p.M, 4});
    kern.input("idx", DType::I32, {p.M});
  };
  k.recipes.push_back(make_recipe<ToyParams, SeedArgs>(
      "pair", "fills in and idx",
      [](const ToyParams&) {
        return std::vector<std::string>{"in", "idx"};
      },
      nullptr,
      [](const ToyParams& p, const SeedArgs& a, RecipeIO& io) {
        io.output("in").set(0, static_cast<float>(a.seed));
        io.output("idx").set_int(p.M - 1, 7);
      }));
  Registry r;
  r.add(make_kernel(std::move(k)));
  return r;
}

std::string error_of(const Registry& r, const json& params) {
  try {
    r.bind("toy", params);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("registry: typed parameters get their defaults and round-trip to JSON", "[kernels][registry]") {
  Registry r = toy_registry();
  const auto b = r.bind("toy", {{"M", 128}, {"alpha", 2}, {"order", "nmk"}, {"config", {{"tile_m", 64}}}});
  const auto* bp = dynamic_cast<const BoundPackage<ToyParams>*>(b.get());
  REQUIRE(bp != nullptr);
  const ToyParams& p = bp->typed();
  CHECK(p.M == 128);
  CHECK(p.alpha == 2.0);
  CHECK(p.order == Order::NMK);
  CHECK(p.config.has_value());
  CHECK(p.config->tile_m == 64);
  CHECK(p.config->bufs == 2);  // nested default
  CHECK_FALSE(p.shape.has_value());
  CHECK(p.shared.fast == false);
  const json j = b->params();
  CHECK(j == json{{"M", 128},
                  {"alpha", 2.0},
                  {"label", "x"},
                  {"order", "nmk"},
                  {"shape", nullptr},
                  {"config", {{"tile_m", 64}, {"bufs", 2}}},
                  {"fast", false}});
  KernelBuild kb = b->build({});
  REQUIRE(kb.program.tensors.size() == 2);
  CHECK(kb.program.tensors[0].shape == std::vector<int64_t>{128, 4});
  CHECK(kb.inputs == std::vector<std::string>{"in", "idx"});
  CHECK_FALSE(b->cores().has_value());
  // The schema lists the included fields flat and the nested ones under their object.
  std::vector<std::string> names;
  for (const ParamSpec& s : r.get("toy").params()) names.push_back(s.name);
  CHECK(names == std::vector<std::string>{"M", "alpha", "label", "order", "shape", "config", "fast"});
  CHECK(r.get("toy").params()[5].fields.size() == 2);
}

TEST_CASE("registry: errors name the kernel and the parameter", "[kernels][registry]") {
  Registry r = toy_registry();
  CHECK(error_of(r, {{"M", 1}, {"bogus", 3}}) ==
        "kernel 'toy': unknown parameter 'bogus' (known: M, alpha, label, order, shape, config, fast)");
  CHECK(error_of(r, {{"M", -3}}) == "kernel 'toy': parameter 'M': expected an integer in [1, 4096], got -3");
  CHECK(error_of(r, {{"M", 2.5}}) ==
        "kernel 'toy': parameter 'M': expected an integer in [1, 4096], got 2.5");
  CHECK(error_of(r, json::object()) == "kernel 'toy': parameter 'M' is required (int: rows)");
  CHECK(error_of(r, {{"M", 1}, {"order", "kmn"}}) ==
        "kernel 'toy': parameter 'order': expected one of mnk, nmk, got \"kmn\"");
  CHECK(error_of(r, {{"M", 1}, {"fast", 1}}) ==
        "kernel 'toy': parameter 'fast': expected true or false, got 1");
  CHECK(error_of(r, {{"M", 1}, {"shape", {1, 0}}}) ==
        "kernel 'toy': parameter 'shape[1]': expected an integer >= 1, got 0");
  CHECK(error_of(r, {{"M", 1}, {"shape", {4, "x", 2}}}) ==
        "kernel 'toy': parameter 'shape[1]': expected an integer >= 1, got \"x\"");
  CHECK(error_of(r, {{"M", 1}, {"shape", json::array()}}) ==
        "kernel 'toy': parameter 'shape': expected a list of integers each >= 1 or null, got an array of 0 "
        "elements");
  CHECK(error_of(r, {{"M", 1}, {"label", 5}}) == "kernel 'toy': parameter 'label': expected a string, got 5");
  CHECK(error_of(r, {{"M", 1}, {"config", {{"tile_m", 16}}}}) ==
        "kernel 'toy': parameter 'config.tile_m': expected an integer in [32, 128] or null, got 16");
  CHECK(error_of(r, {{"M", 1}, {"config", {{"tile_q", 16}}}}) ==
        "kernel 'toy': unknown parameter 'config.tile_q' (known: tile_m, bufs)");
  CHECK(error_of(r, {{"M", 1}, {"config", 3}}) ==
        "kernel 'toy': parameter 'config': expected a JSON object or null, got 3");
  CHECK(error_of(r, json::array()) ==
        "kernel 'toy': parameters must be a JSON object, got an array of 0 elements");
  CHECK_THROWS_WITH(r.bind("nope", {}), "unknown kernel 'nope' (known: toy)");

  KernelPackage<ToyParams> dup;
  dup.name = "toy";
  CHECK_THROWS_WITH(r.add(make_kernel(dup)), Catch::Contains("registered twice"));
}

TEST_CASE("registry: recipes declare what they make and fill it", "[kernels][registry]") {
  Registry r = toy_registry();
  REQUIRE(r.get("toy").recipes().size() == 1);
  CHECK(r.get("toy").recipes()[0].args[0].name == "seed");
  const auto b = r.bind("toy", {{"M", 3}});
  CHECK_FALSE(b->recipe_plan("nope").has_value());
  const auto plan = b->recipe_plan("pair");
  REQUIRE(plan.has_value());
  CHECK(plan->produces == std::vector<std::string>{"in", "idx"});
  CHECK(plan->reads.empty());
  CHECK_THROWS_WITH(b->check_recipe_args("pair", {{"seed", -1}}, "inputs.x"),
                    "inputs.x (recipe 'pair'): parameter 'seed': expected an integer >= 0, got -1");
  const json args = b->check_recipe_args("pair", {{"seed", 5}}, "inputs.x");
  Tensors made, out;
  out.emplace("in", tensor::HostTensor::zeros(DType::F32, {3, 4}));
  out.emplace("idx", tensor::HostTensor::zeros(DType::I32, {3}));
  RecipeIO io(made, out, 1);
  b->run_recipe("pair", args, io);
  CHECK(out.at("in").value(0) == 5.0f);
  CHECK(out.at("idx").int_value(2) == 7);
  CHECK_THROWS_WITH(io.output("nope"), Catch::Contains("'nope'"));
}

TEST_CASE("matmul_bf16: registered, builds per-core streams under LNC2", "[kernels][registry][matmul]") {
  const KernelDef& def = registry().get("matmul_bf16");
  CHECK(def.params().size() >= 3);
  BuildOptions o{default_limits(Generation::Trn2), 2};
  // M = 256 (2 tiles), N = 1024 (2 tiles of 512), K = 256 (2 tiles): N split, one N tile per core.
  KernelBuild b = registry().bind("matmul_bf16", {{"M", 256}, {"N", 1024}, {"K", 256}})->build(o);
  CHECK(b.inputs == std::vector<std::string>{"x", "w"});
  CHECK(b.outputs == std::vector<std::string>{"y"});
  for (int core = 0; core < 2; ++core) {
    const auto& pe = b.program.streams[core][static_cast<int>(Engine::PE)];
    REQUIRE(pe.size() == 2 * 2);  // 2 M tiles x 2 K tiles
    CHECK_FALSE(pe[0].has(isa::kAccumulate));
    CHECK(pe[1].has(isa::kAccumulate));
    CHECK(pe[0].ops[2].partitions == 128);
    CHECK(pe[0].ops[2].free_elements() == 512);
    // Core c's stores (on ACT, the builder's default for stores) write columns [512c, 512c + 512) of y.
    const auto& act = b.program.streams[core][static_cast<int>(Engine::ACT)];
    REQUIRE_FALSE(act.empty());
    const isa::Instruction& store = act.back();
    CHECK(store.op == isa::Opcode::DmaCopy);
    CHECK(store.ops[0].space == isa::MemSpace::HBM);
    CHECK(store.ops[0].offset_bytes == (128 * 1024 + 512 * core) * 2);
    // The first matmul waits for both transposed loads it reads: its LoadStationary for the stationary's,
    // its MultiplyMoving for the moving operand's.
    CHECK(pe[0].waits.size() == 1);
    CHECK(pe[0].mm_waits.size() == 1);
  }
  // Ragged shapes, PE transposes, FP32 output, one core.
  KernelBuild r = registry()
                      .bind("matmul_bf16", {{"M", 200},
                                            {"N", 300},
                                            {"K", 160},
                                            {"transpose_load", "pe"},
                                            {"output_dtype", "float32"},
                                            {"tile_n", 256}})
                      ->build({default_limits(Generation::Trn3), 1});
  // 8 matmuls (2 N x 2 M x 2 K tiles); W transposes: (2 + 1 chunks of 128 rows) x 2 K tiles; X: 2 x 2 x 2.
  CHECK(r.program.streams[0][static_cast<int>(Engine::PE)].size() == 8 + 3 * 2 + 8);
  CHECK_THROWS_WITH(registry().bind("matmul_bf16", {{"M", 4}, {"N", 4}, {"K", 4}, {"tile_n", 1024}}),
                    Catch::Contains("parameter 'tile_n'"));
  // Its check is a matmul check of y against x and w.
  const auto checks = registry().bind("matmul_bf16", {{"M", 4}, {"N", 4}, {"K", 4}})->checks();
  REQUIRE(checks.size() == 1);
  CHECK(checks[0].output == "y");
}

TEST_CASE("matmul_bf16: a large build stays fast", "[kernels][registry][matmul]") {
  // 16 x 8 x 16 = 2048 matmuls plus ~3k loads, copies and stores per core.
  KernelBuild b = registry()
                      .bind("matmul_bf16", {{"M", 2048}, {"N", 8192}, {"K", 2048}})
                      ->build({default_limits(Generation::Trn2), 2});
  CHECK(b.program.streams[0][static_cast<int>(Engine::PE)].size() == 16 * 8 * 16);
  CHECK(b.program.streams[1][static_cast<int>(Engine::PE)].size() == 16 * 8 * 16);
}

TEST_CASE("registry: every library kernel's schema is valid and its name unique", "[kernels][registry]") {
  std::vector<std::string> names;
  for (const KernelDef* k : registry().kernels()) {
    names.push_back(k->name());
    CHECK_FALSE(k->doc().empty());
  }
  CHECK(names.size() >= 8);
  std::sort(names.begin(), names.end());
  CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
}
