#include "sim/model/trace_observer.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <iterator>

#include "sim/base/hash.h"
#include "sim/isa/names.h"
#include "sim/isa/opcode_table.h"
#include "sim/isa/opcodes.h"
#include "sim/isa/semantics.h"
#include "sim/model/run.h"

namespace trnsim::model {

namespace {

using isa::Engine;
using isa::Opcode;
using trace::Annotation;
using trace::CounterUnit;
using trace::TrackId;

constexpr uint8_t kWaiterWritten = 1;  // the slice carrying the instruction's incoming flows
constexpr uint8_t kSourceWritten = 2;  // the slice carrying its outgoing flows (a DMA: the transfer)

constexpr int kLsSlot = isa::kNumEngines;  // Core::engine index of the PE LoadStationary track

// Opcode names as Neuron profiles show them (the opcode table's profile_name).
const char* profile_name(Opcode op) {
  return isa::opcode_info(op).profile_name;
}

// Engine names in Neuron queue names (qSyncIO0, qScalarIO1, ...).
const char* queue_engine_name(Engine e) {
  switch (e) {
    case Engine::PE:
      return "Tensor";
    case Engine::DVE:
      return "Vector";
    case Engine::ACT:
      return "Scalar";
    case Engine::POOL:
      return "GpSimd";
    case Engine::SP:
      return "Sync";
  }
  return "?";
}

const char* track_name(int slot) {
  static constexpr const char* kNames[] = {"PE matmul", "DVE", "ACT", "POOL", "SP", "PE LoadStationary"};
  return kNames[slot];
}

const char* track_role(int slot) {
  static constexpr const char* kRoles[] = {"Tensor engine MultiplyMoving (Neuron: TensorMatrixE)",
                                           "Vector engine",
                                           "Scalar (activation) engine",
                                           "GpSimd engine",
                                           "Sync engine (DMA triggers, barriers)",
                                           "Tensor engine LoadStationary (Neuron: TensorE)"};
  return kRoles[slot];
}

int32_t track_rank(int slot) {
  static constexpr int32_t kRanks[] = {0, 2, 3, 4, 5, 1};
  return kRanks[slot];
}

void append_int(std::string& s, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, r.ptr);
}

double ns_between(Picoseconds a, Picoseconds b) {
  return b > a ? static_cast<double>(b.count() - a.count()) / 1000.0 : 0.0;
}

}  // namespace

