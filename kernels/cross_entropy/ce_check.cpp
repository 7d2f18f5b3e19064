#include "kernels/cross_entropy/ce_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
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

// The kernel's emulated BF16 gradient (ce_reference.h) from the run's inputs.
struct BwdInputs {
  BwdInputs(const CheckContext& c, const CommonParams& p)
      : target(ints(c.input("target"))),
        row_max(c.input("row_max").values()),
        row_sumexp(c.input("row_sumexp").values()),
        grad_output(c.input("grad_output").values()),
        emulation(c.input("logits"), target, row_max, row_sumexp, grad_output, p) {}
  std::vector<int32_t> target;
  std::vector<float> row_max, row_sumexp, grad_output;
  GradEmulation emulation;
};

// Differing bytes of an output against expected bytes, accumulated over ranges in increasing order (one per
// row block, merged in order, so the result does not depend on the thread count).
struct ByteDiff {
  int64_t differ = 0, first = -1, nonfinite = 0;
  // out[0, n) against expected[0, n), the output's bytes [offset, offset + n); `special` flags the byte
  // values that count as non-finite (null: none).
  void add(const uint8_t* out, const uint8_t* expected, size_t n, size_t offset, const uint8_t* special) {
    // 4 KiB runs compared with memcmp before looking at single bytes.
    constexpr size_t kRun = 4096;
    for (size_t i0 = 0; i0 < n; i0 += kRun) {
      const size_t i1 = std::min(n, i0 + kRun);
      if (special != nullptr)
        for (size_t i = i0; i < i1; ++i) nonfinite += special[out[i]];
      if (std::memcmp(&out[i0], &expected[i0], i1 - i0) == 0) continue;
      for (size_t i = i0; i < i1; ++i)
        if (out[i] != expected[i]) {
          if (first < 0) first = static_cast<int64_t>(offset + i);
          ++differ;
        }
    }
  }
  void then(const ByteDiff& later) {
    differ += later.differ;
    nonfinite += later.nonfinite;
    if (first < 0) first = later.first;
  }
};

// NaN/Inf codes per byte value of an FP8 dtype (all zero for other byte dtypes).
std::array<uint8_t, 256> fp8_special(isa::DType dt) {
  std::array<uint8_t, 256> s{};
  const bool e5m2 = dt == isa::DType::FP8_E5M2, e4m3 = dt == isa::DType::FP8_E4M3FN;
  for (int b = 0; b < 256; ++b) s[b] = (e4m3 && (b & 0x7F) == 0x7F) || (e5m2 && (b & 0x7F) >= 0x7C);
  return s;
}

// A bit-exact result from counts gathered while streaming (the metrics of bit_exact_result).
tensor::CheckResult bit_exact_counts(const std::string& output, const HostTensor& out, size_t bytes_total,
                                     int64_t bytes_differing, int64_t elements_differing, int64_t first,
                                     int64_t nonfinite) {
  tensor::CheckResult r;
  r.output = output;
  r.kind = tensor::kCheckBitExact;
  r.dtype = isa::dtype_name(out.dtype);
  r.elements = out.elements();
  r.nonfinite = nonfinite;
  r.metrics = {{"bytes_total", static_cast<double>(bytes_total)},
               {"bytes_differing", static_cast<double>(bytes_differing)},
               {"elements_differing", static_cast<double>(elements_differing)},
               {"first_difference_index", static_cast<double>(first)}};
  if (bytes_differing > 0)
    r.failures.push_back(fmt::format("{} of {} bytes differ ({} elements; first at element {})",
                                     bytes_differing, bytes_total, elements_differing, first));
  r.pass = r.failures.empty();
  return r;
}

// bit_exact_result for byte-sized dtypes (FP8 data, E8M0 scales) from a ByteDiff over all n output bytes (NaN
// codes counted from the dtype's encoding).
tensor::CheckResult bytes_result(const std::string& output, const HostTensor& out, const ByteDiff& d,
                                 size_t n) {
  return bit_exact_counts(output, out, n, d.differ, d.differ, d.first, d.nonfinite);
}

void check_size(const std::string& output, const HostTensor& out, size_t n) {
  if (n != out.bytes.size())
    throw Error(
        fmt::format("check of '{}': {} expected bytes for {} output bytes", output, n, out.bytes.size()));
}

