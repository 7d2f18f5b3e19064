#include "kernels/api/checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "sim/base/available_memory.h"
#include "sim/base/error.h"
#include "sim/isa/element.h"
#include "sim/isa/semantics.h"

namespace trnsim::kernels {
namespace {

using tensor::CheckResult;
using tensor::HostTensor;

// Output rows are checked in blocks of this many rows when sampled.
constexpr int64_t kSampleBlockRows = 32;
constexpr double kReferenceFlopBudget = 32e9;

int64_t count_nonfinite(const std::vector<float>& v) {
  return std::count_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
}

CheckResult base(const std::string& output, const HostTensor& out, const char* kind) {
  CheckResult r;
  r.output = output;
  r.kind = kind;
  r.dtype = isa::dtype_name(out.dtype);
  r.elements = out.elements();
  return r;
}

// The rel-L2 against the quantized reference that rounding to the output's dtype alone may add: its unit
// roundoff 2^-p for p significand bits (BF16 8, FP16 11, FP8 E4M3 and E4M3FN 4, E5M2 3); FP32 outputs 1e-5.
double rel_l2_bound(isa::DType d) {
  switch (d) {
    case isa::DType::BF16:
      return kRelL2BoundBf16;
    case isa::DType::FP16:
      return 1.0 / 2048.0;
    case isa::DType::FP8_E4M3FN:
    case isa::DType::FP8_E4M3:
      return 1.0 / 16.0;
    case isa::DType::FP8_E5M2:
      return 1.0 / 8.0;
    default:
      return kRelL2BoundF32;
  }
}

}  // namespace

const HostTensor& CheckContext::input(const std::string& name) const {
  const auto it = inputs_.find(name);
  if (it == inputs_.end()) throw Error(fmt::format("check: the kernel has no input '{}'", name));
  return it->second;
}

const HostTensor& CheckContext::output(const std::string& name) const {
  if (outputs_ == nullptr)
    throw Error(
        fmt::format("check: output '{}' asked for while preparing the references from the inputs", name));
  const auto it = outputs_->find(name);
  if (it == outputs_->end()) throw Error(fmt::format("check: the kernel has no output '{}'", name));
  return it->second;
}

CheckResult tolerance_result(const std::string& output, const HostTensor& out, const ref::ErrorMetrics& e,
                             const ref::ErrorMetrics& q, bool quantized, const Tolerance& tol,
                             int64_t rows_compared, int64_t rows_total, bool rows_are_experts) {
  CheckResult r = base(output, out, tensor::kCheckTolerance);
  const double bound = tol.max_rel_l2_vs_quantized.value_or(rel_l2_bound(out.dtype));
  r.nonfinite = e.nonfinite + e.golden_nonfinite - e.finite_where_golden_not;
  r.metrics = {{"max_abs_err", e.max_abs_err},
               {"rel_l2_vs_exact", e.rel_l2},
               {"rel_l2_vs_quantized", q.rel_l2},
               {"cosine_vs_exact", e.cosine},
               {"normalized_euclidean_vs_exact", e.norm_euclidean},
               {"allclose_vs_exact", e.allclose ? 1.0 : 0.0},
               {"max_abs_err_vs_quantized", q.max_abs_err},
               {"max_abs_golden", e.max_abs_golden},
               {"cosine_vs_quantized", q.cosine},
               {"rel_l2_bound", bound},
               {"quantized_reference", quantized ? 1.0 : 0.0},
               {"reference_rows_compared", static_cast<double>(rows_compared)},
               {"reference_rows_total", static_cast<double>(rows_total)},
               {"reference_nonfinite", static_cast<double>(e.golden_nonfinite)}};
  // NaN or Inf where the reference is finite is a wrong result; where the reference is not finite either (the
  // inputs held NaN or Inf, or overflowed their dtype) it is propagation: counted and noted.
  if (e.nonfinite > 0)
    r.failures.push_back(
        fmt::format("{} of {} values are NaN or Inf where the reference is finite", e.nonfinite, e.count));
  if (e.finite_where_golden_not > 0)
    r.failures.push_back(
        fmt::format("{} values are finite where the reference is NaN or Inf", e.finite_where_golden_not));
  const int64_t both_finite = e.count - e.golden_nonfinite - e.nonfinite;
  if (e.golden_nonfinite > 0)
    r.notes.push_back(
        fmt::format("{} of {} reference values are NaN or Inf (the inputs hold NaN or Inf); the "
                    "metrics are over the {} elements both sides hold finite",
                    e.golden_nonfinite, e.count, both_finite));
  // A check that compared nothing does not pass: no element had a finite reference and a finite output.
  if (e.count > 0 && both_finite == 0 && e.nonfinite == 0)
    r.failures.push_back(
        fmt::format("nothing compared: all {} reference values are NaN or Inf (the inputs "
                    "hold NaN or Inf, or overflowed their dtype)",
                    e.count));
  if (both_finite == 0)
    for (tensor::CheckMetric& m : r.metrics)
      if (m.name.find("reference_") != 0 && m.name != "rel_l2_bound" && m.name != "quantized_reference")
        m.value = std::numeric_limits<double>::quiet_NaN();
  if (e.nonfinite == 0 && both_finite > 0) {
    if (!e.allclose)
      r.failures.push_back(fmt::format("allclose_vs_exact: max(|k-g| - rtol|g|) = {:.6g} > atol = {:.6g}",
                                       e.allclose_excess, e.atol));
    if (!(e.cosine >= tol.min_cosine))
      r.failures.push_back(fmt::format("cosine_vs_exact {:.6g} < {}", e.cosine, tol.min_cosine));
    if (!(e.norm_euclidean <= tol.max_norm_euclidean))
      r.failures.push_back(
          fmt::format("normalized_euclidean_vs_exact {:.6g} > {}", e.norm_euclidean, tol.max_norm_euclidean));
    if (!(q.rel_l2 <= bound))
      r.failures.push_back(fmt::format("rel_l2_vs_quantized {:.6g} > {:.6g} ({} output)", q.rel_l2, bound,
                                       isa::dtype_name(out.dtype)));
  }
  if (rows_compared > 0 && rows_compared < rows_total)
    r.notes.push_back(fmt::format("references on {} of {} {} (evenly spaced{}; --full-reference for all)",
                                  rows_compared, rows_total, rows_are_experts ? "experts" : "rows",
                                  rows_are_experts ? "" : " blocks"));
  r.pass = r.failures.empty();
  return r;
}

namespace {

// An integer output (indices, counts) is right or wrong: value for value against golden values that must be
// integers in the output dtype's range, reported as a bit-exact check plus the largest integer difference
// (computed in FP64, exact below 2^53: every ISA integer dtype).
CheckResult integer_result(const std::string& output, const HostTensor& out, const std::vector<double>& g) {
  HostTensor expected = HostTensor::zeros(out.dtype, out.shape);
  int64_t bad = -1;
  for (int64_t i = 0; i < out.elements(); ++i) {
    const double v = g[static_cast<size_t>(i)];
    const bool integral = std::isfinite(v) && std::nearbyint(v) == v && std::fabs(v) < 0x1p62;
    if (integral) expected.set_int(i, static_cast<int64_t>(v));
    if (bad < 0 && (!integral || static_cast<double>(expected.int_value(i)) != v)) bad = i;
  }
  CheckResult r = bit_exact_result(output, out, expected);
  double max_abs = 0;
  for (int64_t i = 0; i < out.elements(); ++i)
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(out.int_value(i)) - g[static_cast<size_t>(i)]));
  r.metrics.insert(r.metrics.begin(), {"max_abs_err", max_abs});
  if (bad >= 0) {
    r.failures.push_back(
        fmt::format("the reference's value {:.17g} at element {} is not an {} (an integer "
                    "output is compared exactly: the reference must give integers in its range)",
                    g[static_cast<size_t>(bad)], bad, isa::dtype_name(out.dtype)));
    r.pass = false;
  }
  return r;
}

}  // namespace

