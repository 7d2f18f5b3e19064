#include "sim/run/session.h"

#include <fmt/format.h>

#include <filesystem>

#include "sim/base/error.h"
#include "sim/base/interrupt.h"
#include "sim/io/made_folders.h"
#include "sim/model/trace_observer.h"
#include "sim/trace/open_trace.h"

namespace trnsim::run {

Session::Session(const isa::Program& program, const config::HwConfig& hw) : program_(program), hw_(hw) {}
Session::~Session() = default;

isa::MachineState& Session::state() {
  if (!state_)
    state_ = std::make_unique<isa::MachineState>(
        isa::make_machine_state(program_, hw_.limits(), std::move(initial_)));
  initial_.clear();
  return *state_;
}

uint32_t Session::tensor_index(const std::string& name) const {
  for (uint32_t i = 0; i < program_.tensors.size(); ++i)
    if (program_.tensors[i].name == name) return i;
  throw InputError(fmt::format("the program has no HBM tensor '{}'", name));
}

void Session::set_input(const std::string& name, const tensor::HostTensor& t) {
  set_input(tensor_index(name), t);
}

void Session::set_input(uint32_t index, const tensor::HostTensor& t) {
  check_input(index, t);
  bind(index, t.bytes.cow_copy());
}

void Session::set_input(const std::string& name, tensor::HostTensor&& t) {
  const uint32_t index = tensor_index(name);
  check_input(index, t);
  bind(index, std::move(t.bytes));
}

void Session::bind(uint32_t index, HostBytes bytes) {
  if (state_)
    state_->hbm[index] = std::move(bytes);
  else
    initial_[index] = std::move(bytes);  // the state is made with it, unpoisoned
}

void Session::check_input(uint32_t index, const tensor::HostTensor& t) const {
  if (index >= program_.tensors.size()) throw InputError(fmt::format("no HBM tensor with index {}", index));
  const isa::TensorDecl& d = program_.tensors[index];
  if (t.dtype != d.dtype || tensor::elements_of(t.shape) != tensor::elements_of(d.shape))
    throw InputError(fmt::format("tensor '{}': the program declares {} {}, the input is {} {}", d.name,
                                 isa::dtype_name(d.dtype), tensor::shape_str(d.shape),
                                 isa::dtype_name(t.dtype), tensor::shape_str(t.shape)));
  const size_t n = static_cast<size_t>(tensor::elements_of(d.shape)) * isa::dtype_size(d.dtype);
  if (n != t.bytes.size())
    throw Error(fmt::format("tensor '{}': {} bytes for a {}-byte tensor", d.name, t.bytes.size(), n));
}

SessionResult Session::run(const SessionOptions& o) {
  if (!taken_.empty()) throw InputError("Session::run: tensors were taken out of this session's state");
  model::RunOptions ro;
  ro.numerics = o.numerics;
  ro.progress = o.progress;
  ro.progress_every = o.progress_every;
  model::StatsObserver profile(program_, hw_);
  ro.observer = &profile;
  // The trace's missing folders, removed again if it is not written (a failed write, a signal): declared
  // first, so that the trace's temporary is gone when they are judged empty.
  io::MadeFolders trace_folders;
  std::unique_ptr<trace::TraceSink> sink;
  std::unique_ptr<model::TraceObserver> tracer;
  std::unique_ptr<model::TeeObserver> tee;
  // The trace is streamed while the model runs, to a temporary renamed into place when it is closed. If the
  // run fails, what was traced is kept and marked incomplete (it shows what happened up to the failure); the
  // error says where it is. A Ctrl-C during the simulation only asks the model to stop (sim/model/run.h);
  // anywhere else here (opening the trace, closing it) it ends the process, and the temporary with it.
  if (!o.trace_path.empty()) {
    const std::filesystem::path parent = std::filesystem::path(o.trace_path).parent_path();
    if (!parent.empty())
      trace_folders.make(parent.string(), fmt::format("cannot create trace file '{}'", o.trace_path));
    sink = trace::open_trace_file(o.trace_path);
    tracer = std::make_unique<model::TraceObserver>(*sink, program_, hw_);
    tee = std::make_unique<model::TeeObserver>(std::vector<model::ModelObserver*>{tracer.get(), &profile});
    ro.observer = tee.get();
  }
  model::RunResult r;
  const auto keep_incomplete = [&](const std::string& why) {
    try {
      tracer->flush();
      const trace::TrackId p = sink->process_track(100, "trnsim", 100);
      const trace::TrackId t = sink->thread_track(p, "run");
      sink->instant(t, 0, "trace incomplete: the run failed", {trace::Annotation("error", why)});
      sink->close();
    } catch (const std::exception&) {
      return std::string("; the trace could not be completed and was not written");
    }
    return "; the trace up to the failure is in " + o.trace_path + " (marked incomplete)";
  };
  try {
    r = model::run_program(program_, hw_, ro, o.numerics ? &state() : nullptr);
    // A signal that came when no instruction was left to complete.
    if (interrupt::requested()) throw Interrupted("interrupted at the end of the simulation");
  } catch (const Interrupted& e) {
    if (!sink) throw;
    throw Interrupted(e.what() + keep_incomplete(e.what()));
  } catch (const RuleError& e) {
    if (!sink) throw;
    throw RuleError(e.what() + keep_incomplete(e.what()));
  } catch (const InputError& e) {
    if (!sink) throw;
    throw InputError(e.what() + keep_incomplete(e.what()));
  } catch (const Error& e) {
    if (!sink) throw;
    throw Error(e.what() + keep_incomplete(e.what()));
  }
  SessionResult out;
  out.stats = r.stats;
  out.profile = profile.stats();
  if (sink) {
    sink->close();
    out.trace.path = o.trace_path;
    out.trace.slices = tracer->counts().slices;
    out.trace.flows = tracer->counts().flows;
    out.trace.counter_samples = tracer->counts().counter_samples;
    std::error_code ec;
    const auto size = std::filesystem::file_size(o.trace_path, ec);
    out.trace.bytes = ec ? 0 : size;
  }
  ran_numerics_ = o.numerics;
  return out;
}

tensor::HostTensor Session::read(const std::string& name) const {
  return read(tensor_index(name));
}

tensor::HostTensor Session::take(const std::string& name) {
  const uint32_t index = tensor_index(name);
  if (!ran_numerics_ || !state_) throw InputError("tensor contents exist only after a run with numerics");
  if (!taken_.insert(index).second) throw InputError(fmt::format("tensor '{}' was taken already", name));
  const isa::TensorDecl& d = program_.tensors.at(index);
  tensor::HostTensor t;
  t.dtype = d.dtype;
  t.shape = d.shape;
  t.bytes = std::move(state_->hbm[index]);
  state_->hbm[index] = {};
  return t;
}

tensor::HostTensor Session::read(uint32_t index) const {
  if (!ran_numerics_ || !state_) throw InputError("tensor contents exist only after a run with numerics");
  const isa::TensorDecl& d = program_.tensors.at(index);
  if (taken_.count(index)) throw InputError(fmt::format("tensor '{}' was taken already", d.name));
  tensor::HostTensor t;
  t.dtype = d.dtype;
  t.shape = d.shape;
  t.bytes = state_->hbm[index];
  return t;
}

}  // namespace trnsim::run
