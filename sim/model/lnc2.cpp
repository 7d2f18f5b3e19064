#include "sim/model/lnc2.h"

#include <fmt/format.h>

#include <algorithm>

#include "sim/base/error.h"
#include "sim/base/interrupt.h"
#include "sim/model/dma_system.h"
#include "sim/model/memory/onchip_memory.h"
#include "sim/model/semaphores.h"
#include "sim/model/sequencer.h"
#include "sim/timing/time_limit.h"

namespace trnsim::model {

Lnc2::Lnc2(sc_core::sc_module_name name, const isa::Program& prog, const config::HwConfig& hwc,
           const RunOptions& opts, isa::MachineState* st)
    : sc_module(name),
      program(prog),
      hw(hwc),
      options(opts),
      observed(opts.observer ? opts.observer->needs() : ModelObserver::Needs{false, false, false}),
      state(st),
      limits(hwc.limits()),
      cost(hwc),
      limit(std::min(opts.max_time, timing::kMaxSimTime)),
      hbm_map(prog) {
  for (auto& d : dge) d.assign(hw.dma.hwdge_blocks, DgeBlock{});
  launch_end = timing::ns_to_ps(hw.sync.kernel_launch_ns);
  // Creation order is process order within a delta cycle: sequencers, then DMA, then semaphores.
  for (int c = 0; c < 2; ++c)
    for (int e = 0; e < isa::kNumEngines; ++e) {
      total_instructions += program.streams[c][e].size();
      std::string n =
          std::string("core") + std::to_string(c) + "_" + isa::engine_name(static_cast<isa::Engine>(e));
      seq[c][e] = std::make_unique<Sequencer>(n.c_str(), *this, c, static_cast<isa::Engine>(e));
    }
  dma = std::make_unique<DmaSystem>("dma", *this);
  semaphores =
      std::make_unique<Semaphores>("semaphores", hw, observed.semaphores ? options.observer : nullptr, limit,
                                   [this](std::exception_ptr e) { fail(e); });
  bind_memories();
}

void Lnc2::bind_memories() {
  hbm = std::make_unique<Hbm>("hbm", hbm_map, state ? &state->hbm : nullptr, timing::HbmTiming(hw.hbm));
  for (int c = 0; c < 2; ++c) {
    const std::string n = "core" + std::to_string(c);
    sbuf[c] = std::make_unique<Sbuf>((n + "_sbuf").c_str(), state ? &state->cores[c].sbuf : nullptr, limits);
    psum[c] = std::make_unique<Psum>((n + "_psum").c_str(), state ? &state->cores[c].psum : nullptr, limits);
    bind_onchip(c, 0, options.bind_sbuf, sbuf[c]->target.socket);
    bind_onchip(c, 1, options.bind_psum, psum[c]->target.socket);
  }
  if (options.bind_hbm) {
    HbmSockets ends{dma->hbm, hbm->socket};
    hbm_binding = options.bind_hbm(ends);
  } else {
    dma->hbm.bind(hbm->socket);
  }
}

void Lnc2::bind_onchip(int core, int which, const OnChipBinder& bind,
                       tlm::tlm_base_target_socket_b<>& memory) {
  OnChipSockets ends{core, which == 0 ? isa::MemSpace::SBUF : isa::MemSpace::PSUM, {}, memory};
  for (auto& s : seq[core]) ends.initiators.push_back(which == 0 ? &s->sbuf : &s->psum);
  ends.initiators.push_back(which == 0 ? &dma->sbuf[core] : &dma->psum[core]);
  if (bind) {
    onchip_bindings.push_back(bind(ends));
    onchip_timed[core][which] = true;
    for (auto& s : seq[core]) s->time_memory_accesses();
  } else {
    for (auto* i : ends.initiators) i->bind(memory);
  }
}

void Lnc2::start_of_simulation() {
  if (!state) return;
  try {
    for (int c = 0; c < program.num_cores; ++c) {
      const std::string n = "core " + std::to_string(c);
      auto& mem = state->cores[c];
      for (int e = 0; e < isa::kNumEngines; ++e) {
        const std::string who = n + " " + isa::engine_name(static_cast<isa::Engine>(e));
        memory::require_dmi(seq[c][e]->sbuf, 0, mem.sbuf.data(), mem.sbuf.size(), who + " SBUF");
        memory::require_dmi(seq[c][e]->psum, 0, mem.psum.data(), mem.psum.size(), who + " PSUM");
      }
      memory::require_dmi(dma->sbuf[c], 0, mem.sbuf.data(), mem.sbuf.size(), "DMA " + n + " SBUF");
      memory::require_dmi(dma->psum[c], 0, mem.psum.data(), mem.psum.size(), "DMA " + n + " PSUM");
    }
    for (uint32_t i = 0; i < hbm_map.tensors() && i < state->hbm.size(); ++i)
      memory::require_dmi(dma->hbm, hbm_map.base(i), state->hbm[i].data(), state->hbm[i].size(),
                          "DMA HBM tensor '" + program.tensors[i].name + "'");
  } catch (...) {
    fail(std::current_exception());
  }
}

Lnc2::~Lnc2() = default;

std::string Lnc2::where(const isa::Instruction& inst) const {
  if (inst.loc.file == 0 || inst.loc.file >= program.files.size() || inst.loc.line == 0)
    return "unknown source";
  return program.files[inst.loc.file] + ":" + std::to_string(inst.loc.line);
}

void Lnc2::count_completion(Picoseconds t) {
  ++completed;
  if (last_completion < t) last_completion = t;
  if (options.progress && options.progress_every > 0 && completed % options.progress_every == 0)
    options.progress(t, completed, total_instructions);
  if (interrupt::requested() && !error)
    fail(std::make_exception_ptr(
        Interrupted(fmt::format("interrupted at {:.3f} us of simulated time, after {} of {} instructions",
                                t.ns() / 1e3, completed, total_instructions))));
}

void Lnc2::fail(std::exception_ptr e) {
  if (error) return;  // stopping already
  error = e;
  sc_core::sc_stop();
}

}  // namespace trnsim::model
