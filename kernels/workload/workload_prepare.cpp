// Preparing a parsed workload (workload.h): the hardware config, the kernel bound to its parameters (a
// registered kernel, or a source file's through its language's loader), every input source checked against
// the kernel's declared tensors, and the program built.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "kernels/api/constant_inputs.h"
#include "kernels/api/registry.h"
#include "kernels/workload/workload.h"
#include "kernels/workload/workload_checker.h"
#include "sim/base/error.h"
#include "sim/base/json_excerpt.h"
#include "sim/config/lnc.h"
#include "sim/io/npy.h"
#include "sim/isa/element.h"
#include "sim/isa/names.h"
#include "sim/isa/semantics.h"

namespace trnsim::workload {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A .npy input against the kernel's declaration (tensor::check_npy_fits), with the kernel's hint appended
// when the shape is what differs (KernelPackage::input_hint: e.g. an operand in another layout).
void check_npy_input(const kernels::BoundKernel& kernel, const io::NpyArray& a, const TensorInfo& t) {
  try {
    tensor::check_npy_fits(a, t.dtype, t.shape, "kernel input " + t.describe());
  } catch (const InputError& err) {
    const std::string hint = a.shape == t.shape ? "" : kernel.input_hint(t.name, a.path, a.shape);
    if (hint.empty()) throw;
    throw InputError(std::string(err.what()) + "; " + hint);
  }
}

std::map<std::string, KernelLoader>& loaders() {
  static std::map<std::string, KernelLoader> m;
  return m;
}

// The kernel dtype a .npy file's dtype stands for when the workload gives none, by the convention trnsim
// reads and writes .npy files with (docs/workloads.md): float32, float16, int16, int8 and uint32 are
// themselves. The others could be more than one (uint16: uint16 values or BF16 / FP16 bits; uint8: uint8
// values or FP8 / E8M0 bits; int32: int32 values or the bits of FP8 x4; float64 and int64 hold values of any
// float or integer dtype): nullopt and what they could be.
std::pair<std::optional<isa::DType>, std::string> npy_kernel_dtype(io::NpyDType d) {
  switch (d) {
    case io::NpyDType::F32:
      return {isa::DType::F32, ""};
    case io::NpyDType::F16:
      return {isa::DType::FP16, ""};
    case io::NpyDType::I16:
      return {isa::DType::I16, ""};
    case io::NpyDType::I8:
      return {isa::DType::I8, ""};
    case io::NpyDType::U32:
      return {isa::DType::U32, ""};
    case io::NpyDType::U16:
      return {std::nullopt, "uint16 values, or the raw bits of bfloat16 or float16"};
    case io::NpyDType::U8:
      return {std::nullopt, "uint8 values, or the raw bits of float8_e4m3fn, float8_e5m2 or float8_e8m0fnu"};
    case io::NpyDType::I32:
      return {std::nullopt, "int32 values, or the raw bits of float8_e4m3fn_x4 or float8_e5m2_x4"};
    case io::NpyDType::F64:
      return {std::nullopt, "values of float32, bfloat16, float16 or an FP8 dtype"};
    case io::NpyDType::I64:
      return {std::nullopt, "values of any integer dtype"};
  }
  return {std::nullopt, "unknown"};
}

}  // namespace

std::string TensorInfo::describe() const {
  return fmt::format("'{}' {} {}", name, isa::dtype_name(dtype), tensor::shape_str(shape));
}

const TensorInfo* PreparedWorkload::input(const std::string& name) const {
  for (const TensorInfo& t : inputs)
    if (t.name == name) return &t;
  return nullptr;
}

const TensorInfo* PreparedWorkload::output(const std::string& name) const {
  for (const TensorInfo& t : outputs)
    if (t.name == name) return &t;
  return nullptr;
}

