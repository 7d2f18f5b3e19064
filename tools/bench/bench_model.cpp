// Model speed benchmark: builds a synthetic LNC=2 program of about N instructions (a DMA -> PE -> ACT -> DVE
// -> DMA pipeline per core, chained by semaphores, plus independent POOL work) and reports simulated
// instructions per host second. Usage: trnsim_bench_model [instructions] [on|off] [hw]
// [TRACE.pftrace|.json|null] (with a trace file, the run writes it through model::TraceObserver:
// tools/bench/bench_trace_model.sh).
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "sim/base/error.h"
#include "sim/config/hw_config.h"
#include "sim/isa/patterns.h"
#include "sim/isa/semantics.h"
#include "sim/model/run.h"
#include "sim/model/trace_observer.h"
#include "sim/trace/open_trace.h"

using namespace trnsim;
using isa::DType;
using isa::Engine;
using isa::MemSpace;
using isa::Opcode;

namespace {

// CPU seconds of this thread: on a loaded machine the run's wall time also counts the time it waited.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

isa::AccessPattern onchip(MemSpace s, DType t, uint32_t parts, uint32_t n, int64_t off) {
  isa::AccessPattern a;
  a.space = s;
  a.dtype = t;
  a.partitions = parts;
  a.offset_bytes = off;
  a.ndim = 1;
  a.set_dim(0, {1, n});
  return a;
}

isa::Instruction make(Opcode op, Engine e, std::initializer_list<isa::AccessPattern> ops, uint16_t wait_sem,
                      uint32_t wait_value, int update_sem) {
  isa::Instruction i = isa::make_instruction(op, e, ops);
  if (wait_value > 0) i.waits.push_back({wait_sem, wait_value});
  if (update_sem >= 0) i.updates.push_back({static_cast<uint16_t>(update_sem), 1, false});
  return i;
}

isa::Program build(uint64_t instructions) {
  isa::Program p;
  const uint32_t K = 32, M = 32, N = 64;
  for (const char* name : {"in", "out"}) {
    isa::TensorDecl t;
    t.name = name;
    t.dtype = DType::BF16;
    t.shape = {K, N};
    p.tensors.push_back(t);
  }
  const uint64_t iters = instructions / 12 + 1;  // 6 instructions per core per iteration
  for (int core = 0; core < 2; ++core) {
    auto& s = p.streams[core];
    for (uint64_t i = 0; i < iters; ++i) {
      const auto v = static_cast<uint32_t>(i + 1);
      const int64_t slot = static_cast<int64_t>(i % 4) * 4096;
      auto ld = make(Opcode::DmaCopy, Engine::SP,
                     {onchip(MemSpace::SBUF, DType::BF16, K, N, slot), isa::hbm_rows(0, DType::BF16, K, N)},
                     0, 0, 0);
      ld.dma_queue = static_cast<uint8_t>(i % 4);
      s[int(Engine::SP)].push_back(ld);
      s[int(Engine::PE)].push_back(make(
          Opcode::NcMatmul, Engine::PE,
          {onchip(MemSpace::PSUM, DType::F32, M, N, (i % 8) * 2048),
           onchip(MemSpace::SBUF, DType::BF16, K, M, 65536), onchip(MemSpace::SBUF, DType::BF16, K, N, slot)},
          0, v, 1));
      s[int(Engine::ACT)].push_back(make(Opcode::Activation, Engine::ACT,
                                         {onchip(MemSpace::SBUF, DType::BF16, M, N, 32768 + slot),
                                          onchip(MemSpace::PSUM, DType::F32, M, N, (i % 8) * 2048)},
                                         1, v, 2));
      s[int(Engine::DVE)].push_back(make(Opcode::TensorCopy, Engine::DVE,
                                         {onchip(MemSpace::SBUF, DType::BF16, M, N, 49152 + slot),
                                          onchip(MemSpace::SBUF, DType::BF16, M, N, 32768 + slot)},
                                         2, v, 3));
      s[int(Engine::POOL)].push_back(
          make(Opcode::Memset, Engine::POOL, {onchip(MemSpace::SBUF, DType::BF16, M, N, 81920)}, 0, 0, -1));
      auto st =
          make(Opcode::DmaCopy, Engine::SP,
               {isa::hbm_rows(1, DType::BF16, M, N), onchip(MemSpace::SBUF, DType::BF16, M, N, 49152 + slot)},
               3, v, -1);
      st.dma_queue = static_cast<uint8_t>(4 + i % 4);
      s[int(Engine::SP)].push_back(st);
    }
  }
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 100000;
    const bool numerics = argc > 2 && std::string(argv[2]) == "on";
    const std::string hw_name = argc > 3 ? argv[3] : "trn2";
    config::HwConfig hw = config::load_hw_config(hw_name);
    isa::Program p = build(n);
    // As the kernel builder does (kernels/api), the program is checked where it is made, not during the run.
    const isa::Limits limits = hw.limits();
    for (const auto& core : p.streams)
      for (const auto& s : core)
        for (const auto& inst : s) isa::check(inst, p, limits);
    p.checked_limits = limits;
    uint64_t total = 0;
    for (const auto& core : p.streams)
      for (const auto& s : core) total += s.size();
    isa::MachineState state;
    if (numerics) state = isa::make_machine_state(p, hw.limits());
    model::RunOptions o;
    o.numerics = numerics;
    auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = thread_cpu_seconds();
    std::unique_ptr<trace::TraceSink> sink;
    std::unique_ptr<model::TraceObserver> observer;
    if (argc > 4) {
      // "null": the observer's own cost, without encoding or I/O.
      if (std::string(argv[4]) == "null")
        sink = std::make_unique<trace::NullSink>();
      else
        sink = trace::open_trace_file(argv[4]);
      observer = std::make_unique<model::TraceObserver>(*sink, p, hw);
      o.observer = observer.get();
    }
    model::RunResult r = model::run_program(p, hw, o, numerics ? &state : nullptr);
    if (sink) sink->close();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = thread_cpu_seconds() - cpu0;
    std::printf(
        "{\"instructions\": %llu, \"numerics\": %s, \"host_s\": %.4f, \"instr_per_s\": %.0f, "
        "\"cpu_s\": %.4f, \"instr_per_cpu_s\": %.0f, \"simulated_ns\": %.3f",
        static_cast<unsigned long long>(total), numerics ? "true" : "false", secs, total / secs, cpu,
        total / cpu, r.end_time.ns());
    if (observer) {
      const auto& c = observer->counts();
      std::printf(", \"trace_slices\": %llu, \"trace_flows\": %llu, \"trace_events\": %llu",
                  static_cast<unsigned long long>(c.slices), static_cast<unsigned long long>(c.flows),
                  static_cast<unsigned long long>(2 * c.slices + c.counter_samples));
    }
    std::printf("}\n");
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "trnsim_bench_model: error: %s\n", e.what());
    return 1;
  }
}
