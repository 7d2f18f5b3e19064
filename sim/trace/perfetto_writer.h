// Perfetto's native protobuf trace (.pftrace), hand-encoded and streamed to disk as events arrive.
//
// Layout: one trusted_packet_sequence_id; a TrackDescriptor packet per track, written when the track is
// created (so before any event that names it); one packet per TrackEvent with an absolute timestamp in
// simulated ns (TracePacket.timestamp, default clock). Event names, debug-annotation names and the string
// values of annotations marked Annotation::repeated() are interned (InternedData event_names,
// debug_annotation_names, debug_annotation_string_values; DebugAnnotation.string_value_iid): a string is
// defined in interned_data of the first packet that uses it. The first event packet carries
// SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE, later ones SEQ_NEEDS_INCREMENTAL_STATE.
// Process tracks carry a ProcessDescriptor; slice tracks are named child tracks; both order their children
// explicitly (child_ordering EXPLICIT, sibling_order_rank). Memory use is bounded by the 2 MiB output buffer
// plus the intern tables (one entry per distinct name or repeated value), whatever the trace length.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "sim/trace/output_file.h"
#include "sim/trace/trace_sink.h"
#include "sim/trace/track_table.h"

namespace trnsim::trace {

class PerfettoWriter final : public TraceSink {
 public:
  // Creates the file; throws InputError naming the path if it cannot.
  explicit PerfettoWriter(const std::filesystem::path& path);
  ~PerfettoWriter() override;

  bool enabled() const override { return true; }
  // Slice/instant calls whose time was moved up to keep a track's times non-decreasing.
  uint64_t clamped_events() const { return tracks_.clamped_events(); }
  // Bytes written to the file so far plus bytes still buffered.
  uint64_t bytes() const { return file_.bytes_written() + n_; }

  static constexpr uint32_t kSequenceId = 1;

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

  // One interning index (event names, annotation names or annotation string values): iids from 1 in order of
  // first use. Lookups do not allocate: a small cache keyed by the caller's pointer catches the common case
  // of a name passed from the same literal or buffer again (verified by content), then an open-addressing
  // table.
  class Interner {
   public:
    Interner();
    // The iid of `s` if the pointer cache knows it (same pointer, size and content as a recent call), else 0.
    uint64_t find_recent(std::string_view s) const {
      const Recent* set = &recent_[2 * recent_set(s.data(), s.size())];
      for (int way = 0; way < 2; ++way) {
        const Recent& r = set[way];
        if (r.data == s.data() && r.size == s.size() && same_bytes(r.stored, s.data(), s.size()))
          return r.iid;
      }
      return 0;
    }
    // The iid of `s`; `fresh` tells whether it was added by this call.
    uint64_t find_or_add_slow(std::string_view s, bool& fresh);
    std::string_view str(uint64_t iid) const { return strings_[iid - 1]; }
    size_t size() const { return strings_.size(); }

   private:
    struct Slot {
      uint64_t hash = 0;
      uint64_t iid = 0;              // 0: empty
      const char* stored = nullptr;  // the interned copy
      size_t size = 0;
    };
    struct Recent {
      const char* data = nullptr;  // the caller's pointer
      const char* stored = nullptr;
      size_t size = 0;
      uint64_t iid = 0;
    };
    void grow();
    static size_t recent_set(const char* data, size_t size) {
      return ((reinterpret_cast<uintptr_t>(data) ^ size) * 0x9e3779b97f4a7c15ULL) >> 56;
    }
    // a[0, n) == b[0, n); short strings (most names) without a library call, by two overlapping word loads.
    static bool same_bytes(const char* a, const char* b, size_t n) {
      if (n >= 8 && n <= 16) {
        uint64_t a0, a1, b0, b1;
        std::memcpy(&a0, a, 8);
        std::memcpy(&b0, b, 8);
        std::memcpy(&a1, a + n - 8, 8);
        std::memcpy(&b1, b + n - 8, 8);
        return ((a0 ^ b0) | (a1 ^ b1)) == 0;
      }
      if (n >= 4 && n < 8) {
        uint32_t a0, a1, b0, b1;
        std::memcpy(&a0, a, 4);
        std::memcpy(&b0, b, 4);
        std::memcpy(&a1, a + n - 4, 4);
        std::memcpy(&b1, b + n - 4, 4);
        return ((a0 ^ b0) | (a1 ^ b1)) == 0;
      }
      return n == 0 || std::memcmp(a, b, n) == 0;
    }

    std::vector<Slot> slots_;           // power-of-two size, at most half full
    std::deque<std::string> strings_;   // by iid - 1; a deque keeps their addresses stable
    std::array<Recent, 512> recent_{};  // by caller pointer: 256 sets of 2, most recent first
  };
  struct NewName {
    uint32_t field;  // InternedData field: 2 event_names, 3 debug_annotation_names, 29 string values
    uint64_t iid;
    std::string_view name;  // points into the interner's storage
  };

  // The iid of `name` in `table`; a new name is queued in new_names_ for this packet's interned_data.
  uint64_t intern(Interner& table, uint32_t field, std::string_view name) {
    const uint64_t iid = table.find_recent(name);
    return iid != 0 ? iid : intern_slow(table, field, name);
  }
  uint64_t intern_slow(Interner& table, uint32_t field, std::string_view name);
  void write_descriptor(uint64_t uuid, std::string_view description);
  void write_event(uint32_t type, uint64_t ts_ns, uint64_t track, std::string_view name,
                   std::span<const Annotation> args, std::span<const uint64_t> flow_ids,
                   std::span<const uint64_t> terminating_flow_ids, const double* counter_value);

  // Encoding appends to buf_[0, n_) through a local cursor (perfetto_writer.cpp). Each packet first reserves
  // an upper bound of its size, so the cursor writes without checks; a nested message may need up to 4 more
  // bytes when its length is widened (counted in the bounds).
  void reserve(size_t extra) {
    if (n_ + extra > buf_.size()) buf_.resize(std::max(buf_.size() * 2, n_ + extra));
  }
  void maybe_flush();

  OutputFile file_;
  TrackTable tracks_;
  Interner event_names_;
  Interner annotation_names_;
  Interner string_values_;
  std::vector<NewName> new_names_;
  std::vector<uint64_t> arg_iids_;    // per annotation: its name's iid
  std::vector<uint64_t> value_iids_;  // per annotation: its interned string value's iid, 0 if written inline
  std::vector<uint8_t> buf_;
  size_t n_ = 0;
  bool first_event_ = true;
  bool closed_ = false;
};

}  // namespace trnsim::trace
