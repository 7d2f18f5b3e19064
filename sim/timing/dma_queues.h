// The DMA queues of both cores of an LNC=2 pair, from the moment a transfer is queued (its trigger done) to
// the moment its last byte has moved (reference §1.5, §2.7). Plain C++, no SystemC, event-driven: the owner
// calls advance(now) at each event time and schedules its next call at next_event(now). Times in ps.
//
// Model:
//   - A transfer queued at t is ready at t + DmaCost::setup (descriptor processing and, when it touches HBM,
//     the HBM latency). Setups are pipelined: the transfers of one queue overlap their setups.
//   - Per queue and DMA engine, FIFO: a queue ID names one hardware queue on each engine, and a transfer
//     joins the queues of the engines in DmaCost::queue_engines (all of them unless dma.queue_sets: then
//     the engines its partitions span). It starts moving when it is ready and every transfer ahead of it on
//     one of its engines has finished holding the queue there. It holds the queue while its bytes move, at
//     most at DmaCost::queue_rate_cap_GBps (sim/timing/dma_queue_policy.h); its last byte lands at the
//     latest of that end, its data start + DmaCost::latency, and the landing of the transfers ahead of it
//     on its engines (in order). With latency 0 and queue_rate_cap_GBps = rate_cap_GBps a queue moves one
//     transfer at a time on each engine.
//   - Moving transfers share bandwidth max-min fairly (timing::BandwidthSharing) over three resources: each
//     core's DMA engines (dma.engines_per_core x dma.engine_bandwidth_GBps; a transfer takes 1 / efficiency
//     of that capacity per byte) and the HBM stack of both cores (hbm.bandwidth_GBps; hbm_bytes / bytes per
//     byte moved).
//   - A zero-byte transfer lands the moment it starts (or when the transfer ahead lands).
// What comes after the data (the completion semaphore write, DmaCost::completion) and what comes before the
// queue (the trigger, and a serial DMA-issue resource per DGE block when that is modelled) are the owner's.
//
// Errors: TimeLimitError (with the transfer's tag) when a transfer would become ready or finish at or beyond
// `limit` (sim/timing/time_limit.h); std::out_of_range for a core or queue index outside the config.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "sim/base/units.h"
#include "sim/config/hw_config.h"
#include "sim/timing/bandwidth_sharing.h"
#include "sim/timing/cost_model.h"
#include "sim/timing/time_limit.h"

namespace trnsim::timing {

struct DmaTransfer {
  int core = 0;        // issuing core, 0 or 1
  uint32_t queue = 0;  // < dma.queues_per_core: the hardware queue (timing::hardware_queue)
  DmaCost cost;        // bytes, hbm_bytes, efficiency, rate cap, setup (CostModel::dma_cost)
  uint64_t hbm_bytes_read = 0, hbm_bytes_written = 0;  // cost.hbm_bytes split, for hbm_rw_GBps()
  uint64_t tag = 0;  // the owner's handle, returned when the transfer finishes
};

class DmaQueues {
 public:
  explicit DmaQueues(const config::HwConfig& hw, Picoseconds limit = kMaxSimTime);

  struct Finished {
    uint64_t tag;
    Picoseconds ready;                 // enqueue time + setup
    Picoseconds data_start, data_end;  // bytes moving: from its start in the queue to its last byte landed
    // When it let the next transfer of its queue start (its occupancy end): data_end without queue sets,
    // earlier when the queue pipelines (sim/timing/dma_queue_policy.h).
    Picoseconds released;
    // The transfer ahead of it in its queue (the previous one to finish there) held it back: data_start >
    // ready.
    bool queued_behind = false;
  };

  // The HBM stack's bandwidth, GB/s (bytes per ns), in place of hbm.bandwidth_GBps: the HBM model's answer
  // (sim/model/memory/hbm.h). Before the first transfer; std::logic_error after.
  void set_hbm_bandwidth(double GBps);
  // Queues `t` at `now`. Returns its ready time (now + setup): the owner must call advance() then.
  Picoseconds enqueue(const DmaTransfer& t, Picoseconds now);
  // Moves to `now` (never backwards): first the transfers whose last byte moved by `now` finish, oldest
  // first; then, core 0 then core 1, queue by queue, every ready queue head starts moving. Returns the
  // finished transfers in that order (valid until the next call).
  const std::vector<Finished>& advance(Picoseconds now);
  // Next time advance() has work (a queue head becomes ready, a moving transfer finishes or lands), > now;
  // nullopt when nothing is queued or moving. Call after advance(now).
  std::optional<Picoseconds> next_event(Picoseconds now) const;