OutputCheck elementwise_check(const std::string& output,
                              std::function<std::vector<double>(const CheckContext&)> golden,
                              const Tolerance& tol) {
  OutputCheck c;
  c.output = output;
  c.run = [output, golden, tol](const CheckContext& ctx) {
    const HostTensor& out = ctx.output(output);
    const std::vector<double> g = golden(ctx);
    if (static_cast<int64_t>(g.size()) != out.elements())
      throw Error(
          fmt::format("check of '{}': {} golden values for {} elements", output, g.size(), out.elements()));
    if (isa::is_int(out.dtype)) return integer_result(output, out, g);
    const std::vector<float> k = out.values();
    const ref::ErrorMetrics e = ref::compare(k.data(), g.data(), out.elements(), tol.atol_factor, tol.rtol);
    // The quantized reference: each golden value cast to the output's dtype as the engines cast (RNE, FP8
    // saturating), so that the rel L2 bound measures the kernel's error beyond that rounding alone.
    std::vector<double> gq(g.size());
    uint8_t cast[4];
    for (size_t i = 0; i < g.size(); ++i) {
      isa::store_element(out.dtype, cast, static_cast<float>(g[i]));
      gq[i] = isa::load_element(out.dtype, cast);
    }
    const ref::ErrorMetrics q = ref::compare(k.data(), gq.data(), out.elements(), tol.atol_factor, tol.rtol);
    return tolerance_result(output, out, e, q, true, tol);
  };
  return c;
}

