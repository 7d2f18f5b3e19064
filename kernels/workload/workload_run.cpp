#include "kernels/workload/workload_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "kernels/api/constant_inputs.h"
#include "sim/base/error.h"
#include "sim/base/release_heap.h"
#include "sim/base/resident_governor.h"
#include "sim/config/lnc.h"
#include "sim/io/npy.h"
#include "sim/io/output_name.h"
#include "sim/isa/names.h"

namespace trnsim::workload {
namespace fs = std::filesystem;
using clock = std::chrono::steady_clock;

namespace {

double secs(clock::time_point a, clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// A program built already, as a kernel without checks (WorkloadRun::of_build).
class BuiltKernel final : public kernels::BoundKernel {
 public:
  BuiltKernel(kernels::KernelBuild b, std::string name) : build_(std::move(b)), def_(std::move(name)) {}
  const kernels::KernelDef& def() const override { return def_; }
  nlohmann::json params() const override { return nlohmann::json::object(); }
  std::optional<int> cores() const override { return build_.program.num_cores; }
  kernels::KernelBuild build(const kernels::BuildOptions&) const override { return build_; }
  std::vector<std::string> build_reads() const override { return {}; }
  std::vector<std::string> zeroed_outputs() const override { return {}; }
  std::vector<kernels::OutputCheck> checks() const override { return {}; }
  std::optional<double> useful_flops() const override { return std::nullopt; }
  std::optional<kernels::RooflineWork> roofline_work(const std::map<std::string, std::vector<int64_t>>&,
                                                     const std::map<std::string, double>&) const override {
    return std::nullopt;
  }
  std::optional<RecipePlan> recipe_plan(const std::string&) const override { return std::nullopt; }
  nlohmann::json check_recipe_args(const std::string&, const nlohmann::json&,
                                   const std::string&) const override {
    return {};
  }
  void run_recipe(const std::string&, const nlohmann::json&, kernels::RecipeIO&) const override {}
  std::vector<kernels::KernelStat> input_stats(const kernels::Tensors&) const override { return {}; }
  void check_inputs(const kernels::Tensors&) const override {}

 private:
  struct Def final : kernels::KernelDef {
    explicit Def(std::string n) : name_(std::move(n)) {}
    const std::string& name() const override { return name_; }
    const std::string& doc() const override { return name_; }
    std::vector<kernels::ParamSpec> params() const override { return {}; }
    const std::string& cores_param() const override { return empty_; }
    std::vector<RecipeInfo> recipes() const override { return {}; }
    std::unique_ptr<kernels::BoundKernel> bind(const nlohmann::json&) const override { return nullptr; }
    std::string name_, empty_;
  };
  kernels::KernelBuild build_;
  Def def_;
};

// The prepared workload of a bound kernel whose inputs the caller gives.
PreparedWorkload prepare_given(std::unique_ptr<kernels::BoundKernel> kernel, config::HwConfig hw,
                               std::optional<int> cores, const std::string& name) {
  PreparedWorkload p;
  p.w.file = name;
  p.w.name = name;
  p.w.kernel = kernel->def().name();
  p.w.params = kernel->params();
  p.hw = std::move(hw);
  p.cores = kernel->cores().value_or(cores.value_or(config::max_lnc(p.hw.generation)));
  if (const auto why = config::lnc_refusal(p.hw, p.cores))
    throw InputError(fmt::format("{}: {}", name, *why));
  kernels::BuildOptions bo;
  bo.limits = p.hw.limits();
  bo.num_programs = p.cores;
  p.build = kernel->build(bo);
  p.kernel = std::move(kernel);
  const auto info = [&](const std::string& n) {
    for (const isa::TensorDecl& t : p.build.program.tensors)
      if (t.name == n) return TensorInfo{n, t.dtype, t.shape};
    throw Error(fmt::format("kernel '{}' lists tensor '{}' but declares no such tensor", p.w.kernel, n));
  };
  for (const std::string& n : p.build.inputs) {
    p.inputs.push_back(info(n));
    InputEntry e;
    e.key = n;
    e.given = true;
    e.dtype = p.inputs.back().dtype;
    e.shape = p.inputs.back().shape;
    p.order.push_back(p.w.inputs.size());
    p.w.inputs.push_back(std::move(e));
  }
  for (const std::string& n : p.build.outputs) p.outputs.push_back(info(n));
  for (const TensorInfo& t : p.outputs) p.written.push_back(t.name);
  return p;
}

// The inputs the kernel gave itself (nl.shared_constant): bound as a caller's given inputs.
void bind_constants(WorkloadRun& r) {
  for (auto& [name, t] : kernels::constant_inputs_of(r.prepared().kernel.get()))
    r.set_input(name, std::move(t));
}

}  // namespace

struct WorkloadRun::Async {
  std::future<double> prepared;  // the reference thread's seconds
};

WorkloadRun::WorkloadRun(PreparedWorkload p) : p_(std::move(p)), t0_(clock::now()) {
  bind_constants(*this);
}
WorkloadRun::WorkloadRun(Workload w) : t0_(clock::now()) {
  p_ = prepare_workload(std::move(w));
  bind_constants(*this);
}
WorkloadRun::~WorkloadRun() = default;
WorkloadRun::WorkloadRun(WorkloadRun&&) noexcept = default;

WorkloadRun WorkloadRun::of_kernel(std::unique_ptr<kernels::BoundKernel> kernel, config::HwConfig hw,
                                   std::optional<int> cores, const std::string& name) {
  return WorkloadRun(prepare_given(std::move(kernel), std::move(hw), cores, name));
}

WorkloadRun WorkloadRun::of_build(kernels::KernelBuild build, config::HwConfig hw, const std::string& name) {
  return WorkloadRun(
      prepare_given(std::make_unique<BuiltKernel>(std::move(build), name), std::move(hw), {}, name));
}

void WorkloadRun::set_input(const std::string& name, tensor::HostTensor t) {
  const TensorInfo* info = p_.input(name);
  if (info == nullptr) throw InputError(fmt::format("{}: the kernel has no input '{}'", p_.w.file, name));
  if (t.dtype != info->dtype || t.shape != info->shape)
    throw InputError(fmt::format("{}: input {}: given a {} {}", p_.w.file, info->describe(),
                                 isa::dtype_name(t.dtype), tensor::shape_str(t.shape)));
  if (std::find(given_.begin(), given_.end(), name) == given_.end()) given_.push_back(name);
  inputs_[name] = std::move(t);
}

kernels::Tensors& WorkloadRun::make_inputs() {
  if (inputs_made_) return inputs_;
  for (const InputEntry& e : p_.w.inputs)
    if (e.given && !inputs_.count(e.key))
      throw InputError(
          e.from
              ? fmt::format("{}: inputs.{}: the output '{}' of {} is given by a chain run (`trnsim run` of "
                            "this workload or of a pipeline file; docs/workloads.md \"Chains\")",
                            p_.w.file, e.key, e.from->output, e.from->written)
              : fmt::format("{}: input '{}' was not given", p_.w.file, e.key));
  try {
    kernels::Tensors made = workload::make_inputs(p_);
    for (auto& [name, t] : made)
      if (!inputs_.count(name)) inputs_.emplace(name, std::move(t));
  } catch (const std::bad_alloc&) {
    throw InputError(fmt::format("{}: out of memory while making the inputs", p_.w.file));
  }
  inputs_made_ = true;
  return inputs_;
}

std::vector<std::string> WorkloadRun::make_notes() const {
  std::vector<std::string> notes = input_notes(p_, inputs_);
  // Outputs the kernel accumulates into without zeroing them (e.g. skip_grad_initialization): trnsim, the
  // caller, zeroes them.
  const std::vector<std::string> zeroed = p_.kernel->zeroed_outputs();
  if (!zeroed.empty())
    notes.push_back(
        fmt::format("outputs {} start at zero, set by trnsim as the caller (kernel parameters "
                    "leave their initialization to the caller)",
                    fmt::join(zeroed, ", ")));
  return notes;
}

const run::SessionResult& WorkloadRun::simulate(const WorkloadRunOptions& o) {
  const auto say = [&](const std::string& m) {
    if (o.message) o.message(m);
  };
  if (!inputs_made_ && (p_.w.numerics || o.dump_inputs || !given_.empty())) make_inputs();
  release_free_heap();  // what the input recipes' threads freed
  notes_ = make_notes();
  for (const std::string& n : notes_) say("note: " + n);
  for (const std::string& w : warning_lines(p_)) say(w);
  session_ = std::make_unique<run::Session>(p_.build.program, p_.hw);
  if (p_.w.numerics) {
    for (const auto& [name, t] : inputs_) session_->set_input(name, t);
    for (const std::string& n : p_.kernel->zeroed_outputs()) {
      const TensorInfo* t = p_.output(n);
      session_->set_input(n, tensor::HostTensor::zeros(t->dtype, t->shape));
    }
  }

  // The references depend on the inputs alone: their prepare steps run on a second host thread while the
  // simulation runs (the same code and thread counts either way, so the same bytes).
  if (p_.w.numerics && o.checks) checks_ = make_checks(p_);
  big_references_ = p_.w.numerics && reference_flops(p_) > 2e10;
  async_ = std::make_unique<Async>();
  if (has_prepare_step(checks_)) {
    if (big_references_) say("computing the FP64 host references on a second thread");
    try {
      async_->prepared = std::async(std::launch::async, [this, full = o.full_reference] {
        const auto a = clock::now();
        prepare_checks(p_, checks_, inputs_, full);
        release_free_heap();  // the references' buffers freed on this thread
        return secs(a, clock::now());
      });
    } catch (const std::system_error&) {
      // No thread to spare (ulimit -u): the checks compute the references after the simulation.
    }
  }

  run::SessionOptions so;
  so.numerics = p_.w.numerics;
  so.trace_path = o.trace_path;
  auto last = t0_;
  // Every 1000 completed instructions, between two of them (no host thread writes a tensor then): the
  // resident-set governor's check; every 20000, a progress message when 2 s have passed.
  so.progress_every = 1000;
  so.progress = [&, t0 = t0_](Picoseconds sim, uint64_t done, uint64_t total) {
    resident::govern();
    if (!o.message || done % 20000 != 0) return;
    const auto now = clock::now();
    if (now - t0 < std::chrono::seconds(3) || now - last < std::chrono::seconds(2)) return;
    last = now;
    o.message(fmt::format("{:.0f} % ({} of {} instructions), simulated {:.3f} us, {:.0f} s",
                          total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 0.0, done,
                          total, sim.ns() / 1e3, secs(t0, now)));
  };
  const auto t_sim = clock::now();
  times_.setup = secs(t0_, t_sim);
  try {
    result_ = session_->run(so);
  } catch (const std::bad_alloc&) {
    throw InputError(
        fmt::format("{}: out of memory while running the model{}", p_.w.file,
                    p_.w.numerics ? " with numerics (the machine state holds every HBM tensor)" : ""));
  }
  const auto t_ref = clock::now();
  times_.simulation = secs(t_sim, t_ref);
  if (async_->prepared.valid()) {
    if (big_references_ && async_->prepared.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
      say("waiting for the FP64 host references");
    times_.reference_thread = async_->prepared.get();
  }
  if (p_.w.numerics) {
    for (const TensorInfo& t : p_.outputs) outputs_.emplace(t.name, session_->take(t.name));
    // The machine's copies of the inputs are not read again: released before the checks, whose host
    // references may need as much memory again on the largest layers.
    for (const auto& [name, t] : inputs_)
      if (!outputs_.count(name)) session_->take(name);
  }
  times_.references = secs(t_ref, clock::now());
  return result_;
}

const std::vector<tensor::CheckResult>& WorkloadRun::check(const WorkloadRunOptions& o) {
  const auto t = clock::now();
  checked_ = true;
  if (p_.w.numerics && !checks_.empty()) {
    if (big_references_ && times_.reference_thread < 0 && o.message)
      o.message("computing the FP64 host references");
    check_results_ = evaluate_checks(p_, checks_, inputs_, outputs_, o.full_reference);
  }
  times_.references += secs(t, clock::now());
  return check_results_;
}

void WorkloadRun::run(const WorkloadRunOptions& o) {
  simulate(o);
  check(o);
}

run::RunReport WorkloadRun::report() const {
  const kernels::RooflineWork work = roofline_work(p_);
  run::RunReport rep =
      run::make_report(p_.build.program, p_.hw, result_, work.useful_flops, work.compulsory_hbm_bytes);
  rep.workload = p_.w.name;
  rep.kernel = p_.w.kernel;
  rep.params = p_.kernel->params();
  rep.notes = notes_;
  for (const std::string& w : warning_lines(p_)) rep.notes.push_back(w);
  rep.nki = p_.kernel->frontend_stats();
  for (const kernels::AllocationRecord& a : p_.build.allocations)
    rep.allocations.push_back({{"name", a.name},
                               {"source", a.source},
                               {"space", isa::mem_name(a.space)},
                               {"bytes_per_partition", a.bytes_per_partition},
                               {"tiles", a.tiles},
                               {"trip_count", a.trip_count},
                               {"bufs", a.bufs},
                               {"chosen_by", a.by_rule ? "rule" : "explicit"},
                               {"reason", a.reason},
                               {"scope", a.scope},
                               {"declarations", a.declarations}});
  if (!inputs_.empty())
    for (const kernels::KernelStat& s : p_.kernel->input_stats(inputs_))
      rep.kernel_stats.push_back({s.name, s.value, s.unit, s.description});
  if (!p_.w.numerics) {
    rep.numerics_note = "off (--no-numerics or \"numerics\": false): timing only, no outputs computed";
  } else if (checks_.empty()) {
    rep.numerics_note = fmt::format("no host reference for kernel '{}' with these parameters", p_.w.kernel);
  } else {
    rep.checks = check_results_;
    rep.numerics_run = true;
  }
  rep.wall_seconds = secs(t0_, clock::now());
  return rep;
}

std::vector<std::string> WorkloadRun::warning_lines(const PreparedWorkload& p) {
  std::vector<std::string> lines;
  for (const std::string& w : p.build.warnings) lines.push_back("warning: " + w);
  return lines;
}

int WorkloadRun::exit_code(const run::RunReport& rep) {
  if (rep.stats.total_time.ns() < rep.roofline_ns * (1 - 1e-9)) return kExitBelowRoofline;
  for (const tensor::CheckResult& c : rep.checks)
    if (!c.pass) return kExitNumericsFail;
  return 0;
}

std::vector<io::OutputFile> WorkloadRun::output_files(const run::RunReport& rep, const std::string& out_dir,
                                                      bool dump_inputs) {
  std::vector<io::OutputFile> files;
  const std::string text = run::stats_text(run::stats_json(rep));
  files.push_back(
      {(fs::path(out_dir) / "stats.json").string(), std::vector<uint8_t>(text.begin(), text.end())});
  const std::string host = run::host_json_text(rep);
  files.push_back(
      {(fs::path(out_dir) / run::kHostFileName).string(), std::vector<uint8_t>(host.begin(), host.end())});
  if (p_.w.numerics)  // the checks are done: each output's bytes move into its file's image, uncopied
    for (const std::string& n : p_.written) {
      tensor::HostTensor& t = outputs_.at(n);
      files.push_back({io::output_npy_path(out_dir, n, p_.w.file),
                       io::npy_header(tensor::npy_dtype_of(t.dtype), t.shape), std::move(t.bytes)});
    }
  if (dump_inputs)
    for (const TensorInfo& ti : p_.inputs) {
      const tensor::HostTensor& t = inputs_.at(ti.name);
      files.push_back({io::output_npy_path((fs::path(out_dir) / "inputs").string(), ti.name,
                                           p_.w.file + ": --dump-inputs"),
                       io::encode_npy(tensor::npy_dtype_of(t.dtype), t.shape, t.bytes.data())});
    }
  return files;
}

}  // namespace trnsim::workload
