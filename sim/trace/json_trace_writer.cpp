#include "sim/trace/json_trace_writer.h"

#include <fmt/compile.h>
#include <fmt/format.h>

#include <cmath>
#include <iterator>
#include <variant>

namespace trnsim::trace {

namespace {

constexpr size_t kFlushBytes = size_t{1} << 20;

template <typename T>
void append_int(std::string& out, T v) {
  const fmt::format_int f(v);
  out.append(f.data(), f.size());
}

bool needs_escape(char c) {
  return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20;
}

void append_escaped(std::string& out, std::string_view s) {
  out.push_back('"');
  size_t plain = 0;
  while (plain < s.size() && !needs_escape(s[plain])) ++plain;
  out.append(s.data(), plain);
  for (char c : s.substr(plain)) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

// Nanoseconds as microseconds with exactly 3 decimals.
void append_us(std::string& out, uint64_t ns) {
  append_int(out, ns / 1000);
  const unsigned frac = static_cast<unsigned>(ns % 1000);
  const char digits[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                          static_cast<char>('0' + frac % 10)};
  out.append(digits, 4);
}

void append_double(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "\"NaN\"";
  } else if (std::isinf(v)) {
    out += v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  } else {
    // Compiled format into a stack buffer: the same shortest round-trip text, without parsing the format
    // string or appending through a back_insert_iterator one char at a time.
    char buf[64];
    const char* end = fmt::format_to(buf, FMT_COMPILE("{}"), v);
    out.append(buf, static_cast<size_t>(end - buf));
  }
}

void append_args(std::string& out, std::span<const Annotation> args) {
  if (args.empty()) return;
  out += ",\"args\":{";
  for (size_t i = 0; i < args.size(); ++i) {
    if (i != 0) out.push_back(',');
    append_escaped(out, args[i].name);
    out.push_back(':');
    const AnnotationValue& v = args[i].value;
    if (const auto* x = std::get_if<int64_t>(&v)) {
      append_int(out, *x);
    } else if (const auto* u = std::get_if<uint64_t>(&v)) {
      append_int(out, *u);
    } else if (const auto* d = std::get_if<double>(&v)) {
      append_double(out, *d);
    } else if (const auto* b = std::get_if<bool>(&v)) {
      out += *b ? "true" : "false";
    } else {
      append_escaped(out, std::get<std::string_view>(v));
    }
  }
  out.push_back('}');
}

// "name":...,"pid":P,"tid":T,"ts":X — the part every slice-track event shares.
void append_head(std::string& out, std::string_view name, int32_t pid, int64_t tid, uint64_t ts_ns) {
  out += "\"name\":";
  append_escaped(out, name);
  out += ",\"pid\":";
  append_int(out, pid);
  out += ",\"tid\":";
  append_int(out, tid);
  out += ",\"ts\":";
  append_us(out, ts_ns);
}

std::string_view series_name(CounterUnit unit, std::string_view unit_name) {
  switch (unit) {
    case CounterUnit::kTimeNs:
      return "ns";
    case CounterUnit::kCount:
      return "count";
    case CounterUnit::kBytes:
      return "bytes";
    case CounterUnit::kCustom:
      break;
  }
  return unit_name.empty() ? std::string_view("value") : unit_name;
}

}  // namespace

JsonTraceWriter::JsonTraceWriter(const std::filesystem::path& path) : file_(path) {
  out_.reserve(kFlushBytes + 4096);
  out_ += "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
}

JsonTraceWriter::~JsonTraceWriter() {
  try {
    do_close();
  } catch (...) {
    // A destructor cannot report; close() does.
  }
}

void JsonTraceWriter::begin_event() {
  if (!first_event_) out_ += ",\n";
  first_event_ = false;
}

void JsonTraceWriter::maybe_flush() {
  if (out_.size() >= kFlushBytes) {
    file_.write(out_.data(), out_.size());
    out_.clear();
  }
}

TrackId JsonTraceWriter::do_process_track(int32_t pid, std::string_view name, int32_t sort_rank) {
  TrackTable::check_not_closed(closed_, "process_track");
  const uint64_t uuid = tracks_.add_process(pid, name, sort_rank);
  json_tracks_.emplace_back();
  begin_event();
  fmt::format_to(std::back_inserter(out_), "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"tid\":0,",
                 pid);
  out_ += "\"args\":{\"name\":";
  append_escaped(out_, name);
  out_ += "}}";
  begin_event();
  fmt::format_to(
      std::back_inserter(out_),
      "{{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{},\"tid\":0,\"args\":{{\"sort_index\":{}}}}}",
      pid, sort_rank);
  maybe_flush();
  return TrackId{uuid};
}

TrackId JsonTraceWriter::do_thread_track(TrackId parent, std::string_view name,
                                         std::string_view /*description*/, int32_t sort_rank) {
  TrackTable::check_not_closed(closed_, "thread_track");
  const uint64_t uuid = tracks_.add_slice_track(parent, name, sort_rank);
  const TrackState& t = tracks_.get(uuid);
  const TrackState& p = tracks_.get(t.parent);
  JsonTrack jt;
  jt.pid = t.pid;
  jt.tid = next_tid_++;
  jt.sort_index = p.kind == TrackKind::kProcess ? sort_rank : json_tracks_[t.parent - 1].sort_index;
  begin_event();
  fmt::format_to(std::back_inserter(out_), "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},",
                 t.pid, jt.tid);
  out_ += "\"args\":{\"name\":";
  append_escaped(out_, name);
  out_ += "}}";
  begin_event();
  fmt::format_to(
      std::back_inserter(out_),
      "{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{},\"tid\":{},\"args\":{{\"sort_index\":{}}}}}",
      t.pid, jt.tid, jt.sort_index);
  json_tracks_.push_back(std::move(jt));
  maybe_flush();
  return TrackId{uuid};
}

TrackId JsonTraceWriter::do_counter_track(TrackId parent, std::string_view name, CounterUnit unit,
                                          std::string_view unit_name, int32_t sort_rank) {
  TrackTable::check_not_closed(closed_, "counter_track");
  const uint64_t uuid = tracks_.add_counter_track(parent, name, unit, unit_name, sort_rank);
  JsonTrack jt;
  jt.series = std::string(series_name(unit, unit_name));
  json_tracks_.push_back(std::move(jt));
  return TrackId{uuid};
}

JsonTraceWriter::Pending& JsonTraceWriter::push_pending(JsonTrack& t, uint64_t ts_ns) {
  if (t.pending_count == t.pending.size()) t.pending.emplace_back();
  Pending& p = t.pending[t.pending_count++];
  p.text.clear();
  p.flows.clear();
  p.ts_ns = ts_ns;
  p.end_ns = ts_ns;
  p.is_slice = false;
  p.ended = false;
  return p;
}

void JsonTraceWriter::flush_tree(JsonTrack& t) {
  for (size_t i = 0; i < t.pending_count; ++i) {
    const Pending& p = t.pending[i];
    begin_event();
    if (!p.is_slice) {
      out_ += "{\"ph\":\"i\",\"s\":\"t\",";
      out_ += p.text;
      out_ += "}";
      continue;
    }
    if (p.ended) {
      out_ += "{\"ph\":\"X\",";
      out_ += p.text;
      out_ += ",\"dur\":";
      append_us(out_, p.end_ns - p.ts_ns);
      out_ += "}";
    } else {
      out_ += "{\"ph\":\"B\",";
      out_ += p.text;
      out_ += "}";
    }
    for (const auto& [phase, id] : p.flows) {
      begin_event();
      // One flow name and category for all, since v1 flows are matched by (cat, name, id).
      out_ += "{\"ph\":\"";
      out_.push_back(phase);
      out_ += phase == 'f' ? "\",\"bp\":\"e\",\"id\":\"" : "\",\"id\":\"";
      char buf[24];
      const char* end = fmt::format_to(buf, FMT_COMPILE("{:#x}"), id);
      out_.append(buf, static_cast<size_t>(end - buf));
      out_ += "\",\"cat\":\"flow\",";
      append_head(out_, "flow", t.pid, t.tid, p.ts_ns);
      out_ += "}";
    }
  }
  t.pending_count = 0;
  t.open.clear();
  maybe_flush();
}

void JsonTraceWriter::do_slice_begin(TrackId track, uint64_t ts_ps, std::string_view name,
                                     std::span<const Annotation> args, std::span<const uint64_t> flow_ids,
                                     std::span<const uint64_t> terminating_flow_ids) {
  TrackTable::check_not_closed(closed_, "slice_begin");
  const uint64_t ns = tracks_.slice_begin(track, ts_ps, flow_ids, terminating_flow_ids);
  JsonTrack& t = json_tracks_[track.uuid - 1];
  Pending& p = push_pending(t, ns);
  p.is_slice = true;
  append_head(p.text, name, tracks_.get(track.uuid).pid, t.tid, ns);
  append_args(p.text, args);
  for (uint64_t id : flow_ids) p.flows.emplace_back(open_flows_.insert(id).second ? 's' : 't', id);
  for (uint64_t id : terminating_flow_ids) {
    p.flows.emplace_back('f', id);
    open_flows_.erase(id);
  }
  t.open.push_back(static_cast<uint32_t>(t.pending_count - 1));
}

void JsonTraceWriter::do_slice_end(TrackId track, uint64_t ts_ps) {
  TrackTable::check_not_closed(closed_, "slice_end");
  const uint64_t ns = tracks_.slice_end(track, ts_ps);
  JsonTrack& t = json_tracks_[track.uuid - 1];
  Pending& p = t.pending[t.open.back()];
  p.end_ns = ns;
  p.ended = true;
  t.open.pop_back();
  if (t.open.empty()) flush_tree(t);
}

void JsonTraceWriter::do_counter(TrackId track, uint64_t ts_ps, double value) {
  TrackTable::check_not_closed(closed_, "counter");
  const uint64_t ns = tracks_.counter(track, ts_ps);
  const TrackState& s = tracks_.get(track.uuid);
  begin_event();
  out_ += "{\"ph\":\"C\",\"name\":";
  append_escaped(out_, s.name);
  out_ += ",\"pid\":";
  append_int(out_, s.pid);
  out_ += ",\"ts\":";
  append_us(out_, ns);
  out_ += ",\"args\":{";
  append_escaped(out_, json_tracks_[track.uuid - 1].series);
  out_.push_back(':');
  append_double(out_, value);
  out_ += "}}";
  maybe_flush();
}

void JsonTraceWriter::do_instant(TrackId track, uint64_t ts_ps, std::string_view name,
                                 std::span<const Annotation> args) {
  TrackTable::check_not_closed(closed_, "instant");
  const uint64_t ns = tracks_.instant(track, ts_ps);
  JsonTrack& t = json_tracks_[track.uuid - 1];
  // Inside an open slice the instant waits with its tree, so the file stays in nesting order.
  Pending& p = push_pending(t, ns);
  append_head(p.text, name, tracks_.get(track.uuid).pid, t.tid, ns);
  append_args(p.text, args);
  if (t.open.empty()) flush_tree(t);
}

void JsonTraceWriter::do_close() {
  if (closed_) return;
  closed_ = true;
  for (JsonTrack& t : json_tracks_) {
    if (t.pending_count != 0) flush_tree(t);
  }
  out_ += "\n]}\n";
  file_.write(out_.data(), out_.size());
  out_.clear();
  file_.close();
}

}  // namespace trnsim::trace
