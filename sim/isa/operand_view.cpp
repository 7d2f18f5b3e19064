#include "sim/isa/operand_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "sim/base/error.h"
#include "sim/numerics/float_formats.h"

namespace trnsim::isa {
namespace {

// Strides and sizes beyond this cannot address any real memory; rejecting them keeps the offset math in
// int64.
constexpr int64_t kMaxStride = int64_t{1} << 40;

}  // namespace

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
    const Dim dim = ap.dim(d);
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
    // Indices whose whole row (every free element) stays inside the tensor.
    const int64_t room = static_cast<int64_t>(mem_bytes_) - ds - ap.offset_bytes - max_col_;
    index_rows_ = room < 0 || ap.offset_bytes + min_col_ < 0 ? 0
                  : row_stride_ > 0                          ? room / row_stride_ + 1
                                                             : 1;
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
    contiguous_ = contiguous_ && off == static_cast<int64_t>(j) * ds;
    // Odometer over the dims, innermost last.
    for (int d = ap.ndim - 1; d >= 0; --d) {
      off += ap.strides[d] * ds;
      if (++idx[d] < ap.sizes[d]) break;
      off -= ap.strides[d] * ds * static_cast<int64_t>(ap.sizes[d]);
      idx[d] = 0;
    }
  }
}

uint8_t* OperandView::at_tensor_row(int64_t index, uint64_t col) {
  const int64_t step = row_stride_ < 0 ? -row_stride_ : row_stride_;
  if (index < 0 || (step > 0 && index > kMaxStride / step)) return nullptr;
  const int64_t a = ap_.offset_bytes + index * row_stride_ + col_off_[col];
  if (a < 0 || a + static_cast<int64_t>(dtype_size(ap_.dtype)) > static_cast<int64_t>(mem_bytes_))
    return nullptr;
  return base_ + a;
}

bool OperandView::may_overlap(const OperandView& o) const {
  if (base_ != o.base_ || rows_ == 0 || o.rows_ == 0 || col_off_.empty() || o.col_off_.empty()) return false;
  const int64_t ds = dtype_size(ap_.dtype), ods = dtype_size(o.ap_.dtype);
  if (ap_.space !=
      MemSpace::HBM) {  // rows are partitions, bytes [offset + min_col, offset + max_col] in each
    const int64_t p0 = ap_.partition_start, p1 = p0 + rows_;
    const int64_t q0 = o.ap_.partition_start, q1 = q0 + o.rows_;
    const int64_t b0 = ap_.offset_bytes + min_col_, b1 = ap_.offset_bytes + max_col_ + ds;
    const int64_t c0 = o.ap_.offset_bytes + o.min_col_, c1 = o.ap_.offset_bytes + o.max_col_ + ods;
    return p0 < q1 && q0 < p1 && b0 < c1 && c0 < b1;
  }
  // HBM, one tensor: the whole byte spans.
  const auto span = [](const OperandView& v, int64_t es) {
    const int64_t rows_span = v.row_stride_ * static_cast<int64_t>(v.rows_ - 1);
    return std::pair<int64_t, int64_t>{v.base_off_ + std::min<int64_t>(0, rows_span) + v.min_col_,
                                       v.base_off_ + std::max<int64_t>(0, rows_span) + v.max_col_ + es};
  };
  const auto [a0, a1] = span(*this, ds);
  const auto [c0, c1] = span(o, ods);
  return a0 < c1 && c0 < a1;
}

float OperandView::load_value(const uint8_t* p) const {
  return load_element(ap_.dtype, p);
}

void OperandView::store_value(uint8_t* p, float v) const {
  store_element(ap_.dtype, p, v);
}

int64_t OperandView::load_int(uint32_t row, uint64_t col) {
  return load_element_int(ap_.dtype, at(row, col));
}

void OperandView::store_int(uint32_t row, uint64_t col, int64_t v) {
  store_element_int(ap_.dtype, at(row, col), v);
}

