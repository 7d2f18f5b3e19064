// TraceObserver: small programs run with a trace written to a temp dir, decoded with read_perfetto_trace and
// checked against the program and the RunStats. One model run per TEST_CASE (each case is its own process).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "sim/isa/opcode_table.h"
#include "sim/isa/semantics.h"
#include "sim/model/run.h"
#include "sim/model/trace_observer.h"
#include "sim/trace/open_trace.h"
#include "sim/trace/reader/pftrace_reader.h"
#include "tests/sim/model/model_test_util.h"

using namespace trnsim;
using namespace trnsim::test;
using isa::DType;
using isa::Engine;
using isa::Opcode;
using trace::ReadSlice;
using trace::ReadTrace;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path dir;
  explicit TempDir(std::string_view tag) {
    dir = fs::temp_directory_path() / fmt::format("trnsim_trace_obs_{}_{}", tag, ::getpid());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

config::HwConfig trn2() {
  return config::load_hw_config("trn2", {{"pe.throttle.enabled", false}, {"sync.kernel_launch_ns", 0}});
}

isa::TensorDecl tensor(const char* name, uint32_t rows, uint32_t cols) {
  isa::TensorDecl d;
  d.name = name;
  d.dtype = DType::BF16;
  d.shape = {rows, cols};
  return d;
}

isa::Instruction matmul(uint32_t n, std::vector<isa::SemWait> waits = {},
                        std::vector<isa::SemUpdate> ups = {}) {
  return make(Opcode::NcMatmul, Engine::PE,
              {psum(DType::F32, 128, {n}), sbuf(DType::BF16, 128, {128}), sbuf(DType::BF16, 128, {n}, 4096)},
              std::move(waits), std::move(ups));
}

isa::Instruction load(uint32_t t, uint32_t cols, uint8_t queue, std::vector<isa::SemUpdate> ups = {},
                      int64_t sbuf_off = 0) {
  auto i =
      make(Opcode::DmaCopy, Engine::SP,
           {sbuf(DType::BF16, 128, {cols}, sbuf_off), hbm(t, DType::BF16, 128, cols)}, {}, std::move(ups));
  i.dma_queue = queue;
  return i;
}

struct Traced {
  model::RunResult result;
  ReadTrace trace;
  model::TraceObserver::Counts counts;
};

Traced run_traced(const isa::Program& p, const config::HwConfig& hw, const fs::path& file) {
  auto sink = trace::open_trace_file(file);
  model::TraceObserver obs(*sink, p, hw);
  model::RunOptions o;
  o.numerics = false;
  o.observer = &obs;
  Traced t;
  t.result = model::run_program(p, hw, o);
  sink->close();
  t.counts = obs.counts();
  if (file.extension() == ".pftrace") t.trace = trace::read_perfetto_trace(file);
  return t;
}

const trace::ReadValue* arg(const ReadSlice& s, std::string_view name) {
  for (const auto& a : s.args)
    if (a.name == name) return &a.value;
  return nullptr;
}
uint64_t arg_u(const ReadSlice& s, std::string_view name) {
  const auto* v = arg(s, name);
  REQUIRE(v != nullptr);
  if (const auto* u = std::get_if<uint64_t>(v)) return *u;
  return static_cast<uint64_t>(std::get<int64_t>(*v));
}
double arg_d(const ReadSlice& s, std::string_view name) {
  const auto* v = arg(s, name);
  REQUIRE(v != nullptr);
  return std::get<double>(*v);
}
std::string arg_s(const ReadSlice& s, std::string_view name) {
  const auto* v = arg(s, name);
  REQUIRE(v != nullptr);
  return std::get<std::string>(*v);
}

int32_t pid_of(const ReadTrace& t, uint64_t uuid) {
  for (const auto* k = t.track(uuid); k; k = t.track(k->parent_uuid))
    if (k->kind == trace::ReadTrackKind::kProcess) return k->pid;
  return 0;
}
std::string track_name(const ReadTrace& t, uint64_t uuid) {
  const auto* k = t.track(uuid);
  return k ? k->name : "";
}

const char* engine_track(Engine e) {
  static constexpr const char* kNames[] = {"PE matmul", "DVE", "ACT", "POOL", "SP"};
  return kNames[static_cast<int>(e)];
}

// A flow: its source and destination slices.
struct Flow {
  const ReadSlice* from = nullptr;
  const ReadSlice* to = nullptr;
};

// The rules every trace must satisfy; returns the flows.
std::vector<Flow> check_trace(const Traced& tr, const isa::Program& p) {
  const ReadTrace& t = tr.trace;
  const model::RunStats& st = tr.result.stats;
  INFO(fmt::format("{}", fmt::join(t.problems, "\n")));
  REQUIRE(t.problems.empty());  // described before use, balanced, no time reversal
  CHECK(t.slices.size() == tr.counts.slices);

  // Every instruction exactly once on its engine track, DMA instructions once more on a queue track.
  std::map<std::tuple<int, std::string, uint64_t>, const ReadSlice*> main;
  std::map<std::tuple<int, std::string, uint64_t>, int> seen, transfers;
  std::map<uint64_t, std::vector<const ReadSlice*>> by_track;
  for (const auto& s : t.slices) {
    REQUIRE(t.track(s.track_uuid) != nullptr);
    CHECK(s.depth == 0);
    by_track[s.track_uuid].push_back(&s);
    const int core = pid_of(t, s.track_uuid) - 1;
    const std::string tn = track_name(t, s.track_uuid);
    if (tn.starts_with("q"))
      ++transfers[{core, arg_s(s, "issuer"), arg_u(s, "index")}];
    else if (tn != "PE LoadStationary") {
      auto key = std::make_tuple(core, tn, arg_u(s, "index"));
      ++seen[key];
      main[key] = &s;
    }
  }
  size_t n_inst = 0, n_dma = 0;
  for (int c = 0; c < p.num_cores; ++c)
    for (int e = 0; e < isa::kNumEngines; ++e) {
      const auto& stream = p.streams[c][e];
      double busy_ns = 0;
      for (uint64_t i = 0; i < stream.size(); ++i) {
        auto key = std::make_tuple(c, std::string(engine_track(static_cast<Engine>(e))), i);
        INFO(fmt::format("core {} {} #{}", c, std::get<1>(key), i));
        REQUIRE(seen[key] == 1);
        const ReadSlice& s = *main[key];
        CHECK(arg_s(s, "opcode") == isa::opcode_name(stream[i].op));
        for (const char* a : {"operands", "sem_waits", "source"}) CHECK(arg(s, a) != nullptr);
        for (const char* a : {"cycles", "bytes", "flops"}) CHECK(arg(s, a) != nullptr);
        CHECK(arg_d(s, "clock_ghz") > 0);
        CHECK(arg_d(s, "wait_ns") >= 0);
        busy_ns += static_cast<double>(s.end_ns - s.begin_ns);
        if (isa::is_dma(stream[i].op)) {
          CHECK(transfers[{c, isa::engine_name(static_cast<Engine>(e)), i}] == 1);
          ++n_dma;
        }
        ++n_inst;
      }
      // Busy time: slice durations sum to the engine's busy time within 1 ns per slice.
      CHECK(std::abs(busy_ns - st.cores[c].engines[e].busy.ns()) <=
            static_cast<double>(stream.size()) + 1e-9);
    }
  CHECK(seen.size() == n_inst);
  size_t n_transfers = 0;
  for (const auto& [k, n] : transfers) {
    CHECK(n == 1);
    ++n_transfers;
  }
  CHECK(n_transfers == n_dma);

  // Slices of one track never overlap (each is top-level, so nesting holds trivially).
  for (auto& [uuid, v] : by_track) {
    std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->begin_ns < b->begin_ns; });
    for (size_t i = 1; i < v.size(); ++i) CHECK(v[i]->begin_ns >= v[i - 1]->end_ns);
  }

  // Flows: each id starts at one slice and ends at one later slice that waited on a semaphore.
  std::map<uint64_t, Flow> flows;
  for (const auto& s : t.slices) {
    for (uint64_t id : s.flow_ids) {
      CHECK(flows[id].from == nullptr);
      flows[id].from = &s;
    }
    for (uint64_t id : s.terminating_flow_ids) {
      CHECK(flows[id].to == nullptr);
      flows[id].to = &s;
    }
  }
  std::vector<Flow> out;
  for (const auto& [id, f] : flows) {
    REQUIRE(f.from != nullptr);
    REQUIRE(f.to != nullptr);
    CHECK(f.from->end_ns <= f.to->begin_ns);
    CHECK(!arg_s(*f.to, "sem_waits").empty());
    out.push_back(f);
  }
  CHECK(out.size() == tr.counts.flows);

  // HBM bytes integrate from the bandwidth counters (GB/s = bytes/ns) within the ns rounding of each sample.
  for (int c = 0; c < p.num_cores; ++c) {
    for (const char* name : {"HBM read", "HBM write"}) {
      std::vector<std::pair<uint64_t, double>> samples;
      for (const auto& e : t.events)
        if (e.type == trace::ReadEventType::kCounter && pid_of(t, e.track_uuid) == c + 1 &&
            track_name(t, e.track_uuid) == name)
          samples.emplace_back(e.ts_ns, e.counter_value);
      REQUIRE(!samples.empty());
      double bytes = 0, peak = 0;
      for (size_t i = 0; i + 1 < samples.size(); ++i) {
        bytes += samples[i].second * static_cast<double>(samples[i + 1].first - samples[i].first);
        peak = std::max(peak, samples[i].second);
      }
      CHECK(samples.back().second == 0);
      const double want = static_cast<double>(
          std::string_view(name) == "HBM read" ? st.cores[c].hbm_bytes_read : st.cores[c].hbm_bytes_written);
      INFO(fmt::format("core {} {}: integrated {} bytes, stats {}", c, name, bytes, want));
      CHECK(std::abs(bytes - want) <= peak * static_cast<double>(samples.size()) + 1);
    }
  }
  return out;
}

