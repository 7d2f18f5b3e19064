// A prepared workload's inputs (workload.h): the tensors made from generators, .npy files and recipes in
// dependency order, and the notes on them a run prints.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kernels/workload/workload.h"
#include "sim/base/error.h"
#include "sim/base/resident_governor.h"
#include "sim/isa/element.h"
#include "sim/isa/names.h"

namespace trnsim::workload {

kernels::Tensors make_inputs(const PreparedWorkload& p) {
  kernels::Tensors made;
  const int threads = tensor::generator_threads();
  for (size_t i : p.order) {
    const InputEntry& e = p.w.inputs[i];
    if (e.given) continue;  // WorkloadRun::set_input
    if (!e.is_recipe) {
      const TensorInfo& t = *p.input(e.key);
      if (e.source.is_npy)
        made.emplace(e.key,
                     tensor::from_npy(p.npy.at(e.key), t.dtype, t.shape, "kernel input " + t.describe()));
      else
        made.emplace(e.key, tensor::generate(e.source.generator, t.dtype, t.shape, threads));
      resident::govern();  // the generator's threads have finished writing it
      continue;
    }
    kernels::Tensors out;
    for (const std::string& o : p.recipe_outputs.at(e.key)) {
      const TensorInfo& t = *p.input(o);
      out.emplace(o, tensor::HostTensor::zeros(t.dtype, t.shape));
    }
    kernels::RecipeIO io(made, out, threads);
    try {
      // What the recipe reads must pass the kernel's input checks first (e.g. routing from .npy files).
      p.kernel->check_inputs(made);
    } catch (const InputError& err) {
      throw InputError(fmt::format("{}: inputs: {}", p.w.file, err.what()));
    }
    try {
      p.kernel->run_recipe(e.recipe, p.recipe_args.at(e.key), io);
    } catch (const InputError& err) {
      throw InputError(fmt::format("{}: inputs.{} (recipe '{}'): {}", p.w.file, e.key, e.recipe, err.what()));
    }
    for (auto& [name, t] : out) made.emplace(name, std::move(t));
    resident::govern();  // the recipe's threads have finished writing its outputs
  }
  try {
    p.kernel->check_inputs(made);
  } catch (const InputError& err) {
    throw InputError(fmt::format("{}: inputs: {}", p.w.file, err.what()));
  }
  return made;
}

std::vector<std::string> input_notes(const PreparedWorkload& p, const kernels::Tensors& inputs) {
  std::vector<std::string> notes;
  // The recipe that made an input, or "" (a generator or an .npy file).
  const auto recipe_of = [&](const std::string& name) -> std::string {
    for (const InputEntry& e : p.w.inputs)
      if (e.is_recipe) {
        const auto& outs = p.recipe_outputs.at(e.key);
        if (std::find(outs.begin(), outs.end(), name) != outs.end()) return e.recipe;
      }
    return "";
  };
  for (const TensorInfo& t : p.inputs) {
    const auto it = inputs.find(t.name);
    if (it == inputs.end()) continue;
    const tensor::HostTensor& h = it->second;
    const int64_t n = h.elements();
    if (t.dtype == isa::DType::E8M0) {  // 0xFF is E8M0's NaN: every value scaled by it is NaN
      int64_t nan = 0;
      for (int64_t i = 0; i < n; ++i) nan += h.bytes[static_cast<size_t>(i)] == 0xFF;
      if (nan > 0)
        notes.push_back(fmt::format(
            "inputs.{}: {} of {} E8M0 scales are 0xFF (NaN): the values they scale are NaN", t.name, nan, n));
      continue;
    }
    if (isa::is_int(t.dtype) || isa::is_x4(t.dtype)) continue;
    int64_t bad = 0;
    // NaN or Inf: an all-ones exponent; BF16 and FP32 straight from their bits (weights run to 10^9 values).
    if (t.dtype == isa::DType::BF16) {
      const auto* b = reinterpret_cast<const uint16_t*>(h.bytes.data());
      for (int64_t i = 0; i < n; ++i) bad += (b[i] & 0x7F80u) == 0x7F80u;
    } else if (t.dtype == isa::DType::F32) {
      const auto* b = reinterpret_cast<const uint32_t*>(h.bytes.data());
      for (int64_t i = 0; i < n; ++i) bad += (b[i] & 0x7F800000u) == 0x7F800000u;
    } else {
      for (int64_t i = 0; i < n; ++i) bad += !std::isfinite(h.value(i));
    }
    if (bad == 0) continue;
    std::string why;
    const auto npy = p.npy.find(t.name);
    if (npy != p.npy.end() &&
        (npy->second.dtype == io::NpyDType::F32 || npy->second.dtype == io::NpyDType::F64)) {
      const io::NpyArray& a = npy->second;
      int64_t src_bad = 0;
      for (int64_t i = 0; i < a.elements(); ++i)
        src_bad += !std::isfinite(a.dtype == io::NpyDType::F32 ? static_cast<double>(a.data<float>()[i])
                                                               : a.data<double>()[i]);
      if (bad > src_bad)
        why = fmt::format(" ({} finite values of the .npy overflowed {})", bad - src_bad,
                          isa::dtype_name(t.dtype));
    } else if (const std::string r = recipe_of(t.name); !r.empty()) {
      why = fmt::format(" (made by recipe '{}' from the other inputs)", r);
    } else if (npy == p.npy.end()) {
      why = fmt::format(" (generated values overflowed {})", isa::dtype_name(t.dtype));
    }
    notes.push_back(
        fmt::format("inputs.{}: {} of {} values are NaN or Inf{}", t.name, bad, h.elements(), why));
  }
  return notes;
}

}  // namespace trnsim::workload
