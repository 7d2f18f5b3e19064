// Processor sharing of bandwidth between concurrent flows (DMA transfers) over shared resources (each core's
// DMA engines, the HBM stack). Rates are max-min fair (progressive filling): every flow's rate rises at the
// same pace until its own cap or a resource it uses is saturated. Rates change only when a flow is added or
// removed, so the SystemC DMA module needs one event per change. Plain C++; bytes, ps, bytes/ps.
// The rates are recomputed when next read (or before flows move on), not at each change: the rates are a
// function of the set of flows alone, so the flows a DMA event removes and adds at one time cost one
// recomputation, with the same result.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/base/small_vector.h"

namespace trnsim::timing {

class BandwidthSharing {
 public:
  // capacities[r] in bytes per ps.
  explicit BandwidthSharing(std::vector<double> capacities);

  struct Use {
    int resource;
    double per_byte;  // capacity consumed per byte moved (e.g. 1 / efficiency, or 2 for HBM -> HBM)
  };
  using Uses = SmallVector<Use, 2>;  // a DMA transfer uses its core's engines and maybe the HBM stack

  // Sets resource r's capacity (bytes per ps) before the first flow; std::logic_error after.
  void set_capacity(int resource, double capacity);
  // Adds a flow of `bytes` capped at `cap` bytes/ps at time `now`. Returns its id.
  uint64_t add(double bytes, double cap, const Uses& uses, double now);
  // Moves every flow forward to `now` at its current rate.
  void advance(double now);
  // Removes flows finished at `now` (after advance) and returns their ids, oldest first (valid until the next
  // call).
  const std::vector<uint64_t>& take_finished(double now);
  // Earliest time an active flow finishes at the current rates (ps); < 0 if none.
  double next_finish() const;
  // Time flow `id` finishes at the current rates (ps); < 0 if it is not active or has rate 0.
  double finish_time(uint64_t id) const;
  double rate(uint64_t id) const;
  // Sum of current rates over flows using resource r, weighted by per_byte (bytes/ps).
  double load(int resource) const;
  size_t active() const { return flows_.size(); }

 private:
  struct Flow {
    uint64_t id;
    double remaining, cap, rate;
    Uses uses;
    uint32_t kind;  // kind_of(cap, uses)
  };
  // The rates of the current flows, recomputed if a flow was added or removed since they were last.
  void settle() const {
    if (stale_) recompute();
  }
  // Rates from the flow set's entry in memo_, else by progressive filling (fill_rates), then kept there.
  void recompute() const;
  void fill_rates() const;

  std::vector<double> capacity_;
  mutable std::vector<Flow> flows_;  // rates: set by settle()
  struct Scratch {
    std::vector<double> used, weight;
    std::vector<char> frozen, saturated;
  };
  mutable Scratch scratch_;  // recompute()'s working arrays
  // The rates are a function of the flows' caps and uses, in flow order, and of the capacities alone: a flow
  // set that recurs (the transfers of a loop) takes its rates, the same bits, from here. Key: per flow its
  // kind, a number standing for its cap, use count and uses as bit patterns (kinds_), so a set's key is one
  // word a flow. Cleared when it holds kMemoEntries sets.
  struct KeyHash {
    template <class Word>
    size_t operator()(const std::vector<Word>& key) const;
  };
  static constexpr size_t kMemoEntries = size_t{1} << 12;
  mutable std::unordered_map<std::vector<uint32_t>, std::vector<double>, KeyHash> memo_;
  mutable std::vector<uint32_t> key_;  // recompute()'s key, reused
  // The number of a cap and uses, given when first seen. Renumbered (memo_ cleared) past kKinds.
  uint32_t kind_of(double cap, const Uses& uses);
  uint32_t kind_of_slow(double cap, const Uses& uses);  // kind_of through kinds_ alone
  static constexpr size_t kKinds = size_t{1} << 16;
  std::unordered_map<std::vector<uint64_t>, uint32_t, KeyHash> kinds_;
  std::vector<uint64_t> kind_key_;  // kind_of()'s key, reused
  // The kinds last looked up in kinds_ (flows of at most two uses), tried first: a DMA-heavy run adds flows
  // of a few kinds only, and hashing a vector key per flow cost more than comparing a few words.
  struct RecentKind {
    uint64_t cap = 0;
    uint32_t n = ~uint32_t{0};  // ~0: an empty entry
    std::array<int, 2> resource{};
    std::array<uint64_t, 2> per_byte{};
    uint32_t kind = 0;
  };
  static constexpr size_t kRecentKinds = 8;
  std::array<RecentKind, kRecentKinds> recent_kinds_{};
  size_t recent_next_ = 0;      // the entry the next miss replaces
  std::vector<uint64_t> done_;  // take_finished()'s result
  double now_ = 0;
  uint64_t next_id_ = 1;
  mutable bool stale_ = false;  // flows were added or removed since recompute()
};

}  // namespace trnsim::timing
