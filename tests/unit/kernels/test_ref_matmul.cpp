#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "kernels/api/checks.h"
#include "kernels/api/registry.h"
#include "kernels/ref/matmul_ref.h"
#include "sim/base/error.h"
#include "sim/io/generators.h"
#include "sim/numerics/float_formats.h"
#include "sim/numerics/mx.h"
#include "sim/numerics/scale_layout.h"

using namespace trnsim;
using ref::Contract;
using ref::Operand;

namespace {

std::vector<float> bf16_values(std::vector<float> v) {
  for (float& x : v) x = num::bf16_to_f32(num::f32_to_bf16(x));
  return v;
}

// [rows, cols] -> [cols, rows]
std::vector<float> transpose(const std::vector<float>& a, int64_t rows, int64_t cols) {
  std::vector<float> t(a.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = a[r * cols + c];
  return t;
}

// Independent path for WrapX: swizzle [T, F] BF16, quantize_x4 as the hardware does, dequantize, unswizzle.
std::vector<double> wrapx_dequantized(const std::vector<float>& a, int64_t T, int64_t F, num::Fp8Format fmt) {
  std::vector<uint16_t> bits(a.size()), sw(a.size());
  for (size_t i = 0; i < a.size(); ++i) bits[i] = num::f32_to_bf16(a[i]);
  num::swizzle(bits.data(), T, F, num::QuantScheme::WrapX, sw.data());
  const int64_t P = T / 4;
  std::vector<uint8_t> data(a.size()), scales(static_cast<size_t>(P / 8 * F));
  num::quantize_x4(sw.data(), P, F, fmt, num::ScaleRule::Trn3, data.data(), scales.data());
  std::vector<float> deq(a.size()), out(a.size());
  for (int64_t p = 0; p < P; ++p)
    for (int64_t i = 0; i < 4 * F; ++i)
      deq[p * 4 * F + i] =
          num::fp8_to_f32(data[p * 4 * F + i], fmt) * num::e8m0_to_f32(scales[(p / 8) * F + i / 4]);
  num::unswizzle(deq.data(), T, F, num::QuantScheme::WrapX, out.data());
  return std::vector<double>(out.begin(), out.end());
}

}  // namespace

TEST_CASE("exact reference: Y = X W^T on hand-computed values", "[ref]") {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};   // [2, 3]
  const std::vector<float> w = {1, 0, -1, 2, 1, 0};  // [2, 3]
  const auto y = ref::matmul_exact({x.data(), 2, 3, Contract::Cols}, {w.data(), 2, 3, Contract::Cols});
  CHECK(y == std::vector<double>{-2, 4, -2, 13});
}

TEST_CASE("exact reference: backward pair dX = dY W, dW = dY^T X", "[ref]") {
  const std::vector<float> dy = {1, 2, 3, 4};        // [M=2, N=2]
  const std::vector<float> w = {1, 0, -1, 2, 1, 0};  // [N=2, K=3]
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};   // [M=2, K=3]
  const auto dx = ref::matmul_exact({dy.data(), 2, 2, Contract::Cols}, {w.data(), 2, 3, Contract::Rows});
  CHECK(dx == std::vector<double>{5, 2, -1, 11, 4, -3});
  const auto dw = ref::matmul_exact({dy.data(), 2, 2, Contract::Rows}, {x.data(), 2, 3, Contract::Rows});
  CHECK(dw == std::vector<double>{13, 17, 21, 18, 24, 30});
}

