#include "sim/model/lnc2.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "sim/base/error.h"

namespace trnsim::model {

using sc_core::sc_module_name;

namespace {

std::string fmt_ns(Picoseconds t) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f", t.ns());
  return buf;
}

Picoseconds later(Picoseconds a, Picoseconds b) {
  return a < b ? b : a;
}

}  // namespace

// ---------------------------------------------------------------- Sequencer

Sequencer::Sequencer(sc_module_name name, Lnc2& top, int core, isa::Engine engine)
    : sc_module(name),
      top_(top),
      core_(core),
      engine_(engine),
      stream_(top.program.streams[core][static_cast<int>(engine)]),
      clock_(top.hw.clock(engine)) {
  if (engine == isa::Engine::PE) throttle_ = std::make_unique<timing::PeThrottle>(top.hw.pe);
  SC_METHOD(step);
  if (engine == isa::Engine::PE) {
    SC_METHOD(pe_complete);
    sensitive << pe_done_;
    dont_initialize();
  }
}

void Sequencer::step() {
  try {
    if (!launched_) {  // no instruction issues before the kernel launch overhead has passed
      launched_ = true;
      if (top_.hw.sync.kernel_launch_ns > 0) {
        next_trigger(to_sc(timing::ns_to_ps(top_.hw.sync.kernel_launch_ns)));
        return;
      }
    }
    run();
  } catch (...) {
    top_.fail(std::current_exception());
  }
}

void Sequencer::rethrow_rule(const std::exception& e, const isa::Instruction& inst, uint32_t index) const {
  throw RuleError("at " + fmt_ns(now_ps()) + " ns, " + top_.where(inst) + ": core " + std::to_string(core_) +
                  " " + isa::engine_name(engine_) + " #" + std::to_string(index) + " " +
                  isa::opcode_name(inst.op) + ": " + e.what());
}

bool Sequencer::waits_ok(const isa::Instruction& inst) {
  auto& sems = top_.sems[core_];
  for (const auto& w : inst.waits) {
    if (w.sem >= sems.value.size())
      throw RuleError("waits on S[" + std::to_string(w.sem) + "], but the core has " +
                      std::to_string(sems.value.size()) + " semaphores");
    if (sems.value[w.sem] < static_cast<int64_t>(w.value)) {
      sems.waiters[w.sem].push_back(this);
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
      rethrow_rule(e, inst, index);
    }
  }
  top_.post_updates(core_, inst, rec.end, top_.hw.sync.semaphore_latency_ns, {core_, engine_, index});
  auto& cs = top_.stats.cores[core_];
  auto& es = cs.engines[static_cast<int>(engine_)];
  ++es.instructions;
  es.busy += Picoseconds(rec.end.count() - rec.start.count());
  if (engine_ == isa::Engine::PE) {
    cs.pe_ls_busy += Picoseconds(rec.ls_end.count() - rec.ls_start.count());
    cs.pe_flops += rec.work.flops;
  }
  if (top_.options.observer) top_.options.observer->on_instruction(rec);
  top_.count_completion(rec.end);
}

void Sequencer::pe_complete() {
  try {
    const Picoseconds now = now_ps();
    while (!pe_pending_.empty() && pe_pending_.front().rec.end <= now) {
      PePending p = std::move(pe_pending_.front());
      pe_pending_.pop_front();
      complete(p.index, p.rec);
    }
    if (!pe_pending_.empty())
      pe_done_.notify(to_sc(Picoseconds(pe_pending_.front().rec.end.count() - now.count())));
  } catch (...) {
    top_.fail(std::current_exception());
  }
}

