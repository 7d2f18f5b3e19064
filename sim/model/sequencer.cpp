#include "sim/model/sequencer.h"

#include <algorithm>
#include <cstdio>
#include <new>

#include "sim/base/error.h"
#include "sim/isa/flops.h"
#include "sim/isa/opcode_table.h"
#include "sim/model/dma_system.h"
#include "sim/model/lnc2.h"
#include "sim/model/memory/onchip_memory.h"
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
  return Picoseconds(now.count() > t.count() ? now.count() - t.count() : 0);
}

Picoseconds later(Picoseconds a, Picoseconds b) {
  return a < b ? b : a;
}

// Asks the CPU to load the cache lines of the bytes [from, to).
void prefetch(const void* from, const void* to) {
  constexpr uintptr_t kLine = 64;
  for (uintptr_t p = reinterpret_cast<uintptr_t>(from) & ~(kLine - 1); p < reinterpret_cast<uintptr_t>(to);
       p += kLine)
    __builtin_prefetch(reinterpret_cast<const void*>(p));
}

}  // namespace

Sequencer::Sequencer(sc_core::sc_module_name name, Lnc2& top, int core, isa::Engine engine)
    : sc_module(name),
      top_(top),
      core_(core),
      engine_(engine),
      stream_(top.program.streams[core][static_cast<int>(engine)]),
      clock_(top.hw.clock(engine)),
      prechecked_(top.program.checked_limits == top.limits),
      trigger_ps_(timing::ns_to_ps(top.hw.dma.trigger_ns)),
      hwdge_ps_(timing::ns_to_ps(top.hw.dma.hwdge_instruction_ns)),
      swdge_ps_(timing::ns_to_ps(top.hw.dma.swdge_instruction_ns)),
      precomputed_ps_(timing::ns_to_ps(top.hw.dma.precomputed_issue_ns)),
      completion_ps_(clock_.to_time(Cycles(top.hw.completion_latency_cycles(engine)))) {
  if (engine == isa::Engine::PE) pe_ = std::make_unique<timing::PePipeline>(top.hw.pe, top.limit);
  // Static sensitivity to the two events it sleeps on (cheaper than re-arming dynamic sensitivity at every
  // activation): `wake` is notified only while the sequencer waits on a semaphore (Semaphores wakes a
  // registered waiter once), `tick_` only while an instruction, a DMA trigger or the launch occupies it.
  SC_METHOD(step);
  sensitive << wake << tick_;
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
        tick_.notify(to_sc(since(at, now)));
        return;
      }
    }
    run();
  } catch (...) {
    fail_with_context(static_cast<uint32_t>(idx_));
  }
}

bool Sequencer::waits_ok(const isa::SemWaits& waits) {
  auto& sems = *top_.semaphores;
  for (const auto& w : waits) {
    if (w.sem >= sems.count())
      throw RuleError("waits on S[" + std::to_string(w.sem) + "], but the core has " +
                      std::to_string(sems.count()) + " semaphores");
    if (sems.value(core_, w.sem) < static_cast<int64_t>(w.value)) {
      sems.wait_for(core_, w.sem, w.value, wake);
      blocked_sem_ = w.sem;
      return false;
    }
  }
  return true;
}

// Inlined into its two callers: returned by value, its 14 bytes went through the stack and were read back
// across two stores (a store-forwarding stall on every instruction).
[[gnu::always_inline]] inline Cause Sequencer::wait_cause(Picoseconds since_t, Picoseconds now) const {
  if (blocked_sem_ >= 0 && now > since_t) {
    const auto sem = static_cast<uint16_t>(blocked_sem_);
    if (const SemaphoreSource* src = top_.semaphores->last_source(core_, sem))
      return {CauseKind::Semaphore, src->node(), sem};
  }
  if (idx_ == 0) return {top_.launch_end > Picoseconds() ? CauseKind::Launch : CauseKind::None, {}, 0};
  return {CauseKind::ProgramOrder,
          {static_cast<int8_t>(core_), engine_, Part::Instruction, static_cast<uint32_t>(idx_ - 1)},
          0};
}

