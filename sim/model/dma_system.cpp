#include "sim/model/dma_system.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <limits>

#include "sim/base/error.h"
#include "sim/model/lnc2.h"
#include "sim/model/memory/hbm.h"
#include "sim/model/memory/onchip_memory.h"
#include "sim/model/sc_time.h"
#include "sim/model/semaphores.h"
#include "sim/timing/dma_queue_policy.h"

namespace trnsim::model {

DmaSystem::DmaSystem(sc_core::sc_module_name name, Lnc2& top)
    : sc_module(name), hbm("hbm"), top_(top), queues_(top.hw, top.limit) {
  for (auto& l : last_done_) l.assign(top.hw.dma.queues_per_core, {});
  SC_METHOD(update);
  sensitive << ev_;
  dont_initialize();
}

std::string DmaSystem::context(const DmaRecord& rec) const {
  char t[48];
  std::snprintf(t, sizeof t, "%.3f", now_ps().ns());
  const auto& inst = *rec.inst;
  return std::string("at ") + t + " ns, " + top_.where(inst) + ": core " + std::to_string(rec.core) + " " +
         isa::engine_name(rec.issuer) + " #" + std::to_string(rec.index) + " " + isa::opcode_name(inst.op) +
         " (DMA queue " + std::to_string(rec.queue) + ")";
}

void DmaSystem::start_of_simulation() {
  try {
    tlm::tlm_generic_payload t;
    auto* answer = new HbmBandwidth;
    t.set_extension(answer);  // the payload owns (frees) it
    t.set_command(tlm::TLM_IGNORE_COMMAND);
    sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
    hbm->b_transport(t, delay);
    if (t.is_response_error() || !(answer->GBps >= 0 && answer->GBps < 1e12))
      throw InputError(std::string("the HBM model (") + hbm.get_base_port().name() + ") answered " +
                       t.get_response_string() + " with a bandwidth of " + std::to_string(answer->GBps) +
                       " GB/s to the DMA system's bandwidth query");
    if (answer->GBps > 0) queues_.set_hbm_bandwidth(answer->GBps);
  } catch (...) {
    top_.fail(std::current_exception());
  }
}

Picoseconds DmaSystem::hbm_latency(const DmaRecord& rec, const timing::DmaCost& cost) {
  const auto& inst = *rec.inst;
  const isa::AccessPattern& a = inst.ops[1].space == isa::MemSpace::HBM ? inst.ops[1] : inst.ops[0];
  const HbmAddressMap& map = top_.hbm_map;
  const uint64_t base = a.tensor < map.tensors() ? map.base(a.tensor) : 0;
  tlm::tlm_generic_payload& t = hbm_access_;
  const Picoseconds delay = memory::timing_transaction(
      hbm, base + static_cast<uint64_t>(std::max<int64_t>(a.offset_bytes, 0)), cost.hbm_bytes, t);
  if (t.is_response_error())
    throw InputError(context(rec) + ": the HBM model (" + hbm.get_base_port().name() + ") answered " +
                     t.get_response_string() + " to the transfer's timing transaction");
  return delay;
}

Picoseconds DmaSystem::onchip_latency(const DmaRecord& rec) {
  Picoseconds d;
  try {
    // The issuing core's memories, then the peer's (a sendrecv's dst; no transaction for other transfers).
    for (const int c : {rec.core, 1 - rec.core}) {
      const auto& timed = top_.onchip_timed[c];
      if (timed[0])
        d += memory::access_delay(sbuf[c], isa::MemSpace::SBUF, *rec.inst, rec.core, c,
                                  top_.limits.sbuf_bytes_per_partition, onchip_access_);
      if (timed[1])
        d += memory::access_delay(psum[c], isa::MemSpace::PSUM, *rec.inst, rec.core, c,
                                  top_.limits.psum_bytes_per_partition, onchip_access_);
    }
  } catch (const InputError& e) {
    throw InputError(context(rec) + ": " + e.what());
  }
  return d;
}

void DmaSystem::enqueue(const DmaRecord& rec, const timing::DmaCost& dma_cost, const isa::Work& work) {
  timing::DmaCost cost = dma_cost;
  const auto& timed = top_.onchip_timed;
  const bool onchip = timed[0][0] || timed[0][1] || timed[1][0] || timed[1][1];
  if (cost.touches_hbm || onchip) {
    Picoseconds d = cost.touches_hbm ? hbm_latency(rec, cost) : Picoseconds();
    if (onchip) [[unlikely]]
      d += onchip_latency(rec);
    // setup <= 2^63 ps (timing::ns_to_ps); a sum beyond every time limit saturates there.
    constexpr uint64_t kCap = uint64_t{1} << 63;
    const uint64_t s = cost.setup.count();
    cost.setup = Picoseconds(s > kCap || d.count() > kCap - s ? kCap : s + d.count());
  }
  uint64_t tag;
  if (free_.empty()) {
    tag = transfers_.size();
    transfers_.emplace_back();
  } else {
    tag = free_.back();
    free_.pop_back();
  }
  Transfer& t = transfers_[tag];
  t.rec = rec;
  t.rec.bytes = cost.bytes;
  t.rec.hbm_bytes = cost.hbm_bytes;
  t.rec.engines = cost.engines;
  t.rec.efficiency = cost.transfer_efficiency;
  t.cost = cost;
  t.work = work;
  timing::DmaTransfer q;
  q.core = rec.core;
  q.queue = timing::hardware_queue(top_.hw.dma, static_cast<uint32_t>(rec.queue), rec.issuer);
  q.cost = cost;
  q.hbm_bytes_read = work.hbm_bytes_read;
  q.hbm_bytes_written = work.hbm_bytes_written;
  q.tag = tag;
  wake_at(queues_.enqueue(q, rec.enqueue), now_ps());
}

void DmaSystem::wake_at(Picoseconds at, Picoseconds now) {
  // A pending notification at or before `at` stands (SystemC would discard this one, after the call's cost).
  if (at.count() >= wake_at_) return;
  ev_.notify(to_sc(Picoseconds(at.count() - now.count())));
  wake_at_ = at.count();
}

void DmaSystem::finish(Transfer& t) {
  const auto& inst = *t.rec.inst;
  if (top_.state) {
    try {
      isa::execute(inst, t.rec.core, top_.program, top_.limits, *top_.state);
    } catch (const RuleError& e) {
      throw RuleError(context(t.rec) + ": " + e.what());
    }
  }
  top_.semaphores->post_updates(t.rec.core, inst, t.rec.data_end,
                                {t.rec.core, t.rec.issuer, t.rec.index, Part::Transfer, t.rec.queue});
  auto& cs = top_.stats.cores[t.rec.core];
  ++cs.dma_transfers;
  cs.dma_bytes += t.cost.bytes;
  cs.hbm_bytes_read += t.work.hbm_bytes_read;
  cs.hbm_bytes_written += t.work.hbm_bytes_written;
  if (top_.options.observer) top_.options.observer->on_dma(t.rec);
  top_.count_completion(t.rec.complete);
}

void DmaSystem::update() {
  const DmaRecord* current = nullptr;  // the transfer being finished, for error messages
  try {
    const Picoseconds now = now_ps();
    wake_at_ = kNoWake;  // ev_ fired
    for (const auto& f : queues_.advance(now)) {
      Transfer& t = transfers_[f.tag];
      current = &t.rec;
      t.rec.data_start = f.data_start;
      t.rec.data_end = f.data_end;
      t.rec.queue_release = f.released;
      auto& last = last_done_[t.rec.core][timing::hardware_queue(
          top_.hw.dma, static_cast<uint32_t>(t.rec.queue), t.rec.issuer)];
      const NodeRef self{static_cast<int8_t>(t.rec.core), t.rec.issuer, Part::Transfer, t.rec.index};
      // What held it back: of the transfers ahead of it on its engines, the last to let go of the queue.
      const uint64_t engines = ~t.cost.queue_engines == 0 ? 1 : t.cost.queue_engines;
      const Done* ahead = nullptr;
      for (uint64_t e = engines; e != 0; e &= e - 1) {
        const Done& d = last[std::countr_zero(e)];
        if (d.node.valid() && (ahead == nullptr || d.released > ahead->released)) ahead = &d;
      }
      t.rec.cause =
          f.queued_behind && ahead != nullptr
              ? Cause{CauseKind::QueueOrder, ahead->node, 0}
              : Cause{CauseKind::Trigger, {self.core, self.engine, Part::Instruction, self.index}, 0};
      for (uint64_t e = engines; e != 0; e &= e - 1) last[std::countr_zero(e)] = {self, f.released};
      t.rec.complete = timing::end_after(f.data_end, t.cost.completion, top_.limit,
                                         "its completion semaphore write would end");
      finish(t);
      free_.push_back(f.tag);
    }
    current = nullptr;
    if (auto next = queues_.next_event(now)) wake_at(*next, now);
    if (top_.observed.counters) {
      const double hbm = queues_.hbm_GBps();
      if (hbm != last_hbm_rate_) {
        top_.options.observer->on_counter(-1, "hbm_GBps", now, hbm);
        last_hbm_rate_ = hbm;
      }
      const auto rw = queues_.hbm_rw_GBps();
      for (int core = 0; core < 2; ++core)
        for (int k = 0; k < 2; ++k)
          if (rw[core][k] != last_rw_rate_[core][k]) {
            top_.options.observer->on_counter(core, k == 0 ? "hbm_read_GBps" : "hbm_write_GBps", now,
                                              rw[core][k]);
            last_rw_rate_[core][k] = rw[core][k];
          }
    }
  } catch (const timing::TimeLimitError& e) {
    const DmaRecord* r = current ? current : e.tag() < transfers_.size() ? &transfers_[e.tag()].rec : nullptr;
    top_.fail(std::make_exception_ptr(InputError((r ? context(*r) + ": " : std::string()) + e.what())));
  } catch (...) {
    top_.fail(std::current_exception());
  }
}

}  // namespace trnsim::model
