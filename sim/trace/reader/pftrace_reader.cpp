#include "sim/trace/reader/pftrace_reader.h"

#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <unordered_map>

#include "perfetto_trace_subset.pb.h"
#include "sim/base/error.h"

namespace trnsim::trace {

namespace pp = perfetto::protos;

namespace {

constexpr uint32_t kPacketTag = (1 << 3) | 2;  // Trace.packet, length-delimited
constexpr uint64_t kOpen = std::numeric_limits<uint64_t>::max();

struct SequenceState {
  bool cleared = false;
  std::unordered_map<uint64_t, std::string> event_names;
  std::unordered_map<uint64_t, std::string> annotation_names;
  std::unordered_map<uint64_t, std::string> string_values;
};

struct TrackSlices {
  std::vector<size_t> open;  // indices into ReadTrace::slices
  uint64_t last_ns = 0;
};

class Decoder {
 public:
  explicit Decoder(ReadTrace& out) : out_(out) {}

  void packet(const pp::TracePacket& p) {
    const size_t index = out_.packets++;
    if (!p.has_trusted_packet_sequence_id()) problem(index, "packet without trusted_packet_sequence_id");
    SequenceState& seq = sequences_[p.trusted_packet_sequence_id()];
    const uint32_t flags = p.sequence_flags();
    if (flags & 1) {
      seq = SequenceState{};
      seq.cleared = true;
    }
    if (p.has_interned_data()) {
      if (!seq.cleared) problem(index, "interned_data before SEQ_INCREMENTAL_STATE_CLEARED");
      for (const auto& e : p.interned_data().event_names()) seq.event_names[e.iid()] = e.name();
      for (const auto& e : p.interned_data().debug_annotation_names())
        seq.annotation_names[e.iid()] = e.name();
      for (const auto& e : p.interned_data().debug_annotation_string_values())
        seq.string_values[e.iid()] = e.str();
    }
    if (p.has_track_descriptor()) descriptor(index, p.track_descriptor());
    if (p.has_track_event()) {
      if ((flags & 2) && !seq.cleared) problem(index, "SEQ_NEEDS_INCREMENTAL_STATE before state was cleared");
      event(index, p, seq);
    }
  }

  void finish() {
    size_t left_open = 0;
    for (const ReadSlice& s : out_.slices) left_open += s.end_ns == kOpen ? 1 : 0;
    if (left_open != 0) out_.problems.push_back(fmt::format("{} slices left open at the end", left_open));
    std::erase_if(out_.slices, [](const ReadSlice& s) { return s.end_ns == kOpen; });
  }

 private:
  void problem(size_t index, std::string_view what) {
    out_.problems.push_back(fmt::format("packet {}: {}", index, what));
  }

  void descriptor(size_t index, const pp::TrackDescriptor& d) {
    ReadTrack t;
    t.uuid = d.uuid();
    t.parent_uuid = d.parent_uuid();
    t.name = d.name();
    t.description = d.description();
    t.child_ordering = d.child_ordering();
    t.sibling_order_rank = d.sibling_order_rank();
    t.packet_index = index;
    if (d.has_process()) {
      t.kind = ReadTrackKind::kProcess;
      t.pid = d.process().pid();
    } else if (d.has_thread()) {
      t.kind = ReadTrackKind::kThread;
      t.pid = d.thread().pid();
      t.tid = d.thread().tid();
    } else if (d.has_counter()) {
      t.kind = ReadTrackKind::kCounter;
      t.counter_unit = d.counter().unit();
      t.unit_name = d.counter().unit_name();
    }
    if (t.uuid == 0) problem(index, "track descriptor without uuid");
    if (kinds_.contains(t.uuid)) problem(index, fmt::format("track uuid {} described twice", t.uuid));
    if (t.parent_uuid != 0 && !kinds_.contains(t.parent_uuid)) {
      problem(index,
              fmt::format("track '{}' names parent uuid {} before it is described", t.name, t.parent_uuid));
    }
    kinds_[t.uuid] = t.kind;
    out_.tracks.push_back(std::move(t));
  }

