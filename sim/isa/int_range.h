// The values each integer dtype holds: the bounds every engine's integer output conversion saturates to
// (element.cpp's store_element, iota) and the range a .npy input's integers must fit (host_tensor.cpp).
#pragma once

#include <cstdint>
#include <utility>

#include "sim/isa/instruction.h"

namespace trnsim::isa {

// [lo, hi] of an integer dtype; {0, 0} for any other dtype.
constexpr std::pair<int64_t, int64_t> int_range(DType t) {
  switch (t) {
    case DType::I32:
      return {INT32_MIN, INT32_MAX};
    case DType::U32:
      return {0, UINT32_MAX};
    case DType::I16:
      return {INT16_MIN, INT16_MAX};
    case DType::U16:
      return {0, UINT16_MAX};
    case DType::I8:
      return {INT8_MIN, INT8_MAX};
    case DType::U8:
      return {0, UINT8_MAX};
    default:
      return {0, 0};
  }
}

}  // namespace trnsim::isa
