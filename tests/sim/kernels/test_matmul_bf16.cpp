// matmul_bf16 (kernels/lib/matmul_bf16.cpp) on the SystemC model: every documented parameter value on small
// shapes (LNC1/LNC2, lnc_shard auto/n/m/none, transpose_load dma/pe, copy_engine act/dve/alternate, BF16 and
// FP32 output, Trn2 and Trn3), full and partial tiles, against the host reference of kernels/ref (exact FP64
// on the BF16 inputs; pass line of kernel_refs.h: rel L2 <= 1e-5 for FP32 output, <= 2^-8 for BF16), plus
// every rejected parameter with its exact error text.
//
// Arithmetic the parameters must not change: each output element is the FP32 PSUM accumulation of the K
// tiles in ascending order (K is never split, tile_n and sharding only choose which core and which N/M tile
// computes it, transposes move bits exactly, the copy out only casts). So every configuration of a shape
// gives bit-identical FP32 output, and its BF16 output is that FP32 output rounded to nearest even.
#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "kernels/api/registry.h"
#include "sim/base/error.h"
#include "sim/config/hw_config.h"
#include "sim/isa/semantics.h"
#include "sim/model/run.h"
#include "sim/numerics/float_formats.h"
#include "sim/tensor/check_result.h"
#include "tests/sim/kernels/test_matmul_mxfp8_util.h"

using namespace trnsim;
using namespace trnsim::test;
using json = nlohmann::json;

