#include "sim/timing/dma_queues.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace trnsim::timing {
namespace {

// Resources of the bandwidth sharing: 0 and 1 the cores' DMA engines, 2 the HBM stack.
constexpr int kHbm = 2;

}  // namespace

DmaQueues::DmaQueues(const config::HwConfig& hw, Picoseconds limit)
    : limit_(limit),
      share_({hw.dma.engines_per_core * hw.dma.engine_bandwidth_GBps / 1000.0,
              hw.dma.engines_per_core * hw.dma.engine_bandwidth_GBps / 1000.0,
              hw.hbm.bandwidth_GBps / 1000.0}) {
  for (auto& q : queues_) q.resize(hw.dma.queues_per_core);
  for (auto& n : nonempty_) n.assign((hw.dma.queues_per_core + 63) / 64, 0);
  next_ = kNever;
}

void DmaQueues::set_hbm_bandwidth(double GBps) {
  share_.set_capacity(kHbm, GBps / 1000.0);
}

void DmaQueues::mark(int core, size_t qi, bool nonempty) {
  const uint64_t bit = uint64_t{1} << (qi % 64);
  uint64_t& word = nonempty_[core][qi / 64];
  word = nonempty ? word | bit : word & ~bit;
}

Picoseconds DmaQueues::enqueue(const DmaTransfer& t, Picoseconds now) {
  auto& hq = queues_.at(t.core).at(t.queue);
  auto& q = hq.q;
  Picoseconds ready;
  try {
    ready = end_after(now, t.cost.setup, limit_, "its DMA setup would end");
  } catch (const TimeLimitError& e) {
    throw TimeLimitError("its DMA setup would end", e.at_ps(), limit_, t.tag);
  }
  q.push_back({t.tag, t.cost.queue_engines, t.cost.bytes, t.cost.hbm_bytes, t.hbm_bytes_read,
               t.hbm_bytes_written, t.cost.efficiency, t.cost.queue_rate_cap_GBps, t.cost.latency, ready,
               Picoseconds(), Picoseconds(), Picoseconds(), 0, false, false});
  ++in_flight_;
  if (q.size() == 1) {
    mark(t.core, t.queue, true);
    hq.next = kNever;
  }
  // It may move at `ready` unless a transfer ahead holds one of its engines (advance() looks again when that
  // one moves on).
  bool free = true;
  for (size_t i = 0; i + 1 < q.size() && free; ++i)
    free = q[i].moved || (q[i].engines & t.cost.queue_engines) == 0;
  if (free) {
    hq.next = std::min(hq.next, ready);
    next_ = std::min(next_, ready);
  }
  return ready;
}

void DmaQueues::moved(Queue& q, Queued& x, Picoseconds now) {
  Picoseconds land = now;
  if (x.latency.count() > 0) {
    try {
      land = std::max(land, end_after(x.data_start, x.latency, limit_, "its last byte would land"));
    } catch (const TimeLimitError& e) {
      throw TimeLimitError("its last byte would land", e.at_ps(), limit_, x.tag);
    }
  }
  if (x.engines == ~uint64_t{0}) {
    land = std::max(land, q.max_land);
    q.all_land = land;
  } else {
    land = std::max(land, q.all_land);
    for (uint64_t e = x.engines; e != 0; e &= e - 1) land = std::max(land, q.last_land[std::countr_zero(e)]);
    for (uint64_t e = x.engines; e != 0; e &= e - 1) q.last_land[std::countr_zero(e)] = land;
  }
  q.max_land = std::max(q.max_land, land);
  x.released = now;
  x.land = land;
  x.moved = true;
}

void DmaQueues::land(Queue& q, Picoseconds now) {
  // Past the point where the transfers still holding or waiting for the queue cover every engine, nothing
  // has moved.
  uint64_t held = 0;
  for (auto it = q.q.begin(); it != q.q.end() && held != ~uint64_t{0};) {
    if (!it->moved) {
      held |= it->engines;
      ++it;
    } else if (it->land <= now) {
      finished_.push_back({it->tag, it->ready, it->data_start, it->land, it->released, it->queued_behind});
      it = q.q.erase(it);
      --in_flight_;
    } else {
      ++it;
    }
  }
}

