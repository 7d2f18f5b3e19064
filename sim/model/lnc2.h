// Top of the SystemC model of one LNC=2 pair (internal; callers use sim/model/run.h): per core a sequencer
// per engine (sequencer.h), the semaphores of both cores (semaphores.h), the DMA system shared by both cores
// (dma_system.h), the memories (sim/model/memory: the HBM shared by both cores, each core's SBUF and PSUM,
// bound to the engines and the DMA system through TLM-2.0 sockets), and the run's shared state (program,
// config, cost model, stats, completion count, first error). Every module is a thin sc_module over plain C++
// timing classes (sim/timing): each process is an SC_METHOD that schedules its next event directly (one timed
// event per instruction or DMA state change), no sc_clock, no sc_signal.
#pragma once

#include <systemc>
#include <tlm>

#include <array>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/config/hw_config.h"
#include "sim/model/memory/hbm.h"
#include "sim/model/run.h"
#include "sim/timing/cost_model.h"

namespace trnsim::model {

class Sequencer;
class DmaSystem;
struct Sbuf;
struct Psum;
class Semaphores;

class Lnc2 : public sc_core::sc_module {
 public:
  Lnc2(sc_core::sc_module_name name, const isa::Program& program, const config::HwConfig& hw,
       const RunOptions& options, isa::MachineState* state);
  ~Lnc2() override;

  const isa::Program& program;
  const config::HwConfig& hw;
  const RunOptions& options;
  ModelObserver::Needs observed;  // what options.observer reads (nothing without one)
  isa::MachineState* state;       // null when numerics are off
  isa::Limits limits;
  timing::CostModel cost;
  Picoseconds limit;  // no event at or beyond: min(options.max_time, timing::kMaxSimTime)
  RunStats stats;
  std::array<int64_t, 2> barriers_issued{};
  // A hardware DGE block of a core: executes one DMA instruction at a time (dma.hwdge_instruction_ns).
  struct DgeBlock {
    Picoseconds free;  // busy until
    NodeRef last;      // the DMA instruction that occupies it last
  };
  std::array<std::vector<DgeBlock>, 2> dge;  // per core: dma.hwdge_blocks
  // The block a sequencer commands: SP block 0, ACT block 1 (mod the block count).
  DgeBlock& dge_block(int core, isa::Engine e) {
    auto& blocks = dge[core];
    return blocks[e == isa::Engine::ACT ? 1 % blocks.size() : 0];
  }
  Picoseconds launch_end;  // sync.kernel_launch_ns
  uint64_t total_instructions = 0;
  uint64_t completed = 0;
  Picoseconds last_completion;
  std::exception_ptr error;

  void count_completion(Picoseconds t);
  // Records the first error and stops the simulation.
  void fail(std::exception_ptr e);
  std::string where(const isa::Instruction& inst) const;  // "kernel.cpp:12" or "unknown source"

  std::array<std::array<std::unique_ptr<Sequencer>, isa::kNumEngines>, 2> seq;
  std::unique_ptr<DmaSystem> dma;
  std::unique_ptr<Semaphores> semaphores;
  HbmAddressMap hbm_map;
  std::unique_ptr<Hbm> hbm;
  std::array<std::unique_ptr<Sbuf>, 2> sbuf;
  std::array<std::unique_ptr<Psum>, 2> psum;
  std::unique_ptr<sc_core::sc_module> hbm_binding;  // what RunOptions::bind_hbm made, kept for the run
  std::vector<std::unique_ptr<sc_core::sc_module>> onchip_bindings;  // what bind_sbuf / bind_psum made
  // Per core: another model is bound in place of its SBUF [0] / PSUM [1] (RunOptions::bind_sbuf /
  // bind_psum): its accesses are timed through the socket (memory::access_delay).
  std::array<std::array<bool, 2>, 2> onchip_timed{};

 private:
  // Binds the engines and the DMA system to the memories (the HBM through RunOptions::bind_hbm if set).
  void bind_memories();
  using OnChipBinder = std::function<std::unique_ptr<sc_core::sc_module>(OnChipSockets&)>;
  // Binds core `core`'s SBUF (`which` 0) or PSUM (1) target socket `memory` to its initiators, through
  // `bind` if set.
  void bind_onchip(int core, int which, const OnChipBinder& bind, tlm::tlm_base_target_socket_b<>& memory);
  // Numerics on: every memory socket grants DMI over the run's bytes (memory::require_dmi); the first error
  // stops the run (fail).
  void start_of_simulation() override;
};

}  // namespace trnsim::model
