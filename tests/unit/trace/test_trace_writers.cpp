// Trace writers: the .pftrace is decoded with libprotobuf (trnsim_trace_reader, independent of the hand
// encoder) and checked against what the scenario wrote; the JSON trace must carry the same events.
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "sim/base/error.h"
#include "sim/io/output_files.h"
#include "sim/trace/json_trace_writer.h"
#include "sim/trace/open_trace.h"
#include "sim/trace/output_file.h"
#include "sim/trace/perfetto_writer.h"
#include "sim/trace/reader/pftrace_reader.h"
#include "sim/trace/trace_sink.h"
#include "tests/unit/numerics/allow_overwrite.h"

namespace fs = std::filesystem;
using namespace trnsim::trace;

namespace {

// A fresh directory per test case, removed at the end.
struct TempDir {
  fs::path dir;
  explicit TempDir(std::string_view tag) {
    dir = fs::temp_directory_path() / fmt::format("trnsim_trace_{}_{}", tag, ::getpid());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The entries of a folder, sorted.
std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out(fs::directory_iterator(dir), fs::directory_iterator{});
  std::sort(out.begin(), out.end());
  return out;
}

using Value = ReadValue;

struct ExpectedSlice {
  std::string track;
  std::string name;
  uint64_t begin_ns;
  uint64_t end_ns;
  uint32_t depth;
  std::vector<std::pair<std::string, Value>> args;
};

const std::string kOddSource = "k\"ern\\el.cpp:42\n\tline";  // needs JSON escaping

// Writes the same scenario through any sink. Times are in ps; the comments give the ns they round to.
void write_scenario(TraceSink& sink) {
  const TrackId core0 = sink.process_track(1, "core 0", 0);
  const TrackId core1 = sink.process_track(2, "core 1", 1);
  const TrackId pe = sink.thread_track(core0, "PE matmul", "TensorMatrixE, 2.4 GHz", 0);
  const TrackId act = sink.thread_track(core0, "ACT", "ScalarE, 1.2 GHz", 2);
  const TrackId dma = sink.thread_track(core0, "qSyncIO0", "DMA queue", 3);
  const TrackId dma1 = sink.thread_track(dma, "qSyncIO0", "overlapping transfer", 1);
  const TrackId act1 = sink.thread_track(core1, "ACT", "", 2);
  const TrackId hbm = sink.counter_track(core0, "HBM read", CounterUnit::kCustom, "GB/s", 10);
  const TrackId sbuf = sink.counter_track(core0, "SBUF bank 0", CounterUnit::kBytes);
  const TrackId pending = sink.counter_track(core0, "Pending DMA", CounterUnit::kCount);
  const TrackId wait = sink.counter_track(act, "semaphore wait", CounterUnit::kTimeNs);

  // PE: a loop slice holding matmuls; the first matmul starts together with the loop and holds a child
  // that starts together with it too (equal-ts nesting).
  sink.slice_begin(pe, 0, "kernel loop", {{"iteration", 0}});
  const uint64_t flow_pe_act[] = {7};
  sink.slice_begin(pe, 0, "MATMUL",
                   {{"opcode", "MATMUL"},
                    {"cycles", uint64_t{64}},
                    {"clock_ghz", 2.4},
                    {"flops", uint64_t{1} << 40},
                    {"transpose", false},
                    {"delta", -5},
                    {"source", kOddSource}},
                   flow_pe_act);
  sink.slice_begin(pe, 0, "LoadStationary", {{"cycles", 32u}});
  sink.slice_end(pe, 13'400);  // 13 ns
  sink.slice_end(pe, 26'700);  // 27 ns
  for (int i = 0; i < 4; ++i) {
    sink.slice_begin(pe, 30'000 + 30'000 * i, "MATMUL", {{"opcode", "MATMUL"}, {"cycles", uint64_t{64}}});
    sink.slice_end(pe, 56'700 + 30'000 * i);
  }
  sink.slice_end(pe, 200'000);

  // ACT waits for the first matmul (flow 7 ends here) and starts flow 8 toward core 1, via a DMA step.
  const uint64_t flow_act_out[] = {8};
  sink.instant(act, 26'000, "semaphore wait", {{"semaphore", 3}, {"wait_ns", 26.0}});
  sink.slice_begin(act, 27'000, "ACTIVATE", {{"opcode", "ACTIVATE"}, {"cycles", uint64_t{150}}}, flow_act_out,
                   flow_pe_act);
  sink.slice_end(act, 1'499);                        // earlier than its begin: clamped to 27 ns
  sink.slice_begin(act, 1'499'499, "ACTIVATE", {});  // 1499 ns
  sink.slice_end(act, 1'500'500);                    // 1501 ns (half rounds up)

  sink.slice_begin(dma, 30'000, "dma_copy", {{"bytes", uint64_t{65536}}}, flow_act_out);
  sink.slice_begin(dma1, 31'000, "dma_copy", {{"bytes", uint64_t{4096}}});
  sink.slice_end(dma, 1'330'000);
  sink.slice_end(dma1, 1'331'000);

  sink.slice_begin(act1, 1'400'000, "TENSOR_TENSOR", {}, {}, flow_act_out);
  sink.slice_end(act1, 1'500'000);

  sink.counter(hbm, 0, 0.0);
  sink.counter(hbm, 30'000, 725.5);
  sink.counter(hbm, 1'330'000, 0.1);
  sink.counter(sbuf, 10'000, 65536.0);
  sink.counter(sbuf, 20'000, 1e300);
  sink.counter(pending, 30'000, 2.0);
  sink.counter(pending, 1'331'000, -3.0);
  sink.counter(wait, 26'000, 1e-9);
  sink.close();
}

std::vector<ExpectedSlice> expected_slices() {
  return {
      {"PE matmul", "kernel loop", 0, 200, 0, {{"iteration", int64_t{0}}}},
      {"PE matmul",
       "MATMUL",
       0,
       27,
       1,
       {{"opcode", std::string("MATMUL")},
        {"cycles", uint64_t{64}},
        {"clock_ghz", 2.4},
        {"flops", uint64_t{1} << 40},
        {"transpose", false},
        {"delta", int64_t{-5}},
        {"source", kOddSource}}},
      {"PE matmul", "LoadStationary", 0, 13, 2, {{"cycles", uint64_t{32}}}},
      {"PE matmul", "MATMUL", 30, 57, 1, {{"opcode", std::string("MATMUL")}, {"cycles", uint64_t{64}}}},
      {"PE matmul", "MATMUL", 60, 87, 1, {{"opcode", std::string("MATMUL")}, {"cycles", uint64_t{64}}}},
      {"PE matmul", "MATMUL", 90, 117, 1, {{"opcode", std::string("MATMUL")}, {"cycles", uint64_t{64}}}},
      {"PE matmul", "MATMUL", 120, 147, 1, {{"opcode", std::string("MATMUL")}, {"cycles", uint64_t{64}}}},
      {"ACT", "ACTIVATE", 27, 27, 0, {{"opcode", std::string("ACTIVATE")}, {"cycles", uint64_t{150}}}},
      {"ACT", "ACTIVATE", 1499, 1501, 0, {}},
      {"qSyncIO0", "dma_copy", 30, 1330, 0, {{"bytes", uint64_t{65536}}}},
      {"qSyncIO0", "dma_copy", 31, 1331, 0, {{"bytes", uint64_t{4096}}}},
      {"ACT", "TENSOR_TENSOR", 1400, 1500, 0, {}},
  };
}

struct Sample {
  std::string track;
  uint64_t ts_ns;
  double value;
  auto operator<=>(const Sample&) const = default;
};

const std::vector<Sample> kSamples = {
    {"HBM read", 0, 0.0},         {"HBM read", 30, 725.5},      {"HBM read", 1330, 0.1},
    {"SBUF bank 0", 10, 65536.0}, {"SBUF bank 0", 20, 1e300},   {"Pending DMA", 30, 2.0},
    {"Pending DMA", 1331, -3.0},  {"semaphore wait", 26, 1e-9},
};

std::vector<std::pair<std::string, Value>> as_pairs(const std::vector<ReadArg>& args) {
  std::vector<std::pair<std::string, Value>> out;
  for (const ReadArg& a : args) out.emplace_back(a.name, a.value);
  return out;
}

ReadTrace write_and_read_pftrace(const fs::path& path) {
  PerfettoWriter w(path);
  write_scenario(w);
  CHECK(w.clamped_events() == 1);
  return read_perfetto_trace(path);
}

}  // namespace

TEST_CASE("ps_to_ns rounds to the nearest ns, half up", "[trace]") {
  CHECK(ps_to_ns(0) == 0);
  CHECK(ps_to_ns(499) == 0);
  CHECK(ps_to_ns(500) == 1);
  CHECK(ps_to_ns(1'499) == 1);
  CHECK(ps_to_ns(1'500) == 2);
  CHECK(ps_to_ns(416'667) == 417);
  CHECK(ps_to_ns(18'446'744'073'709'551'615ull) == 18'446'744'073'709'552ull);
}

TEST_CASE("pftrace decodes with libprotobuf into the tracks that were declared", "[trace]") {
  TempDir tmp("tracks");
  const ReadTrace t = write_and_read_pftrace(tmp.dir / "t.pftrace");
  INFO(fmt::format("{}", fmt::join(t.problems, "\n")));
  REQUIRE(t.problems.empty());
  REQUIRE(t.tracks.size() == 11);

  const ReadTrack& core0 = t.tracks[0];
  CHECK(core0.kind == ReadTrackKind::kProcess);
  CHECK(core0.name == "core 0");
  CHECK(core0.pid == 1);
  CHECK(core0.child_ordering == 3);
  CHECK(t.tracks[1].pid == 2);
  CHECK(t.tracks[1].sibling_order_rank == 1);

  const ReadTrack& pe = t.tracks[2];
  CHECK(pe.kind == ReadTrackKind::kPlain);
  CHECK(pe.name == "PE matmul");
  CHECK(pe.parent_uuid == core0.uuid);
  CHECK(pe.description == "TensorMatrixE, 2.4 GHz");
  CHECK(t.tracks[3].sibling_order_rank == 2);
  const ReadTrack& dma1 = t.tracks[5];
  CHECK(dma1.parent_uuid == t.tracks[4].uuid);  // the overlapping transfer's sub-track
  CHECK(dma1.name == "qSyncIO0");

  const ReadTrack& hbm = t.tracks[7];
  CHECK(hbm.kind == ReadTrackKind::kCounter);
  CHECK(hbm.counter_unit == 0);
  CHECK(hbm.unit_name == "GB/s");
  CHECK(hbm.sibling_order_rank == 10);
  CHECK(t.tracks[8].counter_unit == 3);   // bytes
  CHECK(t.tracks[9].counter_unit == 2);   // count
  CHECK(t.tracks[10].counter_unit == 1);  // ns
  CHECK(t.tracks[10].parent_uuid == t.tracks[3].uuid);

  std::set<uint64_t> uuids;
  for (const ReadTrack& tr : t.tracks) uuids.insert(tr.uuid);
  CHECK(uuids.size() == t.tracks.size());
  // Every event names a track described in an earlier packet.
  for (const ReadEvent& e : t.events) {
    const ReadTrack* tr = t.track(e.track_uuid);
    REQUIRE(tr != nullptr);
    CHECK(tr->packet_index < e.packet_index);
    CHECK(e.sequence_id == PerfettoWriter::kSequenceId);
  }
  // The first event packet clears incremental state, the others depend on it.
  REQUIRE(!t.events.empty());
  CHECK(t.events.front().sequence_flags == 3);
  CHECK(std::all_of(t.events.begin() + 1, t.events.end(),
                    [](const ReadEvent& e) { return e.sequence_flags == 2; }));
}

TEST_CASE("pftrace slices nest, appear once and carry their annotations", "[trace]") {
  TempDir tmp("slices");
  const fs::path path = tmp.dir / "t.pftrace";
  const ReadTrace t = write_and_read_pftrace(path);
  REQUIRE(t.problems.empty());
  const std::vector<ExpectedSlice> want = expected_slices();
  REQUIRE(t.slices.size() == want.size());
  // Slices are listed in begin order per file; match each expected one exactly once.
  std::vector<bool> used(t.slices.size(), false);
  for (const ExpectedSlice& w : want) {
    INFO(w.track << " " << w.name << " @" << w.begin_ns);
    int matches = 0;
    for (size_t i = 0; i < t.slices.size(); ++i) {
      const ReadSlice& s = t.slices[i];
      if (used[i] || s.name != w.name || s.begin_ns != w.begin_ns || t.track(s.track_uuid)->name != w.track)
        continue;
      used[i] = true;
      ++matches;
      CHECK(s.end_ns == w.end_ns);
      CHECK(s.depth == w.depth);
      CHECK(as_pairs(s.args) == w.args);
    }
    CHECK(matches == 1);
  }
  // Children lie within their parent on the same track.
  for (size_t i = 0; i < t.slices.size(); ++i) {
    const ReadSlice& c = t.slices[i];
    if (c.depth == 0) continue;
    bool inside = false;
    for (size_t j = 0; j < i; ++j) {
      const ReadSlice& p = t.slices[j];
      if (p.track_uuid == c.track_uuid && p.depth + 1 == c.depth && p.begin_ns <= c.begin_ns &&
          c.end_ns <= p.end_ns)
        inside = true;
    }
    CHECK(inside);
  }
  // Interning: each event name and annotation name is stored once however often it is used.
  const std::string raw = read_all(path);
  auto count = [&](std::string_view s) {
    size_t n = 0;
    for (size_t at = raw.find(s); at != std::string::npos; at = raw.find(s, at + 1)) ++n;
    return n;
  };
  CHECK(count("LoadStationary") == 1);
  CHECK(count("cycles") == 1);
  CHECK(count("opcode") == 1);
  CHECK(count("MATMUL") == 1 + 5);  // the event name once, plus the "opcode" string value of 5 slices
}

TEST_CASE("pftrace flows connect their source and destination slices", "[trace]") {
  TempDir tmp("flows");
  const ReadTrace t = write_and_read_pftrace(tmp.dir / "t.pftrace");
  REQUIRE(t.problems.empty());
  std::map<uint64_t, std::vector<const ReadSlice*>> starts, ends;
  for (const ReadSlice& s : t.slices) {
    for (uint64_t id : s.flow_ids) starts[id].push_back(&s);
    for (uint64_t id : s.terminating_flow_ids) ends[id].push_back(&s);
  }
  REQUIRE(starts[7].size() == 1);
  REQUIRE(ends[7].size() == 1);
  CHECK(starts[7][0]->name == "MATMUL");
  CHECK(starts[7][0]->begin_ns == 0);
  CHECK(ends[7][0]->name == "ACTIVATE");
  CHECK(ends[7][0]->begin_ns == 27);
  // Flow 8: ACT on core 0 -> DMA step -> ACT on core 1.
  REQUIRE(starts[8].size() == 2);
  CHECK(starts[8][0]->name == "ACTIVATE");
  CHECK(starts[8][1]->name == "dma_copy");
  REQUIRE(ends[8].size() == 1);
  CHECK(ends[8][0]->name == "TENSOR_TENSOR");
  CHECK(t.track(ends[8][0]->track_uuid)->parent_uuid == t.tracks[1].uuid);
  CHECK(starts.size() == 2);
}

TEST_CASE("pftrace counter samples are exact", "[trace]") {
  TempDir tmp("counters");
  const ReadTrace t = write_and_read_pftrace(tmp.dir / "t.pftrace");
  REQUIRE(t.problems.empty());
  std::vector<Sample> got;
  for (const ReadEvent& e : t.events) {
    if (e.type == ReadEventType::kCounter)
      got.push_back({t.track(e.track_uuid)->name, e.ts_ns, e.counter_value});
  }
  CHECK(got == kSamples);
  size_t instants = 0;
  for (const ReadEvent& e : t.events) {
    if (e.type != ReadEventType::kInstant) continue;
    ++instants;
    CHECK(e.name == "semaphore wait");
    CHECK(e.ts_ns == 26);
    CHECK(as_pairs(e.args) ==
          std::vector<std::pair<std::string, Value>>{{"semaphore", int64_t{3}}, {"wait_ns", 26.0}});
  }
  CHECK(instants == 1);
}

TEST_CASE("JSON trace carries the same events as the pftrace", "[trace]") {
  TempDir tmp("json");
  const ReadTrace pt = write_and_read_pftrace(tmp.dir / "t.pftrace");
  REQUIRE(pt.problems.empty());
  const fs::path jpath = tmp.dir / "t.json";
  {
    JsonTraceWriter w(jpath);
    write_scenario(w);
    CHECK(w.clamped_events() == 1);
  }
  const nlohmann::json doc = nlohmann::json::parse(read_all(jpath));
  const auto& events = doc.at("traceEvents");
  auto ns = [](const nlohmann::json& us) {
    return static_cast<uint64_t>(std::llround(us.get<double>() * 1000.0));
  };

  std::map<int64_t, std::string> process_names, thread_names;
  std::map<int64_t, int64_t> thread_pid, thread_sort;
  for (const auto& e : events) {
    if (e.at("ph") != "M") continue;
    if (e.at("name") == "process_name") process_names[e.at("pid")] = e.at("args").at("name");
    if (e.at("name") == "thread_name") {
      thread_names[e.at("tid")] = e.at("args").at("name");
      thread_pid[e.at("tid")] = e.at("pid");
    }
    if (e.at("name") == "thread_sort_index") thread_sort[e.at("tid")] = e.at("args").at("sort_index");
  }
  CHECK(process_names == std::map<int64_t, std::string>{{1, "core 0"}, {2, "core 1"}});
  CHECK(thread_names.size() == 5);
  CHECK(thread_sort.size() == 5);

  // Slices: (track, name, ts, dur, args) as in the protobuf trace.
  using Row = std::tuple<std::string, std::string, uint64_t, uint64_t, std::string>;
  auto args_json = [](const std::vector<ReadArg>& args) {
    nlohmann::json j = nlohmann::json::object();
    for (const ReadArg& a : args) std::visit([&](const auto& v) { j[a.name] = v; }, a.value);
    return j.dump();
  };
  std::multiset<Row> from_pb, from_json;
  for (const ReadSlice& s : pt.slices) {
    from_pb.emplace(pt.track(s.track_uuid)->name, s.name, s.begin_ns, s.end_ns - s.begin_ns,
                    args_json(s.args));
  }
  std::vector<std::tuple<std::string, int64_t, int64_t, uint64_t>> flow_events;  // ph, id, tid, ts
  std::vector<Sample> samples;
  size_t instants = 0;
  for (const auto& e : events) {
    const std::string ph = e.at("ph");
    if (ph == "X") {
      const nlohmann::json args = e.contains("args") ? e.at("args") : nlohmann::json::object();
      from_json.emplace(thread_names.at(e.at("tid")), e.at("name"), ns(e.at("ts")), ns(e.at("dur")),
                        args.dump());
    } else if (ph == "s" || ph == "t" || ph == "f") {
      CHECK(e.at("cat") == "flow");
      CHECK(e.at("name") == "flow");
      CHECK((ph != "f" || e.at("bp") == "e"));
      flow_events.emplace_back(ph, std::stoll(e.at("id").get<std::string>(), nullptr, 16), e.at("tid"),
                               ns(e.at("ts")));
    } else if (ph == "C") {
      REQUIRE(e.at("args").size() == 1);
      samples.push_back({e.at("name"), ns(e.at("ts")), e.at("args").begin().value().get<double>()});
    } else if (ph == "i") {
      ++instants;
      CHECK(e.at("name") == "semaphore wait");
      CHECK(e.at("s") == "t");
      CHECK(ns(e.at("ts")) == 26);
    } else {
      CHECK(ph == "M");
    }
  }
  CHECK(from_json == from_pb);
  CHECK(instants == 1);
  std::sort(samples.begin(), samples.end());
  std::vector<Sample> want = kSamples;
  std::sort(want.begin(), want.end());
  CHECK(samples == want);

  // Flows: v1 start on the source slice's thread and time, a step, and the end on the destination's.
  auto tid_of = [&](std::string_view name, int64_t pid) {
    for (const auto& [tid, n] : thread_names)
      if (n == name && thread_pid[tid] == pid) return tid;
    return int64_t{-1};
  };
  std::sort(flow_events.begin(), flow_events.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<3>(a), std::get<0>(a), std::get<1>(a)) <
           std::tie(std::get<3>(b), std::get<0>(b), std::get<1>(b));
  });
  const std::vector<std::tuple<std::string, int64_t, int64_t, uint64_t>> want_flows = {
      {"s", 7, tid_of("PE matmul", 1), 0}, {"f", 7, tid_of("ACT", 1), 27},   {"s", 8, tid_of("ACT", 1), 27},
      {"t", 8, tid_of("qSyncIO0", 1), 30}, {"f", 8, tid_of("ACT", 2), 1400},
  };
  CHECK(flow_events == want_flows);
  // Counter series are named by unit.
  for (const auto& e : events) {
    if (e.at("ph") == "C" && e.at("name") == "HBM read") CHECK(e.at("args").contains("GB/s"));
    if (e.at("ph") == "C" && e.at("name") == "SBUF bank 0") CHECK(e.at("args").contains("bytes"));
  }
}

TEST_CASE("JSON writes a parent before its children and open slices as B events", "[trace]") {
  TempDir tmp("jsonorder");
  const fs::path path = tmp.dir / "t.json";
  {
    JsonTraceWriter w(path);
    const TrackId p = w.process_track(3, "core");
    const TrackId t = w.thread_track(p, "PE");
    w.slice_begin(t, 1'000, "outer");
    w.slice_begin(t, 1'000, "inner");
    w.instant(t, 1'000, "mark");
    w.slice_end(t, 2'000);
    w.slice_begin(t, 5'000, "never ends");
    w.close();
    CHECK_THROWS_AS(w.slice_end(t, 6'000), trnsim::Error);  // after close
  }
  const nlohmann::json doc = nlohmann::json::parse(read_all(path));
  std::vector<std::string> order;
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") != "M")
      order.push_back(e.at("ph").get<std::string>() + ":" + e.at("name").get<std::string>());
  CHECK(order == std::vector<std::string>{"B:outer", "X:inner", "i:mark", "B:never ends"});
}

TEST_CASE("pftrace streams to disk and round-trips long strings and many names", "[trace]") {
  TempDir tmp("stream");
  const fs::path path = tmp.dir / "big.pftrace";
  const std::string long_value(20'000, 'x');
  {
    PerfettoWriter w(path);
    const TrackId p = w.process_track(1, "core");
    const TrackId t = w.thread_track(p, "PE");
    const TrackId c = w.counter_track(p, "n", CounterUnit::kCount);
    for (uint64_t i = 0; i < 100'000; ++i) {
      const std::string name = fmt::format("op{}", i % 300);  // iids beyond one varint byte
      w.slice_begin(t, i * 10'000, name,
                    {{"i", i}, {"what", i == 5 ? std::string_view(long_value) : "short"}});
      w.slice_end(t, i * 10'000 + 5'000);
      w.counter(c, i * 10'000, static_cast<double>(i));
    }
    // Data reached the disk before close (the writer does not hold the trace in memory), in the temporary
    // that close() renames into place.
    CHECK_FALSE(fs::exists(path));
    const std::vector<fs::path> temps = files_in(tmp.dir);
    REQUIRE(temps.size() == 1);
    CHECK(temps[0].filename().string().starts_with(fmt::format(".trnsim-trace.{}.", ::getpid())));
    CHECK(trnsim::io::is_trace_head(read_all(temps[0]).substr(0, 64)));  // what a cleanup recognises
    CHECK(fs::file_size(temps[0]) > 1'000'000);
    CHECK(w.bytes() >= fs::file_size(temps[0]));
    w.close();
    CHECK(files_in(tmp.dir) == std::vector<fs::path>{tmp.dir / ".trnsim-written", path});
  }
  const ReadTrace t = read_perfetto_trace(path);
  REQUIRE(t.problems.empty());
  REQUIRE(t.slices.size() == 100'000);
  CHECK(t.slices[299].name == "op299");
  CHECK(t.slices[300].name == "op0");
  CHECK(t.slices[99'999].begin_ns == 999'990);
  CHECK(t.slices[99'999].end_ns == 999'995);
  REQUIRE(t.slices[5].args.size() == 2);
  CHECK(std::get<std::string>(t.slices[5].args[1].value) == long_value);
  CHECK(std::get<uint64_t>(t.slices[77'777].args[0].value) == 77'777);
  size_t counters = 0;
  for (const ReadEvent& e : t.events) counters += e.type == ReadEventType::kCounter ? 1 : 0;
  CHECK(counters == 100'000);
}

TEST_CASE("pftrace interns repeated string values and reads them back unchanged", "[trace]") {
  TempDir tmp("repeated");
  const fs::path interned = tmp.dir / "interned.pftrace";
  const fs::path inline_values = tmp.dir / "inline.pftrace";
  const std::string long_value(300, 'y');  // an interned entry longer than one length byte
  auto scenario = [&](TraceSink& w, bool repeated) {
    const TrackId p = w.process_track(1, "core");
    const TrackId t = w.thread_track(p, "PE");
    std::string buffer;  // one reused buffer with changing content, as model::TraceObserver passes texts
    for (uint64_t i = 0; i < 1000; ++i) {
      buffer = fmt::format("src{}.py:{}", i % 3, i % 7);
      const std::string waits = fmt::format("S[0] >= {}", i);  // not repeated: written inline
      const std::string_view value = i % 10 == 9 ? std::string_view(long_value) : std::string_view(buffer);
      const Annotation args[] = {
          repeated ? Annotation::repeated("source", value) : Annotation("source", value),
          {"i", i},
          {"waits", waits}};
      w.slice_begin(t, i * 1000, "OP", args);
      w.slice_end(t, i * 1000 + 500);
    }
    w.close();
  };
  {
    PerfettoWriter w(interned);
    scenario(w, true);
  }
  {
    PerfettoWriter w(inline_values);
    scenario(w, false);
  }
  const ReadTrace a = read_perfetto_trace(interned);
  const ReadTrace b = read_perfetto_trace(inline_values);
  REQUIRE(a.problems.empty());
  REQUIRE(b.problems.empty());
  REQUIRE(a.slices.size() == 1000);
  REQUIRE(b.slices.size() == 1000);
  for (size_t i = 0; i < 1000; ++i) {
    REQUIRE(a.slices[i].args.size() == 3);
    const std::string expected = i % 10 == 9 ? long_value : fmt::format("src{}.py:{}", i % 3, i % 7);
    CHECK(std::get<std::string>(a.slices[i].args[0].value) == expected);
    CHECK(a.slices[i].args[0].name == "source");
    CHECK(std::get<std::string>(a.slices[i].args[2].value) == fmt::format("S[0] >= {}", i));
    CHECK(a.slices[i].args[0].value == b.slices[i].args[0].value);
  }
  // Each distinct value is written once: 100 x 300 bytes and 900 x ~10 bytes become ids of 3 bytes.
  CHECK(fs::file_size(interned) + 30'000 < fs::file_size(inline_values));
}

TEST_CASE("a killed run's unfinished trace goes when the next trace closes in its folder", "[trace]") {
  TempDir tmp("killed");
  // A PID no process has: a child's, reaped.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  // What a SIGKILL leaves: the temporary with its first chunk (a JSON trace's head; a Perfetto packet).
  const std::string json_head = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n{\"ph\":\"M\"";
  const std::string pf_head("\x0a\x85\x80\x80\x00\x50\x01", 7);  // packet, 4-byte length, sequence id 1
  CHECK(trnsim::io::is_trace_head(json_head));
  CHECK(trnsim::io::is_trace_head(pf_head));
  CHECK_FALSE(trnsim::io::is_trace_head("{\"files\": []}"));
  CHECK_FALSE(trnsim::io::is_trace_head(std::string("\x0a\x05\x12\x01", 4)));  // another field first
  const auto killed = [&](int n) { return tmp.dir / fmt::format(".trnsim-trace.{}.{}", child, n); };
  std::ofstream(killed(0)) << json_head;
  std::ofstream(killed(1)) << pf_head;
  std::ofstream(killed(2)) << "";          // killed before its first chunk
  std::ofstream(killed(3)) << "my notes";  // a file of the user's at such a name: kept
  // A live writer's (its lock held; here by this process, as a trnsim in another PID namespace would hold
  // it, whose PID is no process here): kept.
  std::ofstream(killed(4)) << json_head;
  const int live = ::open(killed(4).c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(::flock(live, LOCK_EX) == 0);
  {
    JsonTraceWriter w(tmp.dir / "t.json");
    w.close();
  }
  ::close(live);
  CHECK(files_in(tmp.dir) ==
        std::vector<fs::path>{killed(3), killed(4), tmp.dir / ".trnsim-written", tmp.dir / "t.json"});
  // A name of trnsim's temporaries is never an output's.
  CHECK_THROWS_WITH(JsonTraceWriter(tmp.dir / ".trnsim-trace.1.0"),
                    Catch::Contains(".trnsim-trace.1.0 is a name trnsim gives its own temporary files"));
}

TEST_CASE("an uncreatable trace file is an InputError naming the path", "[trace]") {
  const fs::path bad = "/nonexistent-trnsim-dir/sub/trace.pftrace";
  const fs::path bad_json = "/nonexistent-trnsim-dir/sub/trace.json";
  CHECK_THROWS_WITH(PerfettoWriter(bad), Catch::Contains(bad.string()));
  CHECK_THROWS_AS(PerfettoWriter(bad), trnsim::InputError);
  CHECK_THROWS_WITH(JsonTraceWriter(bad_json), Catch::Contains(bad_json.string()));
  CHECK_THROWS_AS(JsonTraceWriter(bad_json), trnsim::InputError);
  CHECK_THROWS_AS(open_trace_file(bad), trnsim::InputError);
  CHECK_THROWS_WITH(open_trace_file("trace.txt"),
                    Catch::Contains("trace.txt") && Catch::Contains(".pftrace"));
  CHECK_THROWS_WITH(read_perfetto_trace(bad), Catch::Contains(bad.string()));
}

TEST_CASE("a trace replaces its destination only when it is closed", "[trace]") {
  TempDir tmp("replace");
  const fs::path path = tmp.dir / "t.json";
  std::ofstream(path) << "keep";
  // A file trnsim did not write is refused before anything is created (sim/io/replace_check.h).
  CHECK_THROWS_WITH(JsonTraceWriter(path),
                    Catch::Contains("trace file '" + path.string() +
                                    "': cannot write: a file is there that trnsim will "
                                    "not replace: no trnsim record lists it") &&
                        Catch::Contains("pass --overwrite"));
  CHECK(files_in(tmp.dir) == std::vector<fs::path>{path});
  {
    const trnsim::test_util::AllowOverwrite overwrite;  // replaced here on purpose
    OutputFile dropped(path);  // destroyed without close(): a failed write, or a run that ended at once
    dropped.write("new", 3);
    CHECK(read_all(path) == "keep");
  }
  CHECK(read_all(path) == "keep");
  CHECK(files_in(tmp.dir) == std::vector<fs::path>{path});  // no temporary left
  {
    const trnsim::test_util::AllowOverwrite overwrite;
    JsonTraceWriter w(path);
    const TrackId p = w.process_track(1, "core");
    w.slice_begin(w.thread_track(p, "PE"), 0, "x");
    CHECK(read_all(path) == "keep");  // while the trace is written
  }                                   // the writer's destructor closes it, as close() would
  CHECK(nlohmann::json::parse(read_all(path)).at("traceEvents").size() == 5);
  // Recorded in the folder's .trnsim-written: the next trace replaces it without --overwrite.
  CHECK(files_in(tmp.dir) == std::vector<fs::path>{tmp.dir / ".trnsim-written", path});
  JsonTraceWriter(path).close();
  CHECK(nlohmann::json::parse(read_all(path)).at("traceEvents").empty());
  std::ofstream(path, std::ios::app) << " ";  // edited since: refused again
  CHECK_THROWS_WITH(JsonTraceWriter(path), Catch::Contains("it changed since the run that wrote it"));
  // A symlink to a file is refused: the file it points to stays as it was.
  const fs::path target = tmp.dir / "target.json";
  const fs::path link = tmp.dir / "link.json";
  std::ofstream(target) << "old";
  fs::create_symlink(target, link);
  CHECK_THROWS_WITH(JsonTraceWriter(link),
                    Catch::Contains(link.string() + " is a symlink (to " + target.string() +
                                    "): trnsim does not write through links"));
  CHECK(fs::is_symlink(link));
  CHECK(read_all(target) == "old");
  // A device is written in place (never replaced by a regular file), a directory is refused.
  {
    PerfettoWriter w("/dev/null");
    w.process_track(1, "core");
    w.close();
  }
  CHECK(fs::is_character_file("/dev/null"));
  CHECK(dynamic_cast<PerfettoWriter*>(open_trace_file("/dev/null").get()) != nullptr);  // any name
  // A name of 255 bytes: its temporary's name is cut to fit.
  const fs::path longest = tmp.dir / (std::string(250, 't') + ".json");
  {
    JsonTraceWriter w(longest);
    w.close();
  }
  CHECK(nlohmann::json::parse(read_all(longest)).at("traceEvents").empty());
  // A missing or unwritable folder on the way is found before anything is created.
  std::ofstream(tmp.dir / "file") << "x";
  CHECK_THROWS_WITH(check_trace_path(tmp.dir / "file" / "t.json"),
                    Catch::Contains("'" + (tmp.dir / "file").string() + "' is not a directory"));
  CHECK_NOTHROW(check_trace_path(tmp.dir / "new" / "sub" / "t.json"));  // created when the trace is opened
  CHECK_THROWS_WITH(check_trace_path(tmp.dir / "t.txt"), Catch::Contains("unknown extension '.txt'"));
  fs::create_directory(tmp.dir / "d.json");
  CHECK_THROWS_WITH(JsonTraceWriter(tmp.dir / "d.json"), Catch::Contains("is a directory"));
}

TEST_CASE("open_trace_file picks the format from the extension", "[trace]") {
  TempDir tmp("open");
  {
    auto sink = open_trace_file(tmp.dir / "a.pftrace");
    CHECK(dynamic_cast<PerfettoWriter*>(sink.get()) != nullptr);
    auto json = open_trace_file(tmp.dir / "a.json");
    CHECK(dynamic_cast<JsonTraceWriter*>(json.get()) != nullptr);
    CHECK(json->enabled());
  }
  CHECK(fs::exists(tmp.dir / "a.json"));
  CHECK(nlohmann::json::parse(read_all(tmp.dir / "a.json")).at("traceEvents").empty());
}

TEST_CASE("misuse of a sink is a trnsim::Error, never a crash", "[trace]") {
  TempDir tmp("misuse");
  PerfettoWriter w(tmp.dir / "m.pftrace");
  const TrackId p = w.process_track(1, "core");
  const TrackId t = w.thread_track(p, "PE");
  const TrackId c = w.counter_track(p, "n", CounterUnit::kCount);
  CHECK_THROWS_AS(w.process_track(0, "zero"), trnsim::Error);
  CHECK_THROWS_WITH(w.process_track(1, "again"), Catch::Contains("pid 1"));
  CHECK_THROWS_AS(w.thread_track(TrackId{}, "orphan"), trnsim::Error);
  CHECK_THROWS_AS(w.thread_track(c, "under counter"), trnsim::Error);
  CHECK_THROWS_WITH(w.slice_end(t, 0), Catch::Contains("no open slice"));
  CHECK_THROWS_AS(w.slice_begin(c, 0, "x"), trnsim::Error);
  CHECK_THROWS_AS(w.slice_begin(TrackId{99}, 0, "x"), trnsim::Error);
  CHECK_THROWS_AS(w.counter(t, 0, 1.0), trnsim::Error);
  const uint64_t zero[] = {0};
  CHECK_THROWS_AS(w.slice_begin(t, 0, "x", {}, zero), trnsim::Error);
  w.close();
  CHECK_THROWS_AS(w.counter(c, 0, 1.0), trnsim::Error);
  // Nothing bad reached the file.
  const ReadTrace r = read_perfetto_trace(tmp.dir / "m.pftrace");
  CHECK(r.problems.empty());
  CHECK(r.events.empty());
  CHECK(r.tracks.size() == 3);
}

TEST_CASE("the reader reports slices left open", "[trace]") {
  TempDir tmp("open_slices");
  const fs::path path = tmp.dir / "o.pftrace";
  {
    PerfettoWriter w(path);
    const TrackId t = w.thread_track(w.process_track(1, "core"), "PE");
    w.slice_begin(t, 0, "done");
    w.slice_end(t, 1'000);
    w.slice_begin(t, 2'000, "open");
  }
  const ReadTrace r = read_perfetto_trace(path);
  REQUIRE(r.problems.size() == 1);
  CHECK_THAT(r.problems[0], Catch::Contains("1 slices left open"));
  REQUIRE(r.slices.size() == 1);
  CHECK(r.slices[0].name == "done");
}

TEST_CASE("NullSink records nothing and still hands out distinct tracks", "[trace]") {
  NullSink n;
  CHECK_FALSE(n.enabled());
  const TrackId a = n.process_track(1, "core");
  const TrackId b = n.thread_track(a, "PE");
  CHECK(a.valid());
  CHECK(a != b);
  n.slice_begin(b, 0, "x", {{"k", 1}});
  n.slice_end(b, 1);
  n.close();
}