tensor::CheckResult bytes_exact(const std::string& output, const HostTensor& out, const uint8_t* expected,
                                size_t n) {
  check_size(output, out, n);
  ByteDiff d;
  const std::array<uint8_t, 256> special = fp8_special(out.dtype);
  d.add(out.bytes.data(), expected, n, 0, special.data());
  return bytes_result(output, out, d, n);
}

// Rows per step of the streaming passes below: whole 32-row MX blocks, few enough that a thread's buffers
// stay small (the gradient of all rows is never held).
constexpr int64_t kStepRows = 128;

// FP64 gradient check of BF16 gradient bits ([rows, V] row-major), streamed over the sampled rows in 32-row
// steps: kernel_rows(r0, r1, scratch) returns rows [r0, r1) (scratch holds (r1 - r0) V values if needed).
tensor::CheckResult grad_tolerance(
    const std::string& name, const HostTensor& out,
    const std::function<const uint16_t*(int64_t, int64_t, uint16_t*)>& kernel_rows, const CheckContext& c,
    const CommonParams& p, const std::vector<int32_t>& t, const std::vector<float>& go) {
  const auto blocks = sample_rows(p.rows, p.V, c.full_reference());
  int64_t compared = 0;
  for (const auto& [r0, r1] : blocks) compared += r1 - r0;
  const size_t n = static_cast<size_t>(kSampleRows * p.V);
  std::vector<double> g(n);
  std::vector<float> k(n);
  std::vector<uint16_t> scratch(n);
  SpecialTolerance acc(Tolerance{});
  for (const auto& [b0, b1] : blocks)
    for (int64_t r0 = b0; r0 < b1; r0 += kSampleRows) {
      const int64_t r1 = std::min(b1, r0 + kSampleRows), m = (r1 - r0) * p.V;
      grad_reference(c.input("logits"), t, go, p, r0, r1, reference_threads(), g.data());
      const uint16_t* kv = kernel_rows(r0, r1, scratch.data());
      for (int64_t i = 0; i < m; ++i) k[i] = num::bf16_to_f32(kv[i]);
      acc.add(k.data(), g.data(), static_cast<size_t>(m));
    }
  return acc.finish(name, out, compared, p.rows, kNonFinite);
}

// The MXFP8 outputs against num::quantize of the emulated BF16 gradient, both axes in one pass over 128-row
// steps (each thread a contiguous range of 32-row blocks): no whole-tensor copy of the gradient or the
// expected bytes is made. Compact scales are kept whole (V / 32 per row), then laid out as TE's.
struct MxResults {
  tensor::CheckResult data[2], scales[2];
};

const char* const kMxNames[2][2] = {{"input_grad_rowwise_data", "input_grad_rowwise_scale_inv"},
                                    {"input_grad_columnwise_data", "input_grad_columnwise_scale_inv"}};

