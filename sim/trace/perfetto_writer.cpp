#include "sim/trace/perfetto_writer.h"

#include <bit>
#include <cstring>
#include <variant>

namespace trnsim::trace {

namespace {

// Field numbers (perfetto_trace.proto), see reference/perfetto-and-systemc.md §3.2.
constexpr uint32_t kTracePacket = 1;
constexpr uint32_t kPacketTimestamp = 8;
constexpr uint32_t kPacketSequenceId = 10;
constexpr uint32_t kPacketTrackEvent = 11;
constexpr uint32_t kPacketInternedData = 12;
constexpr uint32_t kPacketSequenceFlags = 13;
constexpr uint32_t kPacketTrackDescriptor = 60;

constexpr uint32_t kTrackUuid = 1;
constexpr uint32_t kTrackName = 2;
constexpr uint32_t kTrackProcess = 3;
constexpr uint32_t kTrackParentUuid = 5;
constexpr uint32_t kTrackCounter = 8;
constexpr uint32_t kTrackChildOrdering = 11;
constexpr uint32_t kTrackSiblingOrderRank = 12;
constexpr uint32_t kTrackDescription = 14;
constexpr uint32_t kChildOrderingExplicit = 3;

constexpr uint32_t kProcessPid = 1;
constexpr uint32_t kProcessName = 6;

constexpr uint32_t kCounterUnit = 3;
constexpr uint32_t kCounterUnitName = 6;

constexpr uint32_t kEventDebugAnnotations = 4;
constexpr uint32_t kEventType = 9;
constexpr uint32_t kEventNameIid = 10;
constexpr uint32_t kEventTrackUuid = 11;
constexpr uint32_t kEventDoubleCounterValue = 44;
constexpr uint32_t kEventFlowIds = 47;
constexpr uint32_t kEventTerminatingFlowIds = 48;

constexpr uint32_t kTypeSliceBegin = 1;
constexpr uint32_t kTypeSliceEnd = 2;
constexpr uint32_t kTypeInstant = 3;
constexpr uint32_t kTypeCounter = 4;

constexpr uint32_t kAnnotationNameIid = 1;
constexpr uint32_t kAnnotationBool = 2;
constexpr uint32_t kAnnotationUint = 3;
constexpr uint32_t kAnnotationInt = 4;
constexpr uint32_t kAnnotationDouble = 5;
constexpr uint32_t kAnnotationString = 6;

constexpr uint32_t kInternedEventNames = 2;
constexpr uint32_t kInternedAnnotationNames = 3;
constexpr uint32_t kInternedIid = 1;
constexpr uint32_t kInternedName = 2;

constexpr uint32_t kSeqIncrementalStateCleared = 1;
constexpr uint32_t kSeqNeedsIncrementalState = 2;

constexpr size_t kFlushBytes = size_t{1} << 20;
// Upper bounds of encoded sizes: a packet's fixed fields and its nested headers (each key, length and
// varint at its widest, plus widening room), and one interned entry or annotation without its string.
constexpr size_t kPacketBound = 192;
constexpr size_t kEntryBound = 48;

size_t varint_size(uint64_t v) {
  return v < 128 ? 1 : (std::bit_width(v) + 6) / 7;
}

}  // namespace

PerfettoWriter::PerfettoWriter(const std::filesystem::path& path) : file_(path) {
  buf_.resize(kFlushBytes + 4096);
}

PerfettoWriter::~PerfettoWriter() {
  try {
    do_close();
  } catch (...) {
    // A destructor cannot report; close() does.
  }
}

void PerfettoWriter::put_string(uint32_t field, std::string_view s) {
  put_key(field, 2);
  put_varint(s.size());
  if (!s.empty()) std::memcpy(buf_.data() + n_, s.data(), s.size());
  n_ += s.size();
}

void PerfettoWriter::widen_length(size_t body_start, size_t len) {
  const size_t extra = varint_size(len) - 1;
  std::memmove(buf_.data() + body_start + extra, buf_.data() + body_start, len);
  uint8_t* p = buf_.data() + body_start - 1;
  uint64_t v = len;
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v) | 0x80;
    v >>= 7;
  }
  *p = static_cast<uint8_t>(v);
  n_ += extra;
}

void PerfettoWriter::maybe_flush() {
  if (n_ >= kFlushBytes) {
    file_.write(buf_.data(), n_);
    n_ = 0;
  }
}