void Sequencer::run() {
  const Picoseconds now = now_ps();
  const uint32_t barrier_sem = top_.hw.sync.barrier_semaphore();
  auto& cs = top_.stats.cores[core_];
  auto& es = cs.engines[static_cast<int>(engine_)];

  switch (phase_) {
    case Phase::Busy:
      complete(static_cast<uint32_t>(idx_), cur_);
      ++idx_;
      break;
    case Phase::Trigger: {
      const auto& inst = stream_[idx_];
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
      es.busy += Picoseconds(now.count() - cur_.start.count());
      ++cs.dma_triggers;
      if (top_.options.observer) {
        cur_.work = work;
        top_.options.observer->on_instruction(cur_);
      }
      top_.dma->enqueue(r, cost, work);
      ++idx_;
      break;
    }
    case Phase::PeMoveOn:
      ++idx_;
      break;
    case Phase::BarrierWait:
      if (top_.sems[core_].value[barrier_sem] < barrier_target_) {
        top_.sems[core_].waiters[barrier_sem].push_back(this);
        next_trigger(wake);
        return;
      }
      es.semaphore_wait += Picoseconds(now.count() - cur_.issue.count());  // the barrier wait
      cur_.start = cur_.end = cur_.ls_start = cur_.ls_end = now;
      complete(static_cast<uint32_t>(idx_), cur_);
      ++idx_;
      break;
    case Phase::Fetch:
      break;
  }
  phase_ = Phase::Fetch;

  while (idx_ < stream_.size()) {
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
      rethrow_rule(e, inst, index);
    }
    if (!ok) {
      next_trigger(wake);
      return;
    }
    waiting_ = false;
    es.semaphore_wait += Picoseconds(now.count() - wait_start_.count());
    timing::EngineCost c;
    try {
      top_.cost.check_features(inst);
      isa::check(inst, top_.program, top_.limits);
      if (inst.is_dma() && inst.dma_queue >= top_.hw.dma.queues_per_core)
        throw RuleError("dma_queue " + std::to_string(inst.dma_queue) + " out of range (the core has " +
                        std::to_string(top_.hw.dma.queues_per_core) + " queues)");
      if (!inst.is_dma()) c = top_.cost.engine_cost(inst);
    } catch (const RuleError& e) {
      rethrow_rule(e, inst, index);
    }

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

    if (inst.is_dma()) {
      phase_ = Phase::Trigger;
      next_trigger(to_sc(timing::ns_to_ps(top_.hw.dma.trigger_ns)));
      return;
    }

    if (inst.op == isa::Opcode::CoreBarrier) {
      // Signal the peer's barrier semaphore, then wait for ours (see run.h).
      if (top_.program.num_cores > 1)
        top_.signal(1 - core_, static_cast<uint16_t>(barrier_sem), 1,
                    now + timing::ns_to_ps(top_.hw.sync.cross_core_latency_ns), {core_, engine_, index});
      barrier_target_ = top_.program.num_cores > 1 ? ++top_.barriers_issued[core_] : 0;
      phase_ = Phase::BarrierWait;
      if (top_.sems[core_].value[barrier_sem] < barrier_target_) {
        top_.sems[core_].waiters[barrier_sem].push_back(this);
        next_trigger(wake);
        return;
      }
      cur_.end = now;
      complete(index, cur_);
      phase_ = Phase::Fetch;
      ++idx_;
      continue;
    }

    if (engine_ == isa::Engine::PE) {
      // LoadStationary may run in the background of the previous MultiplyMoving (reference §2.1).
      const auto& pe = top_.hw.pe;
      Picoseconds ls_start = later(now, ls_free_);
      ls_start = later(ls_start, pe.ls_overlap ? mm_start_prev_ : mm_end_prev_);
      Picoseconds ls_end = ls_start + clock_.to_time(c.ls_cycles);
      Picoseconds mm_start = later(ls_end, mm_end_prev_);
      Picoseconds full = clock_.to_time(c.cycles);
      Picoseconds dur = throttle_->run(mm_start, full);
      cur_.throttle_cap = throttle_->cap_at(mm_start);
      cs.pe_throttled += Picoseconds(dur.count() - full.count());
      if (top_.options.observer && dur != full)
        top_.options.observer->on_counter(core_, "pe_throttle_cap", mm_start, cur_.throttle_cap);
      cur_.ls_start = ls_start;
      cur_.ls_end = ls_end;
      cur_.start = mm_start;
      cur_.end = mm_start + dur;
      ls_free_ = ls_end;
      mm_start_prev_ = mm_start;
      mm_end_prev_ = cur_.end;
      pe_pending_.push_back({index, cur_});
      pe_done_.notify(to_sc(Picoseconds(cur_.end.count() - now.count())));
      Picoseconds move_on = pe.ls_overlap ? mm_start : cur_.end;
      if (move_on > now) {
        phase_ = Phase::PeMoveOn;
        next_trigger(to_sc(Picoseconds(move_on.count() - now.count())));
        return;
      }
      ++idx_;
      continue;
    }

    Picoseconds dur = clock_.to_time(c.cycles);
    cur_.end = now + dur;
    if (dur.count() == 0) {
      complete(index, cur_);
      ++idx_;
      continue;
    }
    phase_ = Phase::Busy;
    next_trigger(to_sc(dur));
    return;
  }
}

