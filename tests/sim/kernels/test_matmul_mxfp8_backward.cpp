// matmul_mxfp8_backward on the SystemC model (Trn3): dX = dY W and dW = dY^T X against the host MX reference
// (each operand quantized along its contraction) and nkilib's unquantized tolerances; parameter variants that
// must not change the arithmetic; rejected combinations.
#include <catch2/catch.hpp>

#include <chrono>

#include "kernels/workload/workload.h"
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
    json p = {{"M", M}, {"K", K}, {"N", N}, {"output_dtype", "float32"}, {"float8_dtype", "float8_e4m3fn"}};
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
    // nki-library's own stream (the default) asserts 1x32 out for the K-by-F operands (load_tile); the named
    // option runs it.
    json extra = {{"float8_dtype", c.dtype}, {"quant_scheme", c.scheme}};
    if (s == num::QuantScheme::OneX32) extra["schedule"] = "trnsim_optimized";
    const auto r = run_kernel("matmul_mxfp8_backward", b.params(extra), b.inputs());
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
  // On trnsim_optimized. The library's stream (the default) is not bit-stable under these variants by design:
  // its PSUM copy-in (every third output tile of a block, FP32 PSUM, K blocks to accumulate) accumulates the
  // matmuls onto the running sum in PSUM instead of adding PSUM to it, so which outputs round that way
  // depends on the blocking and the LNC2 split.
  const Bwd b(512, 512, 1024);
  const json cfg = {{"TILES_IN_BLOCK_K", 1}, {"TILES_IN_BLOCK_M", 1}, {"tile_n", 256}};
  const json base_p =
      b.params({{"input_grad_config", cfg}, {"weight_grad_config", cfg}, {"schedule", "trnsim_optimized"}});
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

TEST_CASE("matmul_mxfp8_backward: float8_dtype defaults to float8_e5m2 (nki-library's documented default)") {
  const Bwd b(512, 512, 512);
  json p = b.params();
  p.erase("float8_dtype");
  const auto r = run_kernel("matmul_mxfp8_backward", p, b.inputs());
  // E5M2 quantization on chip: the E5M2 MX reference to FP32 rounding, far from the E4M3 one.
  CHECK(rel_l2(r.get("input_grad"), b.dx_ref(num::Fp8Format::E5M2, num::QuantScheme::WrapX)) <= 1e-5);
  CHECK(rel_l2(r.get("weight_grad"), b.dw_ref(num::Fp8Format::E5M2, num::QuantScheme::WrapX)) <= 1e-5);
  CHECK(rel_l2(r.get("input_grad"), b.dx_ref(num::Fp8Format::E4M3FN, num::QuantScheme::WrapX)) > 1e-2);
}

