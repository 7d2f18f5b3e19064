// matmul_mxfp8 on the SystemC model (Trn3): numerics against the host MX reference and nkilib's tolerances,
// bit-identity across parameters that must not change the arithmetic, and every rejected combination's error.
#include <catch2/catch.hpp>

#include <tuple>

#include "kernels/lib/matmul_mxfp8.h"
#include "sim/base/error.h"
#include "tests/sim/kernels/test_matmul_mxfp8_util.h"

using namespace trnsim;
using namespace trnsim::test;
using json = nlohmann::json;

namespace {

// Forward problem: x [M, K], w [N, K] BF16, and the input forms the kernel accepts.
struct Fwd {
  int64_t M, K, N;
  std::vector<uint16_t> x, w;
  Fwd(int64_t m, int64_t k, int64_t n) : M(m), K(k), N(n), x(random_bf16(m, k, 1)), w(random_bf16(n, k, 2)) {}

  Logical lx() const { return {&x, K, M, false}; }
  Logical lw() const { return {&w, K, N, false}; }
  json params(json extra = json::object()) const {
    // The pipeline's cases run trnsim_optimized (the stream they test); the default, nki-library's own
    // stream, is counted in test_matmul_mxfp8_bwd_lib.cpp and checked against the reference below.
    // Unswizzled E4M3 unless a case says otherwise (the kernel defaults to the library's pre-swizzled E5M2).
    json p = {{"M", M},
              {"K", K},
              {"N", N},
              {"output_dtype", "float32"},
              {"schedule", "trnsim_optimized"},
              {"float8_dtype", "float8_e4m3fn"},
              {"x_is_swizzled", false},
              {"w_is_swizzled", false}};
    p.update(extra);
    return p;
  }
  std::map<std::string, Bytes> inputs() const { return {{"x", as_bytes(x)}, {"w", as_bytes(w)}}; }
  // Transposed copy [K, F] of an F-by-K operand.
  static std::vector<uint16_t> transposed(const std::vector<uint16_t>& a, int64_t F, int64_t K) {
    std::vector<uint16_t> t(a.size());
    for (int64_t f = 0; f < F; ++f)
      for (int64_t k = 0; k < K; ++k) t[k * F + f] = a[f * K + k];
    return t;
  }
  std::vector<double> mx_ref(num::Fp8Format fmt = num::Fp8Format::E4M3FN,
                             num::QuantScheme s = num::QuantScheme::WrapX) const {
    return matmul_tn(mx_dequant(lx(), fmt, s), mx_dequant(lw(), fmt, s), K, M, N);
  }
  std::vector<double> golden() const { return matmul_tn(unquantized(lx()), unquantized(lw()), K, M, N); }
  std::vector<float> run(const json& p, const std::map<std::string, Bytes>& in) const {
    return run_kernel("matmul_mxfp8", p, in).get("y");
  }
  std::vector<float> run(const json& p) const { return run(p, inputs()); }
};

std::string build_error(const std::string& kernel, const json& p, const config::HwConfig& hw = trn3()) {
  try {
    build_mx(kernel, p, hw);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

size_t count_op(const isa::Program& p, isa::Opcode op) {
  size_t n = 0;
  for (const auto& core : p.streams)
    for (const auto& s : core)
      for (const auto& i : s) n += i.op == op;
  return n;
}

}  // namespace

TEST_CASE("matmul_mxfp8: FP32 output meets the MX reference and nkilib's tolerances (E4M3, E5M2)") {
  const Fwd f(512, 1024, 512);
  for (const char* dt : {"float8_e4m3fn", "float8_e5m2"}) {
    INFO(dt);
    const auto fmt = std::string(dt) == "float8_e5m2" ? num::Fp8Format::E5M2 : num::Fp8Format::E4M3FN;
    const auto y = f.run(f.params({{"float8_dtype", dt}}));
    CHECK(rel_l2(y, f.mx_ref(fmt)) <= 1e-5);
    check_nkilib(y, f.golden());
    // MX quantization is visible: the kernel is not the unquantized product.
    CHECK(rel_l2(y, f.golden()) > 1e-3);
  }
}

TEST_CASE("matmul_mxfp8: BF16 output is the FP32 result rounded to nearest even") {
  const Fwd f(256, 512, 1024);
  for (int bk : {1, 2}) {
    INFO("TILES_IN_BLOCK_K " << bk);
    const auto y32 = f.run(f.params({{"TILES_IN_BLOCK_K", bk}, {"tile_k", 256}}));
    const auto y16 =
        f.run(f.params({{"TILES_IN_BLOCK_K", bk}, {"tile_k", 256}, {"output_dtype", "bfloat16"}}));
    REQUIRE(y16.size() == y32.size());
    size_t diff = 0;
    for (size_t i = 0; i < y32.size(); ++i) diff += num::f32_to_bf16(y32[i]) != num::f32_to_bf16(y16[i]);
    CHECK(diff == 0);
    CHECK(rel_l2(y32, f.mx_ref()) <= 1e-5);
    CHECK(rel_l2(y16, f.mx_ref()) <= 3e-3);
    check_nkilib(y16, f.golden());
  }
}

TEST_CASE("matmul_mxfp8: loop order, LNC1/LNC2 and shard choice give bit-identical outputs") {
  const Fwd f(512, 1024, 512);
  const json blocks = {
      {"TILES_IN_BLOCK_K", 1}, {"TILES_IN_BLOCK_M", 2}, {"TILES_IN_BLOCK_N", 1}, {"tile_n", 128}};
  const auto base = f.run(f.params(blocks));
  CHECK(rel_l2(base, f.mx_ref()) <= 1e-5);
  check_nkilib(base, f.golden());
  for (const json& v : {json{{"tile_loop_order", "nmk"}}, json{{"lnc_2_shard_rhs", false}},
                        json{{"lnc_2_shard_rhs", nullptr}}, json{{"run_with_lnc2", false}},
                        json{{"run_with_lnc2", false}, {"tile_loop_order", "nmk"}}}) {
    INFO(v.dump());
    json p = f.params(blocks);
    p.update(v);
    CHECK(same_bits(f.run(p), base));
  }
  // The program really uses one or two cores.
  json p1 = f.params(blocks);
  p1["run_with_lnc2"] = false;
  CHECK(build_mx("matmul_mxfp8", p1).program.num_cores == 1);
  CHECK(build_mx("matmul_mxfp8", f.params(blocks)).program.num_cores == 2);
}

TEST_CASE("matmul_mxfp8: spill_reload and scale packing give bit-identical outputs") {
  // 3 K blocks of one tile and 4 x 4 M/N blocks: every quantized block is needed again after eviction.
  const Fwd f(512, 1536, 512);
  const json blocks = {{"TILES_IN_BLOCK_K", 1},
                       {"TILES_IN_BLOCK_M", 1},
                       {"TILES_IN_BLOCK_N", 1},
                       {"tile_n", 128},
                       {"run_with_lnc2", false}};
  const auto base = f.run(f.params(blocks));
  CHECK(rel_l2(base, f.mx_ref()) <= 1e-5);
  const size_t q_base = count_op(build_mx("matmul_mxfp8", f.params(blocks)).program, isa::Opcode::QuantizeMx);
  for (const json& v : {json{{"spill_reload", true}}, json{{"use_scale_packing", true}},
                        json{{"spill_reload", true}, {"use_scale_packing", true}},
                        json{{"spill_reload", true}, {"run_with_lnc2", true}, {"tile_loop_order", "nmk"}},
                        json{{"use_scale_packing", true}, {"TILES_IN_BLOCK_K", 3}},
                        json{{"use_scale_packing", true}, {"TILES_IN_BLOCK_K", 2}, {"spill_reload", true}}}) {
    INFO(v.dump());
    json p = f.params(blocks);
    p.update(v);
    const auto y = f.run(p);
    if (p["TILES_IN_BLOCK_K"] == 1) {
      CHECK(same_bits(y, base));
    } else {  // other K blocking: another accumulation order
      CHECK(rel_l2(y, f.mx_ref()) <= 1e-5);
    }
  }
  // Spilling replaces re-quantization: each block is quantized once (4 M blocks x 3 + 4 N blocks x 3).
  json ps = f.params(blocks);
  ps["spill_reload"] = true;
  const auto sp = build_mx("matmul_mxfp8", ps).program;
  CHECK(count_op(sp, isa::Opcode::QuantizeMx) == 24);
  CHECK(q_base > 24);
  bool scratch = false;
  for (const auto& t : sp.tensors) scratch |= t.name == "mm_rhs_spill_data";
  CHECK(scratch);
}

TEST_CASE("matmul_mxfp8: K-by-F, pre-swizzled and pre-quantized inputs give bit-identical outputs") {
  const Fwd f(512, 1024, 512);
  for (const char* scheme : {"wrapX", "1x32"}) {
    INFO(scheme);
    const auto s = std::string(scheme) == "1x32" ? num::QuantScheme::OneX32 : num::QuantScheme::WrapX;
    const json q = {{"quant_scheme", scheme}};
    const auto base = f.run(f.params(q));
    CHECK(rel_l2(base, f.mx_ref(num::Fp8Format::E4M3FN, s)) <= 1e-5);
    check_nkilib(base, f.golden());
    // K-by-F operands: x as [K, M], w as [K, N].
    auto in = f.inputs();
    in["x"] = as_bytes(Fwd::transposed(f.x, f.M, f.K));
    in["w"] = as_bytes(Fwd::transposed(f.w, f.N, f.K));
    json p = f.params(q);
    p.update({{"x_is_f_by_k", false}, {"w_is_f_by_k", false}});
    CHECK(same_bits(f.run(p, in), base));
    // Pre-swizzled BF16.
    in = f.inputs();
    in["x"] = as_bytes(swizzled(f.lx(), s));
    in["w"] = as_bytes(swizzled(f.lw(), s));
    p = f.params(q);
    p.update({{"x_is_swizzled", true}, {"w_is_swizzled", true}});
    CHECK(same_bits(f.run(p, in), base));
    // Pre-quantized, unpacked and packed scales; one operand or both.
    for (bool packed : {false, true}) {
      const auto [xd, xs] = prequantized(f.lx(), s, num::Fp8Format::E4M3FN, packed);
      const auto [wd, ws] = prequantized(f.lw(), s, num::Fp8Format::E4M3FN, packed);
      const auto xsh = num::trainium_scale_shape(f.K, f.M, packed),
                 wsh = num::trainium_scale_shape(f.K, f.N, packed);
      in = {{"x", xd}, {"x_scales", xs}, {"w", wd}, {"w_scales", ws}};
      p = f.params(q);
      p.update({{"x_scales", {xsh.rows, xsh.cols}},
                {"w_scales", {wsh.rows, wsh.cols}},
                {"use_scale_packing", packed}});
      CHECK(same_bits(f.run(p, in), base));
      in = {{"x", as_bytes(f.x)}, {"w", wd}, {"w_scales", ws}};
      p = f.params(q);
      p.update({{"w_scales", {wsh.rows, wsh.cols}}, {"use_scale_packing", packed}, {"spill_reload", true}});
      CHECK(same_bits(f.run(p, in), base));
    }
  }
}

TEST_CASE("matmul_mxfp8: tile sizes, remainder K tiles and partial M/N tiles meet the reference") {
  struct Case {
    int64_t M, K, N;
    json p;
  };
  for (const Case& c :
       {Case{256, 512, 256, {{"tile_k", 128}}}, Case{256, 512, 256, {{"tile_k", 256}, {"tile_m", 64}}},
        Case{320, 640, 384, json::object()},  // K tiles 512 + 128; partial M and N tiles
        Case{256, 896, 256, {{"TILES_IN_BLOCK_K", 1}, {"quant_scheme", "wrapX"}}},
        Case{256, 384, 512, {{"tile_n", 256}, {"TILES_IN_LOAD_N", 1}}}}) {
    INFO(c.M << "x" << c.K << "x" << c.N << " " << c.p.dump());
    const Fwd f(c.M, c.K, c.N);
    const auto y = f.run(f.params(c.p));
    CHECK(rel_l2(y, f.mx_ref()) <= 1e-5);
    check_nkilib(y, f.golden());
  }
}

TEST_CASE("matmul_mxfp8: the default schedule, nki-library's stream, meets the reference") {
  // Blocks of the library's fallback (lib_config.h) or the case's; K remainders (896 = 512 + 256 + 128: DGT
  // sub-tiles with their own vector-offset patterns), partial M and N tiles (masked loads), 128-row K tiles,
  // and a BF16 output with its BF16 PSUM (one K tile per block), which rounds each K tile's sum.
  struct Case {
    int64_t M, K, N;
    json p;
    double bound;
  };
  for (const Case& c :
       {Case{256, 896, 256, json::object(), 1e-5}, Case{320, 640, 384, json::object(), 1e-5},
        Case{256, 512, 256, {{"tile_k", 128}}, 1e-5},
        Case{256, 1024, 512, {{"TILES_IN_BLOCK_K", 1}, {"output_dtype", "bfloat16"}}, 4e-3}}) {
    INFO(c.M << "x" << c.K << "x" << c.N << " " << c.p.dump());
    const Fwd f(c.M, c.K, c.N);
    json p = f.params(c.p);
    p.erase("schedule");
    const auto y = f.run(p);
    CHECK(rel_l2(y, f.mx_ref()) <= c.bound);
    check_nkilib(y, f.golden());
  }
}

TEST_CASE(
    "matmul_mxfp8: the default schedule's pre-swizzled, 1x32 and PE-remainder loads meet the reference") {
  // Operand forms nki-library's stream loads by its own paths (lib_load.cpp): pre-swizzled BF16 by one
  // dma_copy per tile (K 896: the last tile clamped to the tensor), quant_scheme 1x32 by
  // load_tile_PE_Swizzle_1x32 (M 320: a partial F tile, one DMA per 128-row sub-tile), and K-by-F operands
  // with a K remainder through the PE loader's 256- and 128-row sub-tiles.
  const auto lib = [](const Fwd& f, json extra) {
    json p = f.params(extra);
    p.erase("schedule");
    return p;
  };
  for (const char* scheme : {"wrapX", "1x32"}) {
    INFO(scheme);
    const auto s = std::string(scheme) == "1x32" ? num::QuantScheme::OneX32 : num::QuantScheme::WrapX;
    for (const auto& [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{256, 1024, 512}, {320, 2048, 1024}}) {
      INFO(M << "x" << K << "x" << N);
      const Fwd f(M, K, N);
      const auto y = f.run(lib(f, {{"quant_scheme", scheme}}));
      CHECK(rel_l2(y, f.mx_ref(num::Fp8Format::E4M3FN, s)) <= 1e-5);
      check_nkilib(y, f.golden());
    }
    const Fwd f(256, 896, 512);
    auto in = f.inputs();
    in["x"] = as_bytes(swizzled(f.lx(), s));
    in["w"] = as_bytes(swizzled(f.lw(), s));
    const auto y =
        f.run(lib(f, {{"quant_scheme", scheme}, {"x_is_swizzled", true}, {"w_is_swizzled", true}}), in);
    CHECK(rel_l2(y, f.mx_ref(num::Fp8Format::E4M3FN, s)) <= 1e-5);
    check_nkilib(y, f.golden());
  }
  for (const int64_t K : {896, 640, 1280}) {
    INFO("K-by-F, K = " << K);
    const Fwd f(512, K, 512);
    auto in = f.inputs();
    in["x"] = as_bytes(Fwd::transposed(f.x, f.M, f.K));
    in["w"] = as_bytes(Fwd::transposed(f.w, f.N, f.K));
    const auto y = f.run(lib(f, {{"x_is_f_by_k", false}, {"w_is_f_by_k", false}}), in);
    CHECK(rel_l2(y, f.mx_ref()) <= 1e-5);
    check_nkilib(y, f.golden());
  }
}

TEST_CASE("matmul_mxfp8: fast_dma_transpose's K-by-F PE loads with a K remainder meet the reference") {
  // With fast_dma_transpose the library's stream loads a K remainder as one sub-tile (lib_load.cpp: the
  // whole 384 rows of K = 896, 128 of 640, 256 of 1280), through the PE loader for K-by-F x and w and by one
  // direct dma_transpose for F-by-K ones: both give the same bytes. Where the default path loads the
  // remainder as one sub-tile too (640, 1280) that is also the default path's y; at 896 the default path
  // splits it into 256 + 128 rows, and y meets the MX reference as closely as that path does.
  for (const int64_t K : {896, 640, 1280}) {
    INFO("K = " << K);
    const Fwd f(512, K, 512);
    json p = f.params({{"fast_dma_transpose", true}});
    p.erase("schedule");
    const auto f_by_k = f.run(p);
    auto in = f.inputs();
    in["x"] = as_bytes(Fwd::transposed(f.x, f.M, f.K));
    in["w"] = as_bytes(Fwd::transposed(f.w, f.N, f.K));
    p.update({{"x_is_f_by_k", false}, {"w_is_f_by_k", false}});
    const auto y = f.run(p, in);
    CHECK(same_bits(y, f_by_k));
    p.erase("fast_dma_transpose");
    if (K % 512 != 384) CHECK(same_bits(y, f.run(p, in)));
    CHECK(rel_l2(y, f.mx_ref()) <= 1e-5);
    check_nkilib(y, f.golden());
  }
}

TEST_CASE("matmul_mxfp8: defaults are nki-library's documented ones, pre-swizzled operands and E5M2") {
  // matmul_mxfp8_generic_kernel.py at 092a49dc: lhs_is_swizzled / rhs_is_swizzled True, float8_dtype
  // "float8_e5m2". A run that names neither reads x [K/4, 4M] and w [K/4, 4N] and quantizes to E5M2.
  const Fwd f(256, 1024, 512);
  const std::map<std::string, Bytes> in = {{"x", as_bytes(swizzled(f.lx(), num::QuantScheme::WrapX))},
                                           {"w", as_bytes(swizzled(f.lw(), num::QuantScheme::WrapX))}};
  const auto y =
      run_kernel("matmul_mxfp8", {{"M", f.M}, {"K", f.K}, {"N", f.N}, {"output_dtype", "float32"}}, in)
          .get("y");
  CHECK(rel_l2(y, f.mx_ref(num::Fp8Format::E5M2)) <= 1e-5);
  CHECK(rel_l2(y, f.mx_ref(num::Fp8Format::E4M3FN)) > 1e-3);
}

TEST_CASE("matmul_mxfp8: plan resolves auto tiles and fits SBUF") {
  kernels::mxfp8::MatmulSpec s;
  s.kernel = "k";
  s.M = 4096, s.K = 4096, s.N = 14336;
  s.lhs.layout = kernels::mxfp8::Layout::FByK;
  s.rhs.layout = kernels::mxfp8::Layout::KByF;
  const auto p = kernels::mxfp8::plan_matmul(s, trn3().limits());
  CHECK(p.lnc2);
  CHECK(p.shard_n);
  CHECK(p.tile_m == 128);
  CHECK(p.tile_k == 512);
  CHECK(p.tile_n == 512);
  CHECK(p.block_k == 8);  // all of K in one block: the LHS is quantized once per M block
  CHECK(p.sbuf_bytes <= int64_t{trn3().limits().sbuf_bytes_per_partition});
}

TEST_CASE("matmul_mxfp8: rejected parameters name the kernel and the reason") {
  const json base = {{"M", 512}, {"K", 1024}, {"N", 512}, {"x_is_swizzled", false}, {"w_is_swizzled", false}};
  const auto err = [&](json extra) {
    json p = base;
    p.update(extra);
    return build_error("matmul_mxfp8", p);
  };
  const std::string k = "kernel 'matmul_mxfp8': ";
  CHECK(build_error("matmul_mxfp8", base, config::load_hw_config("trn2")) ==
        k + "needs Trn3: nki-library's MXFP8 kernels have no Trn2 path (their tests mark them TRN3-only) and "
            "nc_matmul_mx and quantize_mx are available only on NeuronCore-v4 and newer (NKI ISA docs); the "
            "hardware is Trn2");
  CHECK(err({{"K", 1000}}) ==
        k + "K = 1000 must be a multiple of 128 (K/4 interleaved rows go on partitions in "
            "multiples of 32)");
  CHECK(err({{"M", 511}, {"run_with_lnc2", false}}) ==
        k + "M and N must be even (nc_matmul_mx free sizes), got M = 511, N = 512");
  CHECK(err({{"tile_m", 100}}) ==
        k + "tile_m = 100 must be a multiple of 32 and at most 128 (stationary free size)");
  CHECK(err({{"tile_k", 384}}) ==
        k + "tile_k = 384 must be 128, 256 or 512 (32, 64 or 128 partitions of x4 data)");
  CHECK(err({{"tile_n", 8192}}) ==
        k + "tile_n = 8192 must be a multiple of 32 and at most 4096 (FP32 PSUM: 8 "
            "banks of 512; a tile above 512 spans several banks)");
  CHECK(err({{"TILES_IN_BLOCK_M", 4}, {"TILES_IN_LOAD_M", 3}}) ==
        k + "TILES_IN_LOAD_M = 3 must divide TILES_IN_BLOCK_M = 4");
  CHECK(err({{"TILES_IN_BLOCK_N", 2}, {"TILES_IN_LOAD_N", 4}}) ==
        k + "TILES_IN_LOAD_N = 4 must divide TILES_IN_BLOCK_N = 2");
  CHECK(err({{"TILES_IN_BLOCK_M", 16}}) == k + "M = 512 (per core) is less than half a block "
                                               "(TILES_IN_BLOCK_M 16 x tile 128 = 2048); 2*M must be >= "
                                               "the block");
  CHECK(err({{"TILES_IN_BLOCK_K", 8}}) == k + "K = 1024 (per core) is less than half a block "
                                              "(TILES_IN_BLOCK_K 8 x tile 512 = 4096); 2*K must be >= "
                                              "the block");
  CHECK(err({{"TILES_IN_BLOCK_N", 2}, {"tile_n", 256}}) ==
        k + "run_with_lnc2 shards N (lnc_2_shard_rhs=true) but N = 512 has 1 block of 512; LNC2 needs at "
            "least 2 "
            "blocks along the sharded dim");
  CHECK(err({{"lnc_2_shard_rhs", false}, {"TILES_IN_BLOCK_M", 4}}) ==
        k + "run_with_lnc2 shards M (lnc_2_shard_rhs=false) but M = 512 has 1 block of 512; LNC2 needs at "
            "least 2 "
            "blocks along the sharded dim");
  CHECK(err({{"w_is_f_by_k", false}, {"N", 256}}) ==
        k + "w is read K-by-F (contraction on its rows, unswizzled BF16), which needs N % 512 == 0, got N = "
            "256");
  CHECK(err({{"x_is_f_by_k", false}, {"x_is_swizzled", true}}) ==
        k + "x_is_swizzled=true with x_is_f_by_k=false: a pre-swizzled operand is [K/4, 4M] (K on rows) "
            "already; the K-by-F layout is illegal for pre-swizzled inputs (set x_is_swizzled=false for an "
            "unswizzled BF16 [K, M])");
  CHECK(err({{"x_scales", {128, 512}}}) == k + "use_scale_packing=false but x_scales has the packed shape "
                                               "[128, 512] (the unpacked shape is [256, 512])");
  CHECK(err({{"x_scales", {256, 512}}, {"use_scale_packing", true}}) ==
        k + "use_scale_packing=true but x_scales has the unpacked shape [256, 512] (the packed shape is "
            "[128, 512])");
  CHECK(err({{"w_scales", {100, 512}}}) == k + "w_scales has shape [100, 512]; expected the unpacked shape "
                                               "[256, 512] or the packed shape [128, 512]");
  CHECK(err({{"w_scales", {128, 512}}, {"use_scale_packing", true}, {"tile_k", 256}}) ==
        k + "packed pre-quantized scales (w_scales) need tile_k = 512 (128 partitions), got tile_k = 256");
  CHECK(err({{"x_scales", {256, 512}}, {"w_scales", {256, 512}}, {"spill_reload", true}}) ==
        k + "spill_reload=true has nothing to spill: both operands are pre-quantized");
  CHECK(err({{"M", 8192}, {"K", 8192}, {"TILES_IN_BLOCK_M", 64}, {"TILES_IN_BLOCK_K", 16}}) ==
        k + "blocks of TILES_IN_BLOCK_M/N/K = 64/1/16 (tile_m 128, tile_n 512, tile_k 512) need 851968 bytes "
            "per "
            "partition of SBUF even single-buffered; the core has 262144");
  // What nki-library's own loaders assert out; the restructured pipeline runs it.
  CHECK(err({{"quant_scheme", "1x32"}, {"w_is_f_by_k", false}}) ==
        k + "quant_scheme 1x32 with w K-by-F BF16: nki-library's load_tile asserts 1x32 out for a K-by-F "
            "tensor "
            "(load_apis.py at e9ef98fc, load_tile: \"1x32 quantization currently requires F-by-K tensor "
            "layout\") in the nki_library schedule; set \"schedule\": \"trnsim_optimized\" to run it");
  CHECK(
      err({{"quant_scheme", "1x32"}, {"K", 896}}) ==
      k + "quant_scheme 1x32 with x F-by-K BF16 and K = 896 (a remainder of 384 rows): nki-library loads it "
          "by load_tile_PE_Swizzle_1x32, which asserts tile_k == 512 for every K tile it loads, remainder "
          "sub-tiles included (load_apis.py at e9ef98fc, load_tile_PE_Swizzle_1x32) in the nki_library "
          "schedule; set \"schedule\": \"trnsim_optimized\" to run it");
  CHECK(err({{"quant_scheme", "1x32"}, {"tile_k", 256}}).find("and tile_k = 256: nki-library loads it") !=
        std::string::npos);
  CHECK(err({{"tile_loop_order", "mkn"}}) ==
        "kernel 'matmul_mxfp8': parameter 'tile_loop_order': expected one of mnk, nmk, got \"mkn\"");
  CHECK(err({{"run_with_lnc2", true}, {"N", 130}, {"lnc_2_shard_rhs", true}}) ==
        k + "run_with_lnc2 splits N = 130 between two cores; it must be a multiple of 4 (each half even)");
}