TEST_CASE("MX reference on hand-computed values (trn3 rule, E4M3)", "[ref]") {
  // 1x32: one group of 32. amax 3 -> scale 2^(1-7): 3 -> 192 exact, 1.1 -> 70.4 -> 72 -> 1.125.
  std::vector<float> x(32, 1.1f);
  x[5] = 3.0f;
  const std::vector<float> w(32, 1.0f);  // amax 1 -> 1 * 2^7 = 128, exact
  const ref::MxQuant q{num::Fp8Format::E4M3FN, num::ScaleRule::Trn3, num::QuantScheme::OneX32};
  const Operand xo{x.data(), 1, 32, Contract::Cols}, wo{w.data(), 1, 32, Contract::Cols};
  CHECK(ref::matmul_mx(xo, wo, q)[0] == 3.0 + 31 * 1.125);
  CHECK(ref::matmul_exact(xo, wo)[0] == Approx(3.0 + 31 * 1.1).epsilon(1e-7));

  // WrapX vs 1x32 over T = 128: index 32 shares group 0 with index 0 under WrapX (rows 0-7, 32-39, 64-71,
  // 96-103), group 1 under 1x32. A 2^20 neighbour flushes 1.3 to 0 (1.3 * 2^-13 < half the E4M3 subnormal).
  std::vector<float> y(128, 0.0f);
  y[0] = 1.3f;
  y[32] = 1048576.0f;
  const std::vector<float> ones(128, 1.0f);
  const Operand yo{y.data(), 1, 128, Contract::Cols}, oo{ones.data(), 1, 128, Contract::Cols};
  CHECK(ref::matmul_mx(yo, oo, q)[0] == 1048576.0 + 1.25);  // 1.3 * 128 = 166.4 -> 160 -> 1.25
  const ref::MxQuant wq{num::Fp8Format::E4M3FN, num::ScaleRule::Trn3, num::QuantScheme::WrapX};
  CHECK(ref::matmul_mx(yo, oo, wq)[0] == 1048576.0);
}

TEST_CASE("MX reference equals dequantize(quantize) then matmul, both schemes", "[ref]") {
  const int64_t M = 64, T = 640, N = 96;  // T = 512 + a 128 remainder tile for WrapX
  const auto fmt = GENERATE(num::Fp8Format::E4M3FN, num::Fp8Format::E5M2);
  std::vector<float> a = bf16_values(io::student_t(M * T, 4.0, 1.0, 11));  // [M, T], contract cols
  // An outlier at t = 128 of row 0: WrapX groups it with t = 0..7 (flushing them), 1x32 with t = 128..159.
  a[128] = 1099511627776.0f;                                                   // 2^40
  const std::vector<float> b = bf16_values(io::normal(T * N, 0.0, 0.02, 12));  // [T, N], contract rows
  const Operand ao{a.data(), M, T, Contract::Cols}, bo{b.data(), T, N, Contract::Rows};

  SECTION("1x32: the OCP groups of num::quantize (rowwise for [M, T], columnwise for [T, N])") {
    const ref::MxQuant q{fmt, num::ScaleRule::Trn3, num::QuantScheme::OneX32};
    std::vector<uint8_t> da(a.size()), sa(a.size() / 32), db(b.size()), sb(b.size() / 32);
    num::quantize(a.data(), M, T, num::MxAxis::Row, fmt, num::ScaleRule::Trn3, da.data(), sa.data());
    num::quantize(b.data(), T, N, num::MxAxis::Col, fmt, num::ScaleRule::Trn3, db.data(), sb.data());
    std::vector<float> qa(a.size()), qb(b.size());
    num::dequantize(da.data(), sa.data(), M, T, num::MxAxis::Row, fmt, qa.data());
    num::dequantize(db.data(), sb.data(), T, N, num::MxAxis::Col, fmt, qb.data());
    CHECK(ref::mx_fake_quantize(ao, q) == std::vector<double>(qa.begin(), qa.end()));
    CHECK(ref::mx_fake_quantize(bo, q) == std::vector<double>(qb.begin(), qb.end()));
    const std::vector<double> da64(qa.begin(), qa.end()), db64(qb.begin(), qb.end());
    CHECK(ref::matmul_mx(ao, bo, q) == ref::matmul_f64(ao, da64.data(), bo, db64.data()));
  }
  SECTION("WrapX: swizzle + quantize_x4 + unswizzle, for either operand orientation") {
    const ref::MxQuant q{fmt, num::ScaleRule::Trn3, num::QuantScheme::WrapX};
    const std::vector<double> qb = wrapx_dequantized(b, T, N, fmt);
    CHECK(ref::mx_fake_quantize(bo, q) == qb);
    // a is [M, T] with T on the columns: the hardware sees it transposed, [T, M].
    const std::vector<double> qat = wrapx_dequantized(transpose(a, M, T), T, M, fmt);
    std::vector<double> qa(a.size());
    for (int64_t m = 0; m < M; ++m)
      for (int64_t t = 0; t < T; ++t) qa[m * T + t] = qat[t * M + m];
    CHECK(ref::mx_fake_quantize(ao, q) == qa);
    CHECK(ref::matmul_mx(ao, bo, q) == ref::matmul_f64(ao, qa.data(), bo, qb.data()));
    // The schemes group differently: under WrapX the outlier flushes row 0's t = 0..7 to zero.
    const ref::MxQuant q1{fmt, num::ScaleRule::Trn3, num::QuantScheme::OneX32};
    const std::vector<double> q1a = ref::mx_fake_quantize(ao, q1);
    for (int t = 0; t < 8; ++t) {
      CHECK(qa[t] == 0.0);
      CHECK(q1a[t] != 0.0);
    }
  }
}

