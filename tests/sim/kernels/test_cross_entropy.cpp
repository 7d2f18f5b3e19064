// cross_entropy_fwd / cross_entropy_bwd (kernels/cross_entropy) on the SystemC model, small shapes: every
// case of the public bug reports the issue lists, each with the kernel's own checks (FP64 references,
// bit-exact emulation) plus direct assertions on the values that case is about; the MXFP8 outputs against
// num::quantize of the BF16 gradient the same kernel writes with grad_quantizer none (the bytes of another
// run, not a host emulation); LNC2 against one core; the error messages of rejected parameters.
#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/api/registry.h"
#include "kernels/cross_entropy/ce_quant.h"
#include "sim/base/error.h"
#include "sim/numerics/mx.h"
#include "sim/numerics/scale_layout.h"
#include "tests/sim/kernels/test_cross_entropy_util.h"
#include "tests/support/kernel_run.h"

using namespace trnsim;
using namespace trnsim::test;
using json = nlohmann::json;

namespace {

const json kPlain = {{"seed", 3}, {"std", 2.0}, {"ignore_fraction", 0.1}};

// Expected MXFP8 tensors of a BF16 gradient (raw bits, [rows, V]): data and TE scales for `axis`.
struct Mx {
  std::vector<uint8_t> data, scales;
};
Mx quantize_te(const tensor::HostTensor& g, num::MxAxis axis, num::Fp8Format f, num::ScaleRule rule,
               bool swz) {
  const int64_t R = g.shape[0], V = g.shape[1];
  Mx m;
  m.data.resize(static_cast<size_t>(R * V));
  std::vector<uint8_t> compact(static_cast<size_t>(num::mx_scale_shape(R, V, axis).size()));
  num::quantize(reinterpret_cast<const uint16_t*>(g.bytes.data()), R, V, axis, f, rule, m.data.data(),
                compact.data(), 1);
  m.scales.resize(static_cast<size_t>(num::te_scale_shape(R, V, axis).size()));
  if (swz)
    num::to_te_swizzled(compact.data(), R, V, axis, m.scales.data());
  else
    num::to_te_compact(compact.data(), R, V, axis, m.scales.data());
  return m;
}

// MXFP8 run == TE quantization (or Trn3) of the BF16 run's bytes, every byte.
void check_mx_matches_bf16_run(const json& params, const json& inputs, const std::string& hw = "trn3") {
  json pb = params;
  pb["grad_quantizer"] = "none";
  pb.erase("quantize_rule");
  pb.erase("scale_layout");
  pb.erase("fused");
  pb.erase("rowwise_usage");
  pb.erase("columnwise_usage");
  const CeRun bf = run_ce("cross_entropy_bwd", pb, inputs, hw);
  const CeRun mx = run_ce("cross_entropy_bwd", params, inputs, hw);
  REQUIRE(bf.all_pass());
  REQUIRE(mx.all_pass());
  const auto f =
      params.value("grad_quantizer", "") == "mxfp8_e5m2" ? num::Fp8Format::E5M2 : num::Fp8Format::E4M3FN;
  const auto rule = params.value("quantize_rule", "te") == "trn3" ? num::ScaleRule::Trn3 : num::ScaleRule::Te;
  const bool swz = params.value("scale_layout", "compact") == "swizzled";
  const char* names[2][2] = {{"input_grad_rowwise_data", "input_grad_rowwise_scale_inv"},
                             {"input_grad_columnwise_data", "input_grad_columnwise_scale_inv"}};
  for (int a = 0; a < 2; ++a) {
    if (!params.value(a == 0 ? "rowwise_usage" : "columnwise_usage", true)) {
      // The unused orientation is not an output at all.
      CHECK(mx.outputs.count(names[a][0]) == 0);
      CHECK(mx.outputs.count(names[a][1]) == 0);
      continue;
    }
    const Mx want =
        quantize_te(bf.out("input_grad"), a == 0 ? num::MxAxis::Row : num::MxAxis::Col, f, rule, swz);
    INFO(names[a][0]);
    CHECK(mx.out(names[a][0]).bytes == want.data);
    INFO(names[a][1]);
    CHECK(mx.out(names[a][1]).bytes == want.scales);
  }
}

float f32(const tensor::HostTensor& t, int64_t i) {
  return t.value(i);
}

}  // namespace

