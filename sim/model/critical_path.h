// The critical path of a run: the chain of instructions, DMA transfers and waits that sets its total time.
// Plain C++ (no SystemC); the stats observer feeds it every record.
//
// Every record is a node (observer.h NodeRef: an instruction, a DMA transfer, a PE LoadStationary) with its
// activity [start, end] and what held its start back last (InstructionRecord::cause, DmaRecord::cause): the
// previous instruction of its engine, the writer of the semaphore it waited for, the DMA instruction of a
// transfer, the transfer ahead of it in its queue, the busy DGE block. The path is found by walking these
// links back from the node that ends last. A node hands over to the next step when it releases it: at its end
// (results and semaphores posted, a DMA instruction's descriptors generated), or for program and queue order
// when its engine or queue moves on (the occupancy end, the transfer's queue release), which can be before
// its results are posted. Each step is charged the time from its predecessor's handover to its own: the link
// (up to its start: a semaphore's latency, a DMA setup, the launch delay) and its activity. The charges sum
// to the run's total time.
//
// Memory: 64 bytes per instruction of the program per part it has (instruction, transfer, LoadStationary).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/base/units.h"
#include "sim/isa/instruction.h"
#include "sim/model/observer.h"

namespace trnsim::model {

struct CriticalStep {
  NodeRef node;
  Picoseconds start, end;  // the node's activity
  Cause via;               // how it is linked to the step before it (what held its start back)
  Picoseconds link;        // charged to the link: from the predecessor's handover (or 0) to start
  Picoseconds active;      // charged to the node: from max(start, the predecessor's handover) to its own
};

class CriticalPathRecorder {
 public:
  explicit CriticalPathRecorder(const isa::Program& program);

  void on_instruction(const InstructionRecord& r);
  void on_dma(const DmaRecord& r);

  // The path, first step first; empty if nothing ran.
  std::vector<CriticalStep> path() const;

 private:
  struct Node {
    uint64_t start = 0, end = 0;
    // When the node let the next one of its engine (program order) or queue (queue order) start: the engine's
    // occupancy end, or the transfer's queue release (DmaRecord::queue_release). A node's end (its results
    // posted) can be later.
    uint64_t release = 0;
    Cause cause;
    // A core_barrier's node runs from its arrival (start, when it signals the peer) to its release (end);
    // `arrival` is what held the arrival back (its cause is the peer's signal when it waited for it).
    Cause arrival;
    bool barrier = false;
    bool seen = false;
  };
  const Node* find(const NodeRef& n) const;
  // The node's slot (nullptr outside the program). Inline: one per record; the first of its stream maps
  // the stream's array (slot_first).
  Node* slot(const NodeRef& n) {
    if (n.core < 0 || n.core > 1) return nullptr;
    auto& v = nodes_[n.core][static_cast<int>(n.engine)][static_cast<int>(n.part)];
    return n.index < v.size() ? &v[n.index] : slot_first(n);
  }
  Node* slot_first(const NodeRef& n);

  const isa::Program& program_;
  // [core][engine][part] -> per instruction index
  std::vector<Node> nodes_[2][isa::kNumEngines][3];
  NodeRef last_;
  uint64_t last_end_ = 0;
};

// A run of consecutive steps on one resource, of one opcode and source line, reached the same way.
struct CriticalSegment {
  std::string resource;  // "core0 PE", "core0 DMA q3", "core1 PE LoadStationary"
  std::string opcode;
  isa::SourceLoc loc;
  uint64_t steps = 0;
  Picoseconds start, end;  // first step's start, last step's end
  Picoseconds active, link;
  std::string via;  // how its first step was reached: "program order", "S[12] <- core0 DMA q4", ...
};

struct CriticalPathSummary {
  Picoseconds length;  // = the run's total time (sum of every charge)
  uint64_t steps = 0;
  // Time charged per resource (as CriticalSegment::resource) and per kind of link ("link: semaphore",
  // "link: dma setup", "link: launch", ...), largest first.
  std::vector<std::pair<std::string, Picoseconds>> time;
  std::vector<CriticalSegment> segments;  // in time order
};

// Groups a path into segments and totals (resource names from the program's DMA queues).
CriticalPathSummary summarize(const std::vector<CriticalStep>& path, const isa::Program& program);

}  // namespace trnsim::model
