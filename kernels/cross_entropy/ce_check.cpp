#include "kernels/cross_entropy/ce_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>

#include "kernels/cross_entropy/ce_reference.h"
#include "sim/base/error.h"
#include "sim/isa/semantics.h"
#include "sim/numerics/mx.h"
#include "sim/numerics/scale_layout.h"

namespace trnsim::kernels::ce {
namespace {

using tensor::HostTensor;

constexpr int64_t kSampleRows = 32;
constexpr double kSampleBudget = double(int64_t{1} << 26);  // FP64 reference values per check

constexpr const char* kNonFinite =
    "all -inf rows give NaN, a -inf target logit +Inf (with label smoothing any -inf logit)";

std::vector<int32_t> ints(const HostTensor& t) {
  std::vector<int32_t> v(static_cast<size_t>(t.elements()));
  for (int64_t i = 0; i < t.elements(); ++i) v[i] = static_cast<int32_t>(t.int_value(i));
  return v;
}

// Row blocks [start, end) of 32 rows compared against an FP64 reference: all rows, or evenly spaced blocks
// within the budget.
std::vector<std::pair<int64_t, int64_t>> sample_rows(int64_t rows, int64_t V, bool full) {
  std::vector<std::pair<int64_t, int64_t>> out;
  const double total = static_cast<double>(rows) * V;
  if (full || total <= kSampleBudget) {
    out.emplace_back(0, rows);
    return out;
  }
  const int64_t blocks = (rows + kSampleRows - 1) / kSampleRows;
  const int64_t stride = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(total / kSampleBudget)));
  for (int64_t b = 0; b < blocks; b += stride)
    out.emplace_back(b * kSampleRows, std::min(rows, (b + 1) * kSampleRows));
  return out;
}

// Shared, lazily computed host data of one evaluation (the checks of one run share it).
struct FwdState {
  std::optional<FwdReference> ref;
  const FwdReference& get(const CheckContext& c, const CommonParams& p) {
    if (!ref) {
      const int th = reference_threads();
      ref = fwd_reference(c.input("logits"), ints(c.input("target")), p, th);
    }
    return *ref;
  }
};

struct BwdState {
  std::optional<std::vector<uint16_t>> emulated;
  const std::vector<uint16_t>& grad(const CheckContext& c, const CommonParams& p) {
    if (!emulated)
      emulated = emulate_grad_bf16(c.input("logits"), ints(c.input("target")), c.input("row_max").values(),
                                   c.input("row_sumexp").values(), c.input("grad_output").values(), p,
                                   reference_threads());
    return *emulated;
  }
};

// FP64 gradient check of BF16 gradient bits `kv` ([rows, V] row-major) on sampled rows.
run::CheckResult grad_tolerance(const std::string& name, const HostTensor& out, const uint16_t* kv,
                                const CheckContext& c, const CommonParams& p) {
  const auto blocks = sample_rows(p.rows, p.V, c.full_reference());
  const std::vector<int32_t> t = ints(c.input("target"));
  const std::vector<float> go = c.input("grad_output").values();
  std::vector<float> k;
  std::vector<double> g;
  int64_t compared = 0;
  for (const auto& [r0, r1] : blocks) compared += r1 - r0;
  k.reserve(static_cast<size_t>(compared * p.V));  // no regrowth copies of these large vectors
  g.reserve(static_cast<size_t>(compared * p.V));
  for (const auto& [r0, r1] : blocks) {
    const std::vector<double> gb = grad_reference(c.input("logits"), t, go, p, r0, r1, reference_threads());
    g.insert(g.end(), gb.begin(), gb.end());
    for (int64_t i = r0 * p.V; i < r1 * p.V; ++i) k.push_back(num::bf16_to_f32(kv[i]));
  }
  return special_tolerance(name, out, k, g, Tolerance{}, compared, p.rows, kNonFinite);
}

HostTensor bytes_tensor(isa::DType dt, std::vector<int64_t> shape, const uint8_t* data) {
  HostTensor h = HostTensor::zeros(dt, shape);
  std::memcpy(h.bytes.data(), data, h.bytes.size());
  return h;
}

