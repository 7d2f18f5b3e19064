#include "sim/model/stats_observer.h"

#include <algorithm>
#include <tuple>

#include "sim/isa/semantics.h"

namespace trnsim::model {
namespace {

constexpr uint64_t kMaxOffset = (uint64_t{1} << 28) - 1;

uint64_t range_key(int core, isa::MemSpace space, uint32_t q_lo, uint32_t q_hi, uint64_t lo, uint64_t hi) {
  return (uint64_t(core) << 61) | (uint64_t(space == isa::MemSpace::PSUM) << 60) | (uint64_t(q_lo) << 58) |
         (uint64_t(q_hi) << 56) | (lo << 28) | hi;
}

uint64_t line_key(const isa::SourceLoc& loc, isa::Engine e) {
  return (uint64_t(loc.file) << 35) | (uint64_t(loc.line) << 3) | static_cast<uint64_t>(e);
}

// BF16 FLOPs of the same PE time: the cost model runs MX 4x, FP8 double_row 2x and FP32 1/fp32_factor as
// fast.
double bf16_equivalent(const isa::Instruction& inst, uint64_t flops, uint32_t fp32_factor) {
  if (flops == 0) return 0;
  const double f = static_cast<double>(flops);
  if (inst.op == isa::Opcode::NcMatmulMx) return f / 4;
  if (inst.has(isa::kDoubleRow)) return f / 2;
  if (inst.ops[1].dtype == isa::DType::F32 || inst.ops[2].dtype == isa::DType::F32) return f * fp32_factor;
  return f;
}

}  // namespace

StatsObserver::Interval& StatsObserver::RangeTable::operator[](uint64_t key) {
  if (2 * (used_ + 1) > slots_.size()) {  // keep the load at most 1/2
    std::vector<std::pair<uint64_t, Interval>> old(slots_.size() * 2);
    old.swap(slots_);
    used_ = 0;
    for (const auto& [k, iv] : old)
      if (k != 0) (*this)[k] = iv;
  }
  const size_t mask = slots_.size() - 1;
  for (size_t i = (key * 0x9E3779B97F4A7C15ull) >> 20 & mask;; i = (i + 1) & mask) {
    auto& slot = slots_[i];
    if (slot.first == key) return slot.second;
    if (slot.first == 0) {
      slot.first = key;
      ++used_;
      return slot.second;
    }
  }
}

StatsObserver::StatsObserver(const isa::Program& program, const config::HwConfig& hw)
    : program_(program), fp32_factor_(hw.pe.fp32_factor), critical_(program) {
  stats_.bf16_peak_flops_per_ns = 128.0 * 128.0 * 2.0 * hw.pe.clock_GHz * program.num_cores;
  const isa::Limits limits = hw.limits();
  stats_.sbuf.capacity_per_partition = limits.sbuf_bytes_per_partition;
  stats_.psum.capacity_per_partition = limits.psum_bytes_per_partition;
}

void StatsObserver::touch(int core, const isa::AccessPattern& a, uint64_t from_ps, uint64_t to_ps) {
  if (!a.present() || a.space == isa::MemSpace::HBM || core < 0 || core > 1) return;
  // Extent of the access pattern inside one partition, in elements from offset_bytes.
  int64_t lo = 0, hi = 0;
  for (int d = 0; d < a.ndim; ++d) {
    const int64_t step = a.dims[d].stride * (static_cast<int64_t>(a.dims[d].size) - 1);
    (step < 0 ? lo : hi) += step;
  }
  const int64_t esize = isa::dtype_size(a.dtype);
  const int64_t b_lo = a.offset_bytes + lo * esize, b_hi = a.offset_bytes + (hi + 1) * esize;
  if (b_lo < 0 || b_hi <= b_lo || static_cast<uint64_t>(b_hi) > kMaxOffset) return;  // checked earlier
  const uint32_t q_lo = std::min<uint32_t>(a.partition_start / 32, 3);
  const uint32_t q_hi = std::min<uint32_t>((a.partition_start + a.partitions - 1) / 32, 3);
  Interval& iv = ranges_[range_key(core, a.space, q_lo, q_hi, b_lo, b_hi)];
  iv.first = std::min(iv.first, from_ps);
  iv.last = std::max(iv.last, to_ps);
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

  LineTime& l = lines_[line_key(inst.loc, r.engine)];
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

  if (inst.is_dma()) return;  // its on-chip operands are touched by the transfer (on_dma)
  const uint64_t from = std::min(r.ls_start, r.start).count();
  for (int i = 0; i < inst.nops; ++i) touch(r.core, inst.ops[i], from, r.end.count());
}

PhaseTime* StatsObserver::phase_of(const isa::Instruction& inst) {
  if (inst.phase == 0 || inst.phase >= program_.phases.size()) return nullptr;
  if (phases_.empty()) {
    phases_.resize(program_.phases.size());
    for (size_t i = 0; i < phases_.size(); ++i) {
      phases_[i].name = program_.phases[i];
      phases_[i].start = Picoseconds(UINT64_MAX);
    }
  }
  return &phases_[inst.phase];
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
  for (int i = 0; i < inst.nops; ++i) {
    // sendrecv writes the peer core's SBUF.
    const int core = (inst.op == isa::Opcode::SendRecv && i == 0) ? 1 - r.core : r.core;
    touch(core, inst.ops[i], r.data_start.count(), r.data_end.count());
  }
}

void StatsObserver::on_finish(const RunStats&) {
  finish();
}

MemoryPeak StatsObserver::peak_of(isa::MemSpace space, uint64_t capacity) const {
  MemoryPeak m;
  m.capacity_per_partition = capacity;
  struct Range {
    uint64_t lo, hi;
    Interval iv;
  };
  for (int core = 0; core < 2; ++core)
    for (uint32_t q = 0; q < 4; ++q) {
      std::vector<Range> rs;
      std::vector<uint64_t> bounds;
      ranges_.for_each([&](uint64_t key, const Interval& iv) {
        if (static_cast<int>(key >> 61) != core || ((key >> 60) & 1) != (space == isa::MemSpace::PSUM))
          return;
        const uint32_t q_lo = (key >> 58) & 3, q_hi = (key >> 56) & 3;
        if (q < q_lo || q > q_hi) return;
        const uint64_t lo = (key >> 28) & kMaxOffset, hi = key & kMaxOffset;
        rs.push_back({lo, hi, iv});
        bounds.push_back(lo);
        bounds.push_back(hi);
      });
      if (rs.empty()) continue;
      // Elementary byte segments between range bounds: each is in use from the first to the last touch of
      // any range covering it.
      std::sort(bounds.begin(), bounds.end());
      bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
      std::vector<Interval> seg(bounds.size() - 1);
      for (const Range& r : rs)
        for (size_t i = std::lower_bound(bounds.begin(), bounds.end(), r.lo) - bounds.begin();
             bounds[i] < r.hi; ++i) {
          seg[i].first = std::min(seg[i].first, r.iv.first);
          seg[i].last = std::max(seg[i].last, r.iv.last);
        }
      // Sweep over time: [first, last) intervals, releases before acquisitions at equal times.
      std::vector<std::pair<uint64_t, int64_t>> events;
      for (size_t i = 0; i < seg.size(); ++i) {
        if (seg[i].first >= seg[i].last) continue;
        const auto len = static_cast<int64_t>(bounds[i + 1] - bounds[i]);
        events.emplace_back(seg[i].first, len);
        events.emplace_back(seg[i].last, -len);
      }
      std::sort(events.begin(), events.end());
      int64_t use = 0;
      uint64_t peak = 0, at = 0;
      for (size_t i = 0; i < events.size(); ++i) {
        use += events[i].second;
        const bool last_at_time = i + 1 == events.size() || events[i + 1].first != events[i].first;
        if (last_at_time && static_cast<uint64_t>(use) > peak) {
          peak = static_cast<uint64_t>(use);
          at = events[i].first;
        }
      }
      m.quadrant[q] = std::max(m.quadrant[q], peak);
      if (peak > m.bytes_per_partition || (peak == m.bytes_per_partition && peak > 0 && at < m.at.count())) {
        m.bytes_per_partition = peak;
        m.at = Picoseconds(at);
      }
    }
  return m;
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
  stats_.sbuf = peak_of(isa::MemSpace::SBUF, stats_.sbuf.capacity_per_partition);
  stats_.psum = peak_of(isa::MemSpace::PSUM, stats_.psum.capacity_per_partition);
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