void Sequencer::charge_gap(Picoseconds from, Picoseconds to, const Cause& c) {
  if (to <= from) return;
  auto& sp = top_.stats.cores[core_].engines[static_cast<int>(engine_)].split;
  // The launch delay is charged first, whatever the instruction then waited for.
  if (from < top_.launch_end) {
    const Picoseconds cut = std::min(to, top_.launch_end);
    sp.launch += since(cut, from);
    from = cut;
    if (to <= from) return;
  }
  const Picoseconds d = since(to, from);
  switch (c.kind) {
    case CauseKind::Semaphore:
      if (c.from.core != core_) {
        sp.peer += d;
      } else if (c.from.part == Part::Transfer) {
        const auto q =
            top_.program.streams[c.from.core][static_cast<int>(c.from.engine)][c.from.index].dma_queue;
        if (sp.queue.size() <= q) sp.queue.resize(q + 1);
        sp.queue[q] += d;
      } else {
        sp.engine[static_cast<int>(c.from.engine)] += d;
      }
      break;
    case CauseKind::DgeBusy:
      sp.dge += d;
      break;
    case CauseKind::Launch:
      sp.launch += d;
      break;
    case CauseKind::ProgramOrder:
      if (engine_ == isa::Engine::PE) {
        sp.pe_pipeline += d;
        break;
      }
      [[fallthrough]];
    default:
      sp.other += d;
      break;
  }
}

void Sequencer::charge(const InstructionRecord& rec, const Cause& wait, const Cause& mm_wait) {
  auto& es = top_.stats.cores[core_].engines[static_cast<int>(engine_)];
  // The gap before it: up to `issue` what its waits ended on, then (PE) up to mm_issue what the
  // MultiplyMoving's own waits ended on, then what held it back after its waits: the PE pipeline, a busy DGE
  // block, the peer core (a core_barrier).
  const Picoseconds issue = std::min(later(rec.issue, last_end_), rec.start);
  charge_gap(last_end_, issue, wait);
  Picoseconds at = issue;
  Cause inner = rec.cause;
  if (engine_ == isa::Engine::PE) {
    const Picoseconds mm = std::min(later(rec.mm_issue, at), rec.start);
    charge_gap(at, mm, mm_wait);
    at = mm;
    inner.kind = CauseKind::ProgramOrder;
  }
  charge_gap(at, rec.start, inner);
  es.split.work += since(since(rec.end, rec.start), rec.throttled);
  es.split.throttled += rec.throttled;
  last_end_ = later(last_end_, rec.end);
  es.last_end = last_end_;
}

void Sequencer::complete(uint32_t index, InstructionRecord& rec, const Cause& wait, const Cause& mm_wait,
                         const isa::Latched* latched) {
  const auto& inst = stream_[index];
  if (top_.state) {
    try {
      if (latched)
        isa::execute_latched(inst, *latched, core_, top_.program, top_.limits, *top_.state);
      else
        isa::execute(inst, core_, top_.program, top_.limits, *top_.state);
    } catch (const RuleError& e) {
      rethrow_rule(e, index);
    }
  }
  if (rec.complete < rec.end) rec.complete = rec.end;
  top_.semaphores->post_updates(core_, inst, rec.complete, {core_, engine_, index});
  auto& cs = top_.stats.cores[core_];
  auto& es = cs.engines[static_cast<int>(engine_)];
  ++es.instructions;
  es.busy += since(rec.end, rec.start);
  if (engine_ == isa::Engine::PE) {
    cs.pe_ls_busy += since(rec.ls_end, rec.ls_start);
    cs.pe_flops += rec.work.flops;
  }
  charge(rec, wait, mm_wait);
  if (top_.options.observer) top_.options.observer->on_instruction(rec);
  top_.count_completion(rec.complete);
}