namespace {

const config::HwConfig& hw_of(const std::string& gen) {
  static const config::HwConfig trn2 = config::load_hw_config("trn2");
  static const config::HwConfig trn3 = config::load_hw_config("trn3");
  return gen == "trn2" ? trn2 : trn3;
}

kernels::KernelBuild build(const json& params, const std::string& gen, int programs) {
  return test::build_kernel("matmul_bf16", params, hw_of(gen), programs);
}

std::string build_error(const json& params, const std::string& gen = "trn2", int programs = 2) {
  try {
    build(params, gen, programs);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

size_t count_op(const isa::Program& p, int core, isa::Opcode op, isa::Engine e) {
  size_t n = 0;
  for (const auto& i : p.streams[core][static_cast<int>(e)]) n += i.op == op;
  return n;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// One problem: x [M, K] and w [N, K] as BF16, normal(0, 1).
struct Problem {
  int64_t M, K, N;
  std::vector<uint16_t> x, w;
  std::vector<float> xf, wf;  // the same values in FP32 (exact)
  Problem(int64_t m, int64_t k, int64_t n)
      : M(m), K(k), N(n), x(random_bf16(m, k, 11)), w(random_bf16(n, k, 12)) {
    for (uint16_t b : x) xf.push_back(num::bf16_to_f32(b));
    for (uint16_t b : w) wf.push_back(num::bf16_to_f32(b));
  }
  json params(const json& extra = json::object()) const {
    json p = {{"M", M}, {"K", K}, {"N", N}};
    p.update(extra);
    return p;
  }

  // Builds and runs the kernel; returns y as FP32 values (BF16 outputs decoded exactly).
  std::vector<float> run(const json& params, const std::string& gen, int programs,
                         kernels::KernelBuild* out_build = nullptr) const {
    kernels::KernelBuild b = build(params, gen, programs);
    const KernelRun r = test::run_build(b, {{"x", as_bytes(x)}, {"w", as_bytes(w)}}, hw_of(gen));
    const std::vector<float> y = r.get("y");
    REQUIRE(y.size() == static_cast<size_t>(M * N));
    if (out_build) *out_build = std::move(b);
    return y;
  }

  // The kernel package's own check of y (exact FP64 on the BF16 inputs).
  tensor::CheckResult check(const std::vector<float>& y, const json& params) const {
    const auto checks = kernels::registry().bind("matmul_bf16", params)->checks();
    REQUIRE(checks.size() == 1);
    const bool bf16 = params.value("output_dtype", "bfloat16") == "bfloat16";
    tensor::HostTensor out = tensor::HostTensor::zeros(bf16 ? isa::DType::BF16 : isa::DType::F32, {M, N});
    for (int64_t i = 0; i < M * N; ++i) out.set(i, y[i]);
    std::map<std::string, tensor::HostTensor> in, outs;
    in.emplace("x", tensor::HostTensor{isa::DType::BF16, {M, K}, as_bytes(x)});
    in.emplace("w", tensor::HostTensor{isa::DType::BF16, {N, K}, as_bytes(w)});
    outs.emplace("y", out);
    return checks[0].run(kernels::CheckContext(in, outs, false));
  }
};

// Checks the reference's pass line, with the bound the brief states spelled out.
void expect_pass(const tensor::CheckResult& n) {
  for (const auto& f : n.failures) UNSCOPED_INFO(f);
  CHECK(n.pass);
  CHECK(n.nonfinite == 0);
  CHECK(n.metric("rel_l2_vs_exact") <= (n.dtype == "bfloat16" ? 1.0 / 256 : 1e-5));
}

// BF16 y16 is y32 rounded to nearest even, element for element.
size_t not_rounded(const std::vector<float>& y32, const std::vector<float>& y16) {
  REQUIRE(y32.size() == y16.size());
  size_t bad = 0;
  for (size_t i = 0; i < y32.size(); ++i)
    bad += num::bf16_to_f32(num::f32_to_bf16(y32[i])) != y16[i] || std::isnan(y16[i]);
  return bad;
}

// Work split of one configuration, from its parameters: (N tiles, M tiles) per core.
struct Split {
  int64_t n[2], m[2];
};
Split expected_split(int64_t mt, int64_t nt, const std::string& shard, int programs) {
  if (programs == 1) return {{nt, 0}, {mt, 0}};
  std::string mode = shard == "auto" ? (nt >= mt ? "n" : "m") : shard;
  const auto halves = [](int64_t t) {
    const int64_t h = (t + 1) / 2;
    return std::pair<int64_t, int64_t>{std::min(t, h), t - std::min(t, h)};
  };
  if (mode == "n") {
    auto [a, b] = halves(nt);
    return {{a, b}, {mt, mt}};
  }
  if (mode == "m") {
    auto [a, b] = halves(mt);
    return {{nt, nt}, {a, b}};
  }
  return {{nt, 0}, {mt, 0}};  // none: core 1 idles
}

// Runs every combination of transpose_load x copy_engine x output_dtype x (LNC1, LNC2 x lnc_shard) on one
// generation and shape with tile_n; checks the reference, the instruction mix each parameter implies, the
// bit-identity of all FP32 outputs and BF16 = RNE(FP32).
void all_combinations(const std::string& gen, const Problem& pr, int64_t tile_n) {
  REQUIRE(tile_n <= 128);
  const int64_t kt = (pr.K + 127) / 128, mt = (pr.M + 127) / 128, nt = (pr.N + tile_n - 1) / tile_n;
  std::vector<float> first32;
  int runs = 0;
  for (const char* tl : {"dma", "pe"})
    for (const char* ce : {"act", "dve", "alternate"})
      for (int programs : {1, 2})
        for (const char* shard : {"auto", "n", "m", "none"}) {
          if (programs == 1 && std::string(shard) != "auto") continue;  // no sharding on one core
          std::vector<float> y32;
          for (const char* dt : {"float32", "bfloat16"}) {
            const json p = pr.params({{"tile_n", tile_n},
                                      {"transpose_load", tl},
                                      {"copy_engine", ce},
                                      {"lnc_shard", shard},
                                      {"output_dtype", dt}});
            INFO(gen << " LNC" << programs << " " << p.dump());
            kernels::KernelBuild b;
            const std::vector<float> y = pr.run(p, gen, programs, &b);
            ++runs;
            expect_pass(pr.check(y, p));
            if (std::string(dt) == "float32") {
              y32 = y;
              if (first32.empty()) first32 = y;
              CHECK(same_bits(y, first32));
            } else {
              CHECK(not_rounded(y32, y) == 0);
            }
            // The parameters do what they say: work per core, transposes, copy engines.
            const Split s = expected_split(mt, nt, shard, programs);
            size_t copies_act = 0, copies_dve = 0;
            for (int c = 0; c < programs; ++c) {
              const auto& P = b.program;
              const int64_t tiles = s.n[c] * s.m[c];
              CHECK(count_op(P, c, isa::Opcode::NcMatmul, isa::Engine::PE) == size_t(tiles * kt));
              const size_t dma_t = count_op(P, c, isa::Opcode::DmaTranspose, isa::Engine::SP);
              const size_t pe_t = count_op(P, c, isa::Opcode::NcTranspose, isa::Engine::PE);
              // One transpose per K tile of each W^T block and of each output tile's X^T (tile_n <= 128:
              // one PE transpose chunk per block, as one dma_transpose).
              const size_t transposes = size_t(s.n[c] * kt + tiles * kt);
              CHECK(dma_t == (std::string(tl) == "dma" ? transposes : 0));
              CHECK(pe_t == (std::string(tl) == "pe" ? transposes : 0));
              copies_act += count_op(P, c, isa::Opcode::Activation, isa::Engine::ACT);
              copies_dve +=
                  std::string(tl) == "dma" ? count_op(P, c, isa::Opcode::TensorCopy, isa::Engine::DVE) : 0;
            }
            const int64_t out_tiles = mt * nt;
            if (std::string(ce) == "act") CHECK(copies_act == size_t(out_tiles));
            if (std::string(ce) == "dve") CHECK(copies_act == 0);
            if (std::string(ce) == "dve" && std::string(tl) == "dma") CHECK(copies_dve == size_t(out_tiles));
            if (std::string(ce) == "alternate" && out_tiles > 1) CHECK(copies_act > 0);
            if (std::string(ce) == "alternate" && out_tiles > 1 && std::string(tl) == "dma")
              CHECK(copies_dve > 0);
            CHECK(b.program.num_cores == programs);
            CHECK(b.program.generation == hw_of(gen).limits().generation);
          }
        }
  CHECK(runs == 2 * 3 * 5 * 2);
}

}  // namespace

// M = 256 (2 tiles of 128), K = 384 (3 tiles), N = 384 with tile_n 128 (3 tiles): the N split is 2 + 1.
TEST_CASE("matmul_bf16: every parameter combination on Trn2 meets the reference, bit-identical", "[matmul]") {
  all_combinations("trn2", Problem(256, 384, 384), 128);
}

TEST_CASE("matmul_bf16: every parameter combination on Trn3 meets the reference, bit-identical", "[matmul]") {
  all_combinations("trn3", Problem(256, 384, 384), 128);
}

TEST_CASE("matmul_bf16: full and partial tiles in M, K and N", "[matmul]") {
  struct Case {
    int64_t M, K, N;
    json p;
  };
  for (const Case& c : {Case{128, 128, 128, json::object()}, Case{512, 256, 512, json::object()},
                        Case{384, 512, 256, {{"tile_n", 256}}}, Case{256, 128, 1024, {{"lnc_shard", "m"}}},
                        // ragged: partial K tile (72 partitions), partial M and N tiles
                        Case{200, 200, 300, {{"tile_n", 256}}},
                        Case{200, 200, 300, {{"tile_n", 256}, {"transpose_load", "pe"}}},
                        Case{130, 129, 520, {{"lnc_shard", "n"}}},  // N tiles 512 + 8, M 128 + 2, K 128 + 1
                        Case{1, 1, 1, {{"transpose_load", "pe"}}}, Case{3, 5, 7, json::object()}}) {
    const Problem pr(c.M, c.K, c.N);
    std::vector<float> y32;
    for (const char* dt : {"float32", "bfloat16"}) {
      json p = pr.params(c.p);
      p["output_dtype"] = dt;
      for (int programs : {1, 2}) {
        INFO(c.M << "x" << c.K << "x" << c.N << " LNC" << programs << " " << p.dump());
        const auto y = pr.run(p, "trn2", programs);
        expect_pass(pr.check(y, p));
        if (y32.empty()) y32 = y;
        if (p["output_dtype"] == "float32") CHECK(same_bits(y, y32));
        if (p["output_dtype"] == "bfloat16") CHECK(not_rounded(y32, y) == 0);
      }
    }
    // Trn3 runs the same arithmetic.
    json p3 = pr.params(c.p);
    p3["output_dtype"] = "float32";
    CHECK(same_bits(pr.run(p3, "trn3", 2), y32));
  }
}

TEST_CASE("matmul_bf16: a K that fits Trn3's SBUF but not Trn2's", "[matmul]") {
  // K = 190 tiles of 128: the resident W^T block [128, 190, tile_n 512] BF16 takes 194560 B per partition,
  // X^T [128, 190, 128] another 48640 B. Trn3 (256 KiB) holds both; Trn2 (224 KiB) has 229376 - 194560 =
  // 34816 B left for X^T, and the builder names the kernel line that allocates it.
  const Problem pr(128, 190 * 128, 128);
  const json p = pr.params();
  expect_pass(pr.check(pr.run(p, "trn3", 1), p));
  // The allocation's line in the kernel source.
  std::ifstream src(std::string(TRNSIM_SOURCE_DIR) + "/kernels/matmul_bf16/matmul_bf16.cpp");
  REQUIRE(src.good());
  int line = 0, xt_line = 0;
  for (std::string s; std::getline(src, s);) {
    ++line;
    if (s.find("View xt = k.sbuf(") != std::string::npos) xt_line = line;
  }
  REQUIRE(xt_line > 0);
  CHECK(build_error(p, "trn2", 1) ==
        fmt::format("matmul_bf16.cpp:{}: sbuf tile 'xT' [128 x 48640 B] does not "
                    "fit: 34816 B free in partitions 0-127 (229376 B per "
                    "partition, 1 tiles live)",
                    xt_line));
}

TEST_CASE("matmul_bf16: rejected parameters name the kernel, the parameter and the reason", "[matmul]") {
  const json base = {{"M", 256}, {"K", 256}, {"N", 256}};
  const auto err = [&](const json& extra) {
    json p = base;
    p.update(extra);
    return build_error(p);
  };
  const std::string k = "kernel 'matmul_bf16': ";
  CHECK(err({{"M", 0}}) == k + "parameter 'M': expected an integer in [1, 1048576], got 0");
  CHECK(err({{"N", 1048577}}) == k + "parameter 'N': expected an integer in [1, 1048576], got 1048577");
  CHECK(err({{"K", -3}}) == k + "parameter 'K': expected an integer in [1, 1048576], got -3");
  CHECK(err({{"K", 2.5}}) == k + "parameter 'K': expected an integer in [1, 1048576], got 2.5");
  CHECK(err({{"M", "128"}}) == k + "parameter 'M': expected an integer in [1, 1048576], got \"128\"");
  CHECK(err({{"tile_n", 0}}) == k + "parameter 'tile_n': expected an integer in [1, 512], got 0");
  CHECK(err({{"tile_n", 1024}}) == k + "parameter 'tile_n': expected an integer in [1, 512], got 1024");
  CHECK(err({{"output_dtype", "float16"}}) ==
        k + "parameter 'output_dtype': expected one of bfloat16, float32, got \"float16\"");
  CHECK(err({{"transpose_load", "none"}}) ==
        k + "parameter 'transpose_load': expected one of dma, pe, got \"none\"");
  CHECK(err({{"lnc_shard", "k"}}) ==
        k + "parameter 'lnc_shard': expected one of auto, n, m, none, got \"k\"");
  CHECK(err({{"copy_engine", "pool"}}) ==
        k + "parameter 'copy_engine': expected one of act, dve, alternate, got \"pool\"");
  CHECK(err({{"copy_engine", 1}}) ==
        k + "parameter 'copy_engine': expected one of act, dve, alternate, got 1");
  CHECK(err({{"tile_m", 64}}) == k + "unknown parameter 'tile_m' (known: M, N, K, output_dtype, tile_n, "
                                     "transpose_load, lnc_shard, copy_engine)");
  CHECK(build_error({{"N", 256}, {"K", 256}}) == k + "parameter 'M' is required (int: rows of X and Y)");
  CHECK(build_error(json::array({1, 2})) ==
        k + "parameters must be a JSON object, got an array of 2 elements");
  CHECK(build_error(base, "trn2", 3) == "num_programs must be 1 or 2 (LNC2), got 3");
  // Accepted at the bounds.
  CHECK(err({{"tile_n", 512}}) == "(no error)");
  CHECK(err({{"tile_n", 1}}) == "(no error)");
}