TraceObserver::TraceObserver(trace::TraceSink& sink, const isa::Program& program, const config::HwConfig& hw)
    : sink_(sink), program_(program), hw_(hw) {
  for (int e = 0; e < isa::kNumEngines; ++e) clock_ghz_[e] = hw.clock_GHz(static_cast<Engine>(e));
  num_sems_ = hw.sync.semaphores_per_core;
  barrier_sem_ = hw.sync.barrier_semaphore();

  uint32_t n = 0;
  for (int c = 0; c < 2; ++c)
    for (int e = 0; e < isa::kNumEngines; ++e) {
      base_[c][e] = n;
      n += static_cast<uint32_t>(program.streams[c][e].size());
    }
  flags_.assign(n, 0);
  barrier_target_.assign(n, 0);

  // Index every wait condition by (core, semaphore), so an update finds the instructions it releases. A
  // core_barrier waits for S[barrier] >= the number of barriers its core has issued (counted engine by
  // engine, exact when one engine per core issues them).
  waits_.assign(2 * static_cast<size_t>(num_sems_), {});
  for (int c = 0; c < 2; ++c) {
    uint32_t barriers = 0;
    for (int e = 0; e < isa::kNumEngines; ++e) {
      const auto& stream = program.streams[c][e];
      const auto size = static_cast<uint32_t>(stream.size());
      for (uint32_t i = 0; i < size; ++i) {
        // The program is far larger than the caches and each instruction is touched once here: prefetch the
        // lines read a few instructions ahead (and their wait lists once those pointers arrive).
        if (i + 8 < size) {
          __builtin_prefetch(&stream[i + 8].op);
          __builtin_prefetch(&stream[i + 8].waits);
        }
        if (i + 4 < size && !stream[i + 4].waits.empty()) __builtin_prefetch(stream[i + 4].waits.data());
        const uint32_t g = base_[c][e] + i;
        for (const auto& w : stream[i].waits)
          if (w.sem < num_sems_) waits_[c * num_sems_ + w.sem].push_back({w.value, g});
        for (const auto& w : stream[i].mm_waits)  // PE: the MultiplyMoving's own waits
          if (w.sem < num_sems_) waits_[c * num_sems_ + w.sem].push_back({w.value, g});
        if (stream[i].op == Opcode::CoreBarrier && program.num_cores > 1) {
          barrier_target_[g] = ++barriers;
          waits_[c * num_sems_ + barrier_sem_].push_back({barrier_target_[g], g});
        }
      }
    }
  }
  for (auto& v : waits_)
    std::sort(v.begin(), v.end(), [](const WaitRef& a, const WaitRef& b) { return a.value < b.value; });
  fifos_.resize(2 * static_cast<size_t>(isa::kNumEngines + hw.dma.queues_per_core));
  claims_.resize(n);
  sources_.resize(n);

  const std::string gen = isa::generation_name(program.generation);
  for (int c = 0; c < program.num_cores && c < 2; ++c) {
    Core& core = cores_[c];
    const std::string name = program.num_cores > 1
                                 ? fmt::format("core {} ({} NeuronCore, LNC2 pcore {})", c, gen, c)
                                 : fmt::format("core {} ({} NeuronCore)", c, gen);
    core.process = sink_.process_track(c + 1, name, c);
    core.queues.resize(hw.dma.queues_per_core);
    core.hbm_read = sink_.counter_track(core.process, "HBM read", CounterUnit::kCustom, "GB/s", 100);
    core.hbm_write = sink_.counter_track(core.process, "HBM write", CounterUnit::kCustom, "GB/s", 101);
    core.dma_outstanding = sink_.counter_track(core.process, "DMA outstanding", CounterUnit::kCount, {}, 102);
    core.pe_throttle = sink_.counter_track(core.process, "PE throttle", CounterUnit::kCustom, "%", 103);
    core.sbuf_use =
        sink_.counter_track(core.process, "SBUF occupancy", CounterUnit::kCustom, "bytes/partition", 104);
    core.psum_use =
        sink_.counter_track(core.process, "PSUM occupancy", CounterUnit::kCustom, "bytes/partition", 105);
    for (TrackId t : {core.hbm_read, core.hbm_write, core.dma_outstanding}) sample(t, Picoseconds(0), 0);
  }
}

uint32_t TraceObserver::expected_updates(const isa::Instruction& inst) const {
  return static_cast<uint32_t>(inst.updates.size() + inst.ls_updates.size()) +
         (inst.op == Opcode::CoreBarrier && program_.num_cores > 1 ? 1u : 0u);
}

void TraceObserver::sample(TrackId track, Picoseconds t, double value) {
  sink_.counter(track, t.count(), value);
  ++counts_.counter_samples;
}

TrackId TraceObserver::engine_track(int core, int slot) {
  Core& c = cores_[core];
  if (!c.engine[slot].valid()) {
    const Engine e = slot == kLsSlot ? Engine::PE : static_cast<Engine>(slot);
    c.engine[slot] =
        sink_.thread_track(c.process, track_name(slot),
                           fmt::format("{}, {} GHz", track_role(slot), clock_ghz_[int(e)]), track_rank(slot));
  }
  return c.engine[slot];
}

TrackId TraceObserver::lane_for(int core, const DmaRecord& r, uint64_t begin_ps, uint64_t end_ps) {
  Queue& q = cores_[core].queues[r.queue];
  if (!q.track.valid()) {
    q.name = fmt::format("q{}IO{}", queue_engine_name(r.issuer), r.queue);
    q.track = sink_.thread_track(
        cores_[core].process, q.name,
        fmt::format("DMA queue {} of core {} (transfers: trigger end to completion)", r.queue, core),
        10 + r.queue);
    q.lanes.push_back({q.track, 0});
  }
  for (Lane& l : q.lanes)
    if (l.last_end_ps <= begin_ps) {
      l.last_end_ps = end_ps;
      return l.track;
    }
  const auto rank = static_cast<int32_t>(q.lanes.size());
  q.lanes.push_back(
      {sink_.thread_track(q.track, q.name, "overlapping transfers of the queue", rank), end_ps});
  return q.lanes.back().track;
}

