#include "sim/isa/operand_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "sim/base/error.h"
#include "sim/numerics/float_formats.h"

namespace trnsim::isa {
namespace {

// Strides and sizes beyond this cannot address any real memory; rejecting them keeps the offset math in
// int64.
constexpr int64_t kMaxStride = int64_t{1} << 40;

template <typename T>
T read_as(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
void write_as(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// RNE to integer, saturated to [lo, hi]; NaN -> 0.
int64_t float_to_int(float v, int64_t lo, int64_t hi) {
  if (std::isnan(v)) return 0;
  const double r = std::nearbyint(static_cast<double>(v));
  if (r <= static_cast<double>(lo)) return lo;
  if (r >= static_cast<double>(hi)) return hi;
  return static_cast<int64_t>(r);
}

uint8_t f32_to_e8m0_floor(float v) {
  const uint32_t u = std::bit_cast<uint32_t>(v);
  if (std::isnan(v) || std::isinf(v) || (u >> 31) != 0) return (u & 0x7FFFFFFFu) == 0 ? 0x00 : 0xFF;
  return static_cast<uint8_t>(u >> 23);
}

}  // namespace

bool is_x4(DType t) {
  return t == DType::FP8_E4M3FN_X4 || t == DType::FP8_E5M2_X4;
}
bool is_fp8(DType t) {
  return t == DType::FP8_E4M3FN || t == DType::FP8_E5M2;
}
bool is_int(DType t) {
  switch (t) {
    case DType::I32:
    case DType::U32:
    case DType::I16:
    case DType::U16:
    case DType::I8:
    case DType::U8:
      return true;
    default:
      return false;
  }
}

OperandView::OperandView(const AccessPattern& ap, int core, const Program& program, const Limits& limits,
                         MachineState& state, const std::string& prefix, const char* operand,
                         bool indirect_rows)
    : ap_(ap), rows_(ap.partitions) {
  const int64_t ds = dtype_size(ap.dtype);
  if (!ap.present()) throw RuleError(fmt::format("{}: operand missing: {}", prefix, operand));
  if (ap.ndim > 4)
    throw RuleError(fmt::format("{}: free dims: {} has {} free dims (at most 4)", prefix, operand, ap.ndim));
  uint64_t cols = 1;
  for (int d = 0; d < ap.ndim; ++d) {
    const Dim& dim = ap.dims[d];
    if (dim.size == 0)
      throw RuleError(fmt::format("{}: free dims: {} dim {} has size 0", prefix, operand, d));
    if (dim.stride > kMaxStride || dim.stride < -kMaxStride)
      throw RuleError(
          fmt::format("{}: free dims: {} dim {} stride {} is out of range", prefix, operand, d, dim.stride));
    cols *= dim.size;
    if (cols * rows_ > kMaxElements)
      throw RuleError(
          fmt::format("{}: operand size: {} has more than {} elements", prefix, operand, kMaxElements));
    const int64_t span = dim.stride * static_cast<int64_t>(dim.size - 1) * ds;
    min_col_ += std::min<int64_t>(0, span);
    max_col_ += std::max<int64_t>(0, span);
  }
  if (ap.offset_bytes > kMaxStride || ap.offset_bytes < -kMaxStride)
    throw RuleError(
        fmt::format("{}: offset: {} offset {} is out of range", prefix, operand, ap.offset_bytes));

  if (ap.space == MemSpace::HBM) {
    if (ap.tensor >= program.tensors.size() || ap.tensor >= state.hbm.size())
      throw RuleError(fmt::format("{}: HBM tensor: {} names tensor index {}, which does not exist", prefix,
                                  operand, ap.tensor));
    const TensorDecl& t = program.tensors[ap.tensor];
    if (t.private_to_core >= 0 && t.private_to_core != core)
      throw RuleError(fmt::format("{}: private tensor: {} tensor '{}' is private to core {}, not core {}",
                                  prefix, operand, t.name, t.private_to_core, core));
    auto& mem = state.hbm[ap.tensor];
    mem_bytes_ = mem.size();
    base_ = mem.data();
    base_off_ = ap.offset_bytes;
    if (ap.partition_stride > kMaxStride || ap.partition_stride < -kMaxStride)
      throw RuleError(fmt::format("{}: HBM bounds: {} row stride {} is out of range", prefix, operand,
                                  ap.partition_stride));
    row_stride_ = ap.partition_stride * ds;
    tensor_rows_ = t.shape.empty() ? 1 : t.shape[0];
    tensor_row_bytes_ = tensor_rows_ > 0 ? static_cast<int64_t>(mem_bytes_) / tensor_rows_ : 0;
    if (!indirect_rows) {
      const int64_t rows_span = row_stride_ * static_cast<int64_t>(rows_ - 1);
      const int64_t lo = ap.offset_bytes + std::min<int64_t>(0, rows_span) + min_col_;
      const int64_t hi = ap.offset_bytes + std::max<int64_t>(0, rows_span) + max_col_ + ds;
      if (lo < 0 || hi > static_cast<int64_t>(mem_bytes_))
        throw RuleError(fmt::format("{}: HBM bounds: {} bytes [{}, {}) outside tensor '{}' of {} bytes",
                                    prefix, operand, lo, hi, t.name, mem_bytes_));
    }
  } else {
    if (core < 0 || core > 1)
      throw RuleError(fmt::format("{}: core: {} core {} does not exist", prefix, operand, core));
    const bool sbuf = ap.space == MemSpace::SBUF;
    auto& mem = sbuf ? state.cores[core].sbuf : state.cores[core].psum;
    const int64_t bpp = sbuf ? limits.sbuf_bytes_per_partition : limits.psum_bytes_per_partition;
    const char* name = sbuf ? "SBUF" : "PSUM";
    if (mem.empty())
      throw RuleError(fmt::format("{}: core: {} core {} has no {}", prefix, operand, core, name));
    const uint64_t nparts = bpp > 0 ? mem.size() / bpp : 0;
    if (static_cast<uint64_t>(ap.partition_start) + rows_ > nparts)
      throw RuleError(fmt::format("{}: partition count: {} partitions [{}, {}) outside the {} partitions",
                                  prefix, operand, ap.partition_start,
                                  static_cast<uint64_t>(ap.partition_start) + rows_, nparts));
    const int64_t lo = ap.offset_bytes + min_col_, hi = ap.offset_bytes + max_col_ + ds;
    if (lo < 0 || hi > bpp)
      throw RuleError(fmt::format("{}: {} bounds: {} bytes [{}, {}) outside the {} bytes of a partition",
                                  prefix, name, operand, lo, hi, bpp));
    mem_bytes_ = mem.size();
    row_stride_ = bpp;
    base_ = mem.data();
    base_off_ = static_cast<int64_t>(ap.partition_start) * bpp + ap.offset_bytes;
  }

  col_off_.resize(cols);
  std::array<uint32_t, 4> idx{};
  int64_t off = 0;
  for (uint64_t j = 0; j < cols; ++j) {
    col_off_[j] = off;
    // Odometer over the dims, innermost last.
    for (int d = ap.ndim - 1; d >= 0; --d) {
      off += ap.dims[d].stride * ds;
      if (++idx[d] < ap.dims[d].size) break;
      off -= ap.dims[d].stride * ds * static_cast<int64_t>(ap.dims[d].size);
      idx[d] = 0;
    }
  }
}

uint8_t* OperandView::at_tensor_row(int64_t tensor_row, uint64_t col) {
  if (tensor_row < 0 || tensor_row >= tensor_rows_) return nullptr;
  const int64_t a = ap_.offset_bytes + tensor_row * tensor_row_bytes_ + col_off_[col];
  if (a < 0 || a + static_cast<int64_t>(dtype_size(ap_.dtype)) > static_cast<int64_t>(mem_bytes_))
    return nullptr;
  return base_ + a;
}

float OperandView::load_value(const uint8_t* p) const {
  switch (ap_.dtype) {
    case DType::F32:
      return read_as<float>(p);
    case DType::BF16:
      return num::bf16_to_f32(read_as<uint16_t>(p));
    case DType::FP16:
      return num::fp16_to_f32(read_as<uint16_t>(p));
    case DType::FP8_E4M3FN:
      return num::fp8_to_f32(*p, num::Fp8Format::E4M3FN);
    case DType::FP8_E5M2:
      return num::fp8_to_f32(*p, num::Fp8Format::E5M2);
    case DType::E8M0:
      return num::e8m0_to_f32(*p);
    case DType::I32:
      return static_cast<float>(read_as<int32_t>(p));
    case DType::U32:
      return static_cast<float>(read_as<uint32_t>(p));
    case DType::I16:
      return static_cast<float>(read_as<int16_t>(p));
    case DType::U16:
      return static_cast<float>(read_as<uint16_t>(p));
    case DType::I8:
      return static_cast<float>(read_as<int8_t>(p));
    case DType::U8:
      return static_cast<float>(*p);
    case DType::FP8_E4M3FN_X4:
    case DType::FP8_E5M2_X4:
      break;
  }
  throw RuleError(fmt::format("{} elements are packed FP8 and have no single value", dtype_name(ap_.dtype)));
}

void OperandView::store_value(uint8_t* p, float v) const {
  switch (ap_.dtype) {
    case DType::F32:
      write_as(p, v);
      return;
    case DType::BF16:
      write_as(p, num::f32_to_bf16(v));
      return;
    case DType::FP16:
      write_as(p, num::f32_to_fp16(v));
      return;
    case DType::FP8_E4M3FN:
      *p = num::f32_to_fp8(v, num::Fp8Format::E4M3FN, true);
      return;
    case DType::FP8_E5M2:
      *p = num::f32_to_fp8(v, num::Fp8Format::E5M2, true);
      return;
    case DType::E8M0:
      *p = f32_to_e8m0_floor(v);
      return;
    case DType::I32:
      write_as(p, static_cast<int32_t>(float_to_int(v, INT32_MIN, INT32_MAX)));
      return;
    case DType::U32:
      write_as(p, static_cast<uint32_t>(float_to_int(v, 0, UINT32_MAX)));
      return;
    case DType::I16:
      write_as(p, static_cast<int16_t>(float_to_int(v, INT16_MIN, INT16_MAX)));
      return;
    case DType::U16:
      write_as(p, static_cast<uint16_t>(float_to_int(v, 0, UINT16_MAX)));
      return;
    case DType::I8:
      write_as(p, static_cast<int8_t>(float_to_int(v, INT8_MIN, INT8_MAX)));
      return;
    case DType::U8:
      *p = static_cast<uint8_t>(float_to_int(v, 0, UINT8_MAX));
      return;
    case DType::FP8_E4M3FN_X4:
    case DType::FP8_E5M2_X4:
      break;
  }
  throw RuleError(fmt::format("{} elements are packed FP8 and have no single value", dtype_name(ap_.dtype)));
}

int64_t OperandView::load_int(uint32_t row, uint64_t col) {
  const uint8_t* p = at(row, col);
  switch (ap_.dtype) {
    case DType::I32:
      return read_as<int32_t>(p);
    case DType::U32:
      return read_as<uint32_t>(p);
    case DType::I16:
      return read_as<int16_t>(p);
    case DType::U16:
      return read_as<uint16_t>(p);
    case DType::I8:
      return read_as<int8_t>(p);
    case DType::U8:
      return *p;
    default:
      break;
  }
  const float v = load_value(p);
  if (std::isnan(v)) return 0;
  const double t = std::trunc(static_cast<double>(v));
  if (t >= 9.2e18) return std::numeric_limits<int64_t>::max();
  if (t <= -9.2e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(t);
}

void OperandView::store_int(uint32_t row, uint64_t col, int64_t v) {
  uint8_t* p = at(row, col);
  const auto u = static_cast<uint64_t>(v);
  switch (ap_.dtype) {
    case DType::I32:
    case DType::U32:
      write_as(p, static_cast<uint32_t>(u));
      return;
    case DType::I16:
    case DType::U16:
      write_as(p, static_cast<uint16_t>(u));
      return;
    case DType::I8:
    case DType::U8:
      *p = static_cast<uint8_t>(u);
      return;
    default:
      store_value(p, static_cast<float>(v));
  }
}

}  // namespace trnsim::isa
