// A prepared workload's output checks and the work figures its report compares against (workload.h): the
// kernel's checks run with the workload file named in their errors, the reference FLOPs and host bytes, the
// compulsory HBM bytes and the roofline's work.
#include <fmt/format.h>

#include <algorithm>

#include "kernels/workload/workload.h"
#include "sim/base/error.h"
#include "sim/base/resident_governor.h"
#include "sim/isa/names.h"

namespace trnsim::workload {

std::vector<kernels::OutputCheck> make_checks(const PreparedWorkload& p) {
  return p.kernel->checks();
}

bool has_prepare_step(const std::vector<kernels::OutputCheck>& checks) {
  return std::any_of(checks.begin(), checks.end(),
                     [](const kernels::OutputCheck& c) { return static_cast<bool>(c.prepare); });
}

void prepare_checks(const PreparedWorkload& p, const std::vector<kernels::OutputCheck>& checks,
                    const kernels::Tensors& inputs, bool full_reference) {
  const kernels::CheckContext ctx(inputs, full_reference);
  for (const kernels::OutputCheck& c : checks) {
    if (!c.prepare) continue;
    try {
      c.prepare(ctx);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", p.w.file, e.what()));
    }
  }
}

std::vector<tensor::CheckResult> evaluate_checks(const PreparedWorkload& p,
                                                 const std::vector<kernels::OutputCheck>& checks,
                                                 const kernels::Tensors& inputs,
                                                 const kernels::Tensors& outputs, bool full_reference) {
  std::vector<tensor::CheckResult> results;
  const kernels::CheckContext ctx(inputs, outputs, full_reference);
  for (const kernels::OutputCheck& c : checks) {
    resident::govern();  // what the simulation and the earlier checks touched
    try {
      results.push_back(c.run(ctx));
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", p.w.file, e.what()));
    }
  }
  return results;
}

std::vector<tensor::CheckResult> evaluate_checks(const PreparedWorkload& p, const kernels::Tensors& inputs,
                                                 const kernels::Tensors& outputs, bool full_reference) {
  return evaluate_checks(p, make_checks(p), inputs, outputs, full_reference);
}

double reference_flops(const PreparedWorkload& p) {
  double f = 0;
  for (const kernels::OutputCheck& c : p.kernel->checks()) f += c.reference_flops;
  return f;
}

double reference_host_bytes(const PreparedWorkload& p) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto* list : {&p.inputs, &p.outputs})
    for (const TensorInfo& t : *list) shapes[t.name] = t.shape;
  double most = 0, kept = 0;
  for (const kernels::OutputCheck& c : p.kernel->checks()) {
    if (c.prepared_bytes) kept += c.prepared_bytes(shapes);
    double b = 0;
    if (c.reference_bytes) {
      b = c.reference_bytes(shapes);
    } else if (const TensorInfo* t = p.output(c.output)) {
      b = 12.0 * static_cast<double>(tensor::elements_of(t->shape));
    }
    most = std::max(most, b);
  }
  return most + kept;
}

double compulsory_hbm_bytes(const PreparedWorkload& p) {
  double b = 0;
  for (const auto* list : {&p.inputs, &p.outputs})
    for (const TensorInfo& t : *list)
      b += static_cast<double>(tensor::elements_of(t.shape)) * isa::dtype_size(t.dtype);
  return b;
}

kernels::RooflineWork roofline_work(const PreparedWorkload& p) {
  std::map<std::string, double> bytes;
  for (const auto* list : {&p.inputs, &p.outputs})
    for (const TensorInfo& t : *list)
      bytes[t.name] += static_cast<double>(tensor::elements_of(t.shape)) * isa::dtype_size(t.dtype);
  // (Asked with no values too: a Python kernel's work comes from its build, not from values it read.)
  if (const std::optional<kernels::RooflineWork> w = p.kernel->roofline_work(p.input_values, bytes))
    return *w;
  return {p.kernel->useful_flops().value_or(-1), compulsory_hbm_bytes(p)};
}

}  // namespace trnsim::workload
