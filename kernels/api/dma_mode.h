// How a DMA is issued when the kernel leaves it to the compiler, as NKI does: nki.isa.dma_copy and
// dma_transpose default to dge_mode=unknown and engine=unknown, "the compiler decides" (NKI docs, Descriptor
// Generation Engine reference). The builder decides the way the documentation allows (the hardware fact
// sheet §2.7, S1, S12, S13):
//   - indirect (vector_offset): software DGE on GpSimd, the only mode for gather/scatter ("If you specify
//     dge_mode=unknown with vector_offset, the compiler will automatically select swdge").
//   - otherwise the hardware DGE (hwdge), which the Trainium2 architecture guide recommends "whenever
//     possible" (no HBM descriptor storage, no GpSimd time), when the instruction allows it: every dma_copy;
//     a dma_transpose only with a 2-byte dtype, a 16-row source and a multiple of 128 columns (the hwdge
//     transpose constraints); other transposes use precomputed descriptors (none).
//   - the engine: hwdge is commanded by SP or ACT, chosen by the compiler ("currently determined by NKI
//     compiler"). A DMA trigger waits in its sequencer for its semaphores (NKI DMA overview: "the sequencer
//     instruction to trigger the transfer may wait on any semaphore condition"), so a store waiting for
//     compute would hold back every later load on the same sequencer; the core's two DGE instances let the
//     compiler put the two directions on the two sequencers. Stores (on-chip -> HBM) go on ACT, whose
//     descriptor generation runs beside its compute pipeline; everything else (loads, SBUF -> SBUF) on SP,
//     the sequencer of the kernel's I/O queues (qSyncIO in profiles). This placement is an inference: the
//     published profiles of the calibration kernels (nki-autotune's matmul with its stores not blocking the
//     next loads; CS149's tiled vector add at 1.46 us per iteration) fit it and do not fit "everything on
//     SP".
//   - precomputed descriptors (none) may be triggered by any sequencer.
//   - Trn1 (NeuronCore-v2) has no hardware DGE (v3+, NKI DGE reference): unknown resolves to precomputed
//     descriptors (none); hwdge is a RuleError there. A kernel compiled with the compiler's --disable-dge
//     (Kernel::set_disable_dge) resolves unknown the same way on any generation. Their placement is the
//     compiler's static queue sets, not the DGE blocks' SP/ACT split: loads on SP, stores on GpSimd (POOL).
//     Published binaries show it: a Trn1 NEFF of the CS149 n = 256000 FREE_DIM=1000 vector add
//     (github.com/waahm7/asst4-trainium @a4d4676 part1/stream_256k_fd1k.neff, sg00/def.json and SP/Pool.json)
//     puts its four loads on queue set qSPIO0 (owner sp) and its two stores on qPoolIO0 (owner pool), as do
//     the Trn2 --disable-dge NEFFs of the same course (docs/timing.md, "What the published binaries and
//     profiles show").
// An explicit dge_mode or engine is kept (RuleError for a combination the hardware lacks: hwdge from other
// than SP/ACT, swdge from other than POOL, indirect without swdge).
#pragma once

#include <optional>

#include "kernels/api/kernel.h"
#include "kernels/api/view.h"
#include "sim/isa/instruction.h"

namespace trnsim::kernels {

// NKI's nki.isa.dge_mode.
enum class DgeMode { Unknown, None, Swdge, Hwdge };

struct DmaIssue {
  Engine engine = Engine::SP;
  isa::DgeMode dge = isa::DgeMode::None;
};

// The engine and descriptor mode of a dma_copy / dma_transpose (op) from dst to src. Throws RuleError naming
// `loc` for a combination the hardware lacks.
DmaIssue resolve_dma_issue(isa::Opcode op, const View& dst, const View& src, bool indirect, DgeMode mode,
                           std::optional<Engine> engine, const Loc& loc);

}  // namespace trnsim::kernels