std::vector<const ReadSlice*> on_track(const ReadTrace& t, int pid, std::string_view name) {
  std::vector<const ReadSlice*> v;
  for (const auto& s : t.slices)
    if (pid_of(t, s.track_uuid) == pid && track_name(t, s.track_uuid) == name) v.push_back(&s);
  return v;
}

// DMA load -> matmul -> {ACT, DVE} (both wait for the same update) -> ACT releases a DMA store.
isa::Program dependency_chain() {
  isa::Program p;
  p.files = {"?", "kernel.cpp"};
  p.tensors.push_back(tensor("x", 128, 2048));
  p.tensors.push_back(tensor("y", 128, 512));
  auto ld = load(0, 2048, 0, {{1, 1, false}});
  ld.loc = {1, 10};
  push(p, 0, ld);
  auto mm = matmul(512, {{1, 1}}, {{2, 1, false}});
  mm.loc = {1, 11};
  push(p, 0, mm);
  push(p, 0,
       make(Opcode::Activation, Engine::ACT,
            {sbuf(DType::BF16, 128, {512}, 65536), psum(DType::F32, 128, {512})}, {{2, 1}}, {{3, 1, false}}));
  push(p, 0,
       make(Opcode::TensorCopy, Engine::DVE,
            {sbuf(DType::BF16, 128, {512}, 98304), psum(DType::F32, 128, {512})}, {{2, 1}}, {}));
  auto st = make(Opcode::DmaCopy, Engine::SP,
                 {hbm(1, DType::BF16, 128, 512), sbuf(DType::BF16, 128, {512}, 65536)}, {{3, 1}}, {});
  st.dma_queue = 1;
  push(p, 0, st);
  return p;
}

}  // namespace

