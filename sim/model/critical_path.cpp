#include "sim/model/critical_path.h"

#include <algorithm>
#include <array>
#include <map>

#include "sim/base/prefault.h"
#include "sim/isa/semantics.h"

namespace trnsim::model {
namespace {

int part_index(Part p) {
  return static_cast<int>(p);
}

// Stores a node's fields one by one: a braced temporary assigned whole was built on the stack and read back
// 16 bytes at a time across its narrower stores (a store-forwarding stall on every record).
template <class Node>
void set_node(Node& n, uint64_t start, uint64_t end, uint64_t release, const Cause& cause,
              const Cause& arrival, bool barrier) {
  n.start = start;
  n.end = end;
  n.release = release;
  n.cause = cause;
  n.arrival = arrival;
  n.barrier = barrier;
  n.seen = true;
}

std::string resource_of(const NodeRef& n, const isa::Program& program) {
  std::string r = "core" + std::to_string(n.core) + " ";
  if (n.part == Part::Transfer) {
    const auto& inst = program.streams[n.core][static_cast<int>(n.engine)][n.index];
    return r + "DMA q" + std::to_string(inst.dma_queue);
  }
  r += isa::engine_name(n.engine);
  if (n.part == Part::LoadStationary) r += " LoadStationary";
  return r;
}

std::string link_name(CauseKind k) {
  switch (k) {
    case CauseKind::Semaphore:
      return "link: semaphore latency";
    case CauseKind::Trigger:
      return "link: dma setup";
    case CauseKind::QueueOrder:
      return "link: dma queue";
    case CauseKind::DgeBusy:
      return "link: dge";
    case CauseKind::ProgramOrder:
      return "link: program order";
    case CauseKind::Launch:
    case CauseKind::None:
      return "link: launch";
  }
  return "link: other";
}

std::string via_text(const Cause& c, const isa::Program& program) {
  switch (c.kind) {
    case CauseKind::Semaphore:
      return "S[" + std::to_string(c.sem) + "] <- " + resource_of(c.from, program);
    case CauseKind::DgeBusy:
      return "DGE busy <- " + resource_of(c.from, program);
    case CauseKind::QueueOrder:
      return "queue order";
    case CauseKind::Trigger:
      return "its trigger";
    case CauseKind::ProgramOrder:
      return "program order";
    case CauseKind::Launch:
      return "launch";
    case CauseKind::None:
      return "start";
  }
  return "?";
}

}  // namespace

const char* cause_kind_name(CauseKind k) {
  switch (k) {
    case CauseKind::None:
      return "none";
    case CauseKind::Launch:
      return "launch";
    case CauseKind::ProgramOrder:
      return "program_order";
    case CauseKind::Semaphore:
      return "semaphore";
    case CauseKind::DgeBusy:
      return "dge_busy";
    case CauseKind::QueueOrder:
      return "queue_order";
    case CauseKind::Trigger:
      return "trigger";
  }
  return "?";
}

CriticalPathRecorder::CriticalPathRecorder(const isa::Program& program) : program_(program) {}

CriticalPathRecorder::Node* CriticalPathRecorder::slot_first(const NodeRef& n) {
  const auto& stream = program_.streams[n.core][static_cast<int>(n.engine)];
  if (n.index >= stream.size()) return nullptr;
  auto& v = nodes_[n.core][static_cast<int>(n.engine)][part_index(n.part)];
  if (v.empty()) {
    // Mapped in one call rather than a page fault per 64 nodes during the run (a large program's arrays are
    // tens of MB), as the builder maps its instruction streams.
    v.reserve(stream.size());
    prefault(v.data(), stream.size() * sizeof(Node));
    v.resize(stream.size());
  }
  return &v[n.index];
}

const CriticalPathRecorder::Node* CriticalPathRecorder::find(const NodeRef& n) const {
  if (n.core < 0 || n.core > 1) return nullptr;
  const auto& v = nodes_[n.core][static_cast<int>(n.engine)][part_index(n.part)];
  if (n.index >= v.size() || !v[n.index].seen) return nullptr;
  return &v[n.index];
}

void CriticalPathRecorder::on_instruction(const InstructionRecord& r) {
  const NodeRef self{static_cast<int8_t>(r.core), r.engine, Part::Instruction, r.index};
  Node* n = slot(self);
  if (n == nullptr) return;
  // A DMA instruction's node runs on to the end of its descriptor generation, a compute instruction's to
  // the posting of its results.
  const Picoseconds end = std::max({r.end, r.dge_end, r.complete});
  const bool barrier = r.inst != nullptr && r.inst->op == isa::Opcode::CoreBarrier;
  const Picoseconds start = barrier ? r.issue : r.start;
  set_node(*n, start.count(), end.count(), r.end.count(), r.cause, r.wait_cause, barrier);
  if (end.count() >= last_end_) {
    last_end_ = end.count();
    last_ = self;
  }
  if (r.engine == isa::Engine::PE && r.ls_end > r.ls_start) {
    Node* ls = slot({self.core, self.engine, Part::LoadStationary, self.index});
    // Its start was set by its waits, or by the pipeline when it started later: the previous LoadStationary's
    // end, or the previous MultiplyMoving's start (timing::PePipeline), which ends nothing, so the link goes
    // to what set that start. (The previous instruction's node ends after this LoadStationary does.)
    Cause c = r.wait_cause;
    if (r.ls_start > r.issue && r.index > 0)
      c = {CauseKind::ProgramOrder, {self.core, self.engine, Part::Instruction, r.index - 1}, 0};
    if (c.kind == CauseKind::ProgramOrder && r.index > 0) {
      const NodeRef prev_ls{self.core, self.engine, Part::LoadStationary, r.index - 1};
      const Node* pls = find(prev_ls);
      const Node* pmm = find({self.core, self.engine, Part::Instruction, r.index - 1});
      if (pls != nullptr && pls->end == static_cast<uint64_t>(r.ls_start.count()))
        c = {CauseKind::ProgramOrder, prev_ls, 0};
      else if (pmm != nullptr && pmm->start == static_cast<uint64_t>(r.ls_start.count()))
        c = pmm->cause;
    }
    if (ls) set_node(*ls, r.ls_start.count(), r.ls_end.count(), r.ls_end.count(), c, c, false);
  }
}

void CriticalPathRecorder::on_dma(const DmaRecord& r) {
  const NodeRef self{static_cast<int8_t>(r.core), r.issuer, Part::Transfer, r.index};
  Node* n = slot(self);
  if (n == nullptr) return;
  set_node(*n, r.data_start.count(), r.complete.count(), r.queue_release.count(), r.cause, r.cause, false);
  if (r.complete.count() >= last_end_) {
    last_end_ = r.complete.count();
    last_ = self;
  }
}

std::vector<CriticalStep> CriticalPathRecorder::path() const {
  std::vector<CriticalStep> steps;
  NodeRef cur = last_;
  const Node* n = find(cur);
  std::vector<NodeRef> at_same_end;  // nodes visited that hand over when the current one does (no cycles)
  uint64_t handover = n != nullptr ? n->end : 0;  // when the current node released the step after it
  bool by_signal = false;  // the current node is a core_barrier reached through the signal it sent on arrival
  while (n != nullptr) {
    const Cause& cause = by_signal ? n->arrival : n->cause;
    CriticalStep s;
    s.node = cur;
    s.start = Picoseconds(n->start);
    s.end = Picoseconds(by_signal ? n->start : n->end);
    s.via = cause;
    const Node* p = nullptr;
    const bool linked = cause.kind != CauseKind::None && cause.kind != CauseKind::Launch;
    if (linked) p = find(cause.from);
    const bool in_order = cause.kind == CauseKind::ProgramOrder || cause.kind == CauseKind::QueueOrder;
    const bool signal =
        p != nullptr && p->barrier && cause.kind == CauseKind::Semaphore && cause.from.core != cur.core;
    const uint64_t p_handover = p == nullptr ? 0 : in_order ? p->release : signal ? p->start : p->end;
    // Links only go back in time, and never in a circle among nodes that hand over together; anything else
    // ends the walk.
    if (p != nullptr && p_handover > handover) p = nullptr;
    if (p != nullptr && p_handover == handover) {
      if (std::find(at_same_end.begin(), at_same_end.end(), cause.from) != at_same_end.end()) p = nullptr;
      at_same_end.push_back(cur);
    } else {
      at_same_end.clear();
    }
    const uint64_t from = p ? p_handover : 0;
    const uint64_t start = std::min(n->start, handover);
    s.link = Picoseconds(start > from ? start - from : 0);
    s.active = Picoseconds(handover - std::max(start, std::min(from, handover)));
    if (p == nullptr && linked) s.via = Cause{};  // the walk ends here
    steps.push_back(s);
    if (p == nullptr) break;
    handover = from;
    by_signal = signal;
    cur = cause.from;
    n = p;
  }
  std::reverse(steps.begin(), steps.end());
  return steps;
}

namespace {

// A small number per resource name of resource_of() (one name per number, one number per name), so a long
// path names each resource once: core, engine and LoadStationary, or core and DMA queue.
constexpr size_t kEngineResources = 2 * isa::kNumEngines * 2;
constexpr size_t kResources = kEngineResources + 2 * 256;
size_t resource_id(const NodeRef& n, const isa::Program& program) {
  if (n.part == Part::Transfer)
    return kEngineResources + static_cast<size_t>(n.core) * 256 +
           program.streams[n.core][static_cast<int>(n.engine)][n.index].dma_queue;
  return (static_cast<size_t>(n.core) * isa::kNumEngines + static_cast<size_t>(n.engine)) * 2 +
         (n.part == Part::LoadStationary ? 1 : 0);
}

}  // namespace

CriticalPathSummary summarize(const std::vector<CriticalStep>& path, const isa::Program& program) {
  CriticalPathSummary sum;
  // Time per resource and per kind of link, by number; named (and sorted by name) at the end.
  std::vector<std::string> names(kResources);
  std::vector<Picoseconds> res_time(kResources);
  std::vector<char> res_used(kResources, 0);
  std::array<Picoseconds, 8> link_time{};
  std::array<char, 8> link_used{};
  size_t seg_res = 0;
  for (const CriticalStep& s : path) {
    const size_t res = resource_id(s.node, program);
    if (names[res].empty()) names[res] = resource_of(s.node, program);
    const auto& inst = program.streams[s.node.core][static_cast<int>(s.node.engine)][s.node.index];
    const bool ls = s.node.part == Part::LoadStationary;
    res_time[res] += s.active;
    res_used[res] = 1;
    if (s.link.count() > 0) {
      link_time[static_cast<size_t>(s.via.kind)] += s.link;
      link_used[static_cast<size_t>(s.via.kind)] = 1;
    }
    sum.length += s.active + s.link;
    ++sum.steps;
    CriticalSegment* seg = sum.segments.empty() ? nullptr : &sum.segments.back();
    const bool same = seg && seg_res == res &&
                      (ls ? seg->opcode == "load_stationary" : seg->opcode == isa::opcode_name(inst.op)) &&
                      seg->loc.file == inst.loc.file && seg->loc.line == inst.loc.line &&
                      (s.via.kind == CauseKind::ProgramOrder || s.via.kind == CauseKind::QueueOrder);
    if (!same) {
      const std::string op = ls ? "load_stationary" : isa::opcode_name(inst.op);
      sum.segments.push_back({names[res], op, inst.loc, 0, s.start, s.end, {}, {}, via_text(s.via, program)});
      seg = &sum.segments.back();
      seg_res = res;
    }
    ++seg->steps;
    seg->end = s.end;
    seg->active += s.active;
    seg->link += s.link;
  }
  std::map<std::string, Picoseconds> time;
  for (size_t r = 0; r < kResources; ++r)
    if (res_used[r]) time[names[r]] += res_time[r];
  for (size_t k = 0; k < link_time.size(); ++k)
    if (link_used[k]) time[link_name(static_cast<CauseKind>(k))] += link_time[k];
  for (const auto& [k, v] : time) sum.time.emplace_back(k, v);
  std::stable_sort(sum.time.begin(), sum.time.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return sum;
}

}  // namespace trnsim::model