TEST_CASE(
    "cross_entropy_fwd: a row whose first 4096 logits are -inf (flash-attention #1930) has a finite loss",
    "[kernels][cross_entropy]") {
  // V 8192 in chunks of 1024: the masked prefix covers the first four chunks of every 8th row, so the running
  // maximum stays -inf for four chunks and the first finite chunk rescales the running sum by exactly 0.
  const json args = {{"seed", 5}, {"std", 3.0}, {"masked_prefix", 4096}, {"masked_prefix_every", 8}};
  for (bool lnc2 : {false, true}) {
    const CeRun r =
        run_ce("cross_entropy_fwd", {{"rows", 128}, {"V", 8192}, {"chunk", 1024}, {"run_with_lnc2", lnc2}},
               {{"gen",
                 {{"recipe", "lm_logits"},
                  {"seed", 5},
                  {"std", 3.0},
                  {"masked_prefix", 4096},
                  {"masked_prefix_every", 8}}}});
    INFO("LNC2 " << lnc2);
    CHECK(r.all_pass());
    for (int64_t row = 4; row < 128; row += 8) {
      CHECK(std::isfinite(f32(r.out("loss"), row)));
      CHECK(std::isfinite(f32(r.out("row_sumexp"), row)));
      CHECK(r.out("argmax").int_value(row) >= 4096);
    }
  }
  (void)args;
}

TEST_CASE("cross_entropy: all -inf rows give NaN (loss and gradient), a -inf target logit +Inf, as PyTorch",
          "[kernels][cross_entropy]") {
  const json args = {{"seed", 6}, {"all_masked_rows", 3}, {"neg_inf_target_rows", 3}};
  json gen = args;
  gen["recipe"] = "lm_logits";
  const CeRun f = run_ce("cross_entropy_fwd", {{"rows", 256}, {"V", 1024}}, {{"gen", gen}});
  CHECK(f.all_pass());
  int nan = 0, inf = 0;
  for (int64_t i = 0; i < 256; ++i) {
    const float l = f32(f.out("loss"), i);
    nan += std::isnan(l);
    inf += std::isinf(l) && l > 0;
  }
  CHECK(nan == 3);
  CHECK(inf == 3);
  const CeRun b = run_ce("cross_entropy_bwd", {{"rows", 256}, {"V", 1024}}, bwd_inputs(args));
  CHECK(b.all_pass());
  int nan_rows = 0;
  for (int64_t i = 0; i < 256; ++i) {
    int n = 0;
    for (int64_t j = 0; j < 1024; ++j) n += std::isnan(f32(b.out("input_grad"), i * 1024 + j));
    CHECK((n == 0 || n == 1024));
    nan_rows += n == 1024;
  }
  CHECK(nan_rows == 3);
}

TEST_CASE("cross_entropy_bwd: a NaN logit makes its row NaN, ignored or not, as PyTorch's softmax backward",
          "[kernels][cross_entropy]") {
  // 3 rows with one NaN logit among 256; all targets ignored, then none. PyTorch gives a NaN gradient row
  // either way (an ignored row's softmax backward is NaN x 0); the FP64 reference agrees, so the checks pass.
  for (double ignore : {1.0, 0.0}) {
    const json args = {{"seed", 21}, {"nan_rows", 3}, {"ignore_fraction", ignore}};
    for (const char* q : {"none", "mxfp8_e4m3"}) {
      const CeRun b =
          run_ce("cross_entropy_bwd", {{"rows", 256}, {"V", 1024}, {"grad_quantizer", q}}, bwd_inputs(args));
      INFO("ignore_fraction " << ignore << ", grad_quantizer " << q);
      CHECK(b.all_pass());
      if (std::string(q) != "none") continue;
      int nan_rows = 0;
      for (int64_t i = 0; i < 256; ++i) {
        int n = 0, zero = 0;
        for (int64_t j = 0; j < 1024; ++j) {
          n += std::isnan(f32(b.out("input_grad"), i * 1024 + j));
          zero += b.bf16("input_grad", i * 1024 + j) == 0;
        }
        CHECK((n == 0 || n == 1024));
        nan_rows += n == 1024;
        if (ignore == 1.0 && n == 0) CHECK(zero == 1024);
      }
      CHECK(nan_rows == 3);
    }
  }
}

