#include "sim/model/stats_observer.h"

#include <algorithm>
#include <tuple>

#include "sim/isa/semantics.h"

namespace trnsim::model {
namespace {

uint64_t line_key(const isa::SourceLoc& loc, isa::Engine e) {
  return (uint64_t(loc.file) << 35) | (uint64_t(loc.line) << 3) | static_cast<uint64_t>(e);
}

// BF16 FLOPs of the same PE time: the cost model runs a matmul its rate factor times as fast (isa::pe_rate:
// MX 4x, FP8 double_row 2x) and FP32 1/fp32_factor as fast.
double bf16_equivalent(const isa::Instruction& inst, uint64_t flops, uint32_t fp32_factor) {
  if (flops == 0) return 0;
  const double f = static_cast<double>(flops);
  if (const uint32_t rate = isa::pe_rate(inst).factor; rate > 1) return f / rate;
  if (inst.ops[1].dtype == isa::DType::F32 || inst.ops[2].dtype == isa::DType::F32) return f * fp32_factor;
  return f;
}

}  // namespace

StatsObserver::StatsObserver(const isa::Program& program, const config::HwConfig& hw)
    : program_(program), fp32_factor_(hw.pe.fp32_factor), critical_(program) {
  stats_.bf16_peak_flops_per_ns = 128.0 * 128.0 * 2.0 * hw.pe.clock_GHz * program.num_cores;
  const isa::Limits limits = hw.limits();
  stats_.sbuf.capacity_per_partition = limits.sbuf_bytes_per_partition;
  stats_.psum.capacity_per_partition = limits.psum_bytes_per_partition;
  phases_.resize(program.phases.size());
  for (size_t i = 0; i < phases_.size(); ++i) {
    phases_[i].name = program.phases[i];
    phases_[i].start = Picoseconds(UINT64_MAX);
  }
}

void StatsObserver::on_instruction(const InstructionRecord& r) {
  critical_.on_instruction(r);
  const isa::Instruction& inst = *r.inst;
  const int e = static_cast<int>(r.engine);
  const Picoseconds busy(r.end.count() - r.start.count());
  OpcodeTime& op = stats_.opcodes[e][static_cast<int>(inst.op)];
  ++op.count;
  op.total += busy;
  if (r.engine == isa::Engine::PE && r.ls_end > r.ls_start) {
    ++stats_.pe_load_stationary.count;
    stats_.pe_load_stationary.total += Picoseconds(r.ls_end.count() - r.ls_start.count());
  }
  stats_.pe_flops += r.work.flops;
  stats_.pe_flops_bf16_equivalent += bf16_equivalent(inst, r.work.flops, fp32_factor_);

  // Each engine's instructions mostly come from the line of its previous one: one hash lookup per change.
  auto& [last_key, last] = last_line_[e];
  const uint64_t key = line_key(inst.loc, r.engine);
  if (key != last_key || !last) {
    last_key = key;
    last = &lines_[key];  // element addresses of an unordered_map stay valid as it grows
  }
  LineTime& l = *last;
  l.file = inst.loc.file;
  l.line = inst.loc.line;
  l.engine = r.engine;
  ++l.instructions;
  l.busy += busy;
  uint64_t wait = r.issue.count() - r.wait_start.count();
  if (inst.op == isa::Opcode::CoreBarrier) wait += r.start.count() - r.issue.count();
  l.semaphore_wait += Picoseconds(wait);
  if (PhaseTime* ph = phase_of(inst)) {
    ph->start = std::min(ph->start, std::min(r.ls_start, r.start));
    ph->end = std::max(ph->end, r.end);
    ph->busy[static_cast<int>(r.engine)] += busy;
    ++ph->instructions;
  }

  occupancy_.on_instruction(r);
}

void StatsObserver::on_dma(const DmaRecord& r) {
  critical_.on_dma(r);
  const isa::Instruction& inst = *r.inst;
  if (PhaseTime* ph = phase_of(inst)) {
    ph->start = std::min(ph->start, r.data_start);
    ph->end = std::max(ph->end, r.complete);
    ++ph->dma_transfers;
    ph->dma_bytes += r.bytes;
  }
  occupancy_.on_dma(r);
}

void StatsObserver::on_finish(const RunStats&) {
  finish();
}

void StatsObserver::finish() {
  stats_.lines.clear();
  stats_.lines.reserve(lines_.size());
  for (const auto& [key, l] : lines_) stats_.lines.push_back(l);
  std::sort(stats_.lines.begin(), stats_.lines.end(), [](const LineTime& a, const LineTime& b) {
    if (a.busy != b.busy) return a.busy > b.busy;
    return std::tie(a.file, a.line, a.engine) < std::tie(b.file, b.line, b.engine);
  });
  stats_.phases.clear();
  for (const PhaseTime& ph : phases_)
    if (ph.instructions > 0 || ph.dma_transfers > 0) stats_.phases.push_back(ph);
  stats_.critical_path = summarize(critical_.path(), program_);
  stats_.sbuf = occupancy_.peak(isa::MemSpace::SBUF, stats_.sbuf.capacity_per_partition);
  stats_.psum = occupancy_.peak(isa::MemSpace::PSUM, stats_.psum.capacity_per_partition);
}

ModelObserver::Needs TeeObserver::needs() const {
  Needs n{false, false, false};
  for (const auto* o : observers_) {
    const Needs m = o->needs();
    n.work_bytes |= m.work_bytes;
    n.counters |= m.counters;
    n.semaphores |= m.semaphores;
  }
  return n;
}
void TeeObserver::on_instruction(const InstructionRecord& r) {
  for (auto* o : observers_) o->on_instruction(r);
}
void TeeObserver::on_dma(const DmaRecord& r) {
  for (auto* o : observers_) o->on_dma(r);
}
void TeeObserver::on_semaphore(int core, uint16_t sem, int64_t value, Picoseconds t) {
  for (auto* o : observers_) o->on_semaphore(core, sem, value, t);
}
void TeeObserver::on_semaphore_update(int core, uint16_t sem, int64_t old_value, int64_t new_value,
                                      Picoseconds t, const SemaphoreSource& source) {
  for (auto* o : observers_) o->on_semaphore_update(core, sem, old_value, new_value, t, source);
}
void TeeObserver::on_counter(int core, std::string_view name, Picoseconds t, double value) {
  for (auto* o : observers_) o->on_counter(core, name, t, value);
}
void TeeObserver::on_finish(const RunStats& stats) {
  for (auto* o : observers_) o->on_finish(stats);
}

}  // namespace trnsim::model
