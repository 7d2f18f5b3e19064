// Filling many partitions or rows from one: a row broadcast to every partition on the PE, and HBM rows zeroed
// from one zeroed SBUF tile by DMA. The MoE and cross-entropy kernels share them.
#pragma once

#include "kernels/api/kernel.h"
#include "kernels/api/view.h"

namespace trnsim::kernels {

// dst [128, n] = row [1, n] on every partition: the PE computes ones^T x row (ones [1, 128] FP32 holding 1.0,
// so the FP32 result is exact) into `psum` [128, w] FP32, w columns at a time, and `copy_engine` copies each
// piece out of PSUM into dst.
void broadcast_partitions(const View& dst, const View& row, const View& ones, const View& psum,
                          Engine copy_engine);

// Zeroes an HBM region [rows, cols] (any row stride) from a zeroed SBUF tile [128, Z]: per Z columns, one DMA
// for all whole 128-row groups (the tile broadcast over them) and one for the remaining rows.
void zero_region(const View& dst, const View& zeros);

}  // namespace trnsim::kernels