TEST_CASE("cross_entropy: an all-ignored batch with reduce_loss gives loss 0 and a zero gradient, no NaN",
          "[kernels][cross_entropy]") {
  const json args = {{"seed", 7}, {"ignore_fraction", 1.0}};
  json gen = args;
  gen["recipe"] = "lm_logits";
  const CeRun f =
      run_ce("cross_entropy_fwd", {{"rows", 256}, {"V", 1024}, {"reduce_loss", true}}, {{"gen", gen}});
  CHECK(f.all_pass());
  CHECK(f.out("loss").bytes == std::vector<uint8_t>(4, 0));  // +0.0 exactly
  for (const char* q : {"none", "mxfp8_e4m3"}) {
    const CeRun b =
        run_ce("cross_entropy_bwd",
               {{"rows", 256}, {"V", 1024}, {"reduce_loss", true}, {"grad_quantizer", q}}, bwd_inputs(args));
    INFO(q);
    CHECK(b.all_pass());
    for (const auto& [name, t] : b.outputs)
      CHECK(std::all_of(t.bytes.begin(), t.bytes.end(), [](uint8_t x) { return x == 0; }));
  }
}

TEST_CASE("cross_entropy_bwd: ignore_idx rows in the middle of a 128-row tile are exactly zero",
          "[kernels][cross_entropy]") {
  // ignore_idx -7 for 40% of the rows anywhere in the tiles; per-row grad_output, label smoothing.
  const json args = {{"seed", 8}, {"ignore_fraction", 0.4}};
  const json params = {
      {"rows", 256}, {"V", 1024}, {"ignore_idx", -7}, {"label_smoothing", 0.1}, {"grad_output", "per_row"}};
  const CeRun b = run_ce("cross_entropy_bwd", params,
                         bwd_inputs(args, {{"generator", "normal"}, {"seed", 9}, {"std", 2.0}}));
  CHECK(b.all_pass());
  int ignored = 0;
  for (int64_t i = 0; i < 256; ++i) {
    if (b.in("target").int_value(i) != -7) continue;
    ++ignored;
    for (int64_t j = 0; j < 1024; ++j) REQUIRE(b.bf16("input_grad", i * 1024 + j) == 0);
  }
  CHECK(ignored > 40);
}

TEST_CASE("cross_entropy_bwd: per-row grad_output scales each row (checked against FP64 and bit for bit)",
          "[kernels][cross_entropy]") {
  const CeRun b = run_ce("cross_entropy_bwd", {{"rows", 256}, {"V", 1024}, {"grad_output", "per_row"}},
                         bwd_inputs(kPlain, {{"generator", "normal"}, {"seed", 11}, {"std", 3.0}}));
  CHECK(b.all_pass());
  CHECK(b.check("input_grad").metric("rel_l2_vs_exact") < 4e-3);
  CHECK(b.check("input_grad:emulation").metric("bytes_differing") == 0);
}

TEST_CASE("cross_entropy: label smoothing uses the global V under LNC2 (same losses as one core)",
          "[kernels][cross_entropy]") {
  json gen = kPlain;
  gen["recipe"] = "lm_logits";
  const json p1 = {{"rows", 128}, {"V", 2048}, {"label_smoothing", 0.2}, {"run_with_lnc2", false}};
  json p2 = p1;
  p2["run_with_lnc2"] = true;
  const CeRun a = run_ce("cross_entropy_fwd", p1, {{"gen", gen}});
  const CeRun b = run_ce("cross_entropy_fwd", p2, {{"gen", gen}});
  CHECK(a.all_pass());
  CHECK(b.all_pass());
  for (int64_t i = 0; i < 128; ++i)
    CHECK(f32(b.out("loss"), i) == Approx(f32(a.out("loss"), i)).epsilon(1e-6));
  // The backward is elementwise: both core counts give the same bytes.
  const json q1 = {{"rows", 128},
                   {"V", 2048},
                   {"label_smoothing", 0.2},
                   {"run_with_lnc2", false},
                   {"grad_quantizer", "mxfp8_e4m3"}};
  json q2 = q1;
  q2["run_with_lnc2"] = true;
  const CeRun c = run_ce("cross_entropy_bwd", q1, bwd_inputs(kPlain));
  const CeRun d = run_ce("cross_entropy_bwd", q2, bwd_inputs(kPlain));
  CHECK(c.all_pass());
  for (const auto& [name, t] : c.outputs) CHECK(d.out(name).bytes == t.bytes);
}