void Sequencer::pe_complete() {
  uint32_t index = 0;
  try {
    const Picoseconds now = now_ps();
    while (!pe_pending_.empty() && pe_pending_.front().rec.end <= now) {
      // Completed in place (a copy out of the queue moved its ~300 bytes for each instruction).
      PePending& p = pe_pending_.front();
      index = p.index;
      if (p.latched.bytes.empty()) {
        complete(p.index, p.rec, p.wait, p.mm_wait);
      } else {
        complete(p.index, p.rec, p.wait, p.mm_wait, &p.latched);
        p.latched.bytes.clear();
      }
      pe_pending_.pop_front();
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
    if (isa::is_dma(inst.op))
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
      complete(static_cast<uint32_t>(idx_), cur_, fetch_cause_, fetch_cause_);
      ++idx_;
      break;
    case Phase::Trigger:
      enqueue_dma(now);
      ++idx_;
      break;
    case Phase::PeMoveOn:
      ++idx_;
      break;
    case Phase::PeMmWait:
      if (!issue_mm(now)) return false;
      break;
    case Phase::BarrierWait: {
      if (!barrier_reached()) {
        return false;  // woken by `wake` (static sensitivity)
      }
      top_.stats.cores[core_].engines[static_cast<int>(engine_)].semaphore_wait +=
          since(now, cur_.issue);  // the barrier wait
      const auto b = static_cast<uint16_t>(top_.hw.sync.barrier_semaphore());
      if (const SemaphoreSource* src = top_.semaphores->last_source(core_, b))
        cur_.cause = {CauseKind::Semaphore, src->node(), b};
      cur_.start = cur_.end = cur_.ls_start = cur_.ls_end = now;
      complete(static_cast<uint32_t>(idx_), cur_, fetch_cause_, fetch_cause_);
      ++idx_;
      break;
    }
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
    prev_reached_ = idx_ == 0 ? now : wait_start_;
    wait_start_ = now;
    blocked_sem_ = -1;
  }
  bool ok;
  try {
    ok = waits_ok(inst.waits);
  } catch (const RuleError& e) {
    rethrow_rule(e, index);
  }
  if (!ok) {
    return false;  // woken by `wake` (static sensitivity)
  }
  waiting_ = false;
  // The next instructions are read at later activations: start loading them from memory now (a large
  // program's streams do not fit in the caches, and the sequencers take turns). The fields before the
  // operands two ahead (without reading it), the operand slots the next one uses (its nops is loaded by now).
  if (idx_ + 2 < stream_.size()) prefetch(&stream_[idx_ + 2], stream_[idx_ + 2].ops.data());
  if (idx_ + 1 < stream_.size()) {
    const isa::Instruction& n = stream_[idx_ + 1];
    prefetch(n.ops.data(), n.ops.data() + std::min<size_t>(n.nops, n.ops.size()));
  }
  top_.stats.cores[core_].engines[static_cast<int>(engine_)].semaphore_wait += since(now, wait_start_);
  fetch_cause_ = wait_cause(wait_start_, now);
  const bool dma = isa::is_dma(inst.op);
  try {
    top_.cost.check_features(inst);
    if (!prechecked_) isa::check(inst, top_.program, top_.limits);
    if (dma) {
      if (inst.dma_queue >= top_.hw.dma.queues_per_core)
        throw RuleError("dma_queue " + std::to_string(inst.dma_queue) + " out of range (the core has " +
                        std::to_string(top_.hw.dma.queues_per_core) + " queues)");
      if (inst.dge == isa::DgeMode::Hwdge && engine_ != isa::Engine::SP && engine_ != isa::Engine::ACT)
        throw RuleError(std::string("dge_mode hwdge: a hardware DGE block is commanded by SP or ACT, not ") +
                        isa::engine_name(engine_));
      if (inst.dge == isa::DgeMode::Swdge && engine_ != isa::Engine::POOL)
        throw RuleError(std::string("dge_mode swdge: software DGE runs on GpSimd (POOL), not ") +
                        isa::engine_name(engine_));
      cost_ = timing::EngineCost{};
    } else {
      // Built in place: copied from a temporary, its fields were read back 16 bytes at a time across the
      // callee's 8-byte stores (a store-forwarding stall).
      ::new (&cost_) timing::EngineCost(top_.cost.engine_cost(inst));
    }
  } catch (const RuleError& e) {
    rethrow_rule(e, index);
  }
  // Every field is set here, one store each: a zeroed record copied over (a 216-byte clear, then stores
  // the loads right after could not take) made this the sequencer's costliest step.
  static_assert(sizeof(InstructionRecord) == 216, "a field added to InstructionRecord: set it here");
  InstructionRecord& r = cur_;
  r.core = core_;
  r.engine = engine_;
  r.index = index;
  r.inst = &inst;
  r.wait_start = wait_start_;
  r.issue = r.mm_issue = r.start = r.ls_start = r.ls_end = now;
  r.end = r.complete = r.throttled = r.dge_start = r.dge_end = Picoseconds();
  r.cycles = cost_.cycles.count();
  r.ls_cycles = cost_.ls_cycles.count();
  r.perf_mode = cost_.perf_mode;
  r.throttle_cap = 1;
  r.cause = fetch_cause_;
  r.wait_cause = fetch_cause_;
  r.work = isa::Work{};
  // (A DMA's work is computed when its transfer is queued: enqueue_dma.)
  if ((top_.options.observer || engine_ == isa::Engine::PE) && !dma) {
    if (top_.observed.work_bytes)
      ::new (&r.work) isa::Work(isa::work_of(inst, top_.program));  // in place, as cost_
    else
      r.work.flops = isa::flops_of(inst);
  }
  return true;
}

bool Sequencer::issue_dma_trigger(Picoseconds now) {
  const auto& inst = stream_[idx_];
  const auto& dma = top_.hw.dma;
  Picoseconds start = now;
  Picoseconds seq = trigger_ps_;
  Picoseconds dge_start = now, dge_end = now;
  if (inst.dge == isa::DgeMode::Hwdge && dma.hwdge_instruction_ns > 0) {
    Lnc2::DgeBlock& block = top_.dge_block(core_, engine_);
    // The block takes the instruction when it is free and the instruction is known: when its sequencer
    // reaches it, or from ACT (dma.hwdge_act_lookahead) when ACT reached the instruction before it, so
    // that the descriptors are generated while ACT's earlier work runs.
    const bool ahead = engine_ == isa::Engine::ACT && dma.hwdge_act_lookahead;
    dge_start = later(ahead ? prev_reached_ : now, block.free);
    if (dge_start > now) {
      start = dge_start;
      cur_.cause = {CauseKind::DgeBusy, block.last, 0};
    }
    dge_end = timing::end_after(dge_start, hwdge_ps_, top_.limit, "its DGE descriptor generation would end");
    block.free = dge_end;
    block.last = {static_cast<int8_t>(core_), engine_, Part::Instruction, static_cast<uint32_t>(idx_)};
  } else if (inst.dge == isa::DgeMode::Swdge) {
    seq = swdge_ps_;  // GpSimd generates the descriptors
  } else if (inst.dge == isa::DgeMode::None) {
    seq += precomputed_ps_;  // the sequencer issues precomputed descriptors
  }
  cur_.start = cur_.ls_start = cur_.ls_end = start;
  cur_.end = timing::end_after(start, seq, top_.limit, "its DMA trigger would end");
  cur_.dge_start = std::min(dge_start, start);
  cur_.dge_end = later(cur_.end, dge_end);
  dma_enqueue_ = cur_.dge_end;
  phase_ = Phase::Trigger;
  tick_.notify(to_sc(since(cur_.end, now)));
  return false;
}

void Sequencer::enqueue_dma(Picoseconds now) {
  const auto& inst = stream_[idx_];
  auto& cs = top_.stats.cores[core_];
  auto& es = cs.engines[static_cast<int>(engine_)];
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
  r.enqueue = later(now, dma_enqueue_);
  ++es.instructions;
  es.busy += since(cur_.end, cur_.start);
  ++cs.dma_triggers;
  charge(cur_, fetch_cause_, fetch_cause_);
  if (top_.options.observer) {
    cur_.work = work;
    top_.options.observer->on_instruction(cur_);
  }
  top_.dma->enqueue(r, cost, work);
}

bool Sequencer::barrier_reached() {
  const auto b = static_cast<uint16_t>(top_.hw.sync.barrier_semaphore());
  if (top_.semaphores->value(core_, b) >= barrier_target_) return true;
  top_.semaphores->wait_for(core_, b, barrier_target_, wake);
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
    return false;  // woken by `wake` (static sensitivity)
  }
  cur_.end = now;
  complete(index, cur_, fetch_cause_, fetch_cause_);
  phase_ = Phase::Fetch;
  ++idx_;
  return true;
}

