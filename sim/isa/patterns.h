// Common access patterns, for programs written by hand (the CLI's tensor initialisation, tests, benchmarks).
#pragma once

#include <cstdint>

#include "sim/isa/instruction.h"

namespace trnsim::isa {

// The whole of an HBM tensor viewed as [rows, cols] row-major: `rows` rows of `cols` contiguous elements.
inline AccessPattern hbm_rows(uint32_t tensor, DType dtype, uint32_t rows, uint32_t cols) {
  AccessPattern a;
  a.space = MemSpace::HBM;
  a.dtype = dtype;
  a.tensor = tensor;
  a.partitions = rows;
  a.partition_stride = cols;
  a.ndim = 1;
  a.dims[0] = {1, cols};
  return a;
}

}  // namespace trnsim::isa
