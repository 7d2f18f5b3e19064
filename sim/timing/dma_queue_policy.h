// Contract: which in-order hardware queue a DMA transfer joins, and how long it holds that queue before
// the next transfer of the queue may start moving (dma.queue_sets, dma.descriptor_ns; DmaQueues applies it).
//
// With dma.queue_sets (the NEFF reference's "Queue Sets": a set reserves one hardware queue on each DMA
// engine, and a trigger engine's DMAs go on its set, e.g. a Trn1 NEFF's loads on qSPIO0 and stores on
// qPoolIO0; within one queue on one engine transfers run in order, NKI DMA overview "DMA Queues"):
//   - every transfer of a core's trigger engine joins that engine's one queue, whatever queue the program
//     named (the program's queues stay its semaphore bookkeeping), on each DMA engine its partitions span
//     (DmaCost::queue_engines): transfers of one set on disjoint engines do not wait for each other;
//   - the queue pipelines: a transfer holds it for its occupancy, max(its bytes at its engines' bandwidth x
//     op factor, descriptors per engine x dma.descriptor_ns) with descriptors per engine = ceil(partitions /
//     engines) + 1 (the completion semaphore write), then the next transfer starts while its packets are in
//     flight;
//   - its last byte lands no earlier than its data start + its packet latency (bytes /
//   DmaCost::rate_cap_GBps:
//     dma.packet_ns per packet), and not before the transfer ahead of it in the queue (completion in order).
// Without it, the program's queue, held for the whole transfer (occupancy = latency): the earlier model.
#pragma once

#include <cstdint>

#include "sim/config/hw_config.h"
#include "sim/isa/instruction.h"
#include "sim/timing/cost_model.h"

namespace trnsim::timing {

// The hardware queue of a transfer on its core, < dma.queues_per_core: with dma.queue_sets the issuing
// engine's index (mod queues_per_core), else `program_queue`.
uint32_t hardware_queue(const config::DmaConfig& dma, uint32_t program_queue, isa::Engine issuer);

// Sets cost.queue_rate_cap_GBps (the rate at which it holds its queue), cost.latency (least time from its
// data start to its last byte) and cost.queue_engines from the other fields of `cost` (CostModel::dma_cost).
// With more than 64 engines per core a set is held as one queue on all of them.
void set_queue_occupancy(const config::DmaConfig& dma, DmaCost& cost);

}  // namespace trnsim::timing
