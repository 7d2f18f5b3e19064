#include "sim/tensor/host_tensor.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "sim/base/error.h"
#include "sim/isa/element.h"
#include "sim/isa/int_range.h"
#include "sim/isa/semantics.h"
#include "sim/numerics/float_formats.h"

namespace trnsim::tensor {
namespace {

using io::NpyDType;
using isa::DType;

constexpr int64_t kMaxElements = int64_t{1} << 40;

// Shapes equal once size-1 dims are dropped.
bool same_squeezed(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> x, y;
  for (int64_t d : a)
    if (d != 1) x.push_back(d);
  for (int64_t d : b)
    if (d != 1) y.push_back(d);
  return x == y;
}

std::string accepted(DType t) {
  switch (t) {
    case DType::F32:
      return "float32 or float64";
    case DType::BF16:
      return fmt::format("float32, float64 or uint16 (raw {} bits)", isa::dtype_name(t));
    case DType::FP16:
      return "float16, float32, float64 or uint16 (raw float16 bits)";
    case DType::FP8_E4M3FN:
    case DType::FP8_E5M2:
    case DType::FP8_E4M3:
      return fmt::format("float32, float64 or uint8 (raw {} bits)", isa::dtype_name(t));
    case DType::E8M0:
      return "uint8 (raw E8M0 bits)";
    case DType::FP8_E4M3FN_X4:
    case DType::FP8_E5M2_X4:
      return "int32 (raw x4 bits)";
    default:
      return "an integer dtype (int8, int16, int32, int64, uint8, uint16, uint32)";
  }
}

enum class Conv { Value, Raw, Int };

// `d` rounded to float32 by round-to-odd: toward zero, with the lowest mantissa bit set when inexact. A
// format of at most 22 significand bits (bfloat16, float16, the FP8s) rounded to nearest even from that float
// gets what it gets from `d` directly (Boldo and Melquiond, "When double rounding is odd", 2005: the
// intermediate format needs 2 more bits than the target), where RNE to float32 first could round twice
// (1 + 2^-8 + 2^-40 to bfloat16: 1.0 instead of 1.0078125).
float round_to_odd_f32(double d) {
  float f = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(f) == d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d))
    f = std::nextafter(f, 0.0f);  // (to FLT_MAX from inf past the float range)
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits |= 1u;
  std::memcpy(&f, &bits, sizeof bits);
  return f;
}

// How a .npy dtype maps onto a tensor dtype; false if it does not.
bool conversion(NpyDType n, DType t, Conv& c) {
  const bool f = n == NpyDType::F32 || n == NpyDType::F64;
  const bool i = n == NpyDType::I32 || n == NpyDType::I64 || n == NpyDType::I16 || n == NpyDType::I8 ||
                 n == NpyDType::U32 || n == NpyDType::U16 || n == NpyDType::U8;
  switch (t) {
    case DType::F32:
      c = Conv::Value;
      return f;
    case DType::BF16:
    case DType::FP16:
      // float16 values are a float16 tensor's bits as they are (NumPy's float16 is IEEE binary16).
      c = f ? Conv::Value : Conv::Raw;
      return f || n == NpyDType::U16 || (t == DType::FP16 && n == NpyDType::F16);
    case DType::FP8_E4M3FN:
    case DType::FP8_E5M2:
    case DType::FP8_E4M3:
      c = f ? Conv::Value : Conv::Raw;
      return f || n == NpyDType::U8;
    case DType::E8M0:
      c = Conv::Raw;
      return n == NpyDType::U8;
    case DType::FP8_E4M3FN_X4:
    case DType::FP8_E5M2_X4:
      c = Conv::Raw;
      return n == NpyDType::I32;
    default:  // the integer dtypes: any integer .npy, its values in range
      c = Conv::Int;
      return i;
  }
}

int64_t npy_int(const io::NpyArray& a, int64_t i) {
  switch (a.dtype) {
    case NpyDType::I32:
      return a.data<int32_t>()[i];
    case NpyDType::I64:
      return a.data<int64_t>()[i];
    case NpyDType::I16:
      return a.data<int16_t>()[i];
    case NpyDType::I8:
      return a.data<int8_t>()[i];
    case NpyDType::U32:
      return a.data<uint32_t>()[i];
    case NpyDType::U16:
      return a.data<uint16_t>()[i];
    default:
      return a.data<uint8_t>()[i];
  }
}

}  // namespace

int64_t elements_of(const std::vector<int64_t>& shape, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > kMaxElements / d))
      throw InputError(
          fmt::format("{}: shape {} is too large (more than 2^40 elements)", what, shape_str(shape)));
    n *= d;
  }
  return n;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

HostTensor HostTensor::zeros(DType dtype, const std::vector<int64_t>& shape) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = shape;
  t.bytes.assign(static_cast<size_t>(elements_of(shape)) * isa::dtype_size(dtype), 0);
  return t;
}

int64_t HostTensor::elements() const {
  return static_cast<int64_t>(bytes.size() / isa::dtype_size(dtype));
}