TEST_CASE(
    "matmul_mxfp8_backward: pre-quantized output_grad (rowwise for input_grad, columnwise for "
    "weight_grad)") {
  // dY quantized on the host as quantize_mx quantizes it on chip: along N ([N/4, M] x4) for input_grad and
  // along M ([M/4, N] x4, the extension's columnwise set) for weight_grad. The kernel then reads the bytes
  // its BF16 run would have made, so both outputs are bit-identical to that run, and the host check
  // (dequantized dY, MX-quantized W and X) passes.
  const Bwd b(512, 512, 1024);
  const auto s = num::QuantScheme::WrapX;
  const auto f = num::Fp8Format::E4M3FN;
  const auto base = run_kernel("matmul_mxfp8_backward", b.params(), b.inputs());
  for (const bool packed : {false, true}) {
    INFO("packed " << packed);
    const auto [rd, rs] = prequantized(b.dy_n(), s, f, packed);
    const auto [cd, cs] = prequantized(b.dy_m(), s, f, packed);
    auto in = b.inputs();
    in["output_grad"] = rd, in["output_grad_scales"] = rs;
    in["output_grad_columnwise"] = cd, in["output_grad_columnwise_scales"] = cs;
    const auto rshape = num::trainium_scale_shape(b.N, b.M, packed);
    const auto cshape = num::trainium_scale_shape(b.M, b.N, packed);
    const json p = b.params({{"output_grad_scales", {rshape.rows, rshape.cols}},
                             {"output_grad_columnwise_scales", {cshape.rows, cshape.cols}},
                             {"use_scale_packing", packed}});
    const auto r = run_kernel("matmul_mxfp8_backward", p, in);
    CHECK(same_bits(r.get("input_grad"), base.get("input_grad")));
    CHECK(same_bits(r.get("weight_grad"), base.get("weight_grad")));
    const auto x4 = [&](const Bytes& d, int64_t K, int64_t F) {
      return tensor::HostTensor{isa::DType::FP8_E4M3FN_X4, {K / 4, F}, d};
    };
    const auto e8 = [](const Bytes& d, const num::ScaleShape& sh) {
      return tensor::HostTensor{isa::DType::E8M0, {sh.rows, sh.cols}, d};
    };
    std::map<std::string, tensor::HostTensor> ins, outs;
    ins.emplace("output_grad", x4(rd, b.N, b.M));
    ins.emplace("output_grad_scales", e8(rs, rshape));
    ins.emplace("output_grad_columnwise", x4(cd, b.M, b.N));
    ins.emplace("output_grad_columnwise_scales", e8(cs, cshape));
    ins.emplace("weights", tensor::HostTensor{isa::DType::BF16, {b.N, b.K}, as_bytes(b.w)});
    ins.emplace("input_activation", tensor::HostTensor{isa::DType::BF16, {b.M, b.K}, as_bytes(b.x)});
    const auto f32 = [](const std::vector<float>& v, int64_t R, int64_t C) {
      tensor::HostTensor t = tensor::HostTensor::zeros(isa::DType::F32, {R, C});
      for (int64_t i = 0; i < R * C; ++i) t.set(i, v[i]);
      return t;
    };
    outs.emplace("input_grad", f32(r.get("input_grad"), b.M, b.K));
    outs.emplace("weight_grad", f32(r.get("weight_grad"), b.N, b.K));
    const auto checks = kernels::registry().bind("matmul_mxfp8_backward", p)->checks();
    REQUIRE(checks.size() == 2);
    for (const auto& c : checks) {
      const tensor::CheckResult res = c.run(kernels::CheckContext(ins, outs, false));
      INFO(c.output);
      CHECK(res.pass);
      // The kernel's products of the same quantized values, in FP32: the MX reference to rounding.
      CHECK(res.metric("rel_l2_vs_quantized") <= 1e-6);
    }
  }
  // Only the columnwise set: input_grad quantizes a BF16 output_grad itself.
  const auto [cd, cs] = prequantized(b.dy_m(), s, f, false);
  auto in = b.inputs();
  in["output_grad_columnwise"] = cd, in["output_grad_columnwise_scales"] = cs;
  const auto r =
      run_kernel("matmul_mxfp8_backward", b.params({{"output_grad_columnwise_scales", {b.M / 4, b.N}}}), in);
  CHECK(same_bits(r.get("input_grad"), base.get("input_grad")));
  CHECK(same_bits(r.get("weight_grad"), base.get("weight_grad")));
}