void TraceObserver::on_instruction(const InstructionRecord& r) {
  occupancy_.on_instruction(r);
  if (isa::is_dma(r.inst->op)) {
    Core& c = cores_[r.core];
    sample(c.dma_outstanding, r.end, static_cast<double>(++c.outstanding));
  }
  if (r.engine == Engine::PE && !isa::is_dma(r.inst->op) && r.inst->op != Opcode::CoreBarrier &&
      r.throttle_cap != cores_[r.core].throttle) {
    cores_[r.core].throttle = r.throttle_cap;
    sample(cores_[r.core].pe_throttle, r.start, 100.0 * r.throttle_cap);
  }
  if (r.inst->op == Opcode::CoreBarrier) {
    // Decide now which peer signals released this barrier, so the signalling barrier can be written.
    const uint32_t g = gid(r.core, r.engine, r.index);
    chosen_claims(g, r);
    if (const auto* claims = claims_.find(g))
      for (const Claim& c : *claims)
        if (c.sem == barrier_sem_)
          barrier_decision_[c.flow] = std::find(chosen_.begin(), chosen_.end(), &c) != chosen_.end();
  }
  Held h;
  h.inst = r;
  hold_or_write(static_cast<size_t>(r.core) * (fifos_.size() / 2) + static_cast<size_t>(r.engine),
                std::move(h));
}

void TraceObserver::on_dma(const DmaRecord& r) {
  occupancy_.on_dma(r);
  Core& c = cores_[r.core];
  sample(c.dma_outstanding, r.data_end, static_cast<double>(--c.outstanding));
  Held h;
  h.is_dma = true;
  h.dma = r;
  hold_or_write(static_cast<size_t>(r.core) * (fifos_.size() / 2) + isa::kNumEngines + r.queue, std::move(h));
}

void TraceObserver::on_semaphore_update(int core, uint16_t sem, int64_t old_value, int64_t new_value,
                                        Picoseconds t, const SemaphoreSource& source) {
  const uint32_t src = gid(source.core, source.engine, source.index);
  bool fresh = false;
  SourceState& s = sources_.get(src, fresh);
  if (fresh)
    s.remaining =
        expected_updates(program_.streams[source.core][static_cast<int>(source.engine)][source.index]);
  if (s.remaining > 0) --s.remaining;
  // Every instruction waiting for a value in (old, new] on this semaphore is released by this update.
  if (new_value > old_value && sem < num_sems_) {
    const auto& refs = waits_[core * num_sems_ + sem];
    auto lo = std::upper_bound(refs.begin(), refs.end(), old_value,
                               [](int64_t v, const WaitRef& w) { return v < static_cast<int64_t>(w.value); });
    for (auto w = lo; w != refs.end() && static_cast<int64_t>(w->value) <= new_value; ++w) {
      if (flags_[w->gid] & kWaiterWritten) continue;
      const uint64_t flow = next_flow_++;
      bool unused = false;
      claims_.get(w->gid, unused).push_back({sem, t.count(), flow, src});
      if (sem == barrier_sem_ && barrier_target_[w->gid] > 0)
        s.barrier_flows.push_back(flow);
      else
        s.flows.push_back(flow);
    }
  }
  if (held_ > 0) drain(false);
}

void TraceObserver::on_counter(int core, std::string_view name, Picoseconds t, double value) {
  if (core < 0 || core >= program_.num_cores) return;
  if (name == "hbm_read_GBps")
    sample(cores_[core].hbm_read, t, value);
  else if (name == "hbm_write_GBps")
    sample(cores_[core].hbm_write, t, value);
}

void TraceObserver::on_finish(const RunStats&) {
  flush();
  for (int c = 0; c < program_.num_cores && c < 2; ++c)
    for (const auto& [space, track] : {std::pair{isa::MemSpace::SBUF, cores_[c].sbuf_use},
                                       std::pair{isa::MemSpace::PSUM, cores_[c].psum_use}}) {
      std::vector<UseStep> steps = occupancy_.use_over_time(c, space);
      if (steps.empty()) steps.push_back({Picoseconds(0), 0});
      for (const UseStep& s : steps) sample(track, s.t, static_cast<double>(s.bytes));
    }
}

void TraceObserver::flush() {
  drain(true);
}