TEST_CASE("compare_matmul streams row blocks to the same metrics", "[ref]") {
  const int64_t M = 40, T = 256, K = 24;
  const std::vector<float> dy = bf16_values(io::normal(M * T, 0, 1, 3));    // [M, N=T]
  const std::vector<float> w = bf16_values(io::normal(T * K, 0, 0.02, 4));  // [N, K]
  const Operand lo{dy.data(), M, T, Contract::Cols}, ro{w.data(), T, K, Contract::Rows};
  const ref::MxQuant q{num::Fp8Format::E4M3FN, num::ScaleRule::Trn3, num::QuantScheme::WrapX};
  const std::vector<double> golden = ref::matmul_mx(lo, ro, q);
  std::vector<float> out(golden.begin(), golden.end());
  out[7] += 0.01f;
  const ref::ErrorMetrics one = ref::compare(out.data(), golden.data(), M * K);
  const ref::ErrorMetrics blocks = ref::compare_matmul(out.data(), lo, ro, q, 7);
  CHECK(blocks.rel_l2 == one.rel_l2);
  CHECK(blocks.max_abs_err == one.max_abs_err);
  CHECK(blocks.max_abs_err == Approx(0.01).epsilon(1e-3));
  CHECK(ref::compare_matmul(out.data(), lo, ro, q, 1000).cosine == one.cosine);
}

TEST_CASE("compare_matmul with a block stride compares exactly the sampled rows", "[ref]") {
  const int64_t M = 40, T = 64, K = 8;
  const std::vector<float> x = bf16_values(io::normal(M * T, 0, 1, 5));  // [M, T]
  const std::vector<float> w = bf16_values(io::normal(K * T, 0, 1, 6));  // [K, T]
  const Operand lo{x.data(), M, T, Contract::Cols}, ro{w.data(), K, T, Contract::Cols};
  const std::vector<double> golden = ref::matmul_exact(lo, ro);
  std::vector<float> out(golden.begin(), golden.end());
  // Block rows 4, stride 3: rows 0-3, 12-15, 24-27, 36-39 are compared. Spoil row 5 (skipped) and row 13.
  out[5 * K] += 100.0f;
  out[13 * K + 2] += 0.5f;
  std::vector<float> sampled_out;
  std::vector<double> sampled_golden;
  for (int64_t r : {0, 1, 2, 3, 12, 13, 14, 15, 24, 25, 26, 27, 36, 37, 38, 39})
    for (int64_t c = 0; c < K; ++c) {
      sampled_out.push_back(out[r * K + c]);
      sampled_golden.push_back(golden[r * K + c]);
    }
  const ref::ErrorMetrics want = ref::compare(sampled_out.data(), sampled_golden.data(), 16 * K);
  const ref::ErrorMetrics got = ref::compare_matmul(out.data(), lo, ro, std::nullopt, 4, 3);
  CHECK(got.count == 16 * K);
  CHECK(got.max_abs_err == want.max_abs_err);
  CHECK(got.rel_l2 == want.rel_l2);
  CHECK(got.max_abs_err == Approx(0.5).epsilon(1e-6));  // row 5's error of 100 is not in the sample
}