TEST_CASE("trace: matmuls on the PE matmul track, LoadStationary on its own overlapping track", "[trace]") {
  TempDir tmp("mm");
  isa::Program p;
  p.files = {"?", "mm.cpp"};
  for (int i = 0; i < 3; ++i) {
    auto m = matmul(128);
    m.loc = {1, static_cast<uint32_t>(20 + i)};
    push(p, 0, m);
  }
  const Traced tr = run_traced(p, trn2(), tmp.dir / "mm.pftrace");
  check_trace(tr, p);
  const auto& t = tr.trace;
  const auto mm = on_track(t, 1, "PE matmul");
  const auto ls = on_track(t, 1, "PE LoadStationary");
  REQUIRE(mm.size() == 3);
  REQUIRE(ls.size() == 3);
  // LS 13334 ps, MM 53334 ps (test_model.cpp): MM(0) [13, 67] ns, LS(1) runs under it from 13 ns.
  CHECK(mm[0]->name == "MATMUL");
  CHECK(ls[1]->name == "LDWEIGHTS");
  CHECK(mm[0]->begin_ns == 13);
  CHECK(mm[0]->end_ns == 67);
  CHECK(ls[1]->begin_ns == 13);
  CHECK(ls[1]->begin_ns < mm[0]->end_ns);
  CHECK(arg_u(*mm[0], "cycles") == 128);
  CHECK(arg_u(*ls[0], "cycles") == 32);
  CHECK(arg_d(*mm[0], "clock_ghz") == Approx(2.4));
  CHECK(arg_u(*mm[0], "flops") == 2ull * 128 * 128 * 128);
  CHECK(arg_s(*mm[1], "source") == "mm.cpp:21");
  CHECK(arg_s(*mm[0], "operands") ==
        "dst=psum[0:128]+0 [128] float32; stationary=sbuf[0:128]+0 [128] bfloat16; moving=sbuf[0:128]+4096 "
        "[128] bfloat16");
  // Track order as promised: PE matmul before PE LoadStationary before the other engines.
  const auto* mt = t.track(mm[0]->track_uuid);
  const auto* lt = t.track(ls[0]->track_uuid);
  CHECK(mt->sibling_order_rank < lt->sibling_order_rank);
  CHECK_THAT(mt->description, Catch::Matchers::Contains("2.4 GHz"));
  const auto* proc = t.track(mt->parent_uuid);
  REQUIRE(proc->kind == trace::ReadTrackKind::kProcess);
  CHECK(proc->pid == 1);
  CHECK(proc->name == "core 0 (trn2 NeuronCore, LNC2 pcore 0)");
  CHECK(tr.result.stats.cores[0].pe_ls_busy.ns() == Approx(3 * 13.334));
}