bool Sequencer::issue_pe(Picoseconds now, const timing::EngineCost& c) {
  const auto& inst = stream_[idx_];
  prev_mm_end_ = pe_->last_mm_end();
  ls_ = pe_->load_stationary(now, c.ls_cycles);
  cur_.ls_start = ls_.start;
  cur_.ls_end = ls_.end;
  latched_ = {};
  if (!inst.ls_updates.empty()) {
    top_.semaphores->post(core_, inst.ls_updates, ls_.end,
                          {core_, engine_, static_cast<uint32_t>(idx_), Part::LoadStationary});
    if (top_.state) {
      try {
        latched_ = isa::latch_stationary(inst, core_, top_.program, top_.limits, *top_.state);
      } catch (const RuleError& e) {
        rethrow_rule(e, static_cast<uint32_t>(idx_));
      }
    }
  }
  blocked_sem_ = -1;
  wait_start_ = now;
  return issue_mm(now);
}

bool Sequencer::issue_mm(Picoseconds now) {
  const auto& inst = stream_[idx_];
  if (!inst.mm_waits.empty()) {
    bool ok;
    try {
      ok = waits_ok(inst.mm_waits);
    } catch (const RuleError& e) {
      rethrow_rule(e, static_cast<uint32_t>(idx_));
    }
    if (!ok) {
      phase_ = Phase::PeMmWait;
      return false;  // woken by `wake` (static sensitivity)
    }
    top_.stats.cores[core_].engines[static_cast<int>(engine_)].semaphore_wait += since(now, wait_start_);
  }
  const Cause mm_cause = wait_cause(wait_start_, now);
  cur_.mm_issue = now;
  Picoseconds mm_earliest = later(now, ls_.end);
  if (memory_timed_) [[unlikely]]
    mm_earliest = timing::end_after(mm_earliest, memory_delay(), top_.limit, "its memory access would end");
  const timing::PePipeline::Multiply m =
      pe_->multiply_moving(mm_earliest, cost_.cycles, cost_.array_utilization);
  const Picoseconds dur = since(m.end, m.start);
  cur_.throttle_cap = m.throttle_cap;
  cur_.throttled = since(dur, m.full_rate);
  top_.stats.cores[core_].pe_throttled += cur_.throttled;
  if (top_.observed.counters && dur != m.full_rate)
    top_.options.observer->on_counter(core_, "pe_throttle_cap", m.start, cur_.throttle_cap);
  cur_.start = m.start;
  cur_.end = m.end;
  // What set the MultiplyMoving's start: the previous MultiplyMoving, its own waits, or its LoadStationary
  // (whose start was set by its waits or by the previous instruction in the pipeline).
  const NodeRef prev{static_cast<int8_t>(core_), engine_, Part::Instruction, static_cast<uint32_t>(idx_ - 1)};
  if (idx_ > 0 && prev_mm_end_ >= later(now, ls_.end) && prev_mm_end_ > cur_.issue)
    cur_.cause = {CauseKind::ProgramOrder, prev, 0};
  else if (now > cur_.issue && now >= ls_.end)
    cur_.cause = mm_cause;
  else if (idx_ > 0 && ls_.start > cur_.issue)
    cur_.cause = {CauseKind::ProgramOrder, prev, 0};
  else
    cur_.cause = fetch_cause_;
  // MultiplyMoving ends are in issue order: while an earlier one is pending, pe_done_ is notified at or
  // before this end (pe_complete notifies it again for the next), and a later notification would be ignored.
  const bool notified = !pe_pending_.empty() && pe_pending_.front().rec.end <= cur_.end;
  pe_pending_.push_back({static_cast<uint32_t>(idx_), cur_, std::move(latched_), fetch_cause_, mm_cause});
  if (!notified) pe_done_.notify(to_sc(since(cur_.end, now)));
  const Picoseconds move_on = pe_->next_issue();
  if (move_on > now) {
    phase_ = Phase::PeMoveOn;
    tick_.notify(to_sc(since(move_on, now)));
    return false;
  }
  phase_ = Phase::Fetch;
  ++idx_;
  return true;
}