std::unique_ptr<kernels::BoundKernel> bind_kernel(const Workload& w,
                                                  std::map<std::string, io::NpyArray>* npy) {
  Checker c(w.file);
  if (w.kernel_source) {
    // The kernel declares the inputs the workload gives it: their dtypes and shapes come from the workload
    // (a .npy file's shape when "shape" is left out).
    std::vector<TensorInfo> declared;
    for (const InputEntry& e : w.inputs) {
      const std::string path = "inputs." + e.key;
      if (e.is_recipe)
        c.fail(path + ".recipe", "a Python kernel has no recipes: give a generator or a .npy file");
      if (e.from)
        c.fail(path + ".from",
               "a Python kernel's inputs come from generators or .npy files, not from chains");
      if (!e.dtype && !e.source.is_npy)
        c.fail(path + ".dtype", "missing (a Python kernel's input needs its dtype, e.g. \"bfloat16\")");
      if (!e.shape && !e.source.is_npy)
        c.fail(path + ".shape",
               "missing (a Python kernel's generated input needs its shape, e.g. [128, 512])");
      TensorInfo t{e.key, e.dtype.value_or(isa::DType::F32), e.shape.value_or(std::vector<int64_t>{})};
      if (!e.shape || !e.dtype) {
        // A .npy file gives what the workload leaves out: its shape, and its dtype when the file's says which
        // kernel dtype it is (npy_kernel_dtype).
        io::NpyArray a;
        try {
          a = io::read_npy(e.source.npy);
        } catch (const InputError& err) {
          c.fail(path + ".npy", err.what());
        }
        if (!e.shape) t.shape = a.shape.empty() ? std::vector<int64_t>{1} : a.shape;
        if (!e.dtype) {
          const auto [dtype, ambiguous] = npy_kernel_dtype(a.dtype);
          if (!dtype)
            c.fail(path + ".dtype",
                   fmt::format("missing, and {}'s dtype {} does not say which it is: {}; give \"dtype\"",
                               e.source.npy, io::npy_dtype_name(a.dtype), ambiguous));
          t.dtype = *dtype;
        }
        if (npy != nullptr) npy->emplace(e.key, std::move(a));
      } else if (e.source.is_npy) {
        // The file against the workload's dtype and shape now, before the kernel is traced with them: a trace
        // error at a kernel line would hide that the file is what differs.
        try {
          io::NpyArray a = io::read_npy(e.source.npy);
          tensor::check_npy_fits(a, t.dtype, t.shape, "kernel input " + t.describe());
          if (npy != nullptr) npy->emplace(e.key, std::move(a));
        } catch (const InputError& err) {
          c.fail(path + ".npy", err.what());
        }
      }
      declared.push_back(std::move(t));
    }
    const auto it = loaders().find(w.kernel_source->language);
    if (it == loaders().end())
      c.fail("kernel", fmt::format("this trnsim was built without Python support (TRNSIM_PYTHON=OFF): it "
                                   "cannot run the {} kernel {}",
                                   w.kernel_source->language, w.kernel_source->written));
    return it->second(w, declared);
  } else {
    const kernels::Registry& reg = kernels::registry();
    if (reg.find(w.kernel) == nullptr) {
      std::vector<std::string> names;
      for (const kernels::KernelDef* k : reg.kernels()) names.push_back(k->name());
      c.fail("kernel",
             fmt::format("unknown kernel '{}' (known: {})", text_excerpt(w.kernel), fmt::join(names, ", ")));
    }
    try {
      return reg.bind(w.kernel, w.params);
    } catch (const InputError& e) {
      c.fail("params", e.what());
    }
  }
}

