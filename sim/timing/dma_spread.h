// How a DMA transfer's bytes are cut into packets and spread over the core's DMA engines (DmaCost's
// partitions, engines and first_engine; docs/timing.md "DMA").
//
// A transfer with an on-chip (SBUF/PSUM) side: each engine serves dma.partitions_per_engine partitions
// (NKI DMA overview: "each DMA engine is typically responsible for moving data for eight SBUF
// partitions"), so the engines are ceil(partitions / 8), the first at the side's first partition / 8, and
// a packet is one partition's run.
//
// A transfer between two HBM tensors has no partition side: its descriptors give addresses and sizes (NKI
// DGE reference), so the bytes split wherever the descriptors cut them, not by the view's dim 0 [I]. The
// elements run in order on both sides; a packet ends where either side's contiguous chunk ends (adjacent
// rows whose stride is the row's length are one chunk; an indexed side's rows are separate chunks) and
// where an engine's share ends inside a chunk: the elements go in equal shares to all
// dma.engines_per_core engines (the overview: a transfer is "parallelized up to 16 DMA engines"), one at
// least each. A contiguous copy is thus 16 packets whatever its view, and more bytes never take less time;
// 128 gathered rows are 128 packets, 8 per engine, as the partition rule cut them.
#pragma once

#include <cstdint>

#include "sim/config/hw_config.h"
#include "sim/isa/instruction.h"

namespace trnsim::timing {

struct DmaSpread {
  uint64_t packets = 1;       // partitions of the on-chip side, or the HBM -> HBM packets (>= 1)
  uint32_t engines = 1;       // DMA engines the transfer uses, <= dma.engines_per_core
  uint32_t first_engine = 0;  // the first of them
};

DmaSpread dma_spread(const isa::Instruction& inst, const config::DmaConfig& dma);

// Elements of the innermost run of `ap` that is contiguous in memory, over its free dims and, unless
// `rows_indexed` (an indirect DMA's rows), its rows: 1 when the innermost dim steps by more than one.
uint64_t contiguous_run(const isa::AccessPattern& ap, bool rows_indexed);

}  // namespace trnsim::timing
