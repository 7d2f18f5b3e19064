#include "sim/model/run.h"

#include <cstdlib>
#include <optional>
#include <string>

#include "sim/base/error.h"
#include "sim/base/interrupt.h"
#include "sim/isa/names.h"
#include "sim/model/lnc2.h"
#include "sim/model/sequencer.h"

// libsystemc.so references sc_main; programs that drive the model through run_program (the CLI, Catch2 tests)
// have their own main, so provide a weak one that a real sc_main overrides.
extern "C" __attribute__((weak)) int sc_main(int, char**) {
  return 1;
}

namespace trnsim::model {

uint64_t RunStats::hbm_bytes() const {
  uint64_t n = 0;
  for (const auto& c : cores) n += c.hbm_bytes_read + c.hbm_bytes_written;
  return n;
}

double RunStats::hbm_GBps() const {
  return total_time.count() == 0 ? 0.0 : static_cast<double>(hbm_bytes()) * 1000.0 / total_time.count();
}

namespace {

// A SystemC context elaborates once; every run after the first gets a fresh one (the old one is leaked on
// purpose: its modules are gone, and SystemC offers no supported way to destroy it).
void fresh_systemc_context() {
  static bool used = false;
  if (used) {
    sc_core::sc_curr_simcontext = new sc_core::sc_simcontext;
    sc_core::sc_default_global_context = sc_core::sc_curr_simcontext;
  }
  used = true;
}

// The time after each engine's last instruction is `finished`; what no cause explains is `other`, so the
// parts of the split sum to the total time.
void close_time_split(RunStats& stats, int cores) {
  const uint64_t total = stats.total_time.count();
  for (int c = 0; c < cores; ++c)
    for (auto& es : stats.cores[c].engines) {
      auto& sp = es.split;
      sp.finished = Picoseconds(total > es.last_end.count() ? total - es.last_end.count() : 0);
      uint64_t sum = sp.work.count() + sp.throttled.count() + sp.launch.count() + sp.peer.count() +
                     sp.dge.count() + sp.pe_pipeline.count() + sp.finished.count() + sp.other.count();
      for (Picoseconds p : sp.engine) sum += p.count();
      for (Picoseconds p : sp.queue) sum += p.count();
      if (sum < total) sp.other += Picoseconds(total - sum);
    }
}

}  // namespace

RunResult run_program(const isa::Program& program, const config::HwConfig& hw, const RunOptions& options,
                      isa::MachineState* state) {
  if (program.generation != hw.generation)
    throw InputError(std::string("the program was built for ") + isa::generation_name(program.generation) +
                     " but the hardware config " + hw.name + " is " + isa::generation_name(hw.generation));
  if (program.num_cores < 1 || program.num_cores > 2)
    throw InputError("program num_cores must be 1 or 2, found " + std::to_string(program.num_cores));
  for (int e = 0; e < isa::kNumEngines && program.num_cores == 1; ++e)
    if (!program.streams[1][e].empty())
      throw InputError("program has num_cores 1 but instructions for core 1");

  setenv("SC_COPYRIGHT_MESSAGE", "DISABLE", 0);
  fresh_systemc_context();
  sc_core::sc_report_handler::set_actions(sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  sc_core::sc_set_time_resolution(1, sc_core::SC_PS);

  std::optional<isa::MachineState> own;
  if (!options.numerics) {
    state = nullptr;
  } else if (!state) {
    own = isa::make_machine_state(program, hw.limits());
    state = &*own;
  }

  auto top = std::make_unique<Lnc2>("lnc2", program, hw, options, state);
  try {
    const interrupt::CooperativeSection stop_at_a_completion;
    sc_core::sc_start();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(std::string("SystemC: ") + e.what());
  }
  if (top->error) std::rethrow_exception(top->error);

  std::string blocked;
  for (const auto& core : top->seq)
    for (const auto& s : core)
      if (!s->done()) blocked += "\n  " + s->blocked_description();
  if (!blocked.empty())
    throw InputError("deadlock at " + std::to_string(top->last_completion.ns()) +
                     " ns: no instruction can make progress; blocked engines:" + blocked);

  RunResult r;
  r.stats = top->stats;
  r.stats.total_time = top->last_completion;
  close_time_split(r.stats, program.num_cores);
  for (int c = 0; c < 2; ++c)
    r.stats.cores[c].pe_throttle_engagements =
        top->seq[c][static_cast<int>(isa::Engine::PE)]->throttle_engagements();
  r.stats.instructions = top->completed;
  r.end_time = top->last_completion;
  if (options.observer) options.observer->on_finish(r.stats);
  return r;
}

}  // namespace trnsim::model
