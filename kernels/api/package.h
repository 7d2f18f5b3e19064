// A kernel package: everything about one kernel, declared in its own folder (kernels/<name>/) and registered
// with one line in kernels/kernel_list.h. The package says:
//   - its typed parameters P (kernels/api/params.h),
//   - how many physical cores it runs on (and which parameter decides it, so a workload's "lnc" that
//     disagrees is an error naming both),
//   - its instruction-stream builder,
//   - how each output is checked (kernels/api/checks.h: tolerances against FP64 references, bit-exact
//     against a host emulation, or a scalar) and the useful FLOPs of the host reference,
//   - the input recipes it offers (several related tensors made at once, e.g. MoE routing),
//   - kernel-specific stats computed from its inputs (e.g. tokens per expert),
//   - checks of its input values (e.g. routing tensors from .npy files).
// tools/ and sim/ never name a kernel: they see KernelDef / BoundKernel.
//
//   KernelPackage<Params> package() {
//     KernelPackage<Params> k;
//     k.name = "matmul_bf16";
//     k.doc = "...";
//     k.kernel = [](Kernel& kc, const Params& p) { ... nki calls ... };
//     k.checks = [](const Params& p) { return std::vector{matmul_check(...)}; };
//     return k;
//   }
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/api/checks.h"
#include "kernels/api/kernel.h"
#include "kernels/api/params.h"
#include "sim/tensor/host_tensor.h"

namespace trnsim::kernels {

using Tensors = std::map<std::string, tensor::HostTensor>;

// A number computed from a run's inputs, shown under "kernel_stats" in stats.json with its unit and meaning.
struct KernelStat {
  std::string name;  // snake_case, e.g. "tokens_per_expert_max"
  double value = 0;
  std::string unit;         // "count", "%", "bytes", ...
  std::string description;  // one line
};

// What a recipe sees: the kernel inputs it reads (already made) and the ones it fills.
class RecipeIO {
 public:
  RecipeIO(const Tensors& made, Tensors& out, int threads) : made_(made), out_(out), threads_(threads) {}
  // A kernel input the recipe reads (declared in Recipe::reads). InputError if it is missing.
  const tensor::HostTensor& input(const std::string& name) const;
  // A kernel input the recipe fills (declared in Recipe::produces), zeroed, of the kernel's dtype and shape.
  tensor::HostTensor& output(const std::string& name);
  int threads() const { return threads_; }

