// Host pieces of the cross-entropy kernels (kernels/cross_entropy): the vocabulary split, the FP32 constants,
// the FP64 references and the emulation of the kernel's BF16 gradient, on rows small enough to work out by
// hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cross_entropy/ce_lib.h"
#include "kernels/cross_entropy/ce_reference.h"
#include "sim/numerics/float_formats.h"

using namespace trnsim;
using namespace trnsim::kernels::ce;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

tensor::HostTensor bf16_logits(const std::vector<std::vector<float>>& rows) {
  const int64_t R = static_cast<int64_t>(rows.size()), V = static_cast<int64_t>(rows[0].size());
  tensor::HostTensor t = tensor::HostTensor::zeros(isa::DType::BF16, {R, V});
  auto* p = reinterpret_cast<uint16_t*>(t.bytes.data());
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < V; ++j) p[r * V + j] = num::f32_to_bf16(rows[r][j]);
  return t;
}

CommonParams params(int64_t rows, int64_t V, double ls = 0.0, bool reduce = false) {
  CommonParams p;
  p.rows = rows;
  p.V = V;
  p.label_smoothing = ls;
  p.reduce_loss = reduce;
  return p;
}

}  // namespace

TEST_CASE("cross entropy: the vocabulary split of LNC2 is in 128-column blocks", "[kernels][cross_entropy]") {
  // Qwen3's 151936 columns = 1187 blocks: 594 on core 0, 593 on core 1.
  CHECK(core_columns(151936, 0, 2).lo == 0);
  CHECK(core_columns(151936, 0, 2).hi == 76032);
  CHECK(core_columns(151936, 1, 2).lo == 76032);
  CHECK(core_columns(151936, 1, 2).hi == 151936);
  CHECK(core_columns(100, 1, 2).size() == 0);  // a narrow vocabulary leaves core 1 nothing
  CHECK(core_columns(100, 0, 1).hi == 100);
}

TEST_CASE("cross entropy: the FP32 constants are rounded once from FP64", "[kernels][cross_entropy]") {
  const Consts c = consts(params(4, 1000, 0.1));
  CHECK(c.one_minus_ls == 0.9f);
  CHECK(c.neg_eps == static_cast<float>(-0.1 / 1000.0));
}

TEST_CASE("cross entropy FP64 reference: loss, -inf rows, -inf target, ignored rows, clamped mean",
          "[kernels][cross_entropy]") {
  // Row 0: four equal logits -> loss log 4, argmax 0. Row 1: all -inf -> NaN. Row 2: target logit -inf ->
  // +Inf. Row 3: ignored -> 0.
  const tensor::HostTensor x =
      bf16_logits({{1, 1, 1, 1}, {-kInf, -kInf, -kInf, -kInf}, {2, -kInf, 0, 0}, {5, 6, 7, 8}});
  const FwdReference r = fwd_reference(x, {2, 0, 1, -100}, params(4, 4), 1);
  CHECK(r.loss[0] == Approx(std::log(4.0)));
  CHECK(r.argmax[0] == 0);
  CHECK(std::isnan(r.loss[1]));
  CHECK(r.row_max[1] == -std::numeric_limits<double>::infinity());
  CHECK(r.row_sumexp[1] == 0.0);
  CHECK(std::isinf(r.loss[2]));
  CHECK(r.loss[2] > 0);
  CHECK(r.loss[3] == 0.0);
  CHECK(r.argmax[3] == 3);
  CHECK(r.valid == 3);
  // All ignored: the count clamps to 1 and the mean is 0, not NaN.
  const FwdReference z = fwd_reference(x, {-100, -100, -100, -100}, params(4, 4, 0.0, true), 1);
  CHECK(z.mean == 0.0);
}

TEST_CASE("cross entropy emulation: the kernel's BF16 gradient of a two-column row, worked by hand",
          "[kernels][cross_entropy]") {
  // logits [0, 0], target 0, row_max 0, row_sumexp 2, grad_output 1: q = exp(0) = 1, gcd = 1 * (1/2),
  // h = 0, hy = -1; g = [1 * 0.5 - 1, 1 * 0.5 + 0] = [-0.5, 0.5].
  const tensor::HostTensor x = bf16_logits({{0, 0}, {0, 0}});
  const std::vector<uint16_t> g = emulate_grad_bf16(x, {0, -100}, {0, 0}, {2, 2}, {1.0f}, params(2, 2), 1);
  CHECK(g[0] == 0xBF00);  // -0.5
  CHECK(g[1] == 0x3F00);  // 0.5
  CHECK(g[2] == 0x0000);  // ignored row: +0 exactly
  CHECK(g[3] == 0x0000);
  // The FP64 reference agrees.
  const std::vector<double> ref = grad_reference(x, {0, -100}, {1.0f}, params(2, 2), 0, 2, 1);
  CHECK(ref[0] == -0.5);
  CHECK(ref[1] == 0.5);
  CHECK(ref[2] == 0.0);
}

TEST_CASE("cross entropy references: an ignored row holding NaN is a NaN gradient row, as PyTorch",
          "[kernels][cross_entropy]") {
  // Both rows ignored. Row 0 holds a NaN (forward row_max NaN): PyTorch's softmax backward multiplies the
  // NaN softmax by the zero upstream gradient, a NaN row; the emulation (b = m * 0 - inf = NaN) and the FP64
  // reference agree. Row 1 is finite: +0 exactly.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const tensor::HostTensor x = bf16_logits({{0, nan}, {1, 2}});
  const std::vector<uint16_t> g =
      emulate_grad_bf16(x, {-100, -100}, {nan, 2}, {nan, 1.3f}, {1.0f}, params(2, 2), 1);
  CHECK(std::isnan(num::bf16_to_f32(g[0])));
  CHECK(std::isnan(num::bf16_to_f32(g[1])));
  CHECK(g[2] == 0x0000);
  CHECK(g[3] == 0x0000);
  const std::vector<double> ref = grad_reference(x, {-100, -100}, {1.0f}, params(2, 2), 0, 2, 1);
  CHECK(std::isnan(ref[0]));
  CHECK(std::isnan(ref[1]));
  CHECK(ref[2] == 0.0);
  CHECK(ref[3] == 0.0);
}