  // Load on the HBM stack, GB/s (bytes per ns), at the current rates.
  double hbm_GBps() const;
  // Per core: HBM read and write rates (GB/s) of its moving transfers, each transfer's rate split by its
  // hbm_bytes_read / hbm_bytes_written per byte moved.
  std::array<std::array<double, 2>, 2> hbm_rw_GBps() const;
  // Transfers queued or moving.
  size_t in_flight() const { return in_flight_; }

 private:
  static constexpr Picoseconds kNever{~uint64_t{0}};
  struct Queued {  // what the queue needs of a DmaTransfer (kept small: one per queued transfer)
    uint64_t tag;
    uint64_t engines;  // DmaCost::queue_engines
    uint64_t bytes, hbm_bytes, hbm_bytes_read, hbm_bytes_written;
    double efficiency, rate_cap_GBps;  // rate_cap_GBps: DmaCost::queue_rate_cap_GBps
    Picoseconds latency;
    Picoseconds ready;
    Picoseconds data_start, released, land;
    uint64_t flow = 0;   // BandwidthSharing flow id; 0 until the transfer moves
    bool moved = false;  // done holding the queue; lands at `land`
    bool queued_behind = false;
  };
  // A queue's transfers in order: a vector whose erased front is skipped, and dropped once it is half of
  // it, so that queueing and finishing a transfer allocate nothing once the queue has grown (a std::deque
  // allocated a block per few transfers) and indexing is one add.
  class Fifo {
   public:
    Queued* begin() { return v_.data() + head_; }
    Queued* end() { return v_.data() + v_.size(); }
    const Queued* begin() const { return v_.data() + head_; }
    const Queued* end() const { return v_.data() + v_.size(); }
    size_t size() const { return v_.size() - head_; }
    bool empty() const { return head_ == v_.size(); }
    Queued& operator[](size_t i) { return v_[head_ + i]; }
    void push_back(const Queued& x) { v_.push_back(x); }
    // Erases *it; returns the transfer after it.
    Queued* erase(Queued* it) {
      const auto i = static_cast<size_t>(it - v_.data());
      if (i != head_) {
        v_.erase(v_.begin() + static_cast<std::ptrdiff_t>(i));
        return v_.data() + i;
      }
      ++head_;
      if (head_ == v_.size()) {
        v_.clear();
        head_ = 0;
      } else if (head_ >= 32 && 2 * head_ >= v_.size()) {
        v_.erase(v_.begin(), v_.begin() + static_cast<std::ptrdiff_t>(head_));
        head_ = 0;
      }
      return begin();
    }

   private:
    std::vector<Queued> v_;
    size_t head_ = 0;  // v_[0, head_) were erased
  };
  struct Queue {
    // In queue order: moved (waiting to land), moving (flow != 0) or waiting. A transfer moves once no
    // transfer ahead of it that shares an engine still holds the queue or waits.
    Fifo q;
    // Per engine, the latest landing of the queue there so far: the later of last_land[e] and all_land. A
    // transfer on every engine (the usual case without queue sets) sets all_land alone, not 64 entries.
    std::array<Picoseconds, 64> last_land{};
    Picoseconds all_land;
    Picoseconds max_land;  // the latest landing on any engine
    // The earliest time advance() has work here (a transfer no transfer ahead holds back becomes ready, a
    // moved transfer lands), as of the queue's last visit or enqueue; 0 when a flow of it finished. advance()
    // skips a queue whose `next` is later than now: nothing there would change.
    Picoseconds next;
  };

  // Marks queue qi of `core` as holding transfers (or not) in nonempty_.
  void mark(int core, size_t qi, bool nonempty);
  // Moves x past the queue at `now`: it lands at the latest of now, its data start + latency and the last
  // landing of the queue on its engines.
  void moved(Queue& q, Queued& x, Picoseconds now);
  // Reports the queue's transfers that landed by `now`, in queue order.
  void land(Queue& q, Picoseconds now);
  Picoseconds limit_;
  BandwidthSharing share_;
  std::array<std::vector<Queue>, 2> queues_;
  // Per core, a bit per queue that holds transfers: advance() visits only those, in queue order.
  std::array<std::vector<uint64_t>, 2> nonempty_;
  struct Moving {
    uint64_t flow;
    int core;
    uint32_t queue;
  };
  std::vector<Moving> moving_;  // the queues' transfers moving data, by flow id: a finished flow's queue
  std::vector<Finished> finished_;
  size_t in_flight_ = 0;
  // Earliest of the queues' `next`: a queue's next transfer not moving yet becomes ready, a transfer that
  // moved lands; kNever if none.
  Picoseconds next_;
};

}  // namespace trnsim::timing