 private:
  const Tensors& made_;
  Tensors& out_;
  int threads_;
};

// An input recipe of kernel P, with typed arguments A (a struct with describe(), like P).
template <class P>
struct Recipe {
  std::string name;
  std::string doc;
  std::vector<ParamSpec> args;                                 // for docs and `trnsim list`
  std::function<std::vector<std::string>(const P&)> produces;  // kernel inputs it fills
  std::function<std::vector<std::string>(const P&)> reads;     // kernel inputs it needs first
  // Validated arguments (complete JSON) -> fills the outputs. InputError for bad data.
  std::function<void(const P&, const nlohmann::json& args, RecipeIO&)> run;
  // Checks of the arguments against each other and the kernel's parameters, beyond each argument's own
  // range (InputError): `trnsim validate` runs them as `trnsim run` does. Unset: none.
  std::function<void(const P&, const nlohmann::json& args)> check = nullptr;
};

template <class P, class A>
Recipe<P> make_recipe(std::string name, std::string doc,
                      std::function<std::vector<std::string>(const P&)> produces,
                      std::function<std::vector<std::string>(const P&)> reads,
                      std::function<void(const P&, const A&, RecipeIO&)> run,
                      std::function<void(const P&, const A&)> check = nullptr) {
  Recipe<P> r;
  r.name = std::move(name);
  r.doc = std::move(doc);
  r.args = schema_of<A>().specs();
  r.produces = std::move(produces);
  r.reads = std::move(reads);
  r.run = [run, check](const P& p, const nlohmann::json& args, RecipeIO& io) {
    const A a = schema_of<A>().read(args);
    if (check) check(p, a);
    run(p, a, io);
  };
  if (check)
    r.check = [check](const P& p, const nlohmann::json& args) { check(p, schema_of<A>().read(args)); };
  return r;
}

// The roofline's work of one built program: useful FLOPs (< 0: count the PE's) and compulsory HBM bytes.
struct RooflineWork {
  double useful_flops = -1;
  double compulsory_hbm_bytes = 0;
};

template <class P>
struct KernelPackage {
  std::string name;
  std::string doc;
  // Physical cores (1 or 2) the kernel runs on for these parameters, and the parameter that decides it.
  // Unset: the workload's "lnc" decides (default 2).
  std::function<int(const P&)> cores;
  std::string cores_param;
  // The builder: either the SPMD kernel function (run once per physical core) ...
  std::function<void(Kernel&, const P&)> kernel;
  // ... or a full build (when the kernel plans first and may change the core count it was given).
  std::function<KernelBuild(const P&, const BuildOptions&)> build;
  // Inputs whose values the build reads (BuildOptions::input_values), e.g. the count of a dynamic loop: the
  // program holds that many iterations, as the device would run them. They must come from a generator or a
  // .npy file (not a recipe). The workload learns their dtypes and shapes from a declaration build
  // (BuildOptions::declare_only, which must declare every input and output) first. Unset: none.
  std::function<std::vector<std::string>(const P&)> build_reads;
  // Outputs the caller zeroes before the kernel runs, for parameters under which the kernel accumulates
  // into them without zeroing them first (e.g. nkilib's skip_grad_initialization): `trnsim run`, the
  // caller, sets them to zeros (the model starts every other output undefined). Unset: none.
  std::function<std::vector<std::string>(const P&)> zeroed_outputs;
  // How each output is checked; unset or empty: no numerics report.
  std::function<std::vector<OutputCheck>(const P&)> checks;
  // FLOPs of the math the kernel computes (2 M N K per matmul), for the roofline; unset: the PE's FLOPs.
  std::function<double(const P&)> useful_flops;
  // The roofline's work when the values the build read (BuildOptions::input_values) change it, e.g. a token
  // count that bounds the block loop: given those values and each kernel input and output tensor's size in
  // bytes (by name), the FLOPs and bytes of the tokens the program handles. Returns nullopt, or unset:
  // useful_flops and every input and output moved once.
  std::function<std::optional<RooflineWork>(const P&,
                                            const std::map<std::string, std::vector<int64_t>>& values,
                                            const std::map<std::string, double>& tensor_bytes)>
      roofline_work;
  std::vector<Recipe<P>> recipes;
  std::function<std::vector<KernelStat>(const P&, const Tensors& inputs)> input_stats;
  // Checks the values of the inputs (e.g. routing tensors read from .npy files): InputError naming the
  // tensor and the index. Called before each recipe runs, with the inputs made so far, and once all are
  // made: it checks what is there and skips what is not yet. Unset: no check.
  std::function<void(const P&, const Tensors& inputs)> check_inputs;
  // A hint for an input given as a .npy file whose shape is not the one the kernel declares (the shared
  // input check, kernels/workload: "<file>: shape (...) does not match kernel input ...; <hint>"): given the
  // input's name, the file and the array's shape, what the user most likely meant, e.g. the parameters
  // that read an operand in that layout and the command that makes the declared one. "" or unset: none.
  std::function<std::string(const P&, const std::string& input, const std::string& file,
                            const std::vector<int64_t>& shape)>
      input_hint;
};

class BoundKernel;

// A registered kernel, type-erased.
class KernelDef {
 public:
  virtual ~KernelDef() = default;
  virtual const std::string& name() const = 0;
  virtual const std::string& doc() const = 0;
  virtual std::vector<ParamSpec> params() const = 0;
  virtual const std::string& cores_param() const = 0;  // "" if the workload's lnc decides
  // True if "params" may also set names params() does not list (a Python kernel taking **kwargs).
  virtual bool open_params() const { return false; }
  struct RecipeInfo {
    std::string name, doc;
    std::vector<ParamSpec> args;
  };
  virtual std::vector<RecipeInfo> recipes() const = 0;
  // Validates `params` (InputError naming the kernel and parameter) and binds them.
  virtual std::unique_ptr<BoundKernel> bind(const nlohmann::json& params) const = 0;
};

// A kernel with validated parameters.
class BoundKernel {
 public:
  virtual ~BoundKernel() = default;
  virtual const KernelDef& def() const = 0;
  virtual nlohmann::json params() const = 0;  // complete (defaults filled in)
  virtual std::optional<int> cores() const = 0;
  // Builds the program; options.num_programs is the core count decided by the caller.
  virtual KernelBuild build(const BuildOptions& options) const = 0;
  // KernelPackage::build_reads (empty if unset).
  virtual std::vector<std::string> build_reads() const = 0;
  // KernelPackage::zeroed_outputs (empty if unset).
  virtual std::vector<std::string> zeroed_outputs() const = 0;
  virtual std::vector<OutputCheck> checks() const = 0;
  virtual std::optional<double> useful_flops() const = 0;
  // KernelPackage::roofline_work (nullopt if unset).
  virtual std::optional<RooflineWork> roofline_work(
      const std::map<std::string, std::vector<int64_t>>& values,
      const std::map<std::string, double>& tensor_bytes) const = 0;
  // The recipe called `name`: the inputs it fills and reads; nullopt if the kernel has no such recipe.
  struct RecipePlan {
    std::vector<std::string> produces, reads;
  };
  virtual std::optional<RecipePlan> recipe_plan(const std::string& name) const = 0;
  // Checks the recipe's arguments (`args` without the "recipe" key); InputError "<path>: ...".
  virtual nlohmann::json check_recipe_args(const std::string& name, const nlohmann::json& args,
                                           const std::string& path) const = 0;
  virtual void run_recipe(const std::string& name, const nlohmann::json& args, RecipeIO& io) const = 0;
  virtual std::vector<KernelStat> input_stats(const Tensors& inputs) const = 0;
  // KernelPackage::check_inputs (nothing if unset).
  virtual void check_inputs(const Tensors& inputs) const = 0;
  // KernelPackage::input_hint ("" if unset).
  virtual std::string input_hint(const std::string& input, const std::string& file,
                                 const std::vector<int64_t>& shape) const {
    (void)input, (void)file, (void)shape;
    return "";
  }
  // What a kernel's front end recorded while it built (a Python kernel: the nki layer's schedule and
  // choices), shown as stats.json "nki"; null: nothing.
  virtual nlohmann::json frontend_stats() const { return nullptr; }
};

template <class P>
class PackagedKernel final : public KernelDef {
 public:
  explicit PackagedKernel(KernelPackage<P> pkg) : pkg_(std::move(pkg)) {}
  const std::string& name() const override { return pkg_.name; }
  const std::string& doc() const override { return pkg_.doc; }
  std::vector<ParamSpec> params() const override { return schema_of<P>().specs(); }
  const std::string& cores_param() const override { return pkg_.cores_param; }
  std::vector<RecipeInfo> recipes() const override {
    std::vector<RecipeInfo> v;
    for (const Recipe<P>& r : pkg_.recipes) v.push_back({r.name, r.doc, r.args});
    return v;
  }
  std::unique_ptr<BoundKernel> bind(const nlohmann::json& params) const override;
  const KernelPackage<P>& package() const { return pkg_; }