namespace {

// The reference operand of a matmul check: the input's values as they are, unswizzled, or dequantized.
ref::Operand reference_operand(const CheckContext& ctx, const std::string& output, const MatmulOperand& op,
                               const std::optional<ref::MxQuant>& quant, std::vector<float>& values) {
  const HostTensor& t = ctx.input(op.input);
  if (t.shape.size() != 2) throw Error(fmt::format("check of '{}': matmul operands must be 2-D", output));
  if (op.scales.empty() && !op.swizzled) {
    values = t.values();
    return {values.data(), t.shape[0], t.shape[1], op.axis};
  }
  const int64_t K = 4 * t.shape[0];
  if (op.swizzled) {
    const int64_t F = t.shape[1] / 4;
    ref::unswizzle_bf16(t.bytes.data(), K, F, values, quant ? quant->scheme : num::QuantScheme::WrapX);
    return {values.data(), F, K, ref::Contract::Cols};
  }
  if (!quant) throw Error(fmt::format("check of '{}': a pre-quantized operand needs the MX format", output));
  const int64_t F = t.shape[1];
  const HostTensor& s = ctx.input(op.scales);
  const bool packed = s.shape != std::vector<int64_t>{K / 4, F};
  ref::dequantize_x4(t.bytes.data(), s.bytes.data(), K, F, packed, quant->format, values, quant->scheme);
  ref::Operand o{values.data(), F, K, ref::Contract::Cols};
  o.mx_values = true;
  return o;
}

}  // namespace

namespace {

// Which rows a matmul check compares: every row in 256-row blocks, or an evenly spaced sample of 32-row
// blocks when one FP64 reference would cost more than the budget.
struct RowSample {
  int64_t block_rows = 256, stride = 1;
};

RowSample row_sample(int64_t R, double flops, bool full_reference) {
  int64_t stride = 1;
  if (!full_reference && flops > kReferenceFlopBudget) {
    const int64_t blocks = (R + kSampleBlockRows - 1) / kSampleBlockRows;
    stride = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(flops / kReferenceFlopBudget)), 1,
                                 std::max<int64_t>(1, blocks));
  }
  return {stride > 1 ? kSampleBlockRows : 256, stride};
}

}  // namespace