MxResults mx_check(const CheckContext& c, const BwdParams& bp) {
  const CommonParams& p = bp.c;
  const int64_t R = p.rows, V = p.V, nblk = R / 32;
  const num::ScaleRule rule =
      bp.quantize_rule == QuantizeRule::Te ? num::ScaleRule::Te : num::ScaleRule::Trn3;
  const num::Fp8Format fmt = bp.fp8();
  const BwdInputs in(c, p);
  // Only the orientations in use are written (rowwise_usage / columnwise_usage).
  const HostTensor* out[2] = {bp.uses(0) ? &c.output(kMxNames[0][0]) : nullptr,
                              bp.uses(1) ? &c.output(kMxNames[1][0]) : nullptr};
  std::array<uint8_t, 256> special[2];
  for (int a = 0; a < 2; ++a)
    if (out[a]) {
      check_size(kMxNames[a][0], *out[a], static_cast<size_t>(R * V));
      special[a] = fp8_special(out[a]->dtype);
    }
  std::vector<uint8_t> compact[2];
  std::vector<ByteDiff> diff[2];  // per 32-row block
  for (int a = 0; a < 2; ++a) {
    const num::MxAxis ax = a == 0 ? num::MxAxis::Row : num::MxAxis::Col;
    compact[a].resize(static_cast<size_t>(num::mx_scale_shape(R, V, ax).size()));
    diff[a].resize(static_cast<size_t>(nblk));
  }
  parallel_rows(nblk, reference_threads(), [&](int64_t b0, int64_t b1) {
    std::vector<uint16_t> g(static_cast<size_t>(kStepRows * V));
    std::vector<uint8_t> q(static_cast<size_t>(kStepRows * V));
    for (int64_t s0 = b0; s0 < b1; s0 += kStepRows / 32) {
      const int64_t s1 = std::min(b1, s0 + kStepRows / 32), r0 = 32 * s0, r1 = 32 * s1;
      in.emulation.rows(r0, r1, g.data());
      for (int a = 0; a < 2; ++a) {
        if (!out[a]) continue;
        const num::MxAxis ax = a == 0 ? num::MxAxis::Row : num::MxAxis::Col;
        uint8_t* sc = compact[a].data() + (a == 0 ? r0 * (V / 32) : s0 * V);
        num::quantize(g.data(), r1 - r0, V, ax, fmt, rule, q.data(), sc, 1);
        for (int64_t b = s0; b < s1; ++b) {
          const size_t off = static_cast<size_t>((b - s0) * 32 * V), n = static_cast<size_t>(32 * V);
          diff[a][b].add(out[a]->bytes.data() + r0 * V + off, q.data() + off, n, r0 * V + off,
                         special[a].data());
        }
      }
    }
  });
  MxResults res;
  for (int a = 0; a < 2; ++a) {
    if (!out[a]) continue;
    const num::MxAxis ax = a == 0 ? num::MxAxis::Row : num::MxAxis::Col;
    ByteDiff d;
    for (const ByteDiff& b : diff[a]) d.then(b);
    res.data[a] = bytes_result(kMxNames[a][0], *out[a], d, static_cast<size_t>(R * V));
    std::vector<uint8_t> te(static_cast<size_t>(num::te_scale_shape(R, V, ax).size()));
    if (bp.scale_layout == ScaleLayout::Swizzled)
      num::to_te_swizzled(compact[a].data(), R, V, ax, te.data());
    else
      num::to_te_compact(compact[a].data(), R, V, ax, te.data());
    res.scales[a] = bytes_exact(kMxNames[a][1], c.output(kMxNames[a][1]), te.data(), te.size());
  }
  return res;
}

// input_grad (BF16) bit for bit against the emulated gradient, streamed like mx_check: the metrics of
// bit_exact_result (bytes, elements, first element differing; NaN/Inf counted from the BF16 encoding).
tensor::CheckResult bf16_emulation_check(const std::string& name, const CheckContext& c,
                                         const CommonParams& p) {
  const HostTensor& out = c.output("input_grad");
  const int64_t R = p.rows, V = p.V, nsteps = (R + kStepRows - 1) / kStepRows;
  check_size(name, out, static_cast<size_t>(R * V * 2));
  const BwdInputs in(c, p);
  struct Diff {
    int64_t bytes = 0, elems = 0, first = -1, nonfinite = 0;
  };
  std::vector<Diff> diff(static_cast<size_t>(nsteps));
  const auto* o = reinterpret_cast<const uint16_t*>(out.bytes.data());
  parallel_rows(nsteps, reference_threads(), [&](int64_t s0, int64_t s1) {
    std::vector<uint16_t> g(static_cast<size_t>(kStepRows * V));
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t r0 = s * kStepRows, r1 = std::min(R, r0 + kStepRows), n = (r1 - r0) * V;
      in.emulation.rows(r0, r1, g.data());
      Diff& d = diff[s];
      const uint16_t* ko = o + r0 * V;
      for (int64_t i = 0; i < n; ++i) {
        d.nonfinite += (ko[i] & 0x7F80u) == 0x7F80u;
        if (ko[i] == g[i]) continue;
        const int64_t db = ((ko[i] ^ g[i]) & 0xFFu ? 1 : 0) + ((ko[i] ^ g[i]) >> 8 ? 1 : 0);
        d.bytes += db;
        ++d.elems;
        if (d.first < 0) d.first = r0 * V + i;
      }
    }
  });
  Diff t;
  for (const Diff& d : diff) {
    t.bytes += d.bytes;
    t.elems += d.elems;
    t.nonfinite += d.nonfinite;
    if (t.first < 0) t.first = d.first;
  }
  return bit_exact_counts(name, out, out.bytes.size(), t.bytes, t.elems, t.first, t.nonfinite);
}

}  // namespace