PreparedWorkload prepare_workload(Workload w) {
  Checker c(w.file);
  PreparedWorkload p;
  try {
    p.hw = config::load_hw_config(w.hardware, w.hw_overrides);
  } catch (const InputError& e) {
    c.fail("hardware", e.what());
  }
  p.kernel = bind_kernel(w, &p.npy);

  // One source of truth for the core count: the kernel's core parameter, else "lnc" (default 2).
  const std::optional<int> kc = p.kernel->cores();
  const std::string& cores_param = p.kernel->def().cores_param();
  if (kc && w.lnc && *kc != *w.lnc)
    c.fail("lnc",
           fmt::format("{} conflicts with kernel parameter '{}' = {}, which runs the kernel on {} core{}; "
                       "remove \"lnc\" or change '{}'",
                       *w.lnc, cores_param, json_excerpt(p.kernel->params()[cores_param]), *kc,
                       *kc == 1 ? "" : "s", cores_param));
  // (a Python kernel runs once, on one core, unless it asks for two: NKI's default launch; a C++ kernel on
  // the LNC2 pair where the hardware has one, sim/config/lnc.h)
  p.cores = kc.value_or(w.lnc.value_or(w.kernel_source ? 1 : config::max_lnc(p.hw.generation)));
  if (const auto why = config::lnc_refusal(p.hw, p.cores))
    c.fail(kc ? "params." + cores_param : "lnc",
           *why + (kc ? fmt::format(": run the kernel with '{}' off", cores_param) : ": set \"lnc\": 1"));
  // Inputs the build reads (e.g. a dynamic loop's count): their values are made below from the declarations
  // of a first, declaration-only build (no instructions); the program is the second build's.
  const std::vector<std::string> build_reads = p.kernel->build_reads();
  kernels::BuildOptions bo;
  try {
    bo.limits = p.hw.limits();
    bo.num_programs = p.cores;
    bo.declare_only = !build_reads.empty();
    if (w.max_instructions) bo.max_instructions = *w.max_instructions;
    p.build = p.kernel->build(bo);
  } catch (const Error& e) {
    c.fail(w.kernel_source ? "kernel" : "params", e.what());
  }
  const isa::Program& prog = p.build.program;
  const auto info = [&](const std::string& name) {
    for (const isa::TensorDecl& t : prog.tensors)
      if (t.name == name) return TensorInfo{name, t.dtype, t.shape};
    throw Error(fmt::format("kernel '{}' lists tensor '{}' but declares no such tensor", w.kernel, name));
  };
  for (const std::string& n : p.build.inputs) p.inputs.push_back(info(n));
  for (const std::string& n : p.build.outputs) p.outputs.push_back(info(n));
  const auto names = [](const std::vector<TensorInfo>& v) {
    std::vector<std::string> s;
    for (const TensorInfo& t : v) s.push_back(t.name);
    return fmt::format("{}", fmt::join(s, ", "));
  };

  // Who makes each kernel input.
  std::map<std::string, std::string> maker;  // input -> entry key
  const auto claim = [&](const std::string& input, const std::string& entry) {
    const auto [it, fresh] = maker.emplace(input, entry);
    if (!fresh)
      c.fail("inputs." + entry, fmt::format("input '{}' is already made by inputs.{}", input, it->second));
  };
  std::map<std::string, std::vector<std::string>> reads;
  for (const InputEntry& e : w.inputs) {
    const std::string path = "inputs." + e.key;
    if (!e.is_recipe) {
      const TensorInfo* t = p.input(e.key);
      if (t == nullptr)
        c.fail(path,
               fmt::format("kernel '{}' has no input '{}' (inputs: {}{})", w.kernel, e.key, names(p.inputs),
                           p.kernel->def().recipes().empty() ? "" : "; recipes use a \"recipe\" key"));
      claim(e.key, e.key);
      if (e.dtype && *e.dtype != t->dtype)
        c.fail(path + ".dtype",
               fmt::format("{}, but the kernel declares {}", isa::dtype_name(*e.dtype), t->describe()));
      if (e.shape && *e.shape != t->shape)
        c.fail(path + ".shape",
               fmt::format("{}, but the kernel declares {}", tensor::shape_str(*e.shape), t->describe()));
      if (e.given) continue;
      if (e.source.is_npy && p.npy.count(e.key)) {
        try {
          check_npy_input(*p.kernel, p.npy.at(e.key), *t);
        } catch (const InputError& err) {
          c.fail(path + ".npy", err.what());
        }
      } else if (e.source.is_npy) {
        try {
          io::NpyArray a = io::read_npy(e.source.npy);
          check_npy_input(*p.kernel, a, *t);
          p.npy.emplace(e.key, std::move(a));
        } catch (const InputError& err) {
          c.fail(path + ".npy", err.what());
        }
      } else {
        try {
          tensor::check_generator_fits(e.source.generator, t->dtype, t->shape, path);
        } catch (const InputError& err) {
          c.fail("", err.what());
        }
      }
      continue;
    }
    const auto plan = p.kernel->recipe_plan(e.recipe);
    if (!plan) {
      std::vector<std::string> rs;
      for (const auto& r : p.kernel->def().recipes()) rs.push_back(r.name);
      c.fail(path + ".recipe",
             fmt::format("kernel '{}' has no recipe '{}' ({})", w.kernel, text_excerpt(e.recipe),
                         rs.empty() ? std::string("it offers none")
                                    : fmt::format("recipes: {}", fmt::join(rs, ", "))));
    }
    try {
      p.recipe_args[e.key] = p.kernel->check_recipe_args(e.recipe, e.recipe_args, path);
    } catch (const InputError& err) {
      c.fail("", err.what());
    }
    for (const std::string& out : plan->produces) {
      if (p.input(out) == nullptr)
        throw Error(fmt::format("recipe '{}' makes '{}', which kernel '{}' does not declare", e.recipe, out,
                                w.kernel));
      claim(out, e.key);
    }
    p.recipe_outputs[e.key] = plan->produces;
    reads[e.key] = plan->reads;
  }
  const kernels::Tensors constants = kernels::constant_inputs_of(p.kernel.get());
  for (const TensorInfo& t : p.inputs)
    if (!maker.count(t.name) && !constants.count(t.name))  // (nl.shared_constant: bound by WorkloadRun)
      c.fail("inputs",
             fmt::format("missing input {} (kernel '{}' needs {})", t.describe(), w.kernel, names(p.inputs)));

  // Production order: plain sources first, then recipes once what they read exists.
  std::set<std::string> made;
  std::vector<bool> done(w.inputs.size(), false);
  for (size_t i = 0; i < w.inputs.size(); ++i)
    if (!w.inputs[i].is_recipe) {
      p.order.push_back(i);
      made.insert(w.inputs[i].key);
      done[i] = true;
    }
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t i = 0; i < w.inputs.size(); ++i) {
      if (done[i]) continue;
      const auto& rd = reads[w.inputs[i].key];
      if (std::all_of(rd.begin(), rd.end(), [&](const std::string& r) { return made.count(r) > 0; })) {
        p.order.push_back(i);
        for (const std::string& o : p.recipe_outputs[w.inputs[i].key]) made.insert(o);
        done[i] = progress = true;
      }
    }
  }
  for (size_t i = 0; i < w.inputs.size(); ++i)
    if (!done[i])
      c.fail("inputs." + w.inputs[i].key,
             fmt::format("recipe '{}' reads {}, which cannot be made first (missing or circular)",
                         w.inputs[i].recipe, fmt::join(reads[w.inputs[i].key], ", ")));

  for (size_t i = 0; i < w.outputs.size(); ++i)
    if (p.output(w.outputs[i]) == nullptr)
      c.fail(fmt::format("outputs[{}]", i),
             fmt::format("kernel '{}' has no output '{}' (outputs: {})", w.kernel, text_excerpt(w.outputs[i]),
                         names(p.outputs)));
  // Integer inputs read from .npy files (routing tensors, counts) get the kernel's value checks now, so
  // validate and a timing-only run reject what a run with numerics would.
  kernels::Tensors ints;
  for (const auto& [key, a] : p.npy)
    if (const TensorInfo* t = p.input(key); t != nullptr && isa::is_int(t->dtype))
      ints.emplace(key, tensor::from_npy(a, t->dtype, t->shape, "kernel input " + t->describe()));
  try {
    p.kernel->check_inputs(ints);
  } catch (const InputError& err) {
    c.fail("inputs", err.what());
  }
  // Inputs the build reads: made now from their generator or .npy, checked, and the program built with their
  // values.
  if (!build_reads.empty()) {
    kernels::Tensors vals;
    for (const std::string& n : build_reads) {
      const TensorInfo* t = p.input(n);
      if (t == nullptr)
        throw Error(fmt::format("kernel '{}' reads input '{}' at build time but declares no such input",
                                w.kernel, n));
      const auto e = std::find_if(w.inputs.begin(), w.inputs.end(),
                                  [&](const InputEntry& x) { return !x.is_recipe && x.key == n; });
      if (e == w.inputs.end())
        c.fail("inputs." + maker.at(n),
               fmt::format("input '{}' sets the kernel's loop count when the program is built: give it as a "
                           "generator or .npy, not by a recipe",
                           n));
      const int threads = tensor::generator_threads();
      vals.emplace(n, e->source.is_npy
                          ? tensor::from_npy(p.npy.at(n), t->dtype, t->shape, "kernel input " + t->describe())
                          : tensor::generate(e->source.generator, t->dtype, t->shape, threads));
    }
    try {
      p.kernel->check_inputs(vals);
    } catch (const InputError& err) {
      c.fail("inputs", err.what());
    }
    for (const auto& [n, t] : vals) {
      std::vector<int64_t>& v = bo.input_values[n];
      for (int64_t i = 0; i < t.elements(); ++i) v.push_back(t.int_value(i));
    }
    p.input_values = bo.input_values;
    bo.declare_only = false;
    try {
      p.build = p.kernel->build(bo);
    } catch (const Error& e) {
      c.fail("params", e.what());
    }
  }
  p.written = w.outputs;
  if (p.written.empty())
    for (const TensorInfo& t : p.outputs) p.written.push_back(t.name);
  p.w = std::move(w);
  return p;
}

void set_kernel_loader(const std::string& language, KernelLoader loader) {
  loaders()[language] = std::move(loader);
}

bool has_kernel_loader(const std::string& language) {
  return loaders().count(language) > 0;
}

}  // namespace trnsim::workload