TEST_CASE("sampled_reference and compare_sampled give compare_matmul's metrics", "[ref]") {
  // The references a check's prepare step computes ahead are the values compare_matmul computes itself: the
  // same metrics to the bit, exact and MX, with and without a stride; the rows of L go through transposed
  // (Rows) and plain (Cols) operands alike.
  const int64_t M = 70, T = 128, K = 40;
  const std::vector<float> dy = bf16_values(io::normal(T * M, 0, 1, 7));  // [T, M]: L = dY^T
  const std::vector<float> x = bf16_values(io::normal(T * K, 0, 1, 8));   // [T, K]
  const ref::MxQuant q{num::Fp8Format::E4M3FN, num::ScaleRule::Trn3, num::QuantScheme::WrapX};
  for (const Contract axis : {Contract::Rows, Contract::Cols}) {
    std::vector<float> l = dy;
    if (axis == Contract::Cols)  // [M, T]
      for (int64_t t = 0; t < T; ++t)
        for (int64_t m = 0; m < M; ++m) l[m * T + t] = dy[t * M + m];
    const Operand lo{l.data(), axis == Contract::Rows ? T : M, axis == Contract::Rows ? M : T, axis};
    const Operand ro{x.data(), T, K, Contract::Rows};
    const std::vector<double> golden = ref::matmul_exact(lo, ro);
    std::vector<float> out(golden.begin(), golden.end());
    for (size_t i = 0; i < out.size(); i += 13) out[i] *= 1.001f;
    for (const auto& quant : {std::optional<ref::MxQuant>{}, std::optional<ref::MxQuant>{q}})
      for (const auto& [rows, stride] : {std::pair<int64_t, int64_t>{256, 1}, {8, 3}, {5, 4}}) {
        CAPTURE(axis == Contract::Rows, quant.has_value(), rows, stride);
        const ref::ErrorMetrics want = ref::compare_matmul(out.data(), lo, ro, quant, rows, stride);
        const std::vector<double> g = ref::sampled_reference(lo, ro, quant, rows, stride);
        CHECK(static_cast<int64_t>(g.size()) == ref::sampled_rows(M, rows, stride) * K);
        const ref::ErrorMetrics got = ref::compare_sampled(out.data(), {M, T, K}, rows, stride, g);
        CHECK(got.count == want.count);
        CHECK(got.max_abs_err == want.max_abs_err);
        CHECK(got.rel_l2 == want.rel_l2);
        CHECK(got.cosine == want.cosine);
        CHECK(got.allclose_excess == want.allclose_excess);
        const std::vector<double> one_short(g.begin(), g.end() - 1);
        CHECK_THROWS_AS(ref::compare_sampled(out.data(), {M, T, K}, rows, stride, one_short), Error);
      }
  }
}

TEST_CASE("reference input errors", "[ref]") {
  const std::vector<float> a(64, 1.0f), b(96, 1.0f);
  CHECK_THROWS_MATCHES(
      ref::matmul_exact({a.data(), 2, 32, Contract::Cols}, {b.data(), 3, 32, Contract::Rows}), InputError,
      Catch::Message("matmul reference: contraction lengths differ (lhs 32, rhs 3)"));
  const ref::MxQuant q{num::Fp8Format::E4M3FN, num::ScaleRule::Trn3, num::QuantScheme::WrapX};
  CHECK_THROWS_AS(ref::mx_fake_quantize({a.data(), 2, 32, Contract::Cols}, q), InputError);  // 32 % 128 != 0
  CHECK_THROWS_MATCHES(ref::to_f64({nullptr, 2, 32, Contract::Cols}), InputError,
                       Catch::Message("matmul reference: operand has no data"));
}