OutputCheck matmul_check(const std::string& output, MatmulOperand lhs, MatmulOperand rhs,
                         std::optional<ref::MxQuant> quant, double flops, const Tolerance& tol) {
  OutputCheck c;
  c.output = output;
  c.reference_flops = flops * (quant ? 2 : 1);
  // The FP32 values of both operands and the output (HostTensor::values) and the FP64 copies of both operands
  // (ref::compare_matmul), plus one chunk of FP64 reference rows.
  c.reference_bytes = [=](const std::map<std::string, std::vector<int64_t>>& shapes) {
    const auto elements = [&](const std::string& n) {
      const auto it = shapes.find(n);
      return it == shapes.end() ? 0.0 : static_cast<double>(tensor::elements_of(it->second));
    };
    const auto& o = shapes.count(output) ? shapes.at(output) : std::vector<int64_t>{};
    const double cols = o.size() == 2 ? static_cast<double>(o[1]) : 0.0;
    return 12.0 * (elements(lhs.input) + elements(rhs.input)) + 4.0 * elements(output) + 8.0 * 256 * cols;
  };
  // The prepare step computes the sampled reference rows (exact, and MX when quantized) while the simulation
  // runs; run compares with them (compare_sampled gives compare_matmul's bytes) or, when prepare did not run
  // or gave up (an input holding NaN or Inf: run then raises the error as before), computes them itself.
  // Prepared rows are kept only up to the default sample's size (prepared_bytes), so --full-reference on a
  // large output computes its rows after the simulation as before.
  const int refs = quant ? 2 : 1;
  const auto default_rows = [flops](int64_t R) {
    const RowSample s = row_sample(R, flops, false);
    return ref::sampled_rows(R, s.block_rows, s.stride);
  };
  c.prepared_bytes = [=](const std::map<std::string, std::vector<int64_t>>& shapes) {
    const auto it = shapes.find(output);
    if (it == shapes.end() || it->second.size() != 2) return 0.0;
    return 8.0 * refs * static_cast<double>(default_rows(it->second[0])) * static_cast<double>(it->second[1]);
  };
  struct Prepared {
    bool ready = false;
    RowSample sample;
    ref::MatmulDims dims;
    std::vector<double> exact, mx;
  };
  const auto prepared = std::make_shared<Prepared>();
  c.prepare = [=](const CheckContext& ctx) {
    // Under an address-space limit (ulimit -v) the references keep to their old place after the simulation:
    // a second thread's malloc arena and stack take address space the memory check does not count.
    if (address_space_headroom()) return;
    try {
      std::vector<float> lv, rv;
      const ref::Operand lo = reference_operand(ctx, output, lhs, quant, lv),
                         ro = reference_operand(ctx, output, rhs, quant, rv);
      const ref::MatmulDims d = ref::matmul_dims(lo, ro);
      const RowSample s = row_sample(d.R, flops, ctx.full_reference());
      if (ref::sampled_rows(d.R, s.block_rows, s.stride) > default_rows(d.R)) return;
      prepared->exact = ref::sampled_reference(lo, ro, std::nullopt, s.block_rows, s.stride);
      if (quant) prepared->mx = ref::sampled_reference(lo, ro, quant, s.block_rows, s.stride);
      prepared->sample = s;
      prepared->dims = d;
      prepared->ready = true;
    } catch (const std::exception&) {
      *prepared = Prepared{};  // run computes the references and reports what went wrong
    }
  };
  c.run = [=](const CheckContext& ctx) {
    const HostTensor& out = ctx.output(output);
    // The operands' FP32 copies only when the prepared rows do not serve (they were made from the same
    // inputs, so their dims hold).
    std::vector<float> lv, rv;
    ref::Operand lo, ro;
    const auto operands = [&] {
      lo = reference_operand(ctx, output, lhs, quant, lv);
      ro = reference_operand(ctx, output, rhs, quant, rv);
      return ref::matmul_dims(lo, ro);
    };
    const ref::MatmulDims d = prepared->ready ? prepared->dims : operands();
    if (out.shape != std::vector<int64_t>{d.R, d.C})
      throw Error(fmt::format("check of '{}': output shape {} but the reference gives [{}, {}]", output,
                              tensor::shape_str(out.shape), d.R, d.C));
    const RowSample s = row_sample(d.R, flops, ctx.full_reference());
    const int64_t compared = ref::sampled_rows(d.R, s.block_rows, s.stride);
    // The output's FP32 values on the rows compared, in a buffer of the whole shape left uninitialised: the
    // rows a sample skips cost neither a conversion nor their pages.
    const std::unique_ptr<float[]> k(new float[static_cast<size_t>(d.R * d.C)]);
    for (const auto& [r0, r1] : ref::sample_blocks(d.R, s.block_rows, s.stride))
      out.values(r0 * d.C, (r1 - r0) * d.C, k.get() + r0 * d.C);
    const bool ready =
        prepared->ready && prepared->sample.block_rows == s.block_rows && prepared->sample.stride == s.stride;
    if (!ready && lo.data == nullptr) operands();
    try {
      const ref::ErrorMetrics e =
          ready ? ref::compare_sampled(k.get(), d, s.block_rows, s.stride, prepared->exact)
                : ref::compare_matmul(k.get(), lo, ro, std::nullopt, s.block_rows, s.stride);
      const ref::ErrorMetrics q = !quant ? e
                                  : ready
                                      ? ref::compare_sampled(k.get(), d, s.block_rows, s.stride, prepared->mx)
                                      : ref::compare_matmul(k.get(), lo, ro, quant, s.block_rows, s.stride);
      *prepared = Prepared{};  // the reference rows are not needed again
      return tolerance_result(output, out, e, q, quant.has_value(), tol, compared, d.R);
    } catch (const InputError& err) {
      throw InputError(
          fmt::format("host reference of output '{}': {} (an input holds NaN or Inf)", output, err.what()));
    }
  };
  return c;
}