uint64_t PerfettoWriter::intern(InternTable& table, uint32_t field, std::string_view name) {
  auto it = table.find(name);
  if (it != table.end()) return it->second;
  const uint64_t iid = table.size() + 1;
  auto [ins, ok] = table.emplace(std::string(name), iid);
  (void)ok;
  new_names_.push_back(NewName{field, iid, ins->first});
  return iid;
}

void PerfettoWriter::write_descriptor(uint64_t uuid, std::string_view description) {
  const TrackState& t = tracks_.get(uuid);
  reserve(kPacketBound + 2 * t.name.size() + t.unit_name.size() + description.size());
  const size_t packet = begin_message(kTracePacket);
  put_uint(kPacketSequenceId, kSequenceId);
  const size_t desc = begin_message(kPacketTrackDescriptor);
  put_uint(kTrackUuid, uuid);
  put_string(kTrackName, t.name);
  if (t.parent != 0) put_uint(kTrackParentUuid, t.parent);
  if (t.kind == TrackKind::kProcess) {
    const size_t proc = begin_message(kTrackProcess);
    put_uint(kProcessPid, static_cast<uint64_t>(static_cast<int64_t>(t.pid)));
    put_string(kProcessName, t.name);
    end_message(proc);
  }
  if (t.kind == TrackKind::kCounter) {
    const size_t counter = begin_message(kTrackCounter);
    switch (t.unit) {
      case CounterUnit::kTimeNs:
        put_uint(kCounterUnit, 1);
        break;
      case CounterUnit::kCount:
        put_uint(kCounterUnit, 2);
        break;
      case CounterUnit::kBytes:
        put_uint(kCounterUnit, 3);
        break;
      case CounterUnit::kCustom:
        break;
    }
    if (!t.unit_name.empty()) put_string(kCounterUnitName, t.unit_name);
    end_message(counter);
  } else {
    put_uint(kTrackChildOrdering, kChildOrderingExplicit);
  }
  // int32 fields are sign-extended to 64 bits on the wire.
  put_uint(kTrackSiblingOrderRank, static_cast<uint64_t>(static_cast<int64_t>(t.sort_rank)));
  if (!description.empty()) put_string(kTrackDescription, description);
  end_message(desc);
  end_message(packet);
  maybe_flush();
}

void PerfettoWriter::write_event(uint32_t type, uint64_t ts_ns, uint64_t track, std::string_view name,
                                 std::span<const Annotation> args, std::span<const uint64_t> flow_ids,
                                 std::span<const uint64_t> terminating_flow_ids,
                                 const double* counter_value) {
  // Intern first: new names go into this packet's interned_data, written ahead of the event.
  new_names_.clear();
  uint64_t name_iid = 0;
  if (type == kTypeSliceBegin || type == kTypeInstant) {
    name_iid = intern(event_names_, kInternedEventNames, name);
  }
  arg_iids_.clear();
  for (const Annotation& a : args)
    arg_iids_.push_back(intern(annotation_names_, kInternedAnnotationNames, a.name));

  size_t bound = kPacketBound + (flow_ids.size() + terminating_flow_ids.size()) * 10;
  for (const NewName& nn : new_names_) bound += kEntryBound + nn.name.size();
  for (const Annotation& a : args) {
    const auto* str = std::get_if<std::string_view>(&a.value);
    bound += kEntryBound + (str != nullptr ? str->size() : 0);
  }
  reserve(bound);

  const size_t packet = begin_message(kTracePacket);
  put_uint(kPacketTimestamp, ts_ns);
  put_uint(kPacketSequenceId, kSequenceId);
  if (!new_names_.empty()) {
    const size_t interned = begin_message(kPacketInternedData);
    for (const NewName& nn : new_names_) {
      const size_t entry = begin_message(nn.field);
      put_uint(kInternedIid, nn.iid);
      put_string(kInternedName, nn.name);
      end_message(entry);
    }
    end_message(interned);
  }
  const size_t event = begin_message(kPacketTrackEvent);
  put_uint(kEventType, type);
  put_uint(kEventTrackUuid, track);
  if (name_iid != 0) put_uint(kEventNameIid, name_iid);
  for (size_t i = 0; i < args.size(); ++i) {
    const size_t ann = begin_message(kEventDebugAnnotations);
    put_uint(kAnnotationNameIid, arg_iids_[i]);
    const AnnotationValue& v = args[i].value;
    if (const auto* x = std::get_if<int64_t>(&v)) {
      put_uint(kAnnotationInt, static_cast<uint64_t>(*x));
    } else if (const auto* u = std::get_if<uint64_t>(&v)) {
      put_uint(kAnnotationUint, *u);
    } else if (const auto* d = std::get_if<double>(&v)) {
      put_fixed64(kAnnotationDouble, std::bit_cast<uint64_t>(*d));
    } else if (const auto* b = std::get_if<bool>(&v)) {
      put_uint(kAnnotationBool, *b ? 1 : 0);
    } else {
      put_string(kAnnotationString, std::get<std::string_view>(v));
    }
    end_message(ann);
  }
  if (counter_value != nullptr)
    put_fixed64(kEventDoubleCounterValue, std::bit_cast<uint64_t>(*counter_value));
  for (uint64_t id : flow_ids) put_fixed64(kEventFlowIds, id);
  for (uint64_t id : terminating_flow_ids) put_fixed64(kEventTerminatingFlowIds, id);
  end_message(event);
  put_uint(kPacketSequenceFlags, first_event_ ? kSeqIncrementalStateCleared | kSeqNeedsIncrementalState
                                              : kSeqNeedsIncrementalState);
  first_event_ = false;
  end_message(packet);
  maybe_flush();
}

