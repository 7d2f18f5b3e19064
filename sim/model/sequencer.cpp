#include "sim/model/sequencer.h"

#include <cstdio>

#include "sim/base/error.h"
#include "sim/model/dma_system.h"
#include "sim/model/lnc2.h"
#include "sim/model/sc_time.h"
#include "sim/model/semaphores.h"
#include "sim/timing/time_limit.h"

namespace trnsim::model {

namespace {

std::string fmt_ns(Picoseconds t) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f", t.ns());
  return buf;
}

Picoseconds since(Picoseconds now, Picoseconds t) {
  return Picoseconds(now.count() - t.count());
}

}  // namespace

Sequencer::Sequencer(sc_core::sc_module_name name, Lnc2& top, int core, isa::Engine engine)
    : sc_module(name),
      top_(top),
      core_(core),
      engine_(engine),
      stream_(top.program.streams[core][static_cast<int>(engine)]),
      clock_(top.hw.clock(engine)) {
  if (engine == isa::Engine::PE) pe_ = std::make_unique<timing::PePipeline>(top.hw.pe, top.limit);
  SC_METHOD(step);
  if (engine == isa::Engine::PE) {
    SC_METHOD(pe_complete);
    sensitive << pe_done_;
    dont_initialize();
  }
}

std::string Sequencer::context(uint32_t index) const {
  std::string s = "at " + fmt_ns(now_ps()) + " ns, ";
  if (index >= stream_.size()) return s + "core " + std::to_string(core_) + " " + isa::engine_name(engine_);
  const auto& inst = stream_[index];
  return s + top_.where(inst) + ": core " + std::to_string(core_) + " " + isa::engine_name(engine_) + " #" +
         std::to_string(index) + " " + isa::opcode_name(inst.op);
}

void Sequencer::rethrow_rule(const std::exception& e, uint32_t index) const {
  throw RuleError(context(index) + ": " + e.what());
}

void Sequencer::fail_with_context(uint32_t index) {
  try {
    throw;
  } catch (const timing::TimeLimitError& e) {
    top_.fail(std::make_exception_ptr(InputError(context(index) + ": " + e.what())));
  } catch (...) {
    top_.fail(std::current_exception());
  }
}

void Sequencer::step() {
  try {
    if (!launched_) {  // no instruction issues before the kernel launch overhead has passed
      launched_ = true;
      if (top_.hw.sync.kernel_launch_ns > 0) {
        const Picoseconds now = now_ps();
        const Picoseconds at = timing::end_after(now, timing::ns_to_ps(top_.hw.sync.kernel_launch_ns),
                                                 top_.limit, "the kernel launch would end");
        next_trigger(to_sc(since(at, now)));
        return;
      }
    }
    run();
  } catch (...) {
    fail_with_context(static_cast<uint32_t>(idx_));
  }
}

bool Sequencer::waits_ok(const isa::Instruction& inst) {
  auto& sems = *top_.semaphores;
  for (const auto& w : inst.waits) {
    if (w.sem >= sems.count())
      throw RuleError("waits on S[" + std::to_string(w.sem) + "], but the core has " +
                      std::to_string(sems.count()) + " semaphores");
    if (sems.value(core_, w.sem) < static_cast<int64_t>(w.value)) {
      sems.wait_for(core_, w.sem, wake);
      return false;
    }
  }
  return true;
}

void Sequencer::complete(uint32_t index, InstructionRecord& rec) {
  const auto& inst = stream_[index];
  if (top_.state) {
    try {
      isa::execute(inst, core_, top_.program, top_.limits, *top_.state);
    } catch (const RuleError& e) {
      rethrow_rule(e, index);
    }
  }
  top_.semaphores->post_updates(core_, inst, rec.end, {core_, engine_, index});
  auto& cs = top_.stats.cores[core_];
  auto& es = cs.engines[static_cast<int>(engine_)];
  ++es.instructions;
  es.busy += since(rec.end, rec.start);
  if (engine_ == isa::Engine::PE) {
    cs.pe_ls_busy += since(rec.ls_end, rec.ls_start);
    cs.pe_flops += rec.work.flops;
  }
  if (top_.options.observer) top_.options.observer->on_instruction(rec);
  top_.count_completion(rec.end);
}

void Sequencer::pe_complete() {
  uint32_t index = 0;
  try {
    const Picoseconds now = now_ps();
    while (!pe_pending_.empty() && pe_pending_.front().rec.end <= now) {
      PePending p = std::move(pe_pending_.front());
      pe_pending_.pop_front();
      index = p.index;
      complete(p.index, p.rec);
    }
    if (!pe_pending_.empty()) pe_done_.notify(to_sc(since(pe_pending_.front().rec.end, now)));
  } catch (...) {
    fail_with_context(index);
  }
}

