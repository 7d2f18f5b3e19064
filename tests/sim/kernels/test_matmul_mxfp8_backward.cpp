// matmul_mxfp8_backward on the SystemC model (Trn3): dX = dY W and dW = dY^T X against the host MX reference
// (each operand quantized along its contraction) and nkilib's unquantized tolerances; parameter variants that
// must not change the arithmetic; rejected combinations.
#include <catch2/catch.hpp>

#include <chrono>

#include "sim/base/error.h"
#include "tests/sim/kernels/test_matmul_mxfp8_util.h"

using namespace trnsim;
using namespace trnsim::test;
using json = nlohmann::json;

namespace {

struct Bwd {
  int64_t M, K, N;
  std::vector<uint16_t> dy, w, x;  // [M, N], [N, K], [M, K]
  Bwd(int64_t m, int64_t k, int64_t n)
      : M(m), K(k), N(n), dy(random_bf16(m, n, 11)), w(random_bf16(n, k, 12)), x(random_bf16(m, k, 13)) {}

  json params(json extra = json::object()) const {
    json p = {{"M", M}, {"K", K}, {"N", N}, {"output_dtype", "float32"}};
    p.update(extra);
    return p;
  }
  std::map<std::string, Bytes> inputs() const {
    return {{"output_grad", as_bytes(dy)}, {"weights", as_bytes(w)}, {"input_activation", as_bytes(x)}};
  }
  // Logical operands: dX phase contracts N, dW phase contracts M.
  Logical dy_n() const { return {&dy, N, M, false}; }  // [N, M] view of dY [M, N]
  Logical w_n() const { return {&w, N, K, true}; }
  Logical dy_m() const { return {&dy, M, N, true}; }
  Logical x_m() const { return {&x, M, K, true}; }
  std::vector<double> dx_ref(num::Fp8Format f, num::QuantScheme s) const {
    return matmul_tn(mx_dequant(dy_n(), f, s), mx_dequant(w_n(), f, s), N, M, K);
  }
  std::vector<double> dw_ref(num::Fp8Format f, num::QuantScheme s) const {
    return matmul_tn(mx_dequant(dy_m(), f, s), mx_dequant(x_m(), f, s), M, N, K);
  }
  std::vector<double> dx_golden() const {
    return matmul_tn(unquantized(dy_n()), unquantized(w_n()), N, M, K);
  }
  std::vector<double> dw_golden() const {
    return matmul_tn(unquantized(dy_m()), unquantized(x_m()), M, N, K);
  }
};

std::string build_error(const json& p) {
  try {
    build_mx("matmul_mxfp8_backward", p);
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

TEST_CASE("matmul_mxfp8_backward: dX and dW meet the MX reference and nkilib's tolerances") {
  struct Case {
    int64_t M, K, N;
    const char* dtype;
    const char* scheme;
  };
  for (const Case& c :
       {Case{512, 512, 512, "float8_e4m3fn", "wrapX"}, Case{1024, 512, 512, "float8_e5m2", "wrapX"},
        Case{512, 1024, 512, "float8_e4m3fn", "1x32"}}) {
    INFO(c.M << "x" << c.K << "x" << c.N << " " << c.dtype << " " << c.scheme);
    const Bwd b(c.M, c.K, c.N);
    const auto f = std::string(c.dtype) == "float8_e5m2" ? num::Fp8Format::E5M2 : num::Fp8Format::E4M3FN;
    const auto s = std::string(c.scheme) == "1x32" ? num::QuantScheme::OneX32 : num::QuantScheme::WrapX;
    const auto r = run_kernel("matmul_mxfp8_backward",
                              b.params({{"float8_dtype", c.dtype}, {"quant_scheme", c.scheme}}), b.inputs());
    const auto dx = r.get("input_grad"), dw = r.get("weight_grad");
    CHECK(dx.size() == size_t(c.M * c.K));
    CHECK(dw.size() == size_t(c.N * c.K));
    CHECK(rel_l2(dx, b.dx_ref(f, s)) <= 1e-5);
    CHECK(rel_l2(dw, b.dw_ref(f, s)) <= 1e-5);
    check_nkilib(dx, b.dx_golden());
    check_nkilib(dw, b.dw_golden());
  }
}

TEST_CASE("matmul_mxfp8_backward: parameter variants keep the arithmetic (bit-identical outputs)") {
  const Bwd b(512, 512, 1024);
  const json cfg = {{"TILES_IN_BLOCK_K", 1}, {"TILES_IN_BLOCK_M", 1}, {"tile_n", 256}};
  const json base_p = b.params({{"input_grad_config", cfg}, {"weight_grad_config", cfg}});
  const auto base = run_kernel("matmul_mxfp8_backward", base_p, b.inputs());
  const auto dx0 = base.get("input_grad"), dw0 = base.get("weight_grad");
  CHECK(rel_l2(dx0, b.dx_ref(num::Fp8Format::E4M3FN, num::QuantScheme::WrapX)) <= 1e-5);
  CHECK(rel_l2(dw0, b.dw_ref(num::Fp8Format::E4M3FN, num::QuantScheme::WrapX)) <= 1e-5);
  for (const json& v : {json{{"tile_loop_order", "nmk"}}, json{{"lnc_2_shard_rhs", false}},
                        json{{"lnc_2_shard_rhs", nullptr}}, json{{"run_with_lnc2", false}},
                        json{{"spill_reload", true}}, json{{"use_scale_packing", true}},
                        json{{"spill_reload", true}, {"use_scale_packing", true}, {"run_with_lnc2", false}},
                        json{{"fast_dma_transpose", true}}, json{{"disable_dma_transpose", true}}}) {
    INFO(v.dump());
    json p = base_p;
    p.update(v);
    const auto r = run_kernel("matmul_mxfp8_backward", p, b.inputs());
    CHECK(same_bits(r.get("input_grad"), dx0));
    CHECK(same_bits(r.get("weight_grad"), dw0));
  }
  // Pre-swizzled, pre-quantized (packed) and transposed (F-by-K) weights and activations.
  const auto s = num::QuantScheme::WrapX;
  auto in = b.inputs();
  in["weights"] = as_bytes(swizzled(b.w_n(), s));
  in["input_activation"] = as_bytes(swizzled(b.x_m(), s));
  json p = base_p;
  p.update({{"weights_is_swizzled", true}, {"input_is_swizzled", true}});
  auto r = run_kernel("matmul_mxfp8_backward", p, in);
  CHECK(same_bits(r.get("input_grad"), dx0));
  CHECK(same_bits(r.get("weight_grad"), dw0));

  const auto [wd, ws] = prequantized(b.w_n(), s, num::Fp8Format::E4M3FN, true);
  const auto [xd, xs] = prequantized(b.x_m(), s, num::Fp8Format::E4M3FN, true);
  in = b.inputs();
  in["weights"] = wd, in["weight_scales"] = ws, in["input_activation"] = xd, in["input_scales"] = xs;
  p = base_p;
  p.update({{"weight_scales", {128, b.K}}, {"input_scales", {128, b.K}}, {"use_scale_packing", true}});
  r = run_kernel("matmul_mxfp8_backward", p, in);
  CHECK(same_bits(r.get("input_grad"), dx0));
  CHECK(same_bits(r.get("weight_grad"), dw0));

  std::vector<uint16_t> wt(b.w.size()), xt(b.x.size());
  for (int64_t n = 0; n < b.N; ++n)
    for (int64_t k = 0; k < b.K; ++k) wt[k * b.N + n] = b.w[n * b.K + k];
  for (int64_t m = 0; m < b.M; ++m)
    for (int64_t k = 0; k < b.K; ++k) xt[k * b.M + m] = b.x[m * b.K + k];
  in = b.inputs();
  in["weights"] = as_bytes(wt), in["input_activation"] = as_bytes(xt);
  p = base_p;
  p.update({{"weights_is_f_by_k", true}, {"input_is_f_by_k", true}});
  r = run_kernel("matmul_mxfp8_backward", p, in);
  CHECK(same_bits(r.get("input_grad"), dx0));
  CHECK(same_bits(r.get("weight_grad"), dw0));
  // The same F-by-K operands through the PE loader (nc_transpose instead of dma_transpose).
  p["disable_dma_transpose"] = true;
  r = run_kernel("matmul_mxfp8_backward", p, in);
  CHECK(same_bits(r.get("input_grad"), dx0));
  CHECK(same_bits(r.get("weight_grad"), dw0));
  CHECK(count_op(r.program, isa::Opcode::DmaTranspose) == 0);
  CHECK(count_op(r.program, isa::Opcode::NcTranspose) > 0);
}

TEST_CASE("matmul_mxfp8_backward: BF16 outputs and per-phase configs") {
  const Bwd b(512, 1024, 512);
  const json p =
      b.params({{"output_dtype", "bfloat16"},
                {"input_grad_config", {{"tile_k", 256}, {"tile_m", 64}, {"TILES_IN_BLOCK_K", 1}}},
                {"weight_grad_config", {{"tile_n", 128}, {"TILES_IN_LOAD_N", 1}, {"tile_m", nullptr}}}});
  const auto r = run_kernel("matmul_mxfp8_backward", p, b.inputs());
  const auto dx = r.get("input_grad"), dw = r.get("weight_grad");
  CHECK(rel_l2(dx, b.dx_ref(num::Fp8Format::E4M3FN, num::QuantScheme::WrapX)) <= 3e-3);
  CHECK(rel_l2(dw, b.dw_ref(num::Fp8Format::E4M3FN, num::QuantScheme::WrapX)) <= 3e-3);
  check_nkilib(dx, b.dx_golden());
  check_nkilib(dw, b.dw_golden());
}

TEST_CASE("matmul_mxfp8_backward: registered schema and rejected combinations") {
  const auto& info = kernels::registry().get("matmul_mxfp8_backward");
  std::vector<std::string> names;
  for (const auto& s : info.params()) names.push_back(s.name);
  for (const char* n :
       {"input_grad_config", "weight_grad_config", "tile_loop_order", "float8_dtype", "output_dtype",
        "run_with_lnc2", "lnc_2_shard_rhs", "output_grad_scales", "weight_scales", "input_scales",
        "use_scale_packing", "spill_reload", "output_grad_is_swizzled", "weights_is_swizzled",
        "input_is_swizzled", "quant_scheme"})
    CHECK(std::find(names.begin(), names.end(), n) != names.end());
  const json d =
      kernels::registry().bind("matmul_mxfp8_backward", {{"M", 512}, {"K", 512}, {"N", 512}})->params();
  CHECK(d["float8_dtype"] == "float8_e4m3fn");
  CHECK(d["lnc_2_shard_rhs"] == true);
  CHECK(d["run_with_lnc2"] == true);
  CHECK(d["input_grad_config"].is_null());
  const auto kb = build_mx("matmul_mxfp8_backward", {{"M", 512}, {"K", 512}, {"N", 512}});
  CHECK(kb.inputs == std::vector<std::string>{"output_grad", "weights", "input_activation"});
  CHECK(kb.outputs == std::vector<std::string>{"input_grad", "weight_grad"});

  const json base = {{"M", 512}, {"K", 512}, {"N", 512}};
  const auto err = [&](json extra) {
    json p = base;
    p.update(extra);
    return build_error(p);
  };
  const std::string k = "kernel 'matmul_mxfp8_backward'";
  CHECK(
      err({{"output_grad_scales", {128, 512}}}) ==
      k + ": parameter 'output_grad_scales': a pre-quantized output_grad cannot be used: dY is the "
          "contraction "
          "operand along N in input_grad (dY W) and along M in weight_grad (dY^T X), so one set of MX scales "
          "serves only one of the two phases; pass output_grad as BF16");
  CHECK(err({{"output_grad_is_swizzled", true}}) ==
        k + ": parameter 'output_grad_is_swizzled': a pre-swizzled output_grad cannot be used: the x4 "
            "interleave "
            "runs along the contraction axis, which is N for input_grad and M for weight_grad; pass "
            "output_grad "
            "unswizzled");
  CHECK(err({{"input_grad_config", {{"tile_q", 1}}}}) ==
        k + ": unknown parameter 'input_grad_config.tile_q' (known: tile_m, tile_k, tile_n, "
            "TILES_IN_BLOCK_M, TILES_IN_BLOCK_N, TILES_IN_BLOCK_K, TILES_IN_LOAD_M, TILES_IN_LOAD_N)");
  CHECK(err({{"weight_grad_config", {{"tile_m", -2}}}}) ==
        k + ": parameter 'weight_grad_config.tile_m': expected an integer in [1, 65536] or null, got -2");
  CHECK(err({{"input_grad_config", 3}}) ==
        k + ": parameter 'input_grad_config': expected a JSON object or null, got 3");
  // Phase errors name the phase: W is K-by-F in dX (needs K % 512), dY is K-by-F in dW (needs N % 512).
  CHECK(err({{"K", 256}}) ==
        k + " (input_grad phase, dX = dY W): weights is read K-by-F (contraction on its rows, "
            "unswizzled BF16), which needs K % 512 == 0, got K = 256");
  CHECK(err({{"N", 384}}) ==
        k + " (weight_grad phase, dW = dY^T X): output_grad is read K-by-F (contraction on its "
            "rows, unswizzled BF16), which needs N % 512 == 0, got N = 384");
  CHECK(err({{"weight_scales", {64, 512}}}) ==
        k + " (input_grad phase, dX = dY W): weight_scales has shape [64, 512]; expected the unpacked shape "
            "[128, 512] or the packed shape [128, 512]");
}

// The Llama-3.1-8B MLP down projection backward (M 4096 tokens, K 14336, N 4096) on Trn3 with numerics.
TEST_CASE("matmul_mxfp8_backward: Llama-3.1-8B down projection", "[heavy]") {
  const int64_t M = 4096, K = 14336, N = 4096;
  const json p = {{"M", M}, {"K", K}, {"N", N}};
  const auto t0 = std::chrono::steady_clock::now();
  const auto kb = build_mx("matmul_mxfp8_backward", p);
  size_t instructions = 0;
  for (const auto& core : kb.program.streams)
    for (const auto& s : core) instructions += s.size();
  CHECK(instructions <= 100000);
  const auto dy = random_bf16(M, N, 11), w = random_bf16(N, K, 12), x = random_bf16(M, K, 13);
  const KernelRun r = test::run_build(
      kb, {{"output_grad", as_bytes(dy)}, {"weights", as_bytes(w)}, {"input_activation", as_bytes(x)}},
      trn3());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WARN("instructions " << instructions << ", simulated " << r.stats.total_time.count() / 1e6 << " us, host "
                       << secs << " s");
  CHECK(secs < 120);
  // Spot checks against the MX reference: one output element = dot product of two dequantized vectors, each
  // quantized along the contraction (wrapX groups).
  const auto column = [](const std::vector<uint16_t>& a, int64_t rows, int64_t cols, int64_t c) {
    std::vector<uint16_t> v(rows);
    for (int64_t r = 0; r < rows; ++r) v[r] = a[r * cols + c];
    return v;
  };
  const auto mx_dot = [](const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
    const int64_t n = static_cast<int64_t>(a.size());
    const auto da = mx_dequant({&a, n, 1, true}, num::Fp8Format::E4M3FN, num::QuantScheme::WrapX);
    const auto db = mx_dequant({&b, n, 1, true}, num::Fp8Format::E4M3FN, num::QuantScheme::WrapX);
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += da[i] * db[i];
    return s;
  };
  const auto out_at = [&](const char* t, int64_t i) { return r.outputs.at(t).value(i); };
  for (const auto& [i, j] : {std::pair<int64_t, int64_t>{0, 0}, {17, 14335}, {2049, 7168}, {4095, 9001}}) {
    const std::vector<uint16_t> dy_row(dy.begin() + i * N, dy.begin() + (i + 1) * N);
    const double ref_dx = mx_dot(dy_row, column(w, N, K, j));               // dX[i, j]
    const double ref_dw = mx_dot(column(dy, M, N, i), column(x, M, K, j));  // dW[i, j]
    CHECK(std::abs(out_at("input_grad", i * K + j) - ref_dx) <= 4e-3 * std::abs(ref_dx) + 1e-2);
    CHECK(std::abs(out_at("weight_grad", i * K + j) - ref_dw) <= 4e-3 * std::abs(ref_dw) + 1e-2);
  }
}