std::string Sequencer::blocked_description() const {
  std::string who = "core " + std::to_string(core_) + " " + isa::engine_name(engine_);
  if (idx_ >= stream_.size()) return who + ": finished";
  const auto& inst = stream_[idx_];
  std::string s = who + ": instruction #" + std::to_string(idx_) + " (" + isa::opcode_name(inst.op) + ", " +
                  top_.where(inst) + ")";
  const auto& sems = top_.sems[core_];
  if (phase_ == Phase::BarrierWait) {
    uint32_t b = top_.hw.sync.barrier_semaphore();
    return s + " waits at core_barrier for S[" + std::to_string(b) +
           "] >= " + std::to_string(barrier_target_) + " (now " + std::to_string(sems.value[b]) +
           "; the peer core issued fewer core_barriers)";
  }
  for (const auto& w : inst.waits) {
    if (w.sem < sems.value.size() && sems.value[w.sem] < static_cast<int64_t>(w.value))
      return s + " waits for S[" + std::to_string(w.sem) + "] >= " + std::to_string(w.value) + " (now " +
             std::to_string(sems.value[w.sem]) + ")";
  }
  return s + " is pending";
}

// ---------------------------------------------------------------- DMA

DmaSystem::DmaSystem(sc_module_name name, Lnc2& top)
    : sc_module(name),
      top_(top),
      share_({top.hw.dma.engines_per_core * top.hw.dma.engine_bandwidth_GBps / 1000.0,
              top.hw.dma.engines_per_core * top.hw.dma.engine_bandwidth_GBps / 1000.0,
              top.hw.hbm.bandwidth_GBps / 1000.0}) {
  for (auto& q : queues_) q.resize(top.hw.dma.queues_per_core);
  SC_METHOD(update);
  sensitive << ev_;
  dont_initialize();
}

void DmaSystem::enqueue(const DmaRecord& rec, const timing::DmaCost& cost, const isa::Work& work) {
  auto t = std::make_unique<Transfer>();
  t->rec = rec;
  t->rec.bytes = cost.bytes;
  t->rec.hbm_bytes = cost.hbm_bytes;
  t->rec.engines = cost.engines;
  t->rec.efficiency = cost.efficiency;
  t->cost = cost;
  t->work = work;
  t->ready = rec.enqueue + cost.setup;
  queues_[rec.core][rec.queue].push_back(std::move(t));
  ev_.notify(to_sc(Picoseconds(cost.setup.count())));
}

void DmaSystem::finish(Transfer& t) {
  const Picoseconds now = now_ps();
  t.rec.data_end = now;
  t.rec.complete = now + t.cost.completion;
  const auto& inst = *t.rec.inst;
  if (top_.state) {
    try {
      isa::execute(inst, t.rec.core, top_.program, top_.limits, *top_.state);
    } catch (const RuleError& e) {
      throw RuleError("at " + fmt_ns(now) + " ns, " + top_.where(inst) + ": core " +
                      std::to_string(t.rec.core) + " " + isa::engine_name(t.rec.issuer) + " #" +
                      std::to_string(t.rec.index) + " " + isa::opcode_name(inst.op) + " (DMA queue " +
                      std::to_string(t.rec.queue) + "): " + e.what());
    }
  }
  top_.post_updates(t.rec.core, inst, now, top_.hw.sync.semaphore_latency_ns,
                    {t.rec.core, t.rec.issuer, t.rec.index});
  auto& cs = top_.stats.cores[t.rec.core];
  ++cs.dma_transfers;
  cs.dma_bytes += t.cost.bytes;
  cs.hbm_bytes_read += t.work.hbm_bytes_read;
  cs.hbm_bytes_written += t.work.hbm_bytes_written;
  if (top_.options.observer) top_.options.observer->on_dma(t.rec);
  top_.count_completion(t.rec.complete);
}