void Sequencer::run() {
  const Picoseconds now = now_ps();
  if (!resume(now)) return;
  phase_ = Phase::Fetch;
  while (idx_ < stream_.size()) {
    if (!fetch(now)) return;
    const auto& inst = stream_[idx_];
    bool moved_on;
    if (inst.is_dma())
      moved_on = issue_dma_trigger(now);
    else if (inst.op == isa::Opcode::CoreBarrier)
      moved_on = issue_barrier(now);
    else if (engine_ == isa::Engine::PE)
      moved_on = issue_pe(now, cost_);
    else
      moved_on = issue_compute(now, cost_);
    if (!moved_on) return;
  }
}

bool Sequencer::resume(Picoseconds now) {
  switch (phase_) {
    case Phase::Busy:
      complete(static_cast<uint32_t>(idx_), cur_);
      ++idx_;
      break;
    case Phase::Trigger:
      enqueue_dma(now);
      ++idx_;
      break;
    case Phase::PeMoveOn:
      ++idx_;
      break;
    case Phase::BarrierWait:
      if (!barrier_reached()) {
        next_trigger(wake);
        return false;
      }
      top_.stats.cores[core_].engines[static_cast<int>(engine_)].semaphore_wait +=
          since(now, cur_.issue);  // the barrier wait
      cur_.start = cur_.end = cur_.ls_start = cur_.ls_end = now;
      complete(static_cast<uint32_t>(idx_), cur_);
      ++idx_;
      break;
    case Phase::Fetch:
      break;
  }
  return true;
}

bool Sequencer::fetch(Picoseconds now) {
  const auto& inst = stream_[idx_];
  const auto index = static_cast<uint32_t>(idx_);
  if (!waiting_) {
    waiting_ = true;
    wait_start_ = now;
  }
  bool ok;
  try {
    ok = waits_ok(inst);
  } catch (const RuleError& e) {
    rethrow_rule(e, index);
  }
  if (!ok) {
    next_trigger(wake);
    return false;
  }
  waiting_ = false;
  top_.stats.cores[core_].engines[static_cast<int>(engine_)].semaphore_wait += since(now, wait_start_);
  timing::EngineCost c;
  try {
    top_.cost.check_features(inst);
    isa::check(inst, top_.program, top_.limits);
    if (inst.is_dma() && inst.dma_queue >= top_.hw.dma.queues_per_core)
      throw RuleError("dma_queue " + std::to_string(inst.dma_queue) + " out of range (the core has " +
                      std::to_string(top_.hw.dma.queues_per_core) + " queues)");
    if (!inst.is_dma()) c = top_.cost.engine_cost(inst);
  } catch (const RuleError& e) {
    rethrow_rule(e, index);
  }
  cost_ = c;
  cur_ = InstructionRecord{};
  cur_.core = core_;
  cur_.engine = engine_;
  cur_.index = index;
  cur_.inst = &inst;
  cur_.wait_start = wait_start_;
  cur_.issue = cur_.start = cur_.ls_start = cur_.ls_end = now;
  cur_.cycles = c.cycles.count();
  cur_.ls_cycles = c.ls_cycles.count();
  cur_.perf_mode = c.perf_mode;
  if (top_.options.observer || engine_ == isa::Engine::PE) cur_.work = isa::work_of(inst, top_.program);
  return true;
}

bool Sequencer::issue_dma_trigger(Picoseconds now) {
  const Picoseconds end = timing::end_after(now, timing::ns_to_ps(top_.hw.dma.trigger_ns), top_.limit,
                                            "its DMA trigger would end");
  phase_ = Phase::Trigger;
  next_trigger(to_sc(since(end, now)));
  return false;
}

void Sequencer::enqueue_dma(Picoseconds now) {
  const auto& inst = stream_[idx_];
  auto& cs = top_.stats.cores[core_];
  auto& es = cs.engines[static_cast<int>(engine_)];
  cur_.end = now;
  isa::Work work = isa::work_of(inst, top_.program);
  timing::DmaCost cost = top_.cost.dma_cost(inst, work);
  DmaRecord r;
  r.core = core_;
  r.queue = inst.dma_queue;
  r.issuer = engine_;
  r.index = static_cast<uint32_t>(idx_);
  r.inst = &inst;
  r.wait_start = cur_.wait_start;
  r.trigger_start = cur_.start;
  r.enqueue = now;
  ++es.instructions;
  es.busy += since(now, cur_.start);
  ++cs.dma_triggers;
  if (top_.options.observer) {
    cur_.work = work;
    top_.options.observer->on_instruction(cur_);
  }
  top_.dma->enqueue(r, cost, work);
}