TEST_CASE("trace: DMA queues get their own tracks, overlapping transfers go on sub-tracks", "[trace]") {
  TempDir tmp("dma");
  isa::Program p;
  p.tensors.push_back(tensor("x", 128, 2048));
  p.tensors.push_back(tensor("y", 128, 2048));
  for (int i = 0; i < 4; ++i) push(p, 0, load(0, 2048, 0, {}, i * 4096));
  for (int i = 0; i < 2; ++i) push(p, 0, load(0, 2048, 3, {}, 16384 + i * 4096));
  auto st = make(Opcode::DmaCopy, Engine::ACT,
                 {hbm(1, DType::BF16, 128, 2048), sbuf(DType::BF16, 128, {2048}, 32768)});
  st.dma_queue = 5;
  push(p, 0, st);
  push(p, 1, load(0, 2048, 0));
  const Traced tr = run_traced(p, trn2(), tmp.dir / "dma.pftrace");
  check_trace(tr, p);
  const auto& t = tr.trace;
  // Queue tracks, named as in Neuron profiles, and sub-tracks of the same name under qSyncIO0.
  std::map<std::string, int> names;
  const trace::ReadTrack* q0 = nullptr;
  for (const auto& k : t.tracks) {
    if (k.kind == trace::ReadTrackKind::kCounter || !k.name.starts_with("q")) continue;
    ++names[k.name];
    if (k.name == "qSyncIO0" && pid_of(t, k.uuid) == 1 &&
        t.track(k.parent_uuid)->kind == trace::ReadTrackKind::kProcess)
      q0 = &k;
  }
  REQUIRE(q0 != nullptr);
  CHECK(names.count("qSyncIO3") == 1);
  CHECK(names["qScalarIO5"] == 1);
  // 4 transfers of 512 KiB on queue 0 of core 0: each spans setup (~1.3 us) + data, so they overlap.
  std::set<uint64_t> lanes;
  size_t q0_slices = 0;
  for (const auto& s : t.slices) {
    const auto* k = t.track(s.track_uuid);
    if (k->name != "qSyncIO0" || pid_of(t, k->uuid) != 1) continue;
    ++q0_slices;
    lanes.insert(k->uuid);
    if (k->uuid != q0->uuid) CHECK(k->parent_uuid == q0->uuid);
    CHECK(s.name == "DMA_COPY");
    CHECK(arg_u(s, "bytes") == 128ull * 4096);
  }
  CHECK(q0_slices == 4);
  CHECK(lanes.size() >= 2);
  CHECK(on_track(t, 2, "qSyncIO0").size() == 1);
  // Outstanding DMAs return to 0; the counter reached 4 on core 0 (four triggers before the first completes).
  double peak = 0, last = -1;
  for (const auto& e : t.events)
    if (e.type == trace::ReadEventType::kCounter && pid_of(t, e.track_uuid) == 1 &&
        track_name(t, e.track_uuid) == "DMA outstanding") {
      peak = std::max(peak, e.counter_value);
      last = e.counter_value;
    }
  CHECK(peak >= 4);
  CHECK(last == 0);
  // Occupancy: core 1's one load fills [0, 4096) of every partition (2048 BF16) while its data moves, then
  // nothing; no PSUM is touched. Samples are in time order on each track.
  std::map<std::string, std::vector<std::pair<uint64_t, double>>> occ;
  for (const auto& e : t.events)
    if (e.type == trace::ReadEventType::kCounter && pid_of(t, e.track_uuid) == 2 &&
        track_name(t, e.track_uuid).ends_with("occupancy"))
      occ[track_name(t, e.track_uuid)].emplace_back(e.ts_ns, e.counter_value);
  REQUIRE(occ["SBUF occupancy"].size() == 3);
  CHECK(occ["SBUF occupancy"][0] == std::pair<uint64_t, double>{0, 0});
  CHECK(occ["SBUF occupancy"][1].second == 4096);
  CHECK(occ["SBUF occupancy"][2].second == 0);
  CHECK(occ["SBUF occupancy"][1].first < occ["SBUF occupancy"][2].first);
  CHECK(occ["PSUM occupancy"] == std::vector<std::pair<uint64_t, double>>{{0, 0}});
}

