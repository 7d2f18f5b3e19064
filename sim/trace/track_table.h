// Bookkeeping both trace writers share: track kinds and parents, open-slice depth, per-track time clamping,
// and the misuse checks listed in trace_sink.h.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/trace/trace_sink.h"

namespace trnsim::trace {

enum class TrackKind : uint8_t { kProcess, kSlice, kCounter };

struct TrackState {
  TrackKind kind = TrackKind::kProcess;
  uint64_t parent = 0;    // parent uuid, 0 for a process
  int32_t pid = 0;        // pid of the process the track belongs to
  int32_t sort_rank = 0;  // as given, among siblings
  CounterUnit unit = CounterUnit::kCount;
  std::string name;
  std::string unit_name;
  uint64_t last_ns = 0;  // latest slice/instant time written on the track
  uint32_t open = 0;     // open slices
};

class TrackTable {
 public:
  // Each returns the new uuid; throws trnsim::Error on a bad pid or parent.
  uint64_t add_process(int32_t pid, std::string_view name, int32_t sort_rank);
  uint64_t add_slice_track(TrackId parent, std::string_view name, int32_t sort_rank);
  uint64_t add_counter_track(TrackId parent, std::string_view name, CounterUnit unit,
                             std::string_view unit_name, int32_t sort_rank);

  const TrackState& get(uint64_t uuid) const { return tracks_[uuid - 1]; }

  // Checks the call and returns the event time in ns, clamped to the track's latest time.
  uint64_t slice_begin(TrackId track, uint64_t ts_ps, std::span<const uint64_t> flow_ids,
                       std::span<const uint64_t> terminating_flow_ids);
  uint64_t slice_end(TrackId track, uint64_t ts_ps);
  uint64_t instant(TrackId track, uint64_t ts_ps);
  uint64_t counter(TrackId track, uint64_t ts_ps);

  // Throws trnsim::Error if `closed` (a call after close()).
  static void check_not_closed(bool closed, std::string_view what);

  uint64_t clamped_events() const { return clamped_; }
  size_t size() const { return tracks_.size(); }

 private:
  TrackState& slice_track(TrackId track, std::string_view what);
  uint64_t clamp(TrackState& t, uint64_t ts_ps);

  std::vector<TrackState> tracks_;
  std::vector<int32_t> pids_;
  uint64_t clamped_ = 0;
};

}  // namespace trnsim::trace