void SpecialTolerance::add(const float* k, const double* g, size_t n) {
  size_t run = 0;  // start of the current run of finite references, added in one call (same order)
  for (size_t i = 0; i <= n; ++i) {
    if (i < n && std::isfinite(g[i])) {
      kernel_nonfinite_ += std::isfinite(k[i]) ? 0 : 1;
      continue;
    }
    if (i > run) acc_.add(&k[run], &g[run], static_cast<int64_t>(i - run));
    run = i + 1;
    if (i == n) break;
    kernel_nonfinite_ += std::isfinite(k[i]) ? 0 : 1;
    ++expected_;
    const bool same = std::isnan(g[i]) ? std::isnan(k[i]) : static_cast<double>(k[i]) == g[i];
    mismatched_ += same ? 0 : 1;
  }
}

tensor::CheckResult SpecialTolerance::finish(const std::string& output, const HostTensor& out,
                                             int64_t rows_compared, int64_t rows_total,
                                             const std::string& what_nonfinite) const {
  const ref::ErrorMetrics e = acc_.finish(tol_.atol_factor);
  tensor::CheckResult r = tolerance_result(output, out, e, e, false, tol_, rows_compared, rows_total);
  r.nonfinite = kernel_nonfinite_;
  for (std::string& f : r.failures)
    if (f.find("are NaN or Inf") != std::string::npos) f += " where the FP64 reference is finite";
  if (mismatched_ > 0)
    r.failures.push_back(
        fmt::format("{} of {} expected NaN/Inf values differ ({})", mismatched_, expected_, what_nonfinite));
  if (expected_ > 0)
    r.notes.push_back(fmt::format("{} NaN/Inf values expected and {} ({})", expected_,
                                  mismatched_ == 0 ? "matched" : "not all matched", what_nonfinite));
  r.pass = r.failures.empty();
  return r;
}

tensor::CheckResult special_tolerance(const std::string& output, const HostTensor& out,
                                      const std::vector<float>& k, const std::vector<double>& g,
                                      const Tolerance& tol, int64_t rows_compared, int64_t rows_total,
                                      const std::string& what_nonfinite) {
  if (k.size() != g.size())
    throw Error(
        fmt::format("check of '{}': {} kernel values for {} reference values", output, k.size(), g.size()));
  SpecialTolerance acc(tol);
  acc.add(k.data(), g.data(), k.size());
  return acc.finish(output, out, rows_compared, rows_total, what_nonfinite);
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
  const double flops = 8.0 * static_cast<double>(p.rows) * p.V;
  std::vector<OutputCheck> v;
  if (!bp.mxfp8()) {
    v.push_back({"input_grad",
                 [p](const CheckContext& c) {
                   const HostTensor& out = c.output("input_grad");
                   const auto* kv = reinterpret_cast<const uint16_t*>(out.bytes.data());
                   return grad_tolerance(
                       "input_grad", out, [&](int64_t r0, int64_t, uint16_t*) { return kv + r0 * p.V; }, c, p,
                       ints(c.input("target")), c.input("grad_output").values());
                 },
                 flops});
    v.push_back({"input_grad:emulation",
                 [p](const CheckContext& c) { return bf16_emulation_check("input_grad:emulation", c, p); }});
    return v;
  }
  // MXFP8: one pass computes the four byte checks when the first of them runs.
  auto res = std::make_shared<std::optional<MxResults>>();
  for (int axis = 0; axis < 2; ++axis)
    for (int scales = 0; bp.uses(axis) && scales < 2; ++scales)
      v.push_back({kMxNames[axis][scales], [bp, res, axis, scales](const CheckContext& c) {
                     if (!*res) *res = mx_check(c, bp);
                     return scales ? (*res)->scales[axis] : (*res)->data[axis];
                   }});
  v.push_back(
      {"input_grad:emulation_vs_fp64",
       [p](const CheckContext& c) {
         const BwdInputs in(c, p);
         const HostTensor h = HostTensor::zeros(isa::DType::BF16, {p.rows, 1});  // names the dtype only
         tensor::CheckResult r = grad_tolerance(
             "input_grad:emulation_vs_fp64", h,
             [&](int64_t r0, int64_t r1, uint16_t* scratch) {
               in.emulation.rows(r0, r1, scratch);
               return static_cast<const uint16_t*>(scratch);
             },
             c, p, in.target, in.grad_output);
         r.elements = p.rows * p.V;
         return r;
       },
       flops});
  return v;
}

}  // namespace trnsim::kernels::ce