TEST_CASE("trace: SBUF and PSUM occupancy counters step at the instructions' ends, by their byte ranges",
          "[trace]") {
  TempDir tmp("occupancy");
  isa::Program p;
  // Core 0's three matmuls of N = 128 (trn2, throttle off): LoadStationary 128 / 4 = 32 cycles at 2.4 GHz =
  // 13334 ps, MultiplyMoving 128 cycles = 53334 ps, each LS under the previous MM: matmul k holds its
  // operands from its LS start to its MM end: #0 [0, 66668], #1 [13334, 120002], #2 [66668, 173336] ps. Bytes
  // per partition: stationary 128 BF16 = 256, moving 128 BF16 = 256, PSUM 128 F32 = 512.
  //   #0: stationary [0, 256), moving [4096, 4352), PSUM [0, 512)
  //   #1: stationary [256, 512), moving [4096, 4352) (#0's), PSUM [512, 1024)
  //   #2: stationary [512, 768), moving [8192, 8448), PSUM [0, 512) (#0's)
  auto mm = [&](int64_t stationary, int64_t moving, int64_t out) {
    push(p, 0,
         make(Opcode::NcMatmul, Engine::PE,
              {psum(DType::F32, 128, {128}, out), sbuf(DType::BF16, 128, {128}, stationary),
               sbuf(DType::BF16, 128, {128}, moving)}));
  };
  mm(0, 4096, 0);
  mm(256, 4096, 512);
  mm(512, 8192, 0);
  // And a POOL iota over partitions 32..63 only (quadrant 1): 512 int32 = [16384, 18432), 2048 bytes per
  // partition of that quadrant, for 150 + 512 = 662 cycles at 1.2 GHz = [0, 551667] ps.
  push(p, 0,
       make(Opcode::Iota, Engine::POOL, {onchip(isa::MemSpace::SBUF, DType::I32, 32, {512}, 16384, 32)}));
  const Traced tr = run_traced(p, trn2(), tmp.dir / "occupancy.pftrace");
  check_trace(tr, p);
  std::map<std::string, std::vector<std::pair<uint64_t, double>>> occ;
  for (const auto& e : tr.trace.events)
    if (e.type == trace::ReadEventType::kCounter && pid_of(tr.trace, e.track_uuid) == 1 &&
        track_name(tr.trace, e.track_uuid).ends_with("occupancy"))
      occ[track_name(tr.trace, e.track_uuid)].emplace_back(e.ts_ns, e.counter_value);
  using Steps = std::vector<std::pair<uint64_t, double>>;
  // SBUF, the fullest quadrant (1: the matmuls' ranges span all four, the iota's only quadrant 1), in ns
  // (500 ps rounds up):
  //   0:   #0's stationary and moving 256 + 256, the iota's 2048       = 2560
  //   13:  + #1's stationary 256                                        = 2816
  //   67:  - #0's stationary 256, + #2's stationary and moving 512      = 3072
  //   120: - #1's stationary and the shared moving 256 + 256            = 2560
  //   173: - #2's 512                                                   = 2048
  //   552: - the iota's 2048                                            = 0
  CHECK(occ["SBUF occupancy"] ==
        Steps{{0, 2560}, {13, 2816}, {67, 3072}, {120, 2560}, {173, 2048}, {552, 0}});
  // PSUM: [0, 512) from #0's start to #2's end, [512, 1024) during #1.
  CHECK(occ["PSUM occupancy"] == Steps{{0, 512}, {13, 1024}, {120, 512}, {173, 0}});
  // Core 1 touched nothing: one sample of 0 on each.
  for (const char* name : {"SBUF occupancy", "PSUM occupancy"}) {
    Steps core1;
    for (const auto& e : tr.trace.events)
      if (e.type == trace::ReadEventType::kCounter && pid_of(tr.trace, e.track_uuid) == 2 &&
          track_name(tr.trace, e.track_uuid) == name)
        core1.emplace_back(e.ts_ns, e.counter_value);
    CHECK(core1 == Steps{{0, 0}});
  }
  // Their units, as Perfetto shows them.
  for (const auto& k : tr.trace.tracks)
    if (k.kind == trace::ReadTrackKind::kCounter && k.name.ends_with("occupancy"))
      CHECK(k.unit_name == "bytes/partition");
}