void DmaSystem::update() {
  try {
    const Picoseconds now = now_ps();
    const double nowd = static_cast<double>(now.count());
    for (uint64_t id : share_.take_finished(nowd)) {
      for (auto& core_queues : queues_)
        for (auto& q : core_queues)
          if (!q.empty() && q.front()->flow == id) {
            finish(*q.front());
            q.pop_front();
          }
    }
    uint64_t next = std::numeric_limits<uint64_t>::max();
    for (int core = 0; core < 2; ++core) {
      for (auto& q : queues_[core]) {
        while (!q.empty() && q.front()->flow == 0 && q.front()->ready <= now) {
          Transfer& t = *q.front();
          t.rec.data_start = now;
          if (t.cost.bytes == 0) {
            finish(t);
            q.pop_front();
            continue;
          }
          std::vector<timing::BandwidthSharing::Use> uses{{core, 1.0 / t.cost.efficiency}};
          if (t.cost.hbm_bytes > 0)
            uses.push_back({2, static_cast<double>(t.cost.hbm_bytes) / static_cast<double>(t.cost.bytes)});
          t.flow = share_.add(static_cast<double>(t.cost.bytes), t.cost.rate_cap_GBps / 1000.0,
                              std::move(uses), nowd);
        }
        if (!q.empty() && q.front()->flow == 0) next = std::min<uint64_t>(next, q.front()->ready.count());
      }
    }
    double f = share_.next_finish();
    if (f >= 0) next = std::min<uint64_t>(next, static_cast<uint64_t>(std::ceil(f - 1e-6)));
    if (next != std::numeric_limits<uint64_t>::max()) {
      if (next <= now.count()) next = now.count() + 1;
      ev_.notify(to_sc(Picoseconds(next - now.count())));
    }
    if (top_.options.observer) {
      double hbm = share_.load(2) * 1000.0;
      if (hbm != last_hbm_rate_) {
        top_.options.observer->on_counter(-1, "hbm_GBps", now, hbm);
        last_hbm_rate_ = hbm;
      }
      // HBM read / write rates of each core's moving transfers, split by their HBM read / write bytes.
      std::array<std::array<double, 2>, 2> rw{};
      for (int core = 0; core < 2; ++core)
        for (auto& q : queues_[core]) {
          if (q.empty() || q.front()->flow == 0) continue;
          const Transfer& t = *q.front();
          const double per_byte = share_.rate(t.flow) * 1000.0 / static_cast<double>(t.cost.bytes);
          rw[core][0] += per_byte * static_cast<double>(t.work.hbm_bytes_read);
          rw[core][1] += per_byte * static_cast<double>(t.work.hbm_bytes_written);
        }
      for (int core = 0; core < 2; ++core)
        for (int k = 0; k < 2; ++k)
          if (rw[core][k] != last_rw_rate_[core][k]) {
            top_.options.observer->on_counter(core, k == 0 ? "hbm_read_GBps" : "hbm_write_GBps", now,
                                              rw[core][k]);
            last_rw_rate_[core][k] = rw[core][k];
          }
    }
  } catch (...) {
    top_.fail(std::current_exception());
  }
}

// ---------------------------------------------------------------- semaphores with latency

SemaphoreDelay::SemaphoreDelay(sc_module_name name, Lnc2& top) : sc_module(name), top_(top) {
  SC_METHOD(update);
  sensitive << ev_;
  dont_initialize();
}

