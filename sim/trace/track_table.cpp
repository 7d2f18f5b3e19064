#include "sim/trace/track_table.h"

#include <fmt/format.h>

#include <algorithm>

#include "sim/base/error.h"

namespace trnsim::trace {

namespace {

void check_flow_ids(std::span<const uint64_t> ids) {
  for (uint64_t id : ids) {
    if (id == 0) throw Error("trace: flow id 0 is reserved; use nonzero flow ids");
  }
}

}  // namespace

uint64_t TrackTable::add_process(int32_t pid, std::string_view name, int32_t sort_rank) {
  if (pid <= 0) throw Error(fmt::format("trace: process '{}' has pid {}; pids must be > 0", name, pid));
  if (std::find(pids_.begin(), pids_.end(), pid) != pids_.end()) {
    throw Error(fmt::format("trace: process '{}' reuses pid {}", name, pid));
  }
  pids_.push_back(pid);
  TrackState& t = tracks_.emplace_back();
  t.kind = TrackKind::kProcess;
  t.pid = pid;
  t.sort_rank = sort_rank;
  t.name = name;
  return tracks_.size();
}

uint64_t TrackTable::add_slice_track(TrackId parent, std::string_view name, int32_t sort_rank) {
  if (!parent.valid() || parent.uuid > tracks_.size() || get(parent.uuid).kind == TrackKind::kCounter) {
    throw Error(fmt::format("trace: track '{}' needs a process or slice track as parent (got uuid {})", name,
                            parent.uuid));
  }
  const int32_t pid = get(parent.uuid).pid;
  TrackState& t = tracks_.emplace_back();
  t.kind = TrackKind::kSlice;
  t.parent = parent.uuid;
  t.pid = pid;
  t.sort_rank = sort_rank;
  t.name = name;
  return tracks_.size();
}

uint64_t TrackTable::add_counter_track(TrackId parent, std::string_view name, CounterUnit unit,
                                       std::string_view unit_name, int32_t sort_rank) {
  if (!parent.valid() || parent.uuid > tracks_.size() || get(parent.uuid).kind == TrackKind::kCounter) {
    throw Error(fmt::format("trace: counter '{}' needs a process or slice track as parent (got uuid {})",
                            name, parent.uuid));
  }
  const int32_t pid = get(parent.uuid).pid;
  TrackState& t = tracks_.emplace_back();
  t.kind = TrackKind::kCounter;
  t.parent = parent.uuid;
  t.pid = pid;
  t.sort_rank = sort_rank;
  t.unit = unit;
  t.name = name;
  t.unit_name = unit_name;
  return tracks_.size();
}

TrackState& TrackTable::slice_track(TrackId track, std::string_view what) {
  if (!track.valid() || track.uuid > tracks_.size()) {
    throw Error(fmt::format("trace: {} on unknown track uuid {}", what, track.uuid));
  }
  TrackState& t = tracks_[track.uuid - 1];
  if (t.kind != TrackKind::kSlice) {
    throw Error(fmt::format("trace: {} on '{}', which is not a slice track", what, t.name));
  }
  return t;
}

uint64_t TrackTable::clamp(TrackState& t, uint64_t ts_ps) {
  uint64_t ns = ps_to_ns(ts_ps);
  if (ns < t.last_ns) {
    ns = t.last_ns;
    ++clamped_;
  }
  t.last_ns = ns;
  return ns;
}

uint64_t TrackTable::slice_begin(TrackId track, uint64_t ts_ps, std::span<const uint64_t> flow_ids,
                                 std::span<const uint64_t> terminating_flow_ids) {
  TrackState& t = slice_track(track, "slice_begin");
  check_flow_ids(flow_ids);
  check_flow_ids(terminating_flow_ids);
  ++t.open;
  return clamp(t, ts_ps);
}

uint64_t TrackTable::slice_end(TrackId track, uint64_t ts_ps) {
  TrackState& t = slice_track(track, "slice_end");
  if (t.open == 0) throw Error(fmt::format("trace: slice_end on '{}', which has no open slice", t.name));
  --t.open;
  return clamp(t, ts_ps);
}

uint64_t TrackTable::instant(TrackId track, uint64_t ts_ps) {
  return clamp(slice_track(track, "instant"), ts_ps);
}

uint64_t TrackTable::counter(TrackId track, uint64_t ts_ps) {
  if (!track.valid() || track.uuid > tracks_.size() || tracks_[track.uuid - 1].kind != TrackKind::kCounter) {
    throw Error(fmt::format("trace: counter sample on uuid {}, which is not a counter track", track.uuid));
  }
  return ps_to_ns(ts_ps);
}

void TrackTable::check_not_closed(bool closed, std::string_view what) {
  if (closed) throw Error(fmt::format("trace: {} after close()", what));
}

}  // namespace trnsim::trace