bool Sequencer::issue_compute(Picoseconds now, const timing::EngineCost& c) {
  Picoseconds start = now;
  if (memory_timed_) [[unlikely]]
    start = timing::end_after(now, memory_delay(), top_.limit, "its memory access would end");
  cur_.end = timing::end_after(start, clock_, c.cycles, top_.limit, "its execution would end");
  // The engine takes the next instruction at `end`; its results land after the pipeline behind it.
  cur_.complete = timing::end_after(cur_.end, completion_ps_, top_.limit, "its results would be posted");
  if (cur_.end == now) {
    complete(static_cast<uint32_t>(idx_), cur_, fetch_cause_, fetch_cause_);
    ++idx_;
    return true;
  }
  phase_ = Phase::Busy;
  tick_.notify(to_sc(since(cur_.end, now)));
  return false;
}

Picoseconds Sequencer::memory_delay() {
  const auto& inst = stream_[idx_];
  const auto& timed = top_.onchip_timed[core_];
  Picoseconds d;
  try {
    if (timed[0])
      d += memory::access_delay(sbuf, isa::MemSpace::SBUF, inst, core_, core_,
                                top_.limits.sbuf_bytes_per_partition, memory_access_);
    if (timed[1])
      d += memory::access_delay(psum, isa::MemSpace::PSUM, inst, core_, core_,
                                top_.limits.psum_bytes_per_partition, memory_access_);
  } catch (const InputError& e) {
    throw InputError(context(static_cast<uint32_t>(idx_)) + ": " + e.what());
  }
  return d;
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
  const auto& waits = phase_ == Phase::PeMmWait ? inst.mm_waits : inst.waits;
  for (const auto& w : waits) {
    if (w.sem < sems.count() && sems.value(core_, w.sem) < static_cast<int64_t>(w.value))
      return s + (phase_ == Phase::PeMmWait ? " (its MultiplyMoving)" : "") + " waits for S[" +
             std::to_string(w.sem) + "] >= " + std::to_string(w.value) + " (now " +
             std::to_string(sems.value(core_, w.sem)) + ")";
  }
  return s + " is pending";
}

}  // namespace trnsim::model
