#include "sim/timing/dma_spread.h"

#include <algorithm>
#include <numeric>

namespace trnsim::timing {

uint64_t contiguous_run(const isa::AccessPattern& ap, bool rows_indexed) {
  uint64_t run = 1;
  for (int d = ap.ndim - 1; d >= 0; --d) {
    if (ap.sizes[d] == 1) continue;
    if (ap.strides[d] != static_cast<int64_t>(run)) return run;
    run *= ap.sizes[d];
  }
  if (!rows_indexed && ap.partitions > 1 && ap.partition_stride == static_cast<int64_t>(run))
    run *= ap.partitions;
  return run;
}

DmaSpread dma_spread(const isa::Instruction& inst, const config::DmaConfig& dma) {
  const auto& dst = inst.ops[0];
  const auto& src = inst.ops[1];
  DmaSpread s;
  if (dst.space != isa::MemSpace::HBM || src.space != isa::MemSpace::HBM) {
    const auto& side = dst.space != isa::MemSpace::HBM ? dst : src;
    s.packets = std::max<uint32_t>(1, side.partitions);
    s.engines = static_cast<uint32_t>(std::min<uint64_t>(
        dma.engines_per_core, (s.packets + dma.partitions_per_engine - 1) / dma.partitions_per_engine));
    s.first_engine =
        std::min(side.partition_start / dma.partitions_per_engine, dma.engines_per_core - s.engines);
    return s;
  }
  const uint64_t n = uint64_t{dst.partitions} * dst.free_elements();
  if (n == 0) return s;
  // An indirect DMA (vector_offset in slot 2) indexes the rows of src, or of dst with kIndirectDst.
  const bool indirect = inst.nops > 2 && inst.ops[2].present();
  const bool scatter = indirect && inst.has(isa::kIndirectDst);
  // Chunk ends fall at multiples of each side's run: n / a + n / b boundaries, those at multiples of
  // lcm(a, b) (which divides n, as a and b do) counted once.
  const uint64_t a = std::min(n, contiguous_run(src, indirect && !scatter));
  const uint64_t b = std::min(n, contiguous_run(dst, scatter));
  const uint64_t chunks = std::max<uint64_t>(1, n / a + n / b - n / std::lcm(a, b));
  s.engines = static_cast<uint32_t>(std::min<uint64_t>(dma.engines_per_core, n));
  // The shares end at elements floor(e x n / engines), e = 1 .. engines - 1 (q e + floor(r e / engines) for
  // n = q engines + r, free of overflow); one inside a chunk cuts it once more.
  s.packets = chunks;
  const uint64_t q = n / s.engines, r = n % s.engines;
  for (uint64_t e = 1; e < s.engines; ++e) {
    const uint64_t end = q * e + r * e / s.engines;
    if (end % a != 0 && end % b != 0) ++s.packets;
  }
  return s;
}

}  // namespace trnsim::timing