void SemaphoreDelay::post(int core, uint16_t sem, int32_t delta, Picoseconds at, const SemaphoreSource& src) {
  const uint64_t now = now_ps().count();
  q_.push({at.count(), seq_++, core, sem, delta, src});
  ev_.notify(to_sc(Picoseconds(at.count() - now)));
}

void SemaphoreDelay::update() {
  try {
    const uint64_t now = now_ps().count();
    while (!q_.empty() && q_.top().at <= now) {
      Pending p = q_.top();
      q_.pop();
      top_.apply_update(p.core, p.sem, p.delta, p.src);
    }
    if (!q_.empty()) ev_.notify(to_sc(Picoseconds(q_.top().at - now)));
  } catch (...) {
    top_.fail(std::current_exception());
  }
}

// ---------------------------------------------------------------- top

Lnc2::Lnc2(sc_module_name name, const isa::Program& prog, const config::HwConfig& hwc, const RunOptions& opts,
           isa::MachineState* st)
    : sc_module(name), program(prog), hw(hwc), options(opts), state(st), limits(hwc.limits()), cost(hwc) {
  for (auto& s : sems) s.reset(hw.sync.semaphores_per_core);
  for (int c = 0; c < 2; ++c)
    for (int e = 0; e < isa::kNumEngines; ++e) {
      total_instructions += program.streams[c][e].size();
      std::string n =
          std::string("core") + std::to_string(c) + "_" + isa::engine_name(static_cast<isa::Engine>(e));
      seq[c][e] = std::make_unique<Sequencer>(n.c_str(), *this, c, static_cast<isa::Engine>(e));
    }
  dma = std::make_unique<DmaSystem>("dma", *this);
  delay = std::make_unique<SemaphoreDelay>("semaphore_delay", *this);
}

std::string Lnc2::where(const isa::Instruction& inst) const {
  if (inst.loc.file == 0 || inst.loc.file >= program.files.size() || inst.loc.line == 0)
    return "unknown source";
  return program.files[inst.loc.file] + ":" + std::to_string(inst.loc.line);
}

void Lnc2::apply_update(int core, uint16_t sem, int32_t delta, const SemaphoreSource& src) {
  auto& s = sems[core];
  s.value[sem] += delta;
  if (options.observer) {
    options.observer->on_semaphore(core, sem, s.value[sem], now_ps());
    options.observer->on_semaphore_update(core, sem, s.value[sem] - delta, s.value[sem], now_ps(), src);
  }
  if (!s.waiters[sem].empty()) {
    std::vector<Sequencer*> w;
    w.swap(s.waiters[sem]);
    for (Sequencer* q : w) q->wake.notify();
  }
}

void Lnc2::signal(int core, uint16_t sem, int32_t delta, Picoseconds at, const SemaphoreSource& src) {
  if (sem >= sems[core].value.size())
    throw RuleError("semaphore update of S[" + std::to_string(sem) + "] out of range (the core has " +
                    std::to_string(sems[core].value.size()) + " semaphores)");
  if (at <= now_ps())
    apply_update(core, sem, delta, src);
  else
    delay->post(core, sem, delta, at, src);
}

void Lnc2::post_updates(int core, const isa::Instruction& inst, Picoseconds at, double same_core_ns,
                        const SemaphoreSource& src) {
  for (const auto& u : inst.updates) {
    int target = u.peer ? 1 - core : core;
    double lat = u.peer ? hw.sync.cross_core_latency_ns : same_core_ns;
    signal(target, u.sem, u.delta, at + timing::ns_to_ps(lat), src);
  }
}

void Lnc2::count_completion(Picoseconds t) {
  ++completed;
  if (last_completion < t) last_completion = t;
  if (options.progress && options.progress_every > 0 && completed % options.progress_every == 0)
    options.progress(t, completed, total_instructions);
}

void Lnc2::fail(std::exception_ptr e) {
  if (!error) error = e;
  sc_core::sc_stop();
}

}  // namespace trnsim::model