void TraceObserver::hold_or_write(size_t fifo, Held&& h) {
  auto& q = fifos_[fifo];
  if (q.empty() && ready(h)) {
    write(h);
  } else {
    if (q.empty()) busy_fifos_.push_back(static_cast<uint32_t>(fifo));
    q.push_back(std::move(h));
    ++held_;
  }
  if (held_ > 0) drain(false);
}

// Picks, for each semaphore, the latest claim made no later than the waits were satisfied. A core_barrier
// only counts the peer's signal that arrived while it waited (the last core to arrive released the other).
void TraceObserver::chosen_claims(uint32_t g, const InstructionRecord& r) {
  chosen_.clear();
  const auto* claims = claims_.find(g);
  if (claims == nullptr) return;
  const bool barrier = r.inst->op == Opcode::CoreBarrier;
  const uint64_t hi = barrier ? r.end.count() : std::max(r.issue, r.mm_issue).count();
  for (const Claim& c : *claims) {
    if (c.t_ps > hi || (barrier && c.sem == barrier_sem_ && c.t_ps <= r.issue.count())) continue;
    auto same = std::find_if(chosen_.begin(), chosen_.end(), [&](const Claim* x) { return x->sem == c.sem; });
    if (same == chosen_.end())
      chosen_.push_back(&c);
    else if ((*same)->t_ps <= c.t_ps)
      *same = &c;
  }
}

bool TraceObserver::source_ready(uint32_t g, const isa::Instruction& inst) const {
  const SourceState* s = sources_.find(g);
  if (s == nullptr) return expected_updates(inst) == 0;
  if (s->remaining > 0) return false;
  for (uint64_t f : s->barrier_flows)
    if (!barrier_decision_.contains(f)) return false;
  return true;
}

void TraceObserver::collect_out_flows(uint32_t g) {
  out_flows_.clear();
  const SourceState* s = sources_.find(g);
  if (s == nullptr) return;
  out_flows_.assign(s->flows.begin(), s->flows.end());
  for (uint64_t f : s->barrier_flows)
    if (auto d = barrier_decision_.find(f); d != barrier_decision_.end()) {
      if (d->second) out_flows_.push_back(f);
      barrier_decision_.erase(d);
    }
  sources_.erase(g);
}

bool TraceObserver::ready(const Held& h) {
  if (h.is_dma) return source_ready(gid(h.dma.core, h.dma.issuer, h.dma.index), *h.dma.inst);
  const InstructionRecord& r = h.inst;
  const uint32_t g = gid(r.core, r.engine, r.index);
  if (!isa::is_dma(r.inst->op) && !source_ready(g, *r.inst)) return false;
  // Barriers do not wait for their releaser's slice: two cores arriving together release each other.
  if (r.inst->op == Opcode::CoreBarrier) return true;
  chosen_claims(g, r);
  for (const Claim* c : chosen_)
    if (!(flags_[c->source] & kSourceWritten)) return false;
  return true;
}

void TraceObserver::drain(bool force) {
  bool progress = true;
  while (progress && held_ > 0) {
    progress = false;
    for (size_t k = 0; k < busy_fifos_.size();) {
      auto& q = fifos_[busy_fifos_[k]];
      while (!q.empty() && (force || ready(q.front()))) {
        write(q.front());
        q.pop_front();
        --held_;
        progress = true;
      }
      if (q.empty()) {
        busy_fifos_[k] = busy_fifos_.back();
        busy_fifos_.pop_back();
      } else {
        ++k;
      }
    }
  }
}

void TraceObserver::write(const Held& h) {
  if (h.is_dma)
    write_transfer(h.dma);
  else
    write_instruction(h.inst);
}

