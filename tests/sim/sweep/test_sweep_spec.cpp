// Sweep files (tools/sweep/spec.h): the shipped sweeps parse with the sizes their descriptions give, the
// product's order and --set assignments, constraints in Lua (names, dotted paths, null), and the point key.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "sim/base/error.h"
#include "tools/sweep/point_check.h"
#include "tools/sweep/spec.h"

namespace fs = std::filesystem;
using trnsim::InputError;
using namespace trnsim::sweep;

namespace {

std::string shipped(const std::string& name) {
  return (fs::path(TRNSIM_SOURCE_DIR) / "configs" / "sweeps" / name).string();
}

std::string write_sweep(const std::string& body) {
  const fs::path p =
      fs::temp_directory_path() / ("trnsim_test_sweep_" + std::to_string(::getpid()) + ".json");
  std::ofstream(p) << body;
  return p.string();
}

std::string small_sweep(const std::string& rest) {
  const std::string w =
      (fs::path(TRNSIM_SOURCE_DIR) / "configs/workloads/matmul_mxfp8_bwd_512_trn3.json").string();
  return write_sweep("{\"name\": \"t\", \"workload\": \"" + w + "\", " + rest + "}");
}

}  // namespace

TEST_CASE("shipped sweeps parse with their sizes", "[sweep]") {
  // 2 orders x 2 shards x 2 tile_n x (3 x 2 x 3) blocks per phase, squared: 8 x 18 x 18 = 2592.
  const Spec main = parse_spec(shipped("llama3_8b_down_bwd_tiling.json"));
  CHECK(main.product_size() == 2592);
  CHECK(main.listed.size() == 1);
  // 2 x 2 x 5 x 2 x 5 = 200.
  CHECK(parse_spec(shipped("llama3_8b_down_bwd_tiling_200.json")).product_size() == 200);
  // 3 block sizes x 3^4 per-phase blockings; nki-library's two table entries and the shipped workload.
  const Spec bwd = parse_spec(shipped("qwen3_235b_moe_bwd_blocking.json"));
  CHECK(bwd.product_size() == 243);
  CHECK(bwd.listed.size() == 3);
  CHECK(parse_spec(shipped("qwen3_235b_moe_fwd_hbm_dma.json")).product_size() == 20);
}

TEST_CASE("product order, values and --set assignments", "[sweep]") {
  const Spec s = parse_spec(small_sweep(
      "\"set\": {\"numerics\": false}, \"axes\": [{\"name\": \"o\", \"path\": \"params.tile_loop_order\", "
      "\"values\": [\"mnk\", \"nmk\"]}, {\"name\": \"bm\", \"path\": "
      "\"params.input_grad_config.TILES_IN_BLOCK_M\", "
      "\"values\": [null, 2, 4]}]"));
  REQUIRE(s.product_size() == 6);
  // The last axis varies fastest: point 4 = o[1], bm[1].
  const Point p = product_point(s, 4);
  CHECK(p.values["o"] == "nmk");
  CHECK(p.values["bm"] == 2);
  CHECK(p.sets == std::vector<std::string>{"numerics=false", "params.tile_loop_order=\"nmk\"",
                                           "params.input_grad_config.TILES_IN_BLOCK_M=2"});
  CHECK(product_point(s, 0).sets.back() == "params.input_grad_config.TILES_IN_BLOCK_M=null");
}

TEST_CASE("constraints: names, null, strings, dotted paths", "[sweep]") {
  const Spec s = parse_spec(small_sweep(
      "\"axes\": {\"params.tile_loop_order\": [\"mnk\", \"nmk\"], "
      "\"params.input_grad_config.TILES_IN_BLOCK_M\": "
      "[null, 1, 2, 4]}, \"constraints\": [\"params.input_grad_config.TILES_IN_BLOCK_M == null or "
      "params.input_grad_config.TILES_IN_BLOCK_M % 2 == 0\", \"params.tile_loop_order == 'mnk' or "
      "params.input_grad_config.TILES_IN_BLOCK_M ~= 4\"]"));
  const Enumeration e = enumerate(s, 100);
  // 8 points: bm 1 fails the first constraint (2 points), nmk with bm 4 the second (1 point): 5 left.
  CHECK(e.excluded == 3);
  REQUIRE(e.points.size() == 5);
  CHECK(e.points[4].values["params.tile_loop_order"] == "nmk");
  CHECK(e.points[4].values["params.input_grad_config.TILES_IN_BLOCK_M"] == 2);
  Constraints cs(s);
  nlohmann::ordered_json v = {{"params.tile_loop_order", "nmk"},
                              {"params.input_grad_config.TILES_IN_BLOCK_M", 4}};
  CHECK(cs.first_broken(v) == 1);
}

TEST_CASE("bad sweeps are refused", "[sweep]") {
  CHECK_THROWS_WITH(
      parse_spec(small_sweep("\"axes\": {\"params.nope\": [1]}")),
      Catch::Contains("unknown path 'params.nope': kernel 'matmul_mxfp8_backward' has no parameter 'nope'"));
  CHECK_THROWS_WITH(parse_spec(small_sweep("\"axes\": {\"params.M\": []}")),
                    Catch::Contains("axes.params.M: empty list: an axis needs at least one value"));
  CHECK_THROWS_WITH(
      enumerate(parse_spec(small_sweep("\"axes\": {\"params.M\": [512, 1024]}, \"constraints\": "
                                       "[\"params.M > 2000\"]")),
                100),
      Catch::Contains("they exclude every one of the 2 points"));
  CHECK_THROWS_WITH(
      enumerate(parse_spec(small_sweep("\"axes\": {\"params.M\": [512, 1024], \"params.N\": [512, "
                                       "1024]}")),
                3),
      Catch::Contains("the product of the axes has 4 points, more than 3"));
}

TEST_CASE("point key: SHA-256 of the resolved workload", "[sweep]") {
  // FIPS 180-2's test vector: SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223...
  CHECK(short_sha256("abc") == "ba7816bf8f01cfea4141");
  const std::string w =
      (fs::path(TRNSIM_SOURCE_DIR) / "configs/workloads/matmul_mxfp8_bwd_512_trn3.json").string();
  // The kernel's default (mnk) written out resolves to the same workload as leaving it out.
  const CheckedPoint a = check_point(w, {"numerics=false"});
  const CheckedPoint b = check_point(w, {"numerics=false", "params.tile_loop_order=\"mnk\""});
  const CheckedPoint c = check_point(w, {"numerics=false", "params.tile_loop_order=\"nmk\""});
  REQUIRE(a.valid);
  CHECK(a.key == b.key);
  CHECK(a.key != c.key);
  CHECK(a.key.size() == 20);
  const CheckedPoint bad = check_point(w, {"params.input_grad_config.TILES_IN_BLOCK_M=16"});
  CHECK_FALSE(bad.valid);
  CHECK_THAT(bad.reason, Catch::Contains("is less than half a block"));
}
