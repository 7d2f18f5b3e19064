#include "sim/trace/perfetto_writer.h"

#include <bit>
#include <cstring>
#include <variant>

#include "sim/base/hash.h"

namespace trnsim::trace {

namespace {

// Field numbers (perfetto_trace.proto), see docs/facts/perfetto-and-systemc.md §3.2.
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
constexpr uint32_t kAnnotationStringIid = 17;

constexpr uint32_t kInternedEventNames = 2;
constexpr uint32_t kInternedAnnotationNames = 3;
constexpr uint32_t kInternedStringValues = 29;  // InternedString {iid = 1, str = 2}
constexpr uint32_t kInternedIid = 1;
constexpr uint32_t kInternedName = 2;

constexpr uint32_t kSeqIncrementalStateCleared = 1;
constexpr uint32_t kSeqNeedsIncrementalState = 2;

constexpr size_t kFlushBytes = size_t{2} << 20;
// Upper bounds of encoded sizes: a packet's fixed fields and its nested headers (each key, length and
// varint at its widest, plus widening room), and one interned entry or annotation without its string.
constexpr size_t kPacketBound = 192;
constexpr size_t kEntryBound = 48;

size_t varint_size(uint64_t v) {
  return v < 128 ? 1 : (std::bit_width(v) + 6) / 7;
}

// Appends protobuf fields at a raw pointer. A local object, so the position stays in a register: stores
// through uint8_t* may alias any member of the writer, which would force a reload after every byte.
class Cursor {
 public:
  explicit Cursor(uint8_t* p) : p_(p) {}
  uint8_t* pos() const { return p_; }