// bit_exact_result for byte-sized dtypes (FP8 data, E8M0 scales) without a float copy of the output: the same
// metrics, computed on the bytes (NaN codes counted from the dtype's encoding).
run::CheckResult bytes_exact(const std::string& output, const HostTensor& out, const uint8_t* expected,
                             size_t n) {
  run::CheckResult r;
  r.output = output;
  r.kind = run::kCheckBitExact;
  r.dtype = isa::dtype_name(out.dtype);
  r.elements = out.elements();
  if (n != out.bytes.size())
    throw Error(
        fmt::format("check of '{}': {} expected bytes for {} output bytes", output, n, out.bytes.size()));
  int64_t differ = 0, first = -1, nonfinite = 0;
  const bool e5m2 = out.dtype == isa::DType::FP8_E5M2, e4m3 = out.dtype == isa::DType::FP8_E4M3FN;
  // NaN/Inf codes per byte value, then 4 KiB runs compared with memcmp before looking at single bytes.
  uint8_t special[256];
  for (int b = 0; b < 256; ++b) special[b] = (e4m3 && (b & 0x7F) == 0x7F) || (e5m2 && (b & 0x7F) >= 0x7C);
  constexpr size_t kRun = 4096;
  for (size_t i0 = 0; i0 < n; i0 += kRun) {
    const size_t i1 = std::min(n, i0 + kRun);
    if (e4m3 || e5m2)
      for (size_t i = i0; i < i1; ++i) nonfinite += special[out.bytes[i]];
    if (std::memcmp(&out.bytes[i0], &expected[i0], i1 - i0) == 0) continue;
    for (size_t i = i0; i < i1; ++i)
      if (out.bytes[i] != expected[i]) {
        if (first < 0) first = static_cast<int64_t>(i);
        ++differ;
      }
  }
  r.nonfinite = nonfinite;
  r.metrics = {{"bytes_total", static_cast<double>(n)},
               {"bytes_differing", static_cast<double>(differ)},
               {"elements_differing", static_cast<double>(differ)},
               {"first_difference_index", static_cast<double>(first)}};
  if (differ > 0)
    r.failures.push_back(
        fmt::format("{} of {} bytes differ ({} elements; first at element {})", differ, n, differ, first));
  r.pass = r.failures.empty();
  return r;
}

}  // namespace

run::CheckResult special_tolerance(const std::string& output, const HostTensor& out,
                                   const std::vector<float>& k, const std::vector<double>& g,
                                   const Tolerance& tol, int64_t rows_compared, int64_t rows_total,
                                   const std::string& what_nonfinite) {
  if (k.size() != g.size())
    throw Error(
        fmt::format("check of '{}': {} kernel values for {} reference values", output, k.size(), g.size()));
  ref::MetricsAccumulator acc(tol.rtol);
  int64_t expected = 0, mismatched = 0, kernel_nonfinite = 0;
  size_t run = 0;  // start of the current run of finite references, added in one call (same order)
  for (size_t i = 0; i <= k.size(); ++i) {
    if (i < k.size() && std::isfinite(g[i])) {
      kernel_nonfinite += std::isfinite(k[i]) ? 0 : 1;
      continue;
    }
    if (i > run) acc.add(&k[run], &g[run], static_cast<int64_t>(i - run));
    run = i + 1;
    if (i == k.size()) break;
    kernel_nonfinite += std::isfinite(k[i]) ? 0 : 1;
    ++expected;
    const bool same = std::isnan(g[i]) ? std::isnan(k[i]) : static_cast<double>(k[i]) == g[i];
    mismatched += same ? 0 : 1;
  }
  const ref::ErrorMetrics e = acc.finish(tol.atol_factor);
  run::CheckResult r = tolerance_result(output, out, e, e, false, tol, rows_compared, rows_total);
  r.nonfinite = kernel_nonfinite;
  for (std::string& f : r.failures)
    if (f.find("are NaN or Inf") != std::string::npos) f += " where the FP64 reference is finite";
  if (mismatched > 0)
    r.failures.push_back(
        fmt::format("{} of {} expected NaN/Inf values differ ({})", mismatched, expected, what_nonfinite));
  if (expected > 0)
    r.notes.push_back(fmt::format("{} NaN/Inf values expected and {} ({})", expected,
                                  mismatched == 0 ? "matched" : "not all matched", what_nonfinite));
  r.pass = r.failures.empty();
  return r;
}

std::vector<OutputCheck> fwd_checks(const FwdParams& fp) {
  const CommonParams p = fp.c;
  auto st = std::make_shared<FwdState>();
  const double flops = 6.0 * static_cast<double>(p.rows) * p.V;
  std::vector<OutputCheck> v;
  v.push_back({"loss",
               [p, st](const CheckContext& c) {
                 const FwdReference& ref = st->get(c, p);
                 const HostTensor& out = c.output("loss");
                 const std::vector<double> g = p.reduce_loss ? std::vector<double>{ref.mean} : ref.loss;
                 return special_tolerance("loss", out, out.values(), g, Tolerance{}, 0, 0, kNonFinite);
               },
               flops});
  v.push_back({"row_max", [p, st](const CheckContext& c) {
                 const HostTensor& out = c.output("row_max");
                 Tolerance exact{.atol_factor = 0, .rtol = 0, .max_rel_l2_vs_quantized = 0};
                 return special_tolerance("row_max", out, out.values(), st->get(c, p).row_max, exact, 0, 0,
                                          "rows holding NaN give NaN, all -inf rows -inf");
               }});
  v.push_back({"row_sumexp", [p, st](const CheckContext& c) {
                 const HostTensor& out = c.output("row_sumexp");
                 Tolerance t{.max_rel_l2_vs_quantized = 1e-4};
                 return special_tolerance("row_sumexp", out, out.values(), st->get(c, p).row_sumexp, t, 0, 0,
                                          "rows holding NaN give NaN");
               }});
  v.push_back(bit_exact_check("argmax", [p, st](const CheckContext& c) {
    const FwdReference& ref = st->get(c, p);
    const HostTensor& out = c.output("argmax");
    HostTensor e = HostTensor::zeros(isa::DType::I32, {p.rows});
    for (int64_t i = 0; i < p.rows; ++i) e.set_int(i, ref.has_nan[i] ? out.int_value(i) : ref.argmax[i]);
    return e;
  }));
  return v;
}