CheckResult bit_exact_result(const std::string& output, const HostTensor& out, const HostTensor& expected) {
  CheckResult r = base(output, out, tensor::kCheckBitExact);
  if (expected.dtype != out.dtype || expected.shape != out.shape)
    throw Error(fmt::format("check of '{}': expected {} {}, the output is {} {}", output,
                            isa::dtype_name(expected.dtype), tensor::shape_str(expected.shape),
                            isa::dtype_name(out.dtype), tensor::shape_str(out.shape)));
  const size_t es = isa::dtype_size(out.dtype);
  int64_t bytes = 0, elems = 0, first = -1;
  for (size_t i = 0; i < out.bytes.size(); i += es) {
    int64_t d = 0;
    for (size_t b = 0; b < es; ++b) d += out.bytes[i + b] != expected.bytes[i + b];
    bytes += d;
    if (d > 0) {
      ++elems;
      if (first < 0) first = static_cast<int64_t>(i / es);
    }
  }
  if (!isa::is_x4(out.dtype) && out.dtype != isa::DType::E8M0) r.nonfinite = count_nonfinite(out.values());
  r.metrics = {{"bytes_total", static_cast<double>(out.bytes.size())},
               {"bytes_differing", static_cast<double>(bytes)},
               {"elements_differing", static_cast<double>(elems)},
               {"first_difference_index", static_cast<double>(first)}};
  if (bytes > 0)
    r.failures.push_back(fmt::format("{} of {} bytes differ ({} elements; first at element {})", bytes,
                                     out.bytes.size(), elems, first));
  r.pass = r.failures.empty();
  return r;
}

OutputCheck bit_exact_check(const std::string& output,
                            std::function<HostTensor(const CheckContext&)> expected) {
  OutputCheck c;
  c.output = output;
  c.run = [output, expected](const CheckContext& ctx) {
    return bit_exact_result(output, ctx.output(output), expected(ctx));
  };
  return c;
}

CheckResult scalar_result(const std::string& output, const HostTensor& out, int64_t index, double expected,
                          double abs_tol, double rel_tol) {
  CheckResult r = base(output, out, tensor::kCheckScalar);
  const double v = out.value(index);
  const double err = std::fabs(v - expected);
  const double rel = expected != 0 ? err / std::fabs(expected) : (err == 0 ? 0.0 : INFINITY);
  r.nonfinite = std::isfinite(v) ? 0 : 1;
  r.metrics = {{"value", v},     {"expected", expected}, {"abs_err", err},
               {"rel_err", rel}, {"abs_tol", abs_tol},   {"rel_tol", rel_tol}};
  const bool same_special = (std::isnan(v) && std::isnan(expected)) || (std::isinf(v) && v == expected);
  if (!same_special && !(err <= abs_tol || err <= rel_tol * std::fabs(expected)))
    r.failures.push_back(
        fmt::format("{} = {:.9g}, expected {:.9g} (abs err {:.3g} > {:.3g}, rel err {:.3g} > {:.3g})", output,
                    v, expected, err, abs_tol, rel, rel_tol));
  r.pass = r.failures.empty();
  return r;
}

}  // namespace trnsim::kernels