TEST_CASE("trace: semaphore waits across engines become flows from the releasing slice", "[trace]") {
  TempDir tmp("sem");
  const isa::Program p = dependency_chain();
  const Traced tr = run_traced(p, trn2(), tmp.dir / "sem.pftrace");
  const auto flows = check_trace(tr, p);
  const auto& t = tr.trace;
  const auto& st = tr.result.stats;
  // load -> matmul, matmul -> ACT, matmul -> DVE (one update releases both), ACT -> store trigger.
  std::multiset<std::pair<std::string, std::string>> got;
  for (const auto& f : flows) got.emplace(track_name(t, f.from->track_uuid), track_name(t, f.to->track_uuid));
  const std::multiset<std::pair<std::string, std::string>> want = {
      {"qSyncIO0", "PE matmul"}, {"PE matmul", "ACT"}, {"PE matmul", "DVE"}, {"ACT", "SP"}};
  CHECK(got == want);
  for (const auto& f : flows)
    if (track_name(t, f.to->track_uuid) == "SP") CHECK(f.to->name == "DMA_TRIGGER");

  const auto mm = on_track(t, 1, "PE matmul");
  REQUIRE(mm.size() == 1);
  CHECK(arg_s(*mm[0], "sem_waits") == "S[1] >= 1");
  CHECK(arg_s(*mm[0], "source") == "kernel.cpp:11");
  // wait_ns is the sequencer's semaphore wait: the engine's only instruction, so it equals the stats.
  CHECK(arg_d(*mm[0], "wait_ns") == Approx(st.cores[0].engines[0].semaphore_wait.ns()).margin(1e-9));
  CHECK(arg_d(*mm[0], "wait_ns") > 1300);  // the load's ~1.3 us fixed cost at least
  const auto act = on_track(t, 1, "ACT");
  REQUIRE(act.size() == 1);
  CHECK(arg_d(*act[0], "wait_ns") ==
        Approx(st.cores[0].engines[int(Engine::ACT)].semaphore_wait.ns()).margin(1e-9));
  // The transfer slice that released the matmul ends before the matmul starts (10 ns semaphore latency).
  const auto q = on_track(t, 1, "qSyncIO0");
  REQUIRE(q.size() == 1);
  CHECK(q[0]->end_ns + 10 <= mm[0]->begin_ns + 1);
  CHECK(arg_s(*q[0], "operands") ==
        "dst=sbuf[0:128]+0 [2048] bfloat16; src=hbm:x[128 rows]+0 [2048] bfloat16");
}