bool Sequencer::barrier_reached() {
  const auto b = static_cast<uint16_t>(top_.hw.sync.barrier_semaphore());
  if (top_.semaphores->value(core_, b) >= barrier_target_) return true;
  top_.semaphores->wait_for(core_, b, wake);
  return false;
}

bool Sequencer::issue_barrier(Picoseconds now) {
  // Signal the peer's barrier semaphore, then wait for ours (see run.h).
  const auto index = static_cast<uint32_t>(idx_);
  if (top_.program.num_cores > 1)
    top_.semaphores->signal(1 - core_, static_cast<uint16_t>(top_.hw.sync.barrier_semaphore()), 1,
                            timing::end_after(now, timing::ns_to_ps(top_.hw.sync.cross_core_latency_ns),
                                              top_.limit, "its core_barrier signal would arrive"),
                            {core_, engine_, index});
  barrier_target_ = top_.program.num_cores > 1 ? ++top_.barriers_issued[core_] : 0;
  phase_ = Phase::BarrierWait;
  if (!barrier_reached()) {
    next_trigger(wake);
    return false;
  }
  cur_.end = now;
  complete(index, cur_);
  phase_ = Phase::Fetch;
  ++idx_;
  return true;
}

bool Sequencer::issue_pe(Picoseconds now, const timing::EngineCost& c) {
  const timing::PePipeline::Matmul m = pe_->matmul(now, c.ls_cycles, c.cycles);
  const Picoseconds dur = since(m.mm.end, m.mm.start);
  cur_.throttle_cap = m.mm.throttle_cap;
  top_.stats.cores[core_].pe_throttled += Picoseconds(dur.count() - m.mm.full_rate.count());
  if (top_.options.observer && dur != m.mm.full_rate)
    top_.options.observer->on_counter(core_, "pe_throttle_cap", m.mm.start, cur_.throttle_cap);
  cur_.ls_start = m.ls.start;
  cur_.ls_end = m.ls.end;
  cur_.start = m.mm.start;
  cur_.end = m.mm.end;
  pe_pending_.push_back({static_cast<uint32_t>(idx_), cur_});
  pe_done_.notify(to_sc(since(cur_.end, now)));
  const Picoseconds move_on = pe_->next_issue();
  if (move_on > now) {
    phase_ = Phase::PeMoveOn;
    next_trigger(to_sc(since(move_on, now)));
    return false;
  }
  ++idx_;
  return true;
}

bool Sequencer::issue_compute(Picoseconds now, const timing::EngineCost& c) {
  cur_.end = timing::end_after(now, clock_, c.cycles, top_.limit, "its execution would end");
  if (cur_.end == now) {
    complete(static_cast<uint32_t>(idx_), cur_);
    ++idx_;
    return true;
  }
  phase_ = Phase::Busy;
  next_trigger(to_sc(since(cur_.end, now)));
  return false;
}

std::string Sequencer::blocked_description() const {
  std::string who = "core " + std::to_string(core_) + " " + isa::engine_name(engine_);
  if (idx_ >= stream_.size()) return who + ": finished";
  const auto& inst = stream_[idx_];
  std::string s = who + ": instruction #" + std::to_string(idx_) + " (" + isa::opcode_name(inst.op) + ", " +
                  top_.where(inst) + ")";
  const auto& sems = *top_.semaphores;
  if (phase_ == Phase::BarrierWait) {
    const auto b = static_cast<uint16_t>(top_.hw.sync.barrier_semaphore());
    return s + " waits at core_barrier for S[" + std::to_string(b) +
           "] >= " + std::to_string(barrier_target_) + " (now " + std::to_string(sems.value(core_, b)) +
           "; the peer core issued fewer core_barriers)";
  }
  for (const auto& w : inst.waits) {
    if (w.sem < sems.count() && sems.value(core_, w.sem) < static_cast<int64_t>(w.value))
      return s + " waits for S[" + std::to_string(w.sem) + "] >= " + std::to_string(w.value) + " (now " +
             std::to_string(sems.value(core_, w.sem)) + ")";
  }
  return s + " is pending";
}

}  // namespace trnsim::model