namespace {

// Calls f(i, address of element i) for every element of a row. A contiguous row steps by the compile-time
// element size kSize, so the plain conversions below vectorise; other rows go through the column offsets.
template <int64_t kSize, typename F>
inline void for_row(uint8_t* row, const std::vector<int64_t>& off, bool contiguous, F&& f) {
  const size_t n = off.size();
  if (contiguous) {
    for (size_t i = 0; i < n; ++i) f(i, row + static_cast<int64_t>(i) * kSize);
    return;
  }
  for (size_t i = 0; i < n; ++i) f(i, row + off[i]);
}

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

// store_element's FP32 -> integer rule for T of at most 32 bits (RNE, saturate to T's range, NaN -> 0) with
// integer masks instead of FP32 compares, so that row loops vectorise (GCC does not if-convert FP32 compares
// under -ftrapping-math). The rounding is the same 2^23 add and subtract; the bounds are compared as FP32
// magnitude bits (monotone in the value); for an FP32 r, r >= INT32_MAX exactly when r >= 2^31.
template <typename T>
inline T f32_to_int_sat(float v) {
  static_assert(sizeof(T) <= 4 && std::is_integral_v<T>);
  constexpr int64_t lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  constexpr uint32_t kHiBits = std::bit_cast<uint32_t>(sizeof(T) == 4 ? 0x1p31f : static_cast<float>(hi));
  constexpr uint32_t kLoBits = std::bit_cast<uint32_t>(static_cast<float>(-lo));
  const auto mask = [](bool b) { return 0u - static_cast<uint32_t>(b); };
  const uint32_t u = std::bit_cast<uint32_t>(v), ua = u & 0x7FFFFFFFu;
  const float rounded = std::copysign((std::fabs(v) + 0x1p23f) - 0x1p23f, v);
  const uint32_t small = mask(ua < 0x4B000000u);  // |v| < 2^23: not an integer yet
  const uint32_t ur = (std::bit_cast<uint32_t>(rounded) & small) | (u & ~small), ra = ur & 0x7FFFFFFFu;
  const uint32_t nan = mask(ua > 0x7F800000u), neg = 0u - (ur >> 31);
  const uint32_t over = ~nan & ~neg & mask(ur >= kHiBits);
  const uint32_t under = ~nan & neg & (lo == 0 ? ~0u : mask(ra >= kLoBits));
  const uint32_t keep = ~(nan | over | under);
  const auto i = static_cast<uint32_t>(static_cast<int32_t>(std::bit_cast<float>(ur & keep)));
  const uint32_t out = (i & keep) | (static_cast<uint32_t>(static_cast<int32_t>(hi)) & over) |
                       (static_cast<uint32_t>(static_cast<int32_t>(lo)) & under);
  return static_cast<T>(static_cast<int32_t>(out));
}

// Element sizes in bytes, as types: the row loops step by a compile-time stride.
using S1 = std::integral_constant<int64_t, 1>;
using S2 = std::integral_constant<int64_t, 2>;
using S4 = std::integral_constant<int64_t, 4>;

}  // namespace

void OperandView::load_row(uint32_t row, float* out) {
  uint8_t* r = base_ + (base_off_ + row_off(row));
  const auto each = [&](auto size, auto&& f) {
    for_row<decltype(size)::value>(r, col_off_, contiguous_,
                                   [&](size_t i, const uint8_t* p) { out[i] = f(p); });
  };
  switch (ap_.dtype) {
    case DType::F32:
      return each(S4{}, [](const uint8_t* p) { return read_as<float>(p); });
    case DType::BF16:
      return each(S2{}, [](const uint8_t* p) { return num::bf16_to_f32(read_as<uint16_t>(p)); });
    case DType::FP8_E4M3FN:
      return each(S1{}, [](const uint8_t* p) { return num::fp8_to_f32(*p, num::Fp8Format::E4M3FN); });
    case DType::FP8_E5M2:
      return each(S1{}, [](const uint8_t* p) { return num::fp8_to_f32(*p, num::Fp8Format::E5M2); });
    case DType::I32:
      return each(S4{}, [](const uint8_t* p) { return static_cast<float>(read_as<int32_t>(p)); });
    case DType::I16:
      return each(S2{}, [](const uint8_t* p) { return static_cast<float>(read_as<int16_t>(p)); });
    case DType::U16:
      return each(S2{}, [](const uint8_t* p) { return static_cast<float>(read_as<uint16_t>(p)); });
    case DType::I8:
      return each(S1{}, [](const uint8_t* p) { return static_cast<float>(read_as<int8_t>(p)); });
    case DType::U8:
      return each(S1{}, [](const uint8_t* p) { return static_cast<float>(*p); });
    default: {
      const int64_t ds = dtype_size(ap_.dtype);
      for (size_t i = 0; i < col_off_.size(); ++i)
        out[i] = load_element(ap_.dtype, r + (contiguous_ ? static_cast<int64_t>(i) * ds : col_off_[i]));
    }
  }
}