std::vector<OutputCheck> bwd_checks(const BwdParams& bp) {
  const CommonParams p = bp.c;
  auto st = std::make_shared<BwdState>();
  const double flops = 8.0 * static_cast<double>(p.rows) * p.V;
  std::vector<OutputCheck> v;
  if (!bp.mxfp8()) {
    v.push_back({"input_grad",
                 [p](const CheckContext& c) {
                   const HostTensor& out = c.output("input_grad");
                   return grad_tolerance("input_grad", out,
                                         reinterpret_cast<const uint16_t*>(out.bytes.data()), c, p);
                 },
                 flops});
    v.push_back({"input_grad:emulation", [p, st](const CheckContext& c) {
                   const std::vector<uint16_t>& g = st->grad(c, p);
                   const HostTensor e = bytes_tensor(isa::DType::BF16, {p.rows, p.V},
                                                     reinterpret_cast<const uint8_t*>(g.data()));
                   return bit_exact_result("input_grad:emulation", c.output("input_grad"), e);
                 }});
    return v;
  }
  // MXFP8: the expected bytes come from one quantization of the emulated BF16 gradient per axis, computed
  // when the axis's first check runs and released after its second.
  struct Expected {
    std::vector<uint8_t> data[2], scales[2];
  };
  auto ex = std::make_shared<Expected>();
  const num::ScaleRule rule =
      bp.quantize_rule == QuantizeRule::Te ? num::ScaleRule::Te : num::ScaleRule::Trn3;
  const num::Fp8Format fmt = bp.fp8();
  const bool swizzled = bp.scale_layout == ScaleLayout::Swizzled;
  auto make = [=](const CheckContext& c, int axis) {
    if (!ex->data[axis].empty()) return;
    const num::MxAxis ax = axis == 0 ? num::MxAxis::Row : num::MxAxis::Col;
    const std::vector<uint16_t>& g = st->grad(c, p);
    ex->data[axis].resize(g.size());
    std::vector<uint8_t> compact(static_cast<size_t>(num::mx_scale_shape(p.rows, p.V, ax).size()));
    num::quantize(g.data(), p.rows, p.V, ax, fmt, rule, ex->data[axis].data(), compact.data(),
                  reference_threads());
    ex->scales[axis].resize(static_cast<size_t>(num::te_scale_shape(p.rows, p.V, ax).size()));
    if (swizzled)
      num::to_te_swizzled(compact.data(), p.rows, p.V, ax, ex->scales[axis].data());
    else
      num::to_te_compact(compact.data(), p.rows, p.V, ax, ex->scales[axis].data());
  };
  const char* names[2][2] = {{"input_grad_rowwise_data", "input_grad_rowwise_scale_inv"},
                             {"input_grad_columnwise_data", "input_grad_columnwise_scale_inv"}};
  for (int axis = 0; axis < 2; ++axis) {
    v.push_back({names[axis][0], [=](const CheckContext& c) {
                   make(c, axis);
                   const std::vector<uint8_t>& e = ex->data[axis];
                   run::CheckResult r =
                       bytes_exact(names[axis][0], c.output(names[axis][0]), e.data(), e.size());
                   std::vector<uint8_t>().swap(ex->data[axis]);
                   return r;
                 }});
    v.push_back({names[axis][1], [=](const CheckContext& c) {
                   make(c, axis);
                   const std::vector<uint8_t>& e = ex->scales[axis];
                   return bytes_exact(names[axis][1], c.output(names[axis][1]), e.data(), e.size());
                 }});
  }
  v.push_back(
      {"input_grad:emulation_vs_fp64",
       [p, st](const CheckContext& c) {
         const std::vector<uint16_t>& g = st->grad(c, p);
         const HostTensor h = HostTensor::zeros(isa::DType::BF16, {p.rows, 1});  // names the dtype only
         run::CheckResult r = grad_tolerance("input_grad:emulation_vs_fp64", h, g.data(), c, p);
         r.elements = p.rows * p.V;
         return r;
       },
       flops});
  return v;
}

}  // namespace trnsim::kernels::ce