float HostTensor::value(int64_t i) const {
  return isa::load_element(dtype, bytes.data() + i * isa::dtype_size(dtype));
}

int64_t HostTensor::int_value(int64_t i) const {
  return isa::load_element_int(dtype, bytes.data() + i * isa::dtype_size(dtype));
}

void HostTensor::set(int64_t i, float v) {
  isa::store_element(dtype, bytes.data() + i * isa::dtype_size(dtype), v);
}

void HostTensor::set_int(int64_t i, int64_t v) {
  isa::store_element_int(dtype, bytes.data() + i * isa::dtype_size(dtype), v);
}

std::vector<float> HostTensor::values() const {
  std::vector<float> v(static_cast<size_t>(elements()));
  values(0, elements(), v.data());
  return v;
}

void HostTensor::values(int64_t first, int64_t count, float* out) const {
  if (dtype == DType::F32) {
    std::memcpy(out, bytes.data() + 4 * first, 4 * static_cast<size_t>(count));
    return;
  }
  if (dtype == DType::BF16) {  // the common input dtype: the bits are the top half of the FP32 value
    const uint8_t* b = bytes.data() + 2 * first;
    for (int64_t i = 0; i < count; ++i) {
      uint16_t h;
      std::memcpy(&h, b + 2 * i, 2);
      out[i] = num::bf16_to_f32(h);
    }
    return;
  }
  for (int64_t i = 0; i < count; ++i) out[i] = value(first + i);
}

void check_npy_fits(const io::NpyArray& a, DType dtype, const std::vector<int64_t>& shape,
                    const std::string& what) {
  if (a.shape != shape && !same_squeezed(a.shape, shape))
    throw InputError(fmt::format("{}: shape {} does not match {}", a.path, io::shape_str(a.shape), what));
  Conv c;
  if (!conversion(a.dtype, dtype, c))
    throw InputError(fmt::format("{}: dtype {} does not fit {} (expected {})", a.path,
                                 io::npy_dtype_name(a.dtype), what, accepted(dtype)));
}

bool shares_npy_pages(const io::NpyArray& a, DType dtype) {
  Conv c = Conv::Value;
  if (!a.bytes.file_backed() || !conversion(a.dtype, dtype, c)) return false;
  return c == Conv::Raw || (c == Conv::Value && a.dtype == NpyDType::F32 && dtype == DType::F32);
}

HostTensor from_npy(const io::NpyArray& a, DType dtype, const std::vector<int64_t>& shape,
                    const std::string& what) {
  check_npy_fits(a, dtype, shape, what);
  Conv c = Conv::Value;
  conversion(a.dtype, dtype, c);
  if (shares_npy_pages(a, dtype)) {  // the same bits: the file's pages, shared, not copied
    HostTensor t;
    t.dtype = dtype;
    t.shape = shape;
    t.bytes = a.bytes.cow_copy();
    return t;
  }
  HostTensor t = HostTensor::zeros(dtype, shape);
  const int64_t n = t.elements();
  switch (c) {
    case Conv::Raw:
      std::memcpy(t.bytes.data(), a.bytes.data(), t.bytes.size());
      break;
    case Conv::Value:
      if (a.dtype == NpyDType::F32) {
        const float* v = a.data<float>();
        if (dtype == DType::F32)
          std::memcpy(t.bytes.data(), v, t.bytes.size());
        else
          for (int64_t i = 0; i < n; ++i) t.set(i, v[i]);
      } else {
        const double* v = a.data<double>();
        if (dtype == DType::F32)
          for (int64_t i = 0; i < n; ++i) t.set(i, static_cast<float>(v[i]));
        else  // one rounding from the double to the tensor's dtype, not two through float32
          for (int64_t i = 0; i < n; ++i) t.set(i, round_to_odd_f32(v[i]));
      }
      break;
    case Conv::Int: {
      const auto [lo, hi] = isa::int_range(dtype);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t v = npy_int(a, i);
        if (v < lo || v > hi)
          throw InputError(fmt::format("{}: element {} = {} is outside the {} range [{}, {}] of {}", a.path,
                                       i, v, isa::dtype_name(dtype), lo, hi, what));
        t.set_int(i, v);
      }
      break;
    }
  }
  return t;
}

io::NpyDType npy_dtype_of(DType t) {
  switch (t) {
    case DType::F32:
      return NpyDType::F32;
    case DType::FP16:
      return NpyDType::F16;
    case DType::BF16:
    case DType::U16:
      return NpyDType::U16;
    case DType::I16:
      return NpyDType::I16;
    case DType::I8:
      return NpyDType::I8;
    case DType::U32:
      return NpyDType::U32;
    case DType::I32:
    case DType::FP8_E4M3FN_X4:
    case DType::FP8_E5M2_X4:
      return NpyDType::I32;
    default:
      return NpyDType::U8;
  }
}

io::NpyOutput npy_output(const std::string& path, const HostTensor& t) {
  return {path, npy_dtype_of(t.dtype), t.shape, t.bytes.data()};
}

}  // namespace trnsim::tensor
