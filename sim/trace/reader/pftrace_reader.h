// Decodes a Perfetto protobuf trace (.pftrace) with libprotobuf into plain structs, resolving interned names
// and string values, and checks the rules a viewer relies on. For tests and tools (trnsim_trace_reader); the
// simulator itself does not link libprotobuf.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <variant>
#include <vector>

namespace trnsim::trace {

using ReadValue = std::variant<int64_t, uint64_t, double, bool, std::string>;

struct ReadArg {
  std::string name;
  ReadValue value;
};

enum class ReadTrackKind { kPlain, kProcess, kThread, kCounter };

struct ReadTrack {
  uint64_t uuid = 0;
  uint64_t parent_uuid = 0;
  ReadTrackKind kind = ReadTrackKind::kPlain;
  std::string name;
  std::string description;
  int32_t pid = 0;
  int64_t tid = 0;
  int32_t child_ordering = 0;
  int32_t sibling_order_rank = 0;
  int32_t counter_unit = 0;  // CounterDescriptor.Unit
  std::string unit_name;
  size_t packet_index = 0;
};

enum class ReadEventType { kUnspecified = 0, kSliceBegin = 1, kSliceEnd = 2, kInstant = 3, kCounter = 4 };

struct ReadEvent {
  ReadEventType type = ReadEventType::kUnspecified;
  uint64_t ts_ns = 0;
  uint64_t track_uuid = 0;
  std::string name;  // resolved through interning
  std::vector<ReadArg> args;
  std::vector<uint64_t> flow_ids;
  std::vector<uint64_t> terminating_flow_ids;
  double counter_value = 0;
  uint32_t sequence_id = 0;
  uint32_t sequence_flags = 0;
  size_t packet_index = 0;
};

// A BEGIN/END pair, with the begin event's name, args and flows.
struct ReadSlice {
  uint64_t track_uuid = 0;
  std::string name;
  uint64_t begin_ns = 0;
  uint64_t end_ns = 0;
  uint32_t depth = 0;  // 0 for a top-level slice on its track
  std::vector<ReadArg> args;
  std::vector<uint64_t> flow_ids;
  std::vector<uint64_t> terminating_flow_ids;
};

struct ReadTrace {
  std::vector<ReadTrack> tracks;  // in file order
  std::vector<ReadEvent> events;  // in file order
  std::vector<ReadSlice> slices;  // in begin order; slices left open are not listed
  size_t packets = 0;
  // Rule violations found while reading: an unknown or later-described track uuid, an unresolved interned
  // name or string value, interned state used before it was cleared, a packet without a sequence id, an
  // unbalanced or time-reversed BEGIN/END, slices left open, a slice event on a counter track or a sample on
  // a slice track.
  std::vector<std::string> problems;

  const ReadTrack* track(uint64_t uuid) const;
};

// Throws InputError naming the path if the file cannot be opened or is not a valid trace.
ReadTrace read_perfetto_trace(const std::filesystem::path& path);

}  // namespace trnsim::trace