namespace {

tensor::HostTensor f32_tensor(const std::vector<float>& v, std::vector<int64_t> shape) {
  tensor::HostTensor t = tensor::HostTensor::zeros(isa::DType::F32, shape);
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

tensor::CheckResult run_check(const kernels::OutputCheck& c,
                              const std::map<std::string, tensor::HostTensor>& in,
                              const std::map<std::string, tensor::HostTensor>& out, bool full = false) {
  return c.run(kernels::CheckContext(in, out, full));
}

}  // namespace

TEST_CASE("kernel checks and the pass line", "[ref]") {
  const nlohmann::json p = {
      {"M", 64}, {"K", 128}, {"N", 32}, {"float8_dtype", "float8_e5m2"}, {"quant_scheme", "1x32"}};
  const auto k = kernels::registry().bind("matmul_mxfp8_backward", p);
  const auto checks = k->checks();
  REQUIRE(checks.size() == 2);
  CHECK(checks[0].output == "input_grad");
  CHECK(checks[1].output == "weight_grad");
  CHECK(*k->useful_flops() == 2.0 * 2 * 64 * 128 * 32);
  // Pre-quantized weights: the host reference dequantizes them (two checks still).
  CHECK(kernels::registry()
            .bind("matmul_mxfp8_backward", {{"M", 64}, {"K", 128}, {"N", 32}, {"weight_scales", {32, 128}}})
            ->checks()
            .size() == 2);

  // A kernel output equal to the quantized reference in FP32 passes; rounded to BF16 it passes the BF16 bound
  // but not the FP32 one; one corrupted element fails allclose with the exact line.
  const int64_t M = 32, N = 128, K = 64;
  const std::vector<float> dy = bf16_values(io::normal(M * N, 0, 1, 5)),
                           w = bf16_values(io::normal(N * K, 0, 0.02, 6));
  const Operand lo{dy.data(), M, N, Contract::Cols}, ro{w.data(), N, K, Contract::Rows};
  const ref::MxQuant q{num::Fp8Format::E5M2, num::ScaleRule::Trn3, num::QuantScheme::OneX32};
  const kernels::OutputCheck c = kernels::matmul_check("input_grad", {"output_grad", Contract::Cols},
                                                       {"weights", Contract::Rows}, q, 2.0 * M * N * K);
  const std::vector<double> golden = ref::matmul_mx(lo, ro, q);
  std::vector<float> out(golden.begin(), golden.end());
  const std::map<std::string, tensor::HostTensor> in{{"output_grad", f32_tensor(dy, {M, N})},
                                                     {"weights", f32_tensor(w, {N, K})}};
  const tensor::CheckResult ok = run_check(c, in, {{"input_grad", f32_tensor(out, {M, K})}});
  CHECK(ok.pass);
  CHECK(ok.kind == "tolerance");
  CHECK(ok.metric("rel_l2_vs_quantized") < 1e-7);
  CHECK(ok.metric("rel_l2_vs_exact") > 1e-3);  // E5M2 loses far more than 1e-3 against the exact product
  CHECK(ok.metric("cosine_vs_exact") > 0.995);
  CHECK(ok.metric("reference_rows_compared") == M);

  tensor::HostTensor bf = tensor::HostTensor::zeros(isa::DType::BF16, {M, K});
  for (int64_t i = 0; i < M * K; ++i) bf.set(i, out[i]);
  CHECK(run_check(c, in, {{"input_grad", bf}}).pass);
  std::vector<float> bf_as_f32 = bf.values();
  const tensor::CheckResult as_f32 = run_check(c, in, {{"input_grad", f32_tensor(bf_as_f32, {M, K})}});
  CHECK_FALSE(as_f32.pass);
  REQUIRE(as_f32.failures.size() == 1);
  CHECK(as_f32.failures[0].rfind("rel_l2_vs_quantized ", 0) == 0);
  CHECK(as_f32.failures[0].find(" > 1e-05 (float32 output)") != std::string::npos);
  // An FP16 or FP8 output holding the reference rounded to its dtype passes: the bound is the dtype's unit
  // roundoff (FP16 2^-11, E4M3FN 2^-4, E5M2 2^-3), not FP32's 1e-5 (tester23i: every FP8 output failed).
  for (isa::DType d :
       {isa::DType::FP16, isa::DType::FP8_E4M3FN, isa::DType::FP8_E4M3, isa::DType::FP8_E5M2}) {
    tensor::HostTensor low = tensor::HostTensor::zeros(d, {M, K});
    for (int64_t i = 0; i < M * K; ++i) low.set(i, out[i]);
    const tensor::CheckResult r = run_check(c, in, {{"input_grad", low}});
    CHECK(r.pass);
    CHECK(r.metric("rel_l2_vs_quantized") > 1e-5);
    CHECK(r.metric("rel_l2_bound") == (d == isa::DType::FP16       ? 1.0 / 2048
                                       : d == isa::DType::FP8_E5M2 ? 0.125
                                                                   : 0.0625));
  }

  out[0] = 1000.0f;
  const tensor::CheckResult bad = run_check(c, in, {{"input_grad", f32_tensor(out, {M, K})}});
  CHECK_FALSE(bad.pass);
  CHECK(bad.failures.front().rfind("allclose_vs_exact: max(|k-g| - rtol|g|) = ", 0) == 0);

  // Sampling: a declared cost of 96 GFLOP (3x the 32 GFLOP budget) checks every third 32-row block: rows
  // 0-31 of 32 here; --full-reference checks all.
  const kernels::OutputCheck big = kernels::matmul_check("input_grad", {"output_grad", Contract::Cols},
                                                         {"weights", Contract::Rows}, q, 96e9);
  std::vector<float> dy2 = bf16_values(io::normal(128 * N, 0, 1, 7));
  const Operand lo2{dy2.data(), 128, N, Contract::Cols};
  const std::vector<double> g2 = ref::matmul_mx(lo2, ro, q);
  std::vector<float> out2(g2.begin(), g2.end());
  const std::map<std::string, tensor::HostTensor> in2{{"output_grad", f32_tensor(dy2, {128, N})},
                                                      {"weights", f32_tensor(w, {N, K})}};
  const std::map<std::string, tensor::HostTensor> o2{{"input_grad", f32_tensor(out2, {128, K})}};
  const tensor::CheckResult sampled = run_check(big, in2, o2);
  CHECK(sampled.metric("reference_rows_compared") == 64);  // blocks 0 and 3 of 4
  REQUIRE(sampled.notes.size() == 1);
  CHECK(sampled.notes[0] == "references on 64 of 128 rows (evenly spaced blocks; --full-reference for all)");
  CHECK(run_check(big, in2, o2, true).metric("reference_rows_compared") == 128);

  // Bit-exact and scalar checks.
  tensor::HostTensor e = f32_tensor({1, 2, 3, 4}, {2, 2}), f = e;
  CHECK(kernels::bit_exact_result("o", e, f).pass);
  f.bytes[5] ^= 1;
  const tensor::CheckResult be = kernels::bit_exact_result("o", e, f);
  CHECK_FALSE(be.pass);
  CHECK(be.metric("bytes_differing") == 1);
  CHECK(be.metric("first_difference_index") == 1);
  CHECK(be.failures[0] == "1 of 16 bytes differ (1 elements; first at element 1)");
  CHECK(kernels::scalar_result("o", e, 2, 3.0001, 0, 1e-4).pass);
  CHECK_FALSE(kernels::scalar_result("o", e, 2, 3.1, 0.01, 0).pass);
}

TEST_CASE("matmul_check's prepare step gives the metrics of run alone, and keeps only the default sample",
          "[ref]") {
  const int64_t M = 128, N = 128, K = 64;
  const std::vector<float> dy = bf16_values(io::normal(M * N, 0, 1, 11)),
                           w = bf16_values(io::normal(N * K, 0, 0.02, 12));
  const ref::MxQuant q{num::Fp8Format::E4M3FN, num::ScaleRule::Trn3, num::QuantScheme::OneX32};
  const Operand lo{dy.data(), M, N, Contract::Cols}, ro{w.data(), N, K, Contract::Rows};
  const std::vector<double> g = ref::matmul_mx(lo, ro, q);
  std::vector<float> out(g.begin(), g.end());
  out[5] += 0.25f;  // metrics that are not zero
  const std::map<std::string, tensor::HostTensor> in{{"output_grad", f32_tensor(dy, {M, N})},
                                                     {"weights", f32_tensor(w, {N, K})}};
  const std::map<std::string, tensor::HostTensor> o{{"input_grad", f32_tensor(out, {M, K})}};
  const auto same = [](const tensor::CheckResult& a, const tensor::CheckResult& b) {
    REQUIRE(a.metrics.size() == b.metrics.size());
    for (size_t i = 0; i < a.metrics.size(); ++i) {
      CHECK(a.metrics[i].name == b.metrics[i].name);
      CHECK(std::memcmp(&a.metrics[i].value, &b.metrics[i].value, sizeof(double)) == 0);
    }
    CHECK(a.pass == b.pass);
    CHECK(a.failures == b.failures);
    CHECK(a.notes == b.notes);
  };
  // 96 GFLOP declared: every third 32-row block (rows 0-31 and 96-127), as in the test above.
  for (const bool full : {false, true}) {
    const auto make = [&] {
      return kernels::matmul_check("input_grad", {"output_grad", Contract::Cols}, {"weights", Contract::Rows},
                                   q, 96e9);
    };
    const tensor::CheckResult alone = run_check(make(), in, o, full);
    const kernels::OutputCheck c = make();
    REQUIRE(c.prepare);
    c.prepare(kernels::CheckContext(in, full));
    const tensor::CheckResult prepared = run_check(c, in, o, full);
    CHECK(prepared.metric("reference_rows_compared") == (full ? M : 64));
    same(prepared, alone);
  }
  // Held from prepare to run: the default sample's 64 rows of K doubles, exact and MX.
  const kernels::OutputCheck c = kernels::matmul_check("input_grad", {"output_grad", Contract::Cols},
                                                       {"weights", Contract::Rows}, q, 96e9);
  REQUIRE(c.prepared_bytes);
  CHECK(c.prepared_bytes({{"input_grad", {M, K}}}) == 2.0 * 8 * 64 * K);

  // An input holding NaN: the prepared references give run's result alone, bit for bit (NaN metrics too).
  std::vector<float> bad = dy;
  bad[3] = std::numeric_limits<float>::quiet_NaN();
  const std::map<std::string, tensor::HostTensor> in_bad{{"output_grad", f32_tensor(bad, {M, N})},
                                                         {"weights", f32_tensor(w, {N, K})}};
  const auto nan_check = [&] {
    return kernels::matmul_check("input_grad", {"output_grad", Contract::Cols}, {"weights", Contract::Rows},
                                 q, 96e9);
  };
  const kernels::OutputCheck prepared_nan = nan_check();
  prepared_nan.prepare(kernels::CheckContext(in_bad, false));
  same(run_check(prepared_nan, in_bad, o), run_check(nan_check(), in_bad, o));
}