void OperandView::store_row(uint32_t row, const float* in) {
  uint8_t* r = base_ + (base_off_ + row_off(row));
  const auto each = [&](auto size, auto&& f) {
    for_row<decltype(size)::value>(r, col_off_, contiguous_, [&](size_t i, uint8_t* p) { f(p, in[i]); });
  };
  switch (ap_.dtype) {
    case DType::F32:
      return each(S4{}, [](uint8_t* p, float v) { write_as(p, v); });
    case DType::BF16:
      return each(S2{}, [](uint8_t* p, float v) { write_as(p, num::f32_to_bf16(v)); });
    case DType::FP8_E4M3FN:
      return each(S1{}, [](uint8_t* p, float v) { *p = num::f32_to_fp8(v, num::Fp8Format::E4M3FN, true); });
    case DType::FP8_E5M2:
      return each(S1{}, [](uint8_t* p, float v) { *p = num::f32_to_fp8(v, num::Fp8Format::E5M2, true); });
    case DType::I32:
      return each(S4{}, [](uint8_t* p, float v) { write_as(p, f32_to_int_sat<int32_t>(v)); });
    case DType::I16:
      return each(S2{}, [](uint8_t* p, float v) { write_as(p, f32_to_int_sat<int16_t>(v)); });
    case DType::U16:
      return each(S2{}, [](uint8_t* p, float v) { write_as(p, f32_to_int_sat<uint16_t>(v)); });
    case DType::I8:
      return each(S1{}, [](uint8_t* p, float v) { write_as(p, f32_to_int_sat<int8_t>(v)); });
    case DType::U8:
      return each(S1{}, [](uint8_t* p, float v) { *p = f32_to_int_sat<uint8_t>(v); });
    default: {
      const int64_t ds = dtype_size(ap_.dtype);
      for (size_t i = 0; i < col_off_.size(); ++i)
        store_element(ap_.dtype, r + (contiguous_ ? static_cast<int64_t>(i) * ds : col_off_[i]), in[i]);
    }
  }
}

void OperandView::load_row_int(uint32_t row, int64_t* out) {
  uint8_t* r = base_ + (base_off_ + row_off(row));
  const auto each = [&](auto size, auto&& f) {
    for_row<decltype(size)::value>(r, col_off_, contiguous_,
                                   [&](size_t i, const uint8_t* p) { out[i] = f(p); });
  };
  switch (ap_.dtype) {
    case DType::I32:
      return each(S4{}, [](const uint8_t* p) { return int64_t{read_as<int32_t>(p)}; });
    case DType::U32:
      return each(S4{}, [](const uint8_t* p) { return int64_t{read_as<uint32_t>(p)}; });
    case DType::I16:
      return each(S2{}, [](const uint8_t* p) { return int64_t{read_as<int16_t>(p)}; });
    case DType::U16:
      return each(S2{}, [](const uint8_t* p) { return int64_t{read_as<uint16_t>(p)}; });
    case DType::I8:
      return each(S1{}, [](const uint8_t* p) { return int64_t{read_as<int8_t>(p)}; });
    case DType::U8:
      return each(S1{}, [](const uint8_t* p) { return int64_t{*p}; });
    default: {
      const int64_t ds = dtype_size(ap_.dtype);
      for (size_t i = 0; i < col_off_.size(); ++i)
        out[i] = load_element_int(ap_.dtype, r + (contiguous_ ? static_cast<int64_t>(i) * ds : col_off_[i]));
    }
  }
}

void OperandView::store_row_int(uint32_t row, const int64_t* in) {
  uint8_t* r = base_ + (base_off_ + row_off(row));
  const auto each = [&](auto size, auto&& f) {
    for_row<decltype(size)::value>(r, col_off_, contiguous_, [&](size_t i, uint8_t* p) { f(p, in[i]); });
  };
  // Integer dtypes wrap to their width (two's complement), as store_element_int.
  switch (ap_.dtype) {
    case DType::I32:
    case DType::U32:
      return each(
          S4{}, [](uint8_t* p, int64_t v) { write_as(p, static_cast<uint32_t>(static_cast<uint64_t>(v))); });
    case DType::I16:
    case DType::U16:
      return each(
          S2{}, [](uint8_t* p, int64_t v) { write_as(p, static_cast<uint16_t>(static_cast<uint64_t>(v))); });
    case DType::I8:
    case DType::U8:
      return each(S1{}, [](uint8_t* p, int64_t v) { *p = static_cast<uint8_t>(static_cast<uint64_t>(v)); });
    default: {
      const int64_t ds = dtype_size(ap_.dtype);
      for (size_t i = 0; i < col_off_.size(); ++i)
        store_element_int(ap_.dtype, r + (contiguous_ ? static_cast<int64_t>(i) * ds : col_off_[i]), in[i]);
    }
  }
}

}  // namespace trnsim::isa
