// Perfetto's native protobuf trace (.pftrace), hand-encoded and streamed to disk as events arrive.
//
// Layout: one trusted_packet_sequence_id; a TrackDescriptor packet per track, written when the track is
// created (so before any event that names it); one packet per TrackEvent with an absolute timestamp in
// simulated ns (TracePacket.timestamp, default clock). Event names and debug-annotation names are interned:
// a name is defined in interned_data of the first packet that uses it. The first event packet carries
// SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE, later ones SEQ_NEEDS_INCREMENTAL_STATE.
// Process tracks carry a ProcessDescriptor; slice tracks are named child tracks; both order their children
// explicitly (child_ordering EXPLICIT, sibling_order_rank). Memory use is bounded by the 1 MiB output buffer
// plus the intern tables (one entry per distinct name), whatever the trace length.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
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

  // Transparent hashing so lookups by string_view do not allocate.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using InternTable = std::unordered_map<std::string, uint64_t, NameHash, std::equal_to<>>;
  struct NewName {
    uint32_t field;  // InternedData field: 2 event_names, 3 debug_annotation_names
    uint64_t iid;
    std::string_view name;  // points into the intern table's key
  };

  uint64_t intern(InternTable& table, uint32_t field, std::string_view name);
  void write_descriptor(uint64_t uuid, std::string_view description);
  void write_event(uint32_t type, uint64_t ts_ns, uint64_t track, std::string_view name,
                   std::span<const Annotation> args, std::span<const uint64_t> flow_ids,
                   std::span<const uint64_t> terminating_flow_ids, const double* counter_value);

  // Encoding into buf_[0, n_). Each packet first reserves an upper bound of its size, so the put_* helpers
  // write without checks; end_message may add up to 4 bytes per nested message (counted in the bounds).
  void reserve(size_t extra) {
    if (n_ + extra > buf_.size()) buf_.resize(std::max(buf_.size() * 2, n_ + extra));
  }
  void put_varint(uint64_t v) {
    uint8_t* p = buf_.data() + n_;
    uint8_t* const start = p;
    while (v >= 0x80) {
      *p++ = static_cast<uint8_t>(v) | 0x80;
      v >>= 7;
    }
    *p++ = static_cast<uint8_t>(v);
    n_ += static_cast<size_t>(p - start);
  }
  void put_key(uint32_t field, uint32_t wire_type) { put_varint((uint64_t{field} << 3) | wire_type); }
  void put_uint(uint32_t field, uint64_t v) {
    put_key(field, 0);
    put_varint(v);
  }
  void put_fixed64(uint32_t field, uint64_t bits) {
    put_key(field, 1);
    for (int i = 0; i < 8; ++i) buf_[n_ + i] = static_cast<uint8_t>(bits >> (8 * i));
    n_ += 8;
  }
  void put_string(uint32_t field, std::string_view s);
  // A nested message gets a one-byte length placeholder; end_message() widens it in the rare case the body
  // is 128 bytes or longer, so small messages cost exactly what a two-pass encoder would write.
  size_t begin_message(uint32_t field) {
    put_key(field, 2);
    buf_[n_++] = 0;
    return n_;
  }
  void end_message(size_t body_start) {
    const size_t len = n_ - body_start;
    if (len < 128) {
      buf_[body_start - 1] = static_cast<uint8_t>(len);
    } else {
      widen_length(body_start, len);
    }
  }
  void widen_length(size_t body_start, size_t len);
  void maybe_flush();

  OutputFile file_;
  TrackTable tracks_;
  InternTable event_names_;
  InternTable annotation_names_;
  std::vector<NewName> new_names_;
  std::vector<uint64_t> arg_iids_;
  std::vector<uint8_t> buf_;
  size_t n_ = 0;
  bool first_event_ = true;
  bool closed_ = false;
};

}  // namespace trnsim::trace
