// The lm_head_backward chain reference (chain_reference.h): cross entropy backward, then the LM head's
// matmul_mxfp8_backward, against FP64 from the logits.
#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "kernels/chains/chain_reference.h"
#include "kernels/cross_entropy/ce_params.h"
#include "kernels/cross_entropy/ce_reference.h"
#include "kernels/ref/gemm_f64.h"
#include "kernels/ref/metrics.h"
#include "sim/base/error.h"
#include "sim/numerics/mx.h"
#include "sim/numerics/scale_layout.h"

namespace trnsim::kernels {
namespace {

constexpr double kBoundBf16 = 1.0 / 256.0;  // BF16 rounding of the gradient alone
constexpr double kBoundMx = 1.0 / 8.0;      // MXFP8: up to 2^-4 relative per value, on both operands

const ChainStageData& stage_of(const std::vector<ChainStageData>& s, const std::string& kernel) {
  const ChainStageData* found = nullptr;
  for (const ChainStageData& d : s)
    if (d.kernel == kernel) {
      if (found != nullptr)
        throw InputError(
            fmt::format("reference 'lm_head_backward': stages '{}' and '{}' both run {}; it "
                        "takes one",
                        found->name, d.name, kernel));
      found = &d;
    }
  if (found == nullptr)
    throw InputError(fmt::format("reference 'lm_head_backward' needs a stage running {}", kernel));
  return *found;
}

void check_plan(const std::vector<ChainStageData>& s) {
  const ChainStageData& ce = stage_of(s, "cross_entropy_bwd");
  const ChainStageData& mm = stage_of(s, "matmul_mxfp8_backward");
  const nlohmann::json &c = ce.params, &m = mm.params;
  if (c["rows"] != m["M"] || c["V"] != m["N"])
    throw InputError(
        fmt::format("reference 'lm_head_backward': stage '{}' has rows = {}, V = {} and stage "
                    "'{}' M = {}, N = {}: the LM head's M is the rows and N the vocabulary",
                    ce.name, c["rows"].dump(), c["V"].dump(), mm.name, m["M"].dump(), m["N"].dump()));
  for (const char* k : {"weight_scales", "input_scales"})
    if (!m[k].is_null())
      throw InputError(
          fmt::format("reference 'lm_head_backward': stage '{}' has pre-quantized {}; the "
                      "reference takes BF16 weights and input_activation",
                      mm.name, k));
  for (const char* k : {"weights_is_f_by_k", "input_is_f_by_k", "weights_is_swizzled", "input_is_swizzled"})
    if (m[k] == true)
      throw InputError(
          fmt::format("reference 'lm_head_backward': stage '{}' sets {}; the reference takes "
                      "W [N, K] and X [M, K] as they are",
                      mm.name, k));
}

std::vector<double> f64_of(const tensor::HostTensor& t) {
  const std::vector<float> v = t.values();
  return {v.begin(), v.end()};
}

tensor::CheckResult compare(const std::string& label, const tensor::HostTensor& out,
                            const std::vector<float>& k, const std::vector<double>& g, double bound) {
  const ref::ErrorMetrics e = ref::compare(k.data(), g.data(), static_cast<int64_t>(g.size()));
  Tolerance tol;
  tol.max_rel_l2_vs_quantized = bound;
  tensor::CheckResult r = tolerance_result(label, out, e, e, false, tol);
  r.notes.push_back("against the FP64 reference of the whole chain (logits -> CE gradient -> dX, dW)");
  return r;
}

// Values of the MXFP8 gradient the CE stage wrote in TE's compact layout, orientation `axis`.
std::vector<float> dequantized(const Tensors& out, bool rowwise, int64_t M, int64_t V, num::Fp8Format fmt) {
  const std::string o = rowwise ? "rowwise" : "columnwise";
  const tensor::HostTensor &d = out.at("input_grad_" + o + "_data"),
                           &s = out.at("input_grad_" + o + "_scale_inv");
  const num::MxAxis axis = rowwise ? num::MxAxis::Row : num::MxAxis::Col;
  std::vector<uint8_t> compact(static_cast<size_t>(num::mx_scale_shape(M, V, axis).size()));
  num::from_te_compact(s.bytes.data(), M, V, axis, compact.data());
  std::vector<float> v(static_cast<size_t>(M * V));
  num::dequantize(d.bytes.data(), compact.data(), M, V, axis, fmt, v.data(), ce::reference_threads());
  return v;
}

std::vector<tensor::CheckResult> run_reference(const std::vector<ChainStageData>& s) {
  check_plan(s);
  const ChainStageData& ce = stage_of(s, "cross_entropy_bwd");
  const ChainStageData& mm = stage_of(s, "matmul_mxfp8_backward");
  const ce::BwdParams bp = schema_of<ce::BwdParams>().read(ce.params);
  const int64_t M = bp.c.rows, V = bp.c.V, K = mm.params["K"].get<int64_t>();
  const int threads = ce::reference_threads();
  const Tensors &ci = *ce.inputs, &co = *ce.outputs, &mi = *mm.inputs, &mo = *mm.outputs;
  std::vector<int32_t> target(static_cast<size_t>(M));
  for (int64_t r = 0; r < M; ++r) target[r] = static_cast<int32_t>(ci.at("target").int_value(r));
  const std::vector<float> go = ci.at("grad_output").values();
  std::vector<double> G(static_cast<size_t>(M * V));
  ce::grad_reference(ci.at("logits"), target, go, bp.c, 0, M, threads, G.data());

  std::vector<tensor::CheckResult> res;
  if (bp.mxfp8()) {
    for (const bool rowwise : {true, false}) {
      if (!bp.uses(rowwise ? 0 : 1)) continue;
      const std::string o = rowwise ? "input_grad_rowwise_data" : "input_grad_columnwise_data";
      res.push_back(compare(fmt::format("{}.{} (dequantized)", ce.name, o), co.at(o),
                            dequantized(co, rowwise, M, V, bp.fp8()), G, kBoundMx));
    }
  } else {
    res.push_back(
        compare(ce.name + ".input_grad", co.at("input_grad"), co.at("input_grad").values(), G, kBoundBf16));
  }
  const std::vector<double> W = f64_of(mi.at("weights")), X = f64_of(mi.at("input_activation"));
  std::vector<double> ref(static_cast<size_t>(M * K));
  ref::gemm_f64(false, false, M, K, V, G.data(), V, W.data(), K, ref.data(), threads);  // dX = G W
  res.push_back(
      compare(mm.name + ".input_grad", mo.at("input_grad"), mo.at("input_grad").values(), ref, kBoundMx));
  ref.assign(static_cast<size_t>(V * K), 0.0);
  ref::gemm_f64(true, false, V, K, M, G.data(), V, X.data(), K, ref.data(), threads);  // dW = G^T X
  res.push_back(
      compare(mm.name + ".weight_grad", mo.at("weight_grad"), mo.at("weight_grad").values(), ref, kBoundMx));
  return res;
}

}  // namespace

ChainReference lm_head_backward_reference() {
  return {
      "lm_head_backward",
      "cross_entropy_bwd then matmul_mxfp8_backward (the LM head, M = rows, N = V): the CE gradient and dX, "
      "dW against FP64 from the logits",
      check_plan, run_reference};
}

}  // namespace trnsim::kernels