TEST_CASE("matmul_mxfp8_backward: quantize_mx reads the DGT staging contiguously (issue 25 item 1)") {
  // The cost model charges DVE at its strided rate when an on-chip operand's innermost free dim steps more
  // than memory.strided_access_bytes (cost_model.h). (512, 512, 512) on one core quantizes 4 operands, one
  // tile each: dX = dY W contracts N, so dY [M, N] is F-by-K (DGT) and W [N, K] K-by-F; dW = dY^T X contracts
  // M, so dY and X [M, K] are both K-by-F. The DGT loader stages [partition row][f][slot], the order
  // quantize_mx reads (before: [row][slot][f], read 4 slots apart: strided); the K-by-F rows go straight onto
  // partitions and their quantize reads them strided, as operand.h documents: 3 of the 4.
  // That is trnsim_optimized; the default (nki-library's stream) quantizes per (F tile, K tile): dY 4 + W 1
  // in dX and dY 4 + X 1 in dW, each from a staging its DGT or PE swizzle wrote interleaved: none strided.
  const auto count = [](const std::vector<std::string>& sets) {
    const auto w = workload::prepare_workload(workload::parse_workload(
        std::string(TRNSIM_SOURCE_DIR) + "/configs/workloads/matmul_mxfp8_bwd_512_trn3.json", sets));
    const int64_t limit = w.hw.memory.strided_access_bytes;
    std::pair<int64_t, int64_t> n{0, 0};  // quantize_mx, strided
    for (const auto& core : w.build.program.streams)
      for (const auto& stream : core)
        for (const auto& in : stream) {
          if (in.op != isa::Opcode::QuantizeMx) continue;
          ++n.first;
          const auto& src = in.ops[1];
          const isa::Dim inner = src.dim(src.ndim - 1);
          if (inner.size > 1 && std::abs(inner.stride) * isa::dtype_size(src.dtype) > limit) ++n.second;
        }
    return n;
  };
  CHECK(count({"params.schedule=trnsim_optimized"}) == std::pair<int64_t, int64_t>{4, 3});
  CHECK(count({}) == std::pair<int64_t, int64_t>{10, 0});
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
  // nki-library's documented default (matmul_mxfp8_generic_backward_kernel.py), as matmul_mxfp8's
  // (matmul_mxfp8_generic_kernel.py, with its operands pre-swizzled by default; the backward's are not).
  CHECK(d["float8_dtype"] == "float8_e5m2");
  CHECK(d["output_grad_is_swizzled"] == false);
  const json fwd = kernels::registry().bind("matmul_mxfp8", {{"M", 512}, {"K", 512}, {"N", 512}})->params();
  CHECK(fwd["float8_dtype"] == "float8_e5m2");
  CHECK(fwd["x_is_swizzled"] == true);
  CHECK(fwd["w_is_swizzled"] == true);
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
      k + ": parameter 'output_grad_scales' without 'output_grad_columnwise_scales': the x4 data of "
          "output_grad is quantized along N, input_grad's contraction; nki-library hands the same pair to "
          "weight_grad, whose contraction is M (its K check fails unless M == N, and then it computes dY X); "
          "give the columnwise set too (inputs output_grad_columnwise [M/4, N] and its scales)");
  CHECK(
      err({{"output_grad_is_swizzled", true}}) ==
      k + ": parameter 'output_grad_is_swizzled': nki-library passes it to both phases, and weight_grad "
          "reads output_grad K-by-F (contraction M), which matmul_mxfp8 asserts out for pre-swizzled inputs "
          "('K-by-F layout (lhs_is_f_by_k=False) is not supported for pre-swizzled inputs', "
          "matmul_mxfp8_generic_kernel.py); pass output_grad unswizzled, or pre-quantized "
          "(output_grad_scales with output_grad_columnwise_scales)");
  // Trn2: nki-library has no Trn2 path (nc_matmul_mx and quantize_mx are NeuronCore-v4 instructions).
  try {
    build_mx("matmul_mxfp8_backward", base, test::hw_named("trn2"));
    FAIL("built on Trn2");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("needs Trn3") && Catch::Contains("NeuronCore-v4") &&
                             Catch::Contains("TRN3-only"));
  }
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
  // trnsim_optimized, whose instruction count and host time the bounds below were set for; the default
  // (nki-library's stream with its fallback blocks, 77,364 instructions) is
  // test_matmul_mxfp8_bwd_blocking.cpp's.
  const json p = {{"M", M}, {"K", K}, {"N", N}, {"schedule", "trnsim_optimized"}};
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
  // quantized along the contraction (wrapX groups) in the default float8_dtype, float8_e5m2.
  const auto column = [](const std::vector<uint16_t>& a, int64_t rows, int64_t cols, int64_t c) {
    std::vector<uint16_t> v(rows);
    for (int64_t r = 0; r < rows; ++r) v[r] = a[r * cols + c];
    return v;
  };
  const auto mx_dot = [](const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
    const int64_t n = static_cast<int64_t>(a.size());
    const auto da = mx_dequant({&a, n, 1, true}, num::Fp8Format::E5M2, num::QuantScheme::WrapX);
    const auto db = mx_dequant({&b, n, 1, true}, num::Fp8Format::E5M2, num::QuantScheme::WrapX);
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