TEST_CASE("trace: core_barrier flows from the last core to arrive to the one that waited", "[trace]") {
  TempDir tmp("barrier");
  const isa::Program p = barrier_after_iota();
  const Traced tr = run_traced(p, trn2(), tmp.dir / "barrier.pftrace");
  const auto flows = check_trace(tr, p);
  REQUIRE(flows.size() == 1);
  const auto& t = tr.trace;
  CHECK(pid_of(t, flows[0].from->track_uuid) == 2);
  CHECK(pid_of(t, flows[0].to->track_uuid) == 1);
  CHECK(flows[0].from->name == "PSEUDO_CORE_BARRIER");
  CHECK(flows[0].to->name == "PSEUDO_CORE_BARRIER");
  // Core 1 reaches its barrier at 551.667 ns; its signal lands on core 0 100 ns later (test_model.cpp).
  CHECK(flows[0].from->begin_ns == 552);
  CHECK(flows[0].to->begin_ns == 652);
  CHECK(arg_d(*flows[0].to, "wait_ns") == Approx(651.667));
  CHECK(arg_s(*flows[0].to, "sem_waits") == "S[63] >= 1 (core_barrier)");
  CHECK(t.track(t.track(flows[0].from->track_uuid)->parent_uuid)->name ==
        "core 1 (trn2 NeuronCore, LNC2 pcore 1)");
}

TEST_CASE("trace: the JSON trace holds the same slices, flows and counters", "[trace]") {
  TempDir tmp("json");
  isa::Program p = dependency_chain();
  push(p, 1, load(0, 2048, 2));
  const Traced pf = run_traced(p, trn2(), tmp.dir / "t.pftrace");
  check_trace(pf, p);
  const Traced js = run_traced(p, trn2(), tmp.dir / "t.json");
  CHECK(js.counts.slices == pf.counts.slices);
  CHECK(js.counts.flows == pf.counts.flows);
  CHECK(js.counts.counter_samples == pf.counts.counter_samples);

  std::ifstream in(tmp.dir / "t.json");
  const auto j = nlohmann::json::parse(in);
  std::multiset<std::tuple<std::string, uint64_t, uint64_t>> x_json, x_pf;  // name, ts, dur (ns)
  size_t s = 0, f = 0, c = 0;
  for (const auto& e : j.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "X")
      x_json.emplace(e.at("name"), std::llround(e.at("ts").get<double>() * 1000),
                     std::llround(e.at("dur").get<double>() * 1000));
    s += ph == "s";
    f += ph == "f";
    c += ph == "C";
  }
  for (const auto& sl : pf.trace.slices) x_pf.emplace(sl.name, sl.begin_ns, sl.end_ns - sl.begin_ns);
  CHECK(x_json == x_pf);
  CHECK(s == pf.counts.flows);
  CHECK(f == pf.counts.flows);
  size_t pf_counters = 0;
  for (const auto& e : pf.trace.events) pf_counters += e.type == trace::ReadEventType::kCounter;
  CHECK(c == pf_counters);
  CHECK(c == pf.counts.counter_samples);
}