TEST_CASE("cross_entropy: logits at the BF16 maximum", "[kernels][cross_entropy]") {
  // The target logit and its neighbour are 0x7F7F (3.39e38): softmax 0.5 each; a shift that large must not
  // absorb log d (the gradient is exp(x - shift) / d).
  const json args = {{"seed", 12}, {"bf16_max_rows", 4}};
  json gen = args;
  gen["recipe"] = "lm_logits";
  const CeRun f =
      run_ce("cross_entropy_fwd", {{"rows", 128}, {"V", 512}, {"label_smoothing", 0.1}}, {{"gen", gen}});
  CHECK(f.all_pass());
  const CeRun b = run_ce("cross_entropy_bwd", {{"rows", 128}, {"V", 512}}, bwd_inputs(args));
  CHECK(b.all_pass());
  int rows = 0;
  for (int64_t i = 0; i < 128; ++i) {
    const int64_t y = b.in("target").int_value(i);
    if (b.in("logits").value(i * 512 + y) < 1e38f) continue;
    ++rows;
    CHECK(f32(b.out("input_grad"), i * 512 + y) == -0.5f);
    CHECK(f32(b.out("input_grad"), i * 512 + (y + 1) % 512) == 0.5f);
  }
  CHECK(rows == 4);
}

TEST_CASE("cross_entropy_fwd: argmax takes the lowest index among ties", "[kernels][cross_entropy]") {
  json gen = {{"recipe", "lm_logits"}, {"seed", 13}, {"tie_rows", 16}};
  const CeRun f = run_ce("cross_entropy_fwd", {{"rows", 128}, {"V", 700}, {"chunk", 256}}, {{"gen", gen}});
  CHECK(f.all_pass());
  int tied = 0;
  for (int64_t i = 0; i < 128; ++i) {
    int64_t first = -1, count = 0;
    for (int64_t j = 0; j < 700; ++j)
      if (f.in("logits").value(i * 700 + j) == 8.0f) {
        if (first < 0) first = j;
        ++count;
      }
    if (count < 2) continue;
    ++tied;
    CHECK(f.out("argmax").int_value(i) == first);
  }
  CHECK(tied == 16);
}

TEST_CASE(
    "cross_entropy_bwd MXFP8 (TE rule): bytes equal TE's quantizer on the BF16 gradient of a grad_quantizer "
    "none run, fused and not, compact and swizzled",
    "[kernels][cross_entropy]") {
  const json args = {{"seed", 14},
                     {"masked_prefix", 300},
                     {"masked_prefix_every", 16},
                     {"all_masked_rows", 2},
                     {"neg_inf_target_rows", 2},
                     {"bf16_max_rows", 2},
                     {"ignore_fraction", 0.1}};
  for (const char* fused : {"auto", "never"})
    for (const char* layout : {"compact", "swizzled"}) {
      DYNAMIC_SECTION(fused << " " << layout) {
        check_mx_matches_bf16_run({{"rows", 256},
                                   {"V", 1024},
                                   {"grad_quantizer", "mxfp8_e4m3"},
                                   {"fused", fused},
                                   {"scale_layout", layout},
                                   {"label_smoothing", 0.1}},
                                  bwd_inputs(args));
      }
    }
  SECTION("E5M2, rows and V not multiples of 128 (zero scale padding)") {
    check_mx_matches_bf16_run(
        {{"rows", 224}, {"V", 800}, {"grad_quantizer", "mxfp8_e5m2"}, {"reduce_loss", true}},
        bwd_inputs(args));
  }
  SECTION("FP32 logits (quantized from the BF16 gradient), swizzled with padding") {
    check_mx_matches_bf16_run({{"rows", 160},
                               {"V", 544},
                               {"grad_quantizer", "mxfp8_e4m3"},
                               {"logits_dtype", "float32"},
                               {"scale_layout", "swizzled"}},
                              bwd_inputs(args));
  }
}