const std::vector<DmaQueues::Finished>& DmaQueues::advance(Picoseconds now) {
  finished_.clear();
  const double nowd = static_cast<double>(now.count());
  for (uint64_t id : share_.take_finished(nowd)) {
    // A moving flow is the moving transfer of exactly one queue.
    const auto m =
        std::find_if(moving_.begin(), moving_.end(), [id](const Moving& x) { return x.flow == id; });
    if (m == moving_.end()) continue;
    Queue& q = queues_[m->core][m->queue];
    const auto x =
        std::find_if(q.q.begin(), q.q.end(), [id](const Queued& y) { return y.flow == id && !y.moved; });
    moved(q, *x, now);
    land(q, now);
    if (q.q.empty()) mark(m->core, m->queue, false);
    q.next = Picoseconds();  // transfers behind it may start now
    moving_.erase(m);
  }
  next_ = kNever;
  for (int core = 0; core < 2; ++core) {
    const auto& words = nonempty_[core];
    for (size_t w = 0; w < words.size(); ++w) {
      // The queues that hold transfers, in queue order (a queue emptied below is not visited again).
      for (uint64_t bits = words[w]; bits != 0; bits &= bits - 1) {
        const size_t qi = w * 64 + static_cast<size_t>(std::countr_zero(bits));
        Queue& hq = queues_[core][qi];
        if (hq.next > now) {  // nothing lands or may start here yet
          next_ = std::min(next_, hq.next);
          continue;
        }
        auto& q = hq.q;
        land(hq, now);
        // Start every ready transfer no transfer ahead of it holds back (one that shares an engine and has
        // not moved on), in queue order; note the next readiness and landing.
        uint64_t held = 0;
        Picoseconds next = kNever;
        bool landed = false;  // a zero-byte transfer moved past the queue (and may land now)
        for (size_t i = 0; i < q.size() && held != ~uint64_t{0}; ++i) {
          Queued& x = q[i];
          if (!x.moved && x.flow == 0 && (x.engines & held) == 0 && x.ready <= now) {
            x.data_start = now;
            x.queued_behind = x.ready < now;  // ready before: a transfer ahead of it held it back
            if (x.bytes == 0) {
              moved(hq, x, now);
              landed = true;
            } else {
              BandwidthSharing::Uses uses{{core, 1.0 / x.efficiency}};
              if (x.hbm_bytes > 0)
                uses.push_back({kHbm, static_cast<double>(x.hbm_bytes) / static_cast<double>(x.bytes)});
              x.flow = share_.add(static_cast<double>(x.bytes), x.rate_cap_GBps / 1000.0, uses, nowd);
              moving_.push_back({x.flow, core, static_cast<uint32_t>(qi)});
            }
          }
          if (x.moved) {
            if (x.land > now && x.land < next) next = x.land;
            continue;
          }
          if (x.flow == 0 && (x.engines & held) == 0 && x.ready < next) next = x.ready;
          held |= x.engines;
        }
        // Starting a transfer moves nothing past the queue: only a zero-byte one can land now.
        if (landed) land(hq, now);
        if (q.empty()) mark(core, qi, false);
        hq.next = next;
        next_ = std::min(next_, next);
      }
    }
  }
  return finished_;
}

std::optional<Picoseconds> DmaQueues::next_event(Picoseconds now) const {
  uint64_t next = next_.count();
  const double f = share_.next_finish();
  if (f >= 0) {
    if (!(f < static_cast<double>(limit_.count()))) {
      // Name the moving transfer that finishes first (rates only change when a transfer starts or ends).
      const Queued* first = nullptr;
      double first_end = 0;
      for (const auto& core_queues : queues_)
        for (const auto& hq : core_queues) {
          for (const Queued& x : hq.q) {
            if (x.flow == 0 || x.moved) continue;
            const double e = share_.finish_time(x.flow);
            if (e >= 0 && (!first || e < first_end)) first = &x, first_end = e;
          }
        }
      throw TimeLimitError("its data transfer would end", f, limit_, first ? first->tag : 0);
    }
    next = std::min<uint64_t>(next, static_cast<uint64_t>(std::ceil(f - 1e-6)));
  }
  if (next == std::numeric_limits<uint64_t>::max()) return std::nullopt;
  // A finish within a ps of now (rounding) is taken one ps later, never at now again.
  if (next <= now.count()) next = now.count() + 1;
  return Picoseconds(next);
}

double DmaQueues::hbm_GBps() const {
  return share_.load(kHbm) * 1000.0;
}

std::array<std::array<double, 2>, 2> DmaQueues::hbm_rw_GBps() const {
  std::array<std::array<double, 2>, 2> rw{};
  for (int core = 0; core < 2; ++core)
    for (size_t w = 0; w < nonempty_[core].size(); ++w)
      for (uint64_t bits = nonempty_[core][w]; bits != 0; bits &= bits - 1) {
        const auto& hq = queues_[core][w * 64 + static_cast<size_t>(std::countr_zero(bits))];
        for (const Queued& x : hq.q) {
          if (x.flow == 0 || x.moved) continue;
          const double per_byte = share_.rate(x.flow) * 1000.0 / static_cast<double>(x.bytes);
          rw[core][0] += per_byte * static_cast<double>(x.hbm_bytes_read);
          rw[core][1] += per_byte * static_cast<double>(x.hbm_bytes_written);
        }
      }
  return rw;
}

}  // namespace trnsim::timing