  void event(size_t index, const pp::TracePacket& p, const SequenceState& seq) {
    const pp::TrackEvent& e = p.track_event();
    ReadEvent r;
    r.type = static_cast<ReadEventType>(e.type());
    r.ts_ns = p.timestamp();
    r.track_uuid = e.track_uuid();
    r.sequence_id = p.trusted_packet_sequence_id();
    r.sequence_flags = p.sequence_flags();
    r.packet_index = index;
    if (!p.has_timestamp()) problem(index, "track event without timestamp");
    if (e.has_name_iid()) {
      auto it = seq.event_names.find(e.name_iid());
      if (it == seq.event_names.end()) {
        problem(index, fmt::format("event name iid {} is not interned", e.name_iid()));
      } else {
        r.name = it->second;
      }
    } else {
      r.name = e.name();
    }
    for (const pp::DebugAnnotation& a : e.debug_annotations()) {
      ReadArg arg;
      if (a.has_name_iid()) {
        auto it = seq.annotation_names.find(a.name_iid());
        if (it == seq.annotation_names.end()) {
          problem(index, fmt::format("debug annotation name iid {} is not interned", a.name_iid()));
        } else {
          arg.name = it->second;
        }
      } else {
        arg.name = a.name();
      }
      if (a.has_int_value()) {
        arg.value = a.int_value();
      } else if (a.has_uint_value()) {
        arg.value = a.uint_value();
      } else if (a.has_double_value()) {
        arg.value = a.double_value();
      } else if (a.has_bool_value()) {
        arg.value = a.bool_value();
      } else if (a.has_string_value_iid()) {
        auto it = seq.string_values.find(a.string_value_iid());
        if (it == seq.string_values.end()) {
          problem(index,
                  fmt::format("debug annotation string value iid {} is not interned", a.string_value_iid()));
          arg.value = std::string();
        } else {
          arg.value = it->second;
        }
      } else {
        arg.value = a.string_value();
      }
      r.args.push_back(std::move(arg));
    }
    r.flow_ids.assign(e.flow_ids().begin(), e.flow_ids().end());
    r.terminating_flow_ids.assign(e.terminating_flow_ids().begin(), e.terminating_flow_ids().end());
    r.counter_value =
        e.has_double_counter_value() ? e.double_counter_value() : static_cast<double>(e.counter_value());

    auto kind = kinds_.find(r.track_uuid);
    if (kind == kinds_.end()) {
      problem(index, fmt::format("event on track uuid {}, not described earlier", r.track_uuid));
    } else if ((r.type == ReadEventType::kCounter) != (kind->second == ReadTrackKind::kCounter)) {
      problem(index, fmt::format("event type {} does not fit the kind of track uuid {}",
                                 static_cast<int>(r.type), r.track_uuid));
    }
    pair_slices(index, r);
    out_.events.push_back(std::move(r));
  }

  void pair_slices(size_t index, const ReadEvent& r) {
    if (r.type != ReadEventType::kSliceBegin && r.type != ReadEventType::kSliceEnd &&
        r.type != ReadEventType::kInstant) {
      return;
    }
    TrackSlices& t = slices_[r.track_uuid];
    if (r.ts_ns < t.last_ns) {
      problem(index, fmt::format("time goes back on track uuid {}: {} ns after {} ns", r.track_uuid, r.ts_ns,
                                 t.last_ns));
    }
    t.last_ns = std::max(t.last_ns, r.ts_ns);
    if (r.type == ReadEventType::kSliceBegin) {
      t.open.push_back(out_.slices.size());
      out_.slices.push_back(ReadSlice{.track_uuid = r.track_uuid,
                                      .name = r.name,
                                      .begin_ns = r.ts_ns,
                                      .end_ns = kOpen,
                                      .depth = static_cast<uint32_t>(t.open.size() - 1),
                                      .args = r.args,
                                      .flow_ids = r.flow_ids,
                                      .terminating_flow_ids = r.terminating_flow_ids});
    } else if (r.type == ReadEventType::kSliceEnd) {
      if (t.open.empty()) {
        problem(index, fmt::format("SLICE_END without an open slice on track uuid {}", r.track_uuid));
        return;
      }
      out_.slices[t.open.back()].end_ns = r.ts_ns;
      t.open.pop_back();
    }
  }

  ReadTrace& out_;
  std::unordered_map<uint32_t, SequenceState> sequences_;
  std::unordered_map<uint64_t, ReadTrackKind> kinds_;
  std::unordered_map<uint64_t, TrackSlices> slices_;
};

}  // namespace

const ReadTrack* ReadTrace::track(uint64_t uuid) const {
  auto it = std::find_if(tracks.begin(), tracks.end(), [&](const ReadTrack& t) { return t.uuid == uuid; });
  return it == tracks.end() ? nullptr : &*it;
}

ReadTrace read_perfetto_trace(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("cannot open trace file '{}'", path.string()));
  google::protobuf::io::IstreamInputStream stream(&in);
  ReadTrace out;
  Decoder decoder(out);
  pp::TracePacket packet;
  // One CodedInputStream per packet keeps its 2 GiB total-bytes limit per packet, not per file.
  while (true) {
    google::protobuf::io::CodedInputStream coded(&stream);
    const uint32_t tag = coded.ReadTag();
    if (tag == 0) break;
    if (tag != kPacketTag) {
      if (!google::protobuf::internal::WireFormatLite::SkipField(&coded, tag)) {
        throw InputError(
            fmt::format("trace file '{}': truncated field after packet {}", path.string(), out.packets));
      }
      continue;
    }
    uint32_t len = 0;
    if (!coded.ReadVarint32(&len)) {
      throw InputError(fmt::format("trace file '{}': truncated packet {}", path.string(), out.packets));
    }
    const auto limit = coded.PushLimit(static_cast<int>(len));
    if (!packet.ParseFromCodedStream(&coded) || coded.BytesUntilLimit() != 0) {
      throw InputError(fmt::format("trace file '{}': packet {} does not decode", path.string(), out.packets));
    }
    coded.PopLimit(limit);
    decoder.packet(packet);
  }
  decoder.finish();
  return out;
}

}  // namespace trnsim::trace