 private:
  KernelPackage<P> pkg_;
};

template <class P>
class BoundPackage final : public BoundKernel {
 public:
  BoundPackage(const PackagedKernel<P>& def, P params) : def_(def), p_(std::move(params)) {}
  const KernelDef& def() const override { return def_; }
  const P& typed() const { return p_; }
  nlohmann::json params() const override { return schema_of<P>().write(p_); }
  std::optional<int> cores() const override {
    return pkg().cores ? std::optional<int>(pkg().cores(p_)) : std::nullopt;
  }
  KernelBuild build(const BuildOptions& options) const override {
    if (pkg().build) return pkg().build(p_, options);
    const P& p = p_;
    const auto& fn = pkg().kernel;
    return build_program([&](Kernel& k) { fn(k, p); }, options);
  }
  std::vector<std::string> build_reads() const override {
    return pkg().build_reads ? pkg().build_reads(p_) : std::vector<std::string>{};
  }
  std::vector<std::string> zeroed_outputs() const override {
    return pkg().zeroed_outputs ? pkg().zeroed_outputs(p_) : std::vector<std::string>{};
  }
  std::vector<OutputCheck> checks() const override {
    return pkg().checks ? pkg().checks(p_) : std::vector<OutputCheck>{};
  }
  std::optional<double> useful_flops() const override {
    return pkg().useful_flops ? std::optional<double>(pkg().useful_flops(p_)) : std::nullopt;
  }
  std::optional<RooflineWork> roofline_work(
      const std::map<std::string, std::vector<int64_t>>& values,
      const std::map<std::string, double>& tensor_bytes) const override {
    return pkg().roofline_work ? pkg().roofline_work(p_, values, tensor_bytes) : std::nullopt;
  }
  std::optional<RecipePlan> recipe_plan(const std::string& name) const override {
    const Recipe<P>* r = find(name);
    if (!r) return std::nullopt;
    return RecipePlan{r->produces(p_), r->reads ? r->reads(p_) : std::vector<std::string>{}};
  }
  nlohmann::json check_recipe_args(const std::string& name, const nlohmann::json& args,
                                   const std::string& path) const override {
    const std::string where = path + " (recipe '" + name + "')";
    nlohmann::json full = check_params(where, find(name)->args, args);
    if (find(name)->check) {
      try {
        find(name)->check(p_, full);
      } catch (const InputError& e) {
        throw InputError(where + ": " + e.what());
      }
    }
    return full;
  }
  void run_recipe(const std::string& name, const nlohmann::json& args, RecipeIO& io) const override {
    find(name)->run(p_, args, io);
  }
  std::vector<KernelStat> input_stats(const Tensors& inputs) const override {
    return pkg().input_stats ? pkg().input_stats(p_, inputs) : std::vector<KernelStat>{};
  }
  void check_inputs(const Tensors& inputs) const override {
    if (pkg().check_inputs) pkg().check_inputs(p_, inputs);
  }
  std::string input_hint(const std::string& input, const std::string& file,
                         const std::vector<int64_t>& shape) const override {
    return pkg().input_hint ? pkg().input_hint(p_, input, file, shape) : std::string();
  }

 private:
  const KernelPackage<P>& pkg() const { return def_.package(); }
  const Recipe<P>* find(const std::string& name) const {
    for (const Recipe<P>& r : pkg().recipes)
      if (r.name == name) return &r;
    return nullptr;
  }
  const PackagedKernel<P>& def_;
  P p_;
};

template <class P>
std::unique_ptr<BoundKernel> PackagedKernel<P>::bind(const nlohmann::json& params) const {
  return std::make_unique<BoundPackage<P>>(
      *this, schema_of<P>().parse(fmt::format("kernel '{}'", pkg_.name), params));
}

// Wraps a package for the registry.
template <class P>
std::unique_ptr<KernelDef> make_kernel(KernelPackage<P> pkg) {
  return std::make_unique<PackagedKernel<P>>(std::move(pkg));
}

}  // namespace trnsim::kernels