TEST_CASE("cross_entropy_bwd MXFP8 with quantize_rule trn3: quantize_mx's rule on the same BF16 gradient",
          "[kernels][cross_entropy]") {
  const json args = {
      {"seed", 15}, {"all_masked_rows", 1}, {"neg_inf_target_rows", 2}, {"ignore_fraction", 0.1}};
  SECTION("fused, 640 rows (a partial 512-row tile), swizzled") {
    check_mx_matches_bf16_run({{"rows", 640},
                               {"V", 1024},
                               {"grad_quantizer", "mxfp8_e4m3"},
                               {"quantize_rule", "trn3"},
                               {"scale_layout", "swizzled"}},
                              bwd_inputs(args));
  }
  SECTION("unfused, E5M2, V not a multiple of 128") {
    check_mx_matches_bf16_run({{"rows", 288},
                               {"V", 928},
                               {"grad_quantizer", "mxfp8_e5m2"},
                               {"quantize_rule", "trn3"},
                               {"fused", "never"}},
                              bwd_inputs(args));
  }
}

TEST_CASE(
    "cross_entropy_bwd MXFP8: rowwise_usage / columnwise_usage write one orientation and skip the other's "
    "work",
    "[kernels][cross_entropy]") {
  const json args = {{"seed", 16}, {"ignore_fraction", 0.1}, {"neg_inf_target_rows", 2}};
  struct Path {
    const char *rule, *fused;
  };
  for (const Path path : {Path{"te", "auto"}, Path{"te", "never"}, Path{"trn3", "auto"}}) {
    const json base = {{"rows", 512},
                       {"V", 1024},
                       {"grad_quantizer", "mxfp8_e4m3"},
                       {"quantize_rule", path.rule},
                       {"fused", path.fused},
                       {"scale_layout", "swizzled"}};
    const CeRun both = run_ce("cross_entropy_bwd", base, bwd_inputs(args));
    REQUIRE(both.all_pass());
    for (const char* only : {"rowwise_usage", "columnwise_usage"}) {
      DYNAMIC_SECTION(path.rule << " " << path.fused << ", " << only << " = false") {
        json p = base;
        p[only] = false;
        // The same bytes for the orientation kept (TE's quantizer of the BF16 run's gradient).
        check_mx_matches_bf16_run(p, bwd_inputs(args));
        const CeRun one = run_ce("cross_entropy_bwd", p, bwd_inputs(args));
        const bool row = std::string(only) == "columnwise_usage";
        CHECK(one.outputs.size() == 2);
        // Less work and less time than both orientations.
        int64_t n_one = 0, n_both = 0;
        for (const auto& [op, n] : one.ops) n_one += n;
        for (const auto& [op, n] : both.ops) n_both += n;
        CHECK(n_one < n_both);
        CHECK(one.time_ns < both.time_ns);
        const auto count = [](const CeRun& r, isa::Opcode op) { return r.ops.count(op) ? r.ops.at(op) : 0; };
        if (std::string(path.rule) == "te") {
          // TE rule: every PE transpose serves the columnwise blocks (the tile and its keys, the FP8 result
          // back; the fix-up's on DVE), so a rowwise-only run has none.
          if (row) CHECK(count(one, isa::Opcode::NcTranspose) == 0);
          if (!row) CHECK(count(one, isa::Opcode::NcTranspose) == count(both, isa::Opcode::NcTranspose));
        } else {
          // Trn3 rule: one quantize_mx per chunk makes the columnwise blocks, PE transposes and more
          // quantize_mx the rowwise ones: each orientation alone has fewer of both.
          CHECK(count(one, isa::Opcode::QuantizeMx) < count(both, isa::Opcode::QuantizeMx));
          CHECK(count(one, isa::Opcode::NcTranspose) < count(both, isa::Opcode::NcTranspose));
        }
      }
    }
  }
  CHECK_THROWS_WITH(
      run_ce("cross_entropy_bwd",
             {{"rows", 128},
              {"V", 512},
              {"grad_quantizer", "mxfp8_e4m3"},
              {"rowwise_usage", false},
              {"columnwise_usage", false}},
             bwd_inputs(args)),
      Catch::Contains("parameters 'rowwise_usage' and 'columnwise_usage' are both false: the MXFP8 gradient "
                      "would have no tensor"));
  CHECK_THROWS_WITH(
      run_ce("cross_entropy_bwd", {{"rows", 128}, {"V", 512}, {"rowwise_usage", false}}, bwd_inputs(args)),
      Catch::Contains("parameters 'rowwise_usage' / 'columnwise_usage' apply to an MXFP8 "
                      "grad_quantizer"));
}

