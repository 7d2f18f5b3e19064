// Chrome JSON trace event format (for small runs and other viewers), streamed to disk.
//
// The same content as PerfettoWriter: {"displayTimeUnit":"ns","traceEvents":[...]} with
//  - "M" process_name / process_sort_index per process track, thread_name / thread_sort_index per slice
//    track (each slice track is its own tid, unique in the file; a nested track takes its parent's sort
//    index);
//  - "X" complete events (ts and dur in µs with 3 decimals, i.e. exact simulated ns), annotations in "args";
//  - "i" instants (thread scope), "C" counters (series key = the unit: ns, count, bytes or the custom name);
//  - flows v1: "s" (first use of an id), "t" (later flow_ids use), "f" with "bp":"e" (terminating), each
//    written right after its slice with the slice's pid/tid/ts, so it binds to that slice; all with
//    "cat":"flow" and "name":"flow" (v1 matches on cat, name and id) and the id as "0x<hex>".
// An "X" event needs its end, and viewers nest equal-ts "X" events by file order, so a track's top-level
// slice is held (with its children and instants) until it ends and then written parent first. Memory is
// bounded by the largest open slice tree, not the trace length. Slices still open at close() are written
// as "B" events. Non-finite doubles are written as the strings "NaN", "Infinity", "-Infinity".
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "sim/trace/output_file.h"
#include "sim/trace/trace_sink.h"
#include "sim/trace/track_table.h"

namespace trnsim::trace {

class JsonTraceWriter final : public TraceSink {
 public:
  // Creates the file; throws InputError naming the path if it cannot.
  explicit JsonTraceWriter(const std::filesystem::path& path);
  ~JsonTraceWriter() override;

  bool enabled() const override { return true; }
  uint64_t clamped_events() const { return tracks_.clamped_events(); }
  uint64_t bytes() const { return file_.bytes_written() + out_.size(); }

 private:
  TrackId do_process_track(int32_t pid, std::string_view name, int32_t sort_rank) override;
  TrackId do_thread_track(TrackId parent, std::string_view name, std::string_view description,
                          int32_t sort_rank) override;
  TrackId do_counter_track(TrackId parent, std::string_view name, CounterUnit unit,
                           std::string_view unit_name, int32_t sort_rank) override;
  void do_slice_begin(TrackId track, uint64_t ts_ps, std::string_view name, std::span<const Annotation> args,
                      std::span<const uint64_t> flow_ids,
                      std::span<const uint64_t> terminating_flow_ids) override;
  void do_slice_end(TrackId track, uint64_t ts_ps) override;
  void do_counter(TrackId track, uint64_t ts_ps, double value) override;
  void do_instant(TrackId track, uint64_t ts_ps, std::string_view name,
                  std::span<const Annotation> args) override;
  void do_close() override;

  // An event of a slice tree still waiting for its top-level slice to end.
  struct Pending {
    std::string text;  // the event's fields after "ph", without "dur" and the closing brace
    uint64_t ts_ns = 0;
    uint64_t end_ns = 0;
    bool is_slice = false;
    bool ended = false;
    std::vector<std::pair<char, uint64_t>> flows;  // v1 phase ('s', 't' or 'f') and id
  };
  struct JsonTrack {
    int32_t pid = 0;
    int64_t tid = 0;
    int32_t sort_index = 0;
    std::string series;            // counter series key
    std::vector<Pending> pending;  // reused; [0, pending_count) are live
    size_t pending_count = 0;
    std::vector<uint32_t> open;  // indices into pending of open slices
  };

  Pending& push_pending(JsonTrack& t, uint64_t ts_ns);
  void flush_tree(JsonTrack& t);
  void begin_event();
  void maybe_flush();

  OutputFile file_;
  TrackTable tracks_;
  std::vector<JsonTrack> json_tracks_;  // by uuid - 1
  std::unordered_set<uint64_t> open_flows_;
  std::string out_;
  int64_t next_tid_ = 1;
  bool first_event_ = true;
  bool closed_ = false;
};

}  // namespace trnsim::trace