TrackId PerfettoWriter::do_process_track(int32_t pid, std::string_view name, int32_t sort_rank) {
  TrackTable::check_not_closed(closed_, "process_track");
  const uint64_t uuid = tracks_.add_process(pid, name, sort_rank);
  write_descriptor(uuid, {});
  return TrackId{uuid};
}

TrackId PerfettoWriter::do_thread_track(TrackId parent, std::string_view name, std::string_view description,
                                        int32_t sort_rank) {
  TrackTable::check_not_closed(closed_, "thread_track");
  const uint64_t uuid = tracks_.add_slice_track(parent, name, sort_rank);
  write_descriptor(uuid, description);
  return TrackId{uuid};
}

TrackId PerfettoWriter::do_counter_track(TrackId parent, std::string_view name, CounterUnit unit,
                                         std::string_view unit_name, int32_t sort_rank) {
  TrackTable::check_not_closed(closed_, "counter_track");
  const uint64_t uuid = tracks_.add_counter_track(parent, name, unit, unit_name, sort_rank);
  write_descriptor(uuid, {});
  return TrackId{uuid};
}

void PerfettoWriter::do_slice_begin(TrackId track, uint64_t ts_ps, std::string_view name,
                                    std::span<const Annotation> args, std::span<const uint64_t> flow_ids,
                                    std::span<const uint64_t> terminating_flow_ids) {
  TrackTable::check_not_closed(closed_, "slice_begin");
  const uint64_t ns = tracks_.slice_begin(track, ts_ps, flow_ids, terminating_flow_ids);
  write_event(kTypeSliceBegin, ns, track.uuid, name, args, flow_ids, terminating_flow_ids, nullptr);
}

void PerfettoWriter::do_slice_end(TrackId track, uint64_t ts_ps) {
  TrackTable::check_not_closed(closed_, "slice_end");
  const uint64_t ns = tracks_.slice_end(track, ts_ps);
  write_event(kTypeSliceEnd, ns, track.uuid, {}, {}, {}, {}, nullptr);
}

void PerfettoWriter::do_counter(TrackId track, uint64_t ts_ps, double value) {
  TrackTable::check_not_closed(closed_, "counter");
  const uint64_t ns = tracks_.counter(track, ts_ps);
  write_event(kTypeCounter, ns, track.uuid, {}, {}, {}, {}, &value);
}

void PerfettoWriter::do_instant(TrackId track, uint64_t ts_ps, std::string_view name,
                                std::span<const Annotation> args) {
  TrackTable::check_not_closed(closed_, "instant");
  const uint64_t ns = tracks_.instant(track, ts_ps);
  write_event(kTypeInstant, ns, track.uuid, name, args, {}, {}, nullptr);
}

void PerfettoWriter::do_close() {
  if (closed_) return;
  closed_ = true;
  file_.write(buf_.data(), n_);
  n_ = 0;
  file_.close();
}

}  // namespace trnsim::trace