TEST_CASE("cross_entropy_bwd on Trn2 with the TE rule, and quantize_rule trn3 needing Trn3",
          "[kernels][cross_entropy]") {
  check_mx_matches_bf16_run({{"rows", 128}, {"V", 512}, {"grad_quantizer", "mxfp8_e4m3"}}, bwd_inputs(kPlain),
                            "trn2");
  CHECK_THROWS_WITH(
      run_ce("cross_entropy_bwd",
             {{"rows", 128}, {"V", 512}, {"grad_quantizer", "mxfp8_e4m3"}, {"quantize_rule", "trn3"}},
             bwd_inputs(kPlain), "trn2"),
      Catch::Contains(
          "kernel 'cross_entropy_bwd': parameter 'quantize_rule': trn3 uses quantize_mx, which exists "
          "on Trn3 only"));
}

TEST_CASE("cross_entropy_bwd rejects shapes and parameters it cannot honour, naming them",
          "[kernels][cross_entropy]") {
  CHECK_THROWS_WITH(
      run_ce("cross_entropy_bwd", {{"rows", 100}, {"V", 512}, {"grad_quantizer", "mxfp8_e4m3"}},
             bwd_inputs(kPlain)),
      Catch::Contains("kernel 'cross_entropy_bwd': MXFP8 gradients need rows and V multiples of 32 "
                      "(TransformerEngine's MXFP8 tensors), got rows 100 and V 512"));
  CHECK_THROWS_WITH(
      run_ce("cross_entropy_bwd",
             {{"rows", 128}, {"V", 512}, {"grad_quantizer", "mxfp8_e4m3"}, {"chunk", 2048}},
             bwd_inputs(kPlain)),
      Catch::Contains(
          "parameter 'chunk': 2048 columns; the TE-rule MXFP8 path keeps two chunks' transposes in "
          "PSUM, which holds at most 1024 columns each"));
  CHECK_THROWS_WITH(
      run_ce("cross_entropy_bwd", {{"rows", 128}, {"V", 512}, {"quantize_rule", "trn3"}}, bwd_inputs(kPlain)),
      Catch::Contains("parameter 'quantize_rule': trn3 applies to an MXFP8 grad_quantizer"));
  CHECK_THROWS_WITH(
      run_ce("cross_entropy_bwd", {{"rows", 128}, {"V", 512}, {"scale_layout", "swizzled"}},
             bwd_inputs(kPlain)),
      Catch::Contains("kernel 'cross_entropy_bwd': parameter 'scale_layout': swizzled applies to an MXFP8 "
                      "grad_quantizer (grad_quantizer none writes no scales)"));
  CHECK_THROWS_WITH(
      run_ce("cross_entropy_fwd", {{"rows", 128}, {"V", 512}, {"chunk", 200}},
             {{"gen", {{"recipe", "lm_logits"}}}}),
      Catch::Contains("kernel 'cross_entropy_fwd': parameter 'chunk': 200 is not a multiple of 128"));
}