  void varint(uint64_t v) {
    while (v >= 0x80) {
      *p_++ = static_cast<uint8_t>(v) | 0x80;
      v >>= 7;
    }
    *p_++ = static_cast<uint8_t>(v);
  }
  void key(uint32_t field, uint32_t wire_type) { varint((uint64_t{field} << 3) | wire_type); }
  void uint(uint32_t field, uint64_t v) {
    key(field, 0);
    varint(v);
  }
  void fixed64(uint32_t field, uint64_t bits) {
    key(field, 1);
    for (int i = 0; i < 8; ++i) p_[i] = static_cast<uint8_t>(bits >> (8 * i));
    p_ += 8;
  }
  void string(uint32_t field, std::string_view s) {
    key(field, 2);
    varint(s.size());
    if (!s.empty()) std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  // A nested message gets a one-byte length placeholder; end_message() widens it in the rare case the body
  // is 128 bytes or longer, so small messages cost exactly what a two-pass encoder would write.
  uint8_t* begin_message(uint32_t field) {
    key(field, 2);
    *p_++ = 0;
    return p_;
  }
  void end_message(uint8_t* body) {
    const auto len = static_cast<size_t>(p_ - body);
    if (len < 128) {
      body[-1] = static_cast<uint8_t>(len);
      return;
    }
    const size_t extra = varint_size(len) - 1;
    std::memmove(body + extra, body, len);
    uint8_t* q = body - 1;
    uint64_t v = len;
    while (v >= 0x80) {
      *q++ = static_cast<uint8_t>(v) | 0x80;
      v >>= 7;
    }
    *q = static_cast<uint8_t>(v);
    p_ += extra;
  }

 private:
  uint8_t* p_;
};

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

void PerfettoWriter::maybe_flush() {
  if (n_ >= kFlushBytes) {
    file_.write(buf_.data(), n_);
    n_ = 0;
  }
}

PerfettoWriter::Interner::Interner() : slots_(64) {}

uint64_t PerfettoWriter::Interner::find_or_add_slow(std::string_view s, bool& fresh) {
  fresh = false;
  const uint64_t h = fast_string_hash(s);
  const size_t mask = slots_.size() - 1;
  size_t i = h & mask;
  while (slots_[i].iid != 0) {
    const Slot& slot = slots_[i];
    if (slot.hash == h && slot.size == s.size() && same_bytes(slot.stored, s.data(), s.size())) break;
    i = (i + 1) & mask;
  }
  if (slots_[i].iid == 0) {
    strings_.emplace_back(s);
    slots_[i] = Slot{h, strings_.size(), strings_.back().data(), s.size()};
    fresh = true;
  }
  Recent* set = &recent_[2 * recent_set(s.data(), s.size())];
  set[1] = set[0];
  set[0] = Recent{s.data(), slots_[i].stored, s.size(), slots_[i].iid};
  const uint64_t iid = slots_[i].iid;
  if (fresh && 2 * strings_.size() > slots_.size()) grow();
  return iid;
}

void PerfettoWriter::Interner::grow() {
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.iid == 0) continue;
    size_t i = s.hash & mask;
    while (slots_[i].iid != 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

uint64_t PerfettoWriter::intern_slow(Interner& table, uint32_t field, std::string_view name) {
  bool fresh = false;
  const uint64_t iid = table.find_or_add_slow(name, fresh);
  if (fresh) new_names_.push_back(NewName{field, iid, table.str(iid)});
  return iid;
}

void PerfettoWriter::write_descriptor(uint64_t uuid, std::string_view description) {
  const TrackState& t = tracks_.get(uuid);
  reserve(kPacketBound + 2 * t.name.size() + t.unit_name.size() + description.size());
  Cursor c(buf_.data() + n_);
  uint8_t* const packet = c.begin_message(kTracePacket);
  c.uint(kPacketSequenceId, kSequenceId);
  uint8_t* const desc = c.begin_message(kPacketTrackDescriptor);
  c.uint(kTrackUuid, uuid);
  c.string(kTrackName, t.name);
  if (t.parent != 0) c.uint(kTrackParentUuid, t.parent);
  if (t.kind == TrackKind::kProcess) {
    uint8_t* const proc = c.begin_message(kTrackProcess);
    c.uint(kProcessPid, static_cast<uint64_t>(static_cast<int64_t>(t.pid)));
    c.string(kProcessName, t.name);
    c.end_message(proc);
  }
  if (t.kind == TrackKind::kCounter) {
    uint8_t* const counter = c.begin_message(kTrackCounter);
    switch (t.unit) {
      case CounterUnit::kTimeNs:
        c.uint(kCounterUnit, 1);
        break;
      case CounterUnit::kCount:
        c.uint(kCounterUnit, 2);
        break;
      case CounterUnit::kBytes:
        c.uint(kCounterUnit, 3);
        break;
      case CounterUnit::kCustom:
        break;
    }
    if (!t.unit_name.empty()) c.string(kCounterUnitName, t.unit_name);
    c.end_message(counter);
  } else {
    c.uint(kTrackChildOrdering, kChildOrderingExplicit);
  }
  // int32 fields are sign-extended to 64 bits on the wire.
  c.uint(kTrackSiblingOrderRank, static_cast<uint64_t>(static_cast<int64_t>(t.sort_rank)));
  if (!description.empty()) c.string(kTrackDescription, description);
  c.end_message(desc);
  c.end_message(packet);
  n_ = static_cast<size_t>(c.pos() - buf_.data());
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
  if (arg_iids_.size() < args.size()) {  // grow only: slice ends (no args) would make begins refill it
    arg_iids_.resize(args.size());
    value_iids_.resize(args.size());
  }
  size_t bound = kPacketBound + (flow_ids.size() + terminating_flow_ids.size()) * 10;
  for (size_t i = 0; i < args.size(); ++i) {
    const Annotation& a = args[i];
    arg_iids_[i] = intern(annotation_names_, kInternedAnnotationNames, a.name);
    value_iids_[i] = 0;
    bound += kEntryBound;
    if (const auto* str = std::get_if<std::string_view>(&a.value)) {
      if (a.repeats) {
        value_iids_[i] = intern(string_values_, kInternedStringValues, *str);
      } else {
        bound += str->size();
      }
    }
  }
  for (const NewName& nn : new_names_) bound += kEntryBound + nn.name.size();
  reserve(bound);

  Cursor c(buf_.data() + n_);
  uint8_t* const packet = c.begin_message(kTracePacket);
  c.uint(kPacketTimestamp, ts_ns);
  c.uint(kPacketSequenceId, kSequenceId);
  if (!new_names_.empty()) {
    uint8_t* const interned = c.begin_message(kPacketInternedData);
    for (const NewName& nn : new_names_) {
      uint8_t* const entry = c.begin_message(nn.field);
      c.uint(kInternedIid, nn.iid);
      c.string(kInternedName, nn.name);
      c.end_message(entry);
    }
    c.end_message(interned);
  }
  uint8_t* const event = c.begin_message(kPacketTrackEvent);
  c.uint(kEventType, type);
  c.uint(kEventTrackUuid, track);
  if (name_iid != 0) c.uint(kEventNameIid, name_iid);
  for (size_t i = 0; i < args.size(); ++i) {
    uint8_t* const ann = c.begin_message(kEventDebugAnnotations);
    c.uint(kAnnotationNameIid, arg_iids_[i]);
    const AnnotationValue& v = args[i].value;
    if (const auto* x = std::get_if<int64_t>(&v)) {
      c.uint(kAnnotationInt, static_cast<uint64_t>(*x));
    } else if (const auto* u = std::get_if<uint64_t>(&v)) {
      c.uint(kAnnotationUint, *u);
    } else if (const auto* d = std::get_if<double>(&v)) {
      c.fixed64(kAnnotationDouble, std::bit_cast<uint64_t>(*d));
    } else if (const auto* b = std::get_if<bool>(&v)) {
      c.uint(kAnnotationBool, *b ? 1 : 0);
    } else if (value_iids_[i] != 0) {
      c.uint(kAnnotationStringIid, value_iids_[i]);
    } else {
      c.string(kAnnotationString, std::get<std::string_view>(v));
    }
    c.end_message(ann);
  }
  if (counter_value != nullptr) c.fixed64(kEventDoubleCounterValue, std::bit_cast<uint64_t>(*counter_value));
  for (uint64_t id : flow_ids) c.fixed64(kEventFlowIds, id);
  for (uint64_t id : terminating_flow_ids) c.fixed64(kEventTerminatingFlowIds, id);
  c.end_message(event);
  c.uint(kPacketSequenceFlags,
         first_event_ ? kSeqIncrementalStateCleared | kSeqNeedsIncrementalState : kSeqNeedsIncrementalState);
  first_event_ = false;
  c.end_message(packet);
  n_ = static_cast<size_t>(c.pos() - buf_.data());
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
