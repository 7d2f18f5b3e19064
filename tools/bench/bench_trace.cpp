// Trace writer throughput: writes the same synthetic instruction stream (slices with the annotations the
// model attaches, counters, semaphore flows) through each writer and prints events/s and bytes/event.
// Usage: bench_trace [events (default 1000000)] [output dir (default: the system temp dir)]
// [all|pftrace|json]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "sim/base/error.h"
#include "sim/trace/json_trace_writer.h"
#include "sim/trace/perfetto_writer.h"
#include "sim/trace/trace_sink.h"

namespace {

using trnsim::trace::Annotation;
using trnsim::trace::CounterUnit;
using trnsim::trace::TraceSink;
using trnsim::trace::TrackId;

// Emits about `events` sink calls; returns how many were made.
uint64_t drive(TraceSink& sink, uint64_t events) {
  static const char* kOpcodes[] = {"MATMUL",   "LDWEIGHTS",    "TENSOR_TENSOR",
                                   "ACTIVATE", "DMA_DIRECT2D", "WRITE"};
  const TrackId core = sink.process_track(1, "core 0");
  std::vector<TrackId> engines;
  for (const char* name : {"PE matmul", "PE LoadStationary", "DVE", "ACT", "POOL", "SP"}) {
    engines.push_back(sink.thread_track(core, name, "", static_cast<int32_t>(engines.size())));
  }
  const TrackId hbm = sink.counter_track(core, "HBM read", CounterUnit::kCustom, "GB/s");
  std::vector<uint64_t> ts(engines.size(), 0);
  uint64_t calls = 0;
  uint64_t flow = 0;
  for (uint64_t i = 0; calls < events; ++i) {
    const size_t e = i % engines.size();
    const uint64_t begin = ts[e] + 417 * (i % 7);
    const uint64_t end = begin + 26'700 + 1000 * (i % 13);
    ts[e] = end;
    // Text values the model repeats are marked as such, as model::TraceObserver does.
    const Annotation args[] = {Annotation::repeated("opcode", kOpcodes[i % 6]),
                               {"cycles", 64 + i % 448},
                               {"clock_ghz", 2.4},
                               {"bytes", uint64_t{65536}},
                               Annotation::repeated("source", "kernel.cpp:118")};
    const uint64_t out[] = {++flow};
    const uint64_t in[] = {flow - 1};
    sink.slice_begin(engines[e], begin, "MATMUL", args, out,
                     flow > 1 ? std::span<const uint64_t>(in) : std::span<const uint64_t>());
    sink.slice_end(engines[e], end);
    calls += 2;
    if (i % 8 == 0) {
      sink.counter(hbm, end, static_cast<double>(i % 700));
      ++calls;
    }
  }
  sink.close();
  return calls;
}

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Rates use process CPU time (wall time is printed too): on a shared machine wall time mostly measures load.
void run(const char* label, TraceSink& sink, uint64_t events, const std::filesystem::path& path) {
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_seconds();
  const uint64_t calls = drive(sink, events);
  const double cpu = cpu_seconds() - c0;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uintmax_t bytes = path.empty() ? 0 : std::filesystem::file_size(path);
  const double n = static_cast<double>(calls);
  std::printf(
      "%-8s %9llu events  cpu %6.3f s  wall %6.3f s  %7.2f M events/s  %7.1f ns/event  %6.2f bytes/event\n",
      label, static_cast<unsigned long long>(calls), cpu, wall, n / cpu / 1e6, cpu * 1e9 / n,
      static_cast<double>(bytes) / n);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const uint64_t events = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1'000'000;
    const std::filesystem::path dir =
        argc > 2 ? std::filesystem::path(argv[2]) : std::filesystem::temp_directory_path();
    const auto pf = dir / "bench_trace.pftrace";
    const auto js = dir / "bench_trace.json";
    const std::string only = argc > 3 ? argv[3] : "all";
    if (only == "all") {
      trnsim::trace::NullSink null;
      run("null", null, events, {});
    }
    if (only == "all" || only == "pftrace") {
      trnsim::trace::PerfettoWriter w(pf);
      run("pftrace", w, events, pf);
    }
    if (only == "all" || only == "json") {
      trnsim::trace::JsonTraceWriter w(js);
      run("json", w, events, js);
    }
    std::filesystem::remove(pf);
    std::filesystem::remove(js);
  } catch (const trnsim::Error& e) {
    std::fprintf(stderr, "bench_trace: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