TEST_CASE(
    "on-chip MX block quantizer (ce_quant.h) equals num::quantize_block for every BF16 block maximum, "
    "TE and Trn3 rules",
    "[kernels][cross_entropy]") {
  // 32768 blocks of 32 BF16 values: block b's largest magnitude has bit pattern b (every finite value, +Inf,
  // every NaN pattern), the other 31 are smaller magnitudes with mixed signs (and a NaN in some blocks), so
  // the scale chain sees every key and the elements every rounding case.
  constexpr int64_t kBlocks = 32768, kPer = kBlocks / 128;
  std::vector<uint16_t> data(kBlocks * 32);
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (int64_t b = 0; b < kBlocks; ++b)
    for (int i = 0; i < 32; ++i) {
      h = h * 6364136223846793005ull + 1442695040888963407ull;
      const uint16_t mag = static_cast<uint16_t>(b);
      uint16_t v = i == static_cast<int>(b % 32) ? mag : static_cast<uint16_t>((h >> 33) % (mag + 1u));
      if ((h >> 20) % 97 == 0 && i != static_cast<int>(b % 32)) v = 0x7FC1;  // a NaN element now and then
      if ((v & 0x7FFF) > 0x7F80 || (h >> 40) & 1) v = static_cast<uint16_t>(v | (((h >> 41) & 1) << 15));
      data[b * 32 + i] = v;
    }
  for (const auto rule : {kernels::ce::QuantizeRule::Te, kernels::ce::QuantizeRule::Trn3})
    for (const auto fmt : {num::Fp8Format::E4M3FN, num::Fp8Format::E5M2}) {
      const isa::DType f8 = fmt == num::Fp8Format::E5M2 ? isa::DType::FP8_E5M2 : isa::DType::FP8_E4M3FN;
      kernels::BuildOptions o;
      o.limits = hw_named("trn3").limits();
      o.num_programs = 1;
      kernels::KernelBuild b = kernels::build_program(
          [&](kernels::Kernel& k) {
            using kernels::S;
            const kernels::View in = k.input("x", isa::DType::BF16, {128, kPer * 32});
            const kernels::View q = k.output("q", f8, {128, kPer * 32});
            const kernels::View s = k.output("s", isa::DType::U8, {128, kPer});
            const kernels::View x = k.sbuf({128, kPer, 32}, isa::DType::BF16, "x");
            const kernels::View qt = k.sbuf({128, kPer, 32}, f8, "q");
            const kernels::View st = k.sbuf({128, kPer}, isa::DType::U8, "s");
            kernels::nki::dma_copy(x, in.reshape({128, kPer, 32}));
            kernels::ce::mx_quantize_free(k, qt, st, x, rule, fmt, isa::Engine::DVE);
            kernels::nki::dma_copy(q.reshape({128, kPer, 32}), qt);
            kernels::nki::dma_copy(s, st);
          },
          o);
      std::vector<uint8_t> bytes(data.size() * 2);
      std::memcpy(bytes.data(), data.data(), bytes.size());
      const KernelRun r = run_build(std::move(b), {{"x", bytes}}, hw_named("trn3"));
      const num::ScaleRule nr =
          rule == kernels::ce::QuantizeRule::Te ? num::ScaleRule::Te : num::ScaleRule::Trn3;
      int64_t bad = 0;
      for (int64_t blk = 0; blk < kBlocks; ++blk) {
        uint8_t want[32];
        const uint8_t scale = num::quantize_block_bf16(&data[blk * 32], want, fmt, nr);
        bad += r.bytes("s")[blk] != scale;
        bad += std::memcmp(&r.bytes("q")[blk * 32], want, 32) != 0;
      }
      INFO("rule " << (rule == kernels::ce::QuantizeRule::Te ? "te" : "trn3") << " E5M2 "
                   << (fmt == num::Fp8Format::E5M2));
      CHECK(bad == 0);
    }
}

