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
  next_ready_ = kNever;
  next_land_ = kNever;
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
  q.push_back({t.tag, t.cost.bytes, t.cost.hbm_bytes, t.hbm_bytes_read, t.hbm_bytes_written,
               t.cost.efficiency, t.cost.queue_rate_cap_GBps, t.cost.latency, ready, Picoseconds(),
               Picoseconds(), 0, false, false});
  ++in_flight_;
  if (q.size() == 1) mark(t.core, t.queue, true);
  if (q.size() == hq.next + 1 && ready < next_ready_) next_ready_ = ready;  // the queue's next to move
  return ready;
}

void DmaQueues::moved(Queue& q, Picoseconds now) {
  Queued& x = q.q[q.next];
  Picoseconds land = now;
  if (x.latency.count() > 0) {
    try {
      land = std::max(land, end_after(x.data_start, x.latency, limit_, "its last byte would land"));
    } catch (const TimeLimitError& e) {
      throw TimeLimitError("its last byte would land", e.at_ps(), limit_, x.tag);
    }
  }
  x.land = std::max(land, q.last_land);
  x.moved = true;
  q.last_land = x.land;
  ++q.next;
}

void DmaQueues::land(Queue& q, Picoseconds now) {
  while (!q.q.empty() && q.q.front().moved && q.q.front().land <= now) {
    const Queued& x = q.q.front();
    finished_.push_back({x.tag, x.ready, x.data_start, x.land, x.queued_behind});
    q.q.pop_front();
    --q.next;
    --in_flight_;
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
    moved(q, now);
    land(q, now);
    if (q.q.empty()) mark(m->core, m->queue, false);
    moving_.erase(m);
  }
  next_ready_ = kNever;
  next_land_ = kNever;
  for (int core = 0; core < 2; ++core) {
    const auto& words = nonempty_[core];
    for (size_t w = 0; w < words.size(); ++w) {
      // The queues that hold transfers, in queue order (a queue emptied below is not visited again).
      for (uint64_t bits = words[w]; bits != 0; bits &= bits - 1) {
        const size_t qi = w * 64 + static_cast<size_t>(std::countr_zero(bits));
        Queue& hq = queues_[core][qi];
        auto& q = hq.q;
        if (hq.next > 0) land(hq, now);  // only transfers that moved can land
        while (hq.next < q.size()) {
          Queued& x = q[hq.next];
          if (x.flow != 0 || x.ready > now) break;
          x.data_start = now;
          x.queued_behind = x.ready < now;  // ready before: the transfer ahead of it held it back
          if (x.bytes == 0) {
            moved(hq, now);
            land(hq, now);
            continue;
          }
          BandwidthSharing::Uses uses{{core, 1.0 / x.efficiency}};
          if (x.hbm_bytes > 0)
            uses.push_back({kHbm, static_cast<double>(x.hbm_bytes) / static_cast<double>(x.bytes)});
          x.flow = share_.add(static_cast<double>(x.bytes), x.rate_cap_GBps / 1000.0, uses, nowd);
          moving_.push_back({x.flow, core, static_cast<uint32_t>(qi)});
        }
        if (q.empty()) {
          mark(core, qi, false);
          continue;
        }
        if (hq.next < q.size()) {
          const Queued& x = q[hq.next];
          if (x.flow == 0 && x.ready < next_ready_) next_ready_ = x.ready;
        }
        const Queued& front = q.front();
        if (front.moved && front.land < next_land_) next_land_ = front.land;
      }
    }
  }
  return finished_;
}

std::optional<Picoseconds> DmaQueues::next_event(Picoseconds now) const {
  uint64_t next = std::min(next_ready_.count(), next_land_.count());
  const double f = share_.next_finish();
  if (f >= 0) {
    if (!(f < static_cast<double>(limit_.count()))) {
      // Name the moving transfer that finishes first (rates only change when a transfer starts or ends).
      const Queued* first = nullptr;
      double first_end = 0;
      for (const auto& core_queues : queues_)
        for (const auto& hq : core_queues) {
          if (hq.next >= hq.q.size() || hq.q[hq.next].flow == 0) continue;
          const Queued& x = hq.q[hq.next];
          const double e = share_.finish_time(x.flow);
          if (e >= 0 && (!first || e < first_end)) first = &x, first_end = e;
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
        if (hq.next >= hq.q.size() || hq.q[hq.next].flow == 0) continue;
        const Queued& x = hq.q[hq.next];
        const double per_byte = share_.rate(x.flow) * 1000.0 / static_cast<double>(x.bytes);
        rw[core][0] += per_byte * static_cast<double>(x.hbm_bytes_read);
        rw[core][1] += per_byte * static_cast<double>(x.hbm_bytes_written);
      }
  return rw;
}

}  // namespace trnsim::timing