void TraceObserver::format_operands(const isa::Instruction& inst) {
  // Hand-rolled (no format-string parsing): this runs for every slice.
  std::string& o = operands_;
  o.clear();
  const auto& names = isa::operand_names(inst.op);
  for (int i = 0; i < inst.nops && i < static_cast<int>(inst.ops.size()); ++i) {
    const auto& a = inst.ops[i];
    if (!a.present()) continue;
    if (!o.empty()) o += "; ";
    o += i < static_cast<int>(names.size()) ? names[i] : "op";
    if (a.space == isa::MemSpace::HBM) {
      o += "=hbm:";
      o += a.tensor < program_.tensors.size() ? std::string_view(program_.tensors[a.tensor].name) : "?";
      o += '[';
      append_int(o, a.partitions);
      o += " rows]+";
    } else {
      o += '=';
      o += isa::mem_name(a.space);
      o += '[';
      append_int(o, a.partition_start);
      o += ':';
      append_int(o, int64_t{a.partition_start} + a.partitions);
      o += "]+";
    }
    append_int(o, a.offset_bytes);
    o += " [";
    for (int d = 0; d < a.ndim; ++d) {
      if (d) o += 'x';
      append_int(o, a.sizes[d]);
    }
    o += "] ";
    o += isa::dtype_name(a.dtype);
  }
}

uint64_t TraceObserver::KeyHash::operator()(std::string_view s) const {
  return fast_string_hash(s);
}

std::string_view TraceObserver::operands_text(const isa::Instruction& inst) {
  // Programs repeat the same operands (loops over a few buffers), and formatting costs more than looking the
  // text up by the fields it is made of. Cached texts keep their address, so the trace writer can recognise
  // a repeat by pointer too.
  char key[4 + 5 * 40];
  size_t k = 0;
  auto put = [&](const auto& v) {
    std::memcpy(key + k, &v, sizeof v);
    k += sizeof v;
  };
  put(static_cast<uint8_t>(inst.op));
  const int n = std::min(static_cast<int>(inst.nops), static_cast<int>(inst.ops.size()));
  for (int i = 0; i < n; ++i) {
    const auto& a = inst.ops[i];
    if (!a.present()) continue;
    if (a.ndim > a.sizes.size()) {  // malformed: format it without caching
      format_operands(inst);
      return operands_;
    }
    put(static_cast<uint8_t>(i));
    put(static_cast<uint8_t>(a.space));
    put(static_cast<uint8_t>(a.dtype));
    put(a.ndim);
    put(a.space == isa::MemSpace::HBM ? a.tensor : a.partition_start);
    put(a.partitions);
    put(a.offset_bytes);
    for (int d = 0; d < a.ndim; ++d) put(a.sizes[d]);
  }
  const std::string_view key_view(key, k);
  if (auto it = operand_texts_.find(key_view); it != operand_texts_.end()) return it->second;
  if (operand_texts_.size() >= kMaxOperandTexts) operand_texts_.clear();
  format_operands(inst);
  return operand_texts_.emplace(std::string(key_view), operands_).first->second;
}

void TraceObserver::format_waits(const isa::Instruction& inst, uint32_t barrier_target) {
  std::string& o = waits_text_;
  o.clear();
  auto one = [&](uint32_t sem, uint32_t value) {
    if (!o.empty()) o += ", ";
    o += "S[";
    append_int(o, sem);
    o += "] >= ";
    append_int(o, value);
  };
  for (const auto& w : inst.waits) one(w.sem, w.value);
  for (const auto& w : inst.mm_waits) one(w.sem, w.value);
  if (barrier_target > 0) {
    one(barrier_sem_, barrier_target);
    o += " (core_barrier)";
  }
}

void TraceObserver::format_source(const isa::Instruction& inst) {
  source_text_.clear();
  if (inst.loc.file == 0 || inst.loc.file >= program_.files.size() || inst.loc.line == 0) {
    source_text_ = "unknown";
    return;
  }
  source_text_ = program_.files[inst.loc.file];
  source_text_ += ':';
  append_int(source_text_, inst.loc.line);
}