TEST_CASE("cross_entropy_bwd: the bit-exact checks count changed output bytes and NaN codes exactly",
          "[kernels][cross_entropy]") {
  // The checks stream over 128-row steps split between host threads: changes in different steps and at the
  // last byte must all be counted, the first one found. The kernel's own bytes pass (all_pass of the other
  // tests), so the expected metrics are the differences the test makes.
  struct Change {
    std::string output;
    int64_t index;
    uint8_t value;
  };
  const auto tampered = [](const std::vector<Change>& changes, std::map<std::string, int64_t>& differ,
                           std::map<std::string, int64_t>& first) {
    return [&changes, &differ, &first](kernels::Tensors& outs) {
      for (const Change& c : changes) {
        HostBytes& bytes = outs.at(c.output).bytes;
        REQUIRE(static_cast<size_t>(c.index) < bytes.size());
        uint8_t& b = bytes[static_cast<size_t>(c.index)];
        REQUIRE(b != c.value);
        b = c.value;
        ++differ[c.output];
        if (!first.count(c.output)) first[c.output] = c.index;
      }
    };
  };
  SECTION("MXFP8 data and scales") {
    // rows 256 x V 1024: E4M3 byte 0x7F is NaN.
    const std::vector<Change> changes = {{"input_grad_rowwise_data", 3, 0x41},
                                         {"input_grad_rowwise_data", 130 * 1024 + 7, 0x7F},
                                         {"input_grad_rowwise_data", 200 * 1024 + 5, 0x42},
                                         {"input_grad_columnwise_data", 256 * 1024 - 1, 0x43},
                                         {"input_grad_rowwise_scale_inv", 10, 0x01}};
    std::map<std::string, int64_t> differ, first;
    const CeRun b =
        run_ce("cross_entropy_bwd", {{"rows", 256}, {"V", 1024}, {"grad_quantizer", "mxfp8_e4m3"}},
               bwd_inputs(kPlain), "trn3", tampered(changes, differ, first));
    for (const char* n : {"input_grad_rowwise_data", "input_grad_columnwise_data",
                          "input_grad_rowwise_scale_inv", "input_grad_columnwise_scale_inv"}) {
      INFO(n);
      const tensor::CheckResult& c = b.check(n);
      const int64_t d = differ.count(n) ? differ[n] : 0;
      CHECK(c.metric("bytes_differing") == d);
      CHECK(c.metric("elements_differing") == d);
      CHECK(c.metric("first_difference_index") == (d ? first[n] : -1));
      CHECK(c.pass == (d == 0));
      if (d > 0)
        CHECK(c.failures.at(0) == fmt::format("{} of {} bytes differ ({} elements; first at element {})", d,
                                              static_cast<int64_t>(c.metric("bytes_total")), d, first[n]));
    }
    CHECK(b.check("input_grad_rowwise_data").nonfinite == 1);
    CHECK(b.check("input_grad_columnwise_data").nonfinite == 0);
    CHECK(b.check("input_grad:emulation_vs_fp64").pass);
  }
  SECTION("BF16 gradient") {
    // Element 77 * 1024 + 9: its low byte; element 129 * 1024 + 3: high byte 0x7F and low byte 0x80, +Inf
    // (both bytes change: the gradient's elements are small, of either sign).
    std::map<std::string, int64_t> differ, first;
    const std::vector<Change> changes = {{"input_grad", 2 * (77 * 1024 + 9), 0x55},
                                         {"input_grad", 2 * (129 * 1024 + 3), 0x80},
                                         {"input_grad", 2 * (129 * 1024 + 3) + 1, 0x7F}};
    const CeRun b = run_ce("cross_entropy_bwd", {{"rows", 256}, {"V", 1024}}, bwd_inputs(kPlain), "trn3",
                           tampered(changes, differ, first));
    const tensor::CheckResult& c = b.check("input_grad:emulation");
    CHECK(c.metric("bytes_differing") == 3);
    CHECK(c.metric("elements_differing") == 2);
    CHECK(c.metric("first_difference_index") == 77 * 1024 + 9);
    CHECK(c.nonfinite == 1);
    CHECK(c.failures.at(0) == "3 of 524288 bytes differ (2 elements; first at element 78857)");
    CHECK_FALSE(b.check("input_grad").pass);  // +Inf where the FP64 reference is finite
  }
}