void TraceObserver::write_instruction(const InstructionRecord& r) {
  const isa::Instruction& inst = *r.inst;
  const uint32_t g = gid(r.core, r.engine, r.index);
  const bool dma = isa::is_dma(inst.op);
  const bool barrier = inst.op == Opcode::CoreBarrier;
  const double ghz = clock_ghz_[static_cast<int>(r.engine)];

  chosen_claims(g, r);
  in_flows_.clear();
  for (const Claim* c : chosen_) in_flows_.push_back(c->flow);
  claims_.erase(g);
  out_flows_.clear();
  if (!dma) collect_out_flows(g);
  const std::string_view operands = operands_text(inst);
  format_waits(inst, barrier_target_[g]);
  format_source(inst);
  const double wait_ns = barrier ? ns_between(r.wait_start, r.end) : ns_between(r.wait_start, r.issue);
  // A DMA trigger's cycles are the trigger time on the issuing sequencer.
  const uint64_t cycles = dma ? static_cast<uint64_t>(ns_between(r.start, r.end) * ghz + 0.5) : r.cycles;

  std::array<Annotation, 14> args{
      Annotation::repeated("opcode", isa::opcode_name(inst.op)),
      Annotation::repeated("operands", operands),
      Annotation{"cycles", cycles},
      Annotation{"clock_ghz", ghz},
      Annotation{"bytes", r.work.bytes_read + r.work.bytes_written},
      Annotation{"flops", r.work.flops},
      Annotation{"sem_waits", std::string_view(waits_text_)},
      Annotation{"wait_ns", wait_ns},
      Annotation::repeated("source", source_text_),
      Annotation{"index", r.index},
      Annotation{"hbm_bytes", r.work.hbm_bytes_read + r.work.hbm_bytes_written},
      Annotation{"perf_mode", r.perf_mode},
      Annotation{"throttle_cap", r.throttle_cap},
      Annotation{"ls_cycles", r.ls_cycles},
  };
  size_t nargs = 11;
  if (r.engine == Engine::DVE || r.engine == Engine::ACT) nargs = 12;
  if (r.engine == Engine::PE && !dma && !barrier) {
    args[11] = args[12];
    args[12] = args[13];
    nargs = 13;
  }
  if (dma) {
    args[11] = Annotation{"dma_queue", inst.dma_queue};
    nargs = 12;
  }

  const int slot = static_cast<int>(r.engine);
  if (r.engine == Engine::PE && r.ls_end > r.ls_start) {
    const TrackId ls = engine_track(r.core, kLsSlot);
    const std::array<Annotation, 5> ls_args{Annotation::repeated("opcode", isa::opcode_name(inst.op)),
                                            Annotation{"cycles", r.ls_cycles}, Annotation{"clock_ghz", ghz},
                                            Annotation::repeated("source", source_text_),
                                            Annotation{"index", r.index}};
    sink_.slice_begin(ls, r.ls_start.count(), "LDWEIGHTS", ls_args);
    sink_.slice_end(ls, r.ls_end.count());
    ++counts_.slices;
  }
  const TrackId track = engine_track(r.core, slot);
  sink_.slice_begin(track, r.start.count(), dma ? "DMA_TRIGGER" : profile_name(inst.op),
                    std::span<const Annotation>(args.data(), nargs), out_flows_, in_flows_);
  sink_.slice_end(track, r.end.count());
  ++counts_.slices;
  counts_.flows += out_flows_.size();
  flags_[g] |= kWaiterWritten;
  if (!dma) flags_[g] |= kSourceWritten;
}

void TraceObserver::write_transfer(const DmaRecord& r) {
  const isa::Instruction& inst = *r.inst;
  const uint32_t g = gid(r.core, r.issuer, r.index);
  collect_out_flows(g);
  const std::string_view operands = operands_text(inst);
  format_source(inst);
  const uint64_t begin = r.enqueue.count(), end = std::max(r.complete, r.enqueue).count();
  const TrackId lane = lane_for(r.core, r, begin, end);
  const std::array<Annotation, 13> args{
      Annotation::repeated("opcode", isa::opcode_name(inst.op)),
      Annotation::repeated("operands", operands),
      Annotation{"bytes", r.bytes},
      Annotation{"hbm_bytes", r.hbm_bytes},
      Annotation{"flops", uint64_t{0}},
      Annotation{"dma_queue", r.queue},
      Annotation{"dma_engines", r.engines},
      Annotation{"efficiency", r.efficiency},
      Annotation{"setup_ns", ns_between(r.enqueue, r.data_start)},
      Annotation{"data_ns", ns_between(r.data_start, r.data_end)},
      Annotation::repeated("issuer", isa::engine_name(r.issuer)),
      Annotation::repeated("source", source_text_),
      Annotation{"index", r.index},
  };
  sink_.slice_begin(lane, begin, profile_name(inst.op), args, out_flows_);
  sink_.slice_end(lane, end);
  ++counts_.slices;
  counts_.flows += out_flows_.size();
  flags_[g] |= kSourceWritten;
}

}  // namespace trnsim::model
