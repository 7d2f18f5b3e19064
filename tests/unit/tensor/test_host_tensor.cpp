// Host tensors and the .npy mapping (sim/tensor/host_tensor.h): which .npy dtypes fit which tensor dtype,
// the exact bytes each conversion gives, and the messages for everything that does not fit.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "sim/base/error.h"
#include "sim/io/npy.h"
#include "sim/tensor/host_tensor.h"

using namespace trnsim;
using io::NpyDType;
using isa::DType;
using tensor::HostTensor;

namespace {

template <class T>
io::NpyArray npy(NpyDType dt, std::vector<int64_t> shape, std::vector<T> v) {
  io::NpyArray a;
  a.path = "x.npy";
  a.dtype = dt;
  a.shape = std::move(shape);
  a.bytes.resize(v.size() * sizeof(T));
  std::memcpy(a.bytes.data(), v.data(), a.bytes.size());
  return a;
}

std::string error_of(const io::NpyArray& a, DType t, std::vector<int64_t> shape) {
  try {
    tensor::from_npy(a, t, shape, "kernel input 'x'");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("from_npy: float values are rounded into the tensor's dtype", "[tensor]") {
  // 1 + 2^-8 is halfway between two BF16 values (1 and 1 + 2^-7): RNE gives 1.0 (0x3F80). 1 + 3*2^-9 rounds
  // up to 1 + 2^-7 (0x3F81).
  const auto a = npy<float>(NpyDType::F32, {2}, {1.0f + 1.0f / 256, 1.0f + 3.0f / 512});
  const HostTensor t = tensor::from_npy(a, DType::BF16, {2}, "x");
  REQUIRE(t.bytes.size() == 4);
  CHECK((t.bytes[0] | t.bytes[1] << 8) == 0x3F80);
  CHECK((t.bytes[2] | t.bytes[3] << 8) == 0x3F81);
  // float64 into float32 and FP8 (E4M3FN saturates: 1000 -> 448 = 0x7E).
  const auto d = npy<double>(NpyDType::F64, {2}, {0.1, 1000.0});
  CHECK(tensor::from_npy(d, DType::F32, {2}, "x").value(0) == 0.1f);
  const HostTensor f8 = tensor::from_npy(d, DType::FP8_E4M3FN, {2}, "x");
  CHECK(f8.bytes[1] == 0x7E);
}

TEST_CASE("from_npy: float64 is rounded once into a narrower dtype, not twice through float32", "[tensor]") {
  // Each value is just above a tie of the target (the + 2^-40 is lost by RNE to float32, which lands on the
  // tie; RNE then goes to the even neighbour below): rounded once it goes up.
  // BF16: 1 + 2^-8 + 2^-40 -> 1 + 2^-7 (0x3F81), not 1.0 (0x3F80).
  // FP16: 1 + 2^-11 + 2^-40 -> 1 + 2^-10 (0x3C01), not 1.0 (0x3C00).
  // E4M3FN: 1 + 2^-4 + 2^-40 -> 1.125 (0x39), not 1.0 (0x38); -(same) -> 0xB9.
  const double e = std::ldexp(1.0, -40);
  const auto b = npy<double>(NpyDType::F64, {1}, {1.0 + std::ldexp(1.0, -8) + e});
  const HostTensor tb = tensor::from_npy(b, DType::BF16, {1}, "x");
  CHECK((tb.bytes[0] | tb.bytes[1] << 8) == 0x3F81);
  const auto h = npy<double>(NpyDType::F64, {1}, {1.0 + std::ldexp(1.0, -11) + e});
  const HostTensor th = tensor::from_npy(h, DType::FP16, {1}, "x");
  CHECK((th.bytes[0] | th.bytes[1] << 8) == 0x3C01);
  const auto q = npy<double>(NpyDType::F64, {2}, {1.0 + 0.0625 + e, -(1.0 + 0.0625 + e)});
  const HostTensor tq = tensor::from_npy(q, DType::FP8_E4M3FN, {2}, "x");
  CHECK(tq.bytes[0] == 0x39);
  CHECK(tq.bytes[1] == 0xB9);
  // Exact ties and values float32 holds exactly round as before (1 + 2^-8: the tie, to even 0x3F80); a
  // double past float32's range still overflows BF16 to +Inf (0x7F80); a tiny one rounds to a signed zero.
  const auto x = npy<double>(NpyDType::F64, {3}, {1.0 + std::ldexp(1.0, -8), 1e300, -1e-300});
  const HostTensor tx = tensor::from_npy(x, DType::BF16, {3}, "x");
  CHECK((tx.bytes[0] | tx.bytes[1] << 8) == 0x3F80);
  CHECK((tx.bytes[2] | tx.bytes[3] << 8) == 0x7F80);
  CHECK((tx.bytes[4] | tx.bytes[5] << 8) == 0x8000);
}

TEST_CASE("from_npy: raw bits and integers", "[tensor]") {
  const auto bits = npy<uint16_t>(NpyDType::U16, {1, 2}, {0x3F80, 0xFF80});
  const HostTensor b = tensor::from_npy(bits, DType::BF16, {2, 1}, "x");  // [1, 2] fits [2, 1]: same squeeze
  CHECK(b.value(0) == 1.0f);
  CHECK(b.value(1) == -INFINITY);
  const auto i64 = npy<int64_t>(NpyDType::I64, {3}, {-1, 0, 2147483647});
  const HostTensor i = tensor::from_npy(i64, DType::I32, {3, 1}, "x");
  CHECK(i.int_value(0) == -1);
  CHECK(i.int_value(2) == 2147483647);
  CHECK(error_of(npy<int64_t>(NpyDType::I64, {1}, {int64_t{1} << 40}), DType::I32, {1}) ==
        "x.npy: element 0 = 1099511627776 is outside the int32 range [-2147483648, 2147483647] of kernel "
        "input 'x'");
}

TEST_CASE("from_npy: what does not fit is an error naming the file and the tensor", "[tensor]") {
  const auto f = npy<float>(NpyDType::F32, {4}, {1, 2, 3, 4});
  CHECK(error_of(f, DType::I32, {4}) ==
        "x.npy: dtype float32 does not fit kernel input 'x' (expected an integer dtype (int8, int16, int32, "
        "int64, uint8, uint16, uint32))");
  CHECK(error_of(f, DType::E8M0, {4}) ==
        "x.npy: dtype float32 does not fit kernel input 'x' (expected uint8 (raw E8M0 bits))");
  CHECK(error_of(f, DType::F32, {4, 1}) == "no error");
  CHECK(error_of(f, DType::F32, {2, 2}) == "x.npy: shape (4,) does not match kernel input 'x'");
  CHECK(error_of(f, DType::F32, {3}) == "x.npy: shape (4,) does not match kernel input 'x'");
  CHECK(error_of(npy<uint8_t>(NpyDType::U8, {4}, {1, 2, 3, 4}), DType::BF16, {4}) ==
        "x.npy: dtype uint8 does not fit kernel input 'x' (expected float32, float64 or uint16 (raw bfloat16 "
        "bits))");
}

TEST_CASE("npy_dtype_of: how outputs are written", "[tensor]") {
  CHECK(tensor::npy_dtype_of(DType::F32) == NpyDType::F32);
  CHECK(tensor::npy_dtype_of(DType::BF16) == NpyDType::U16);
  CHECK(tensor::npy_dtype_of(DType::FP8_E5M2) == NpyDType::U8);
  CHECK(tensor::npy_dtype_of(DType::E8M0) == NpyDType::U8);
  CHECK(tensor::npy_dtype_of(DType::I32) == NpyDType::I32);
  CHECK(tensor::npy_dtype_of(DType::FP8_E4M3FN_X4) == NpyDType::I32);
  // Each integer dtype as NumPy's of the same name (an int8 -4 was written as uint8 252).
  CHECK(tensor::npy_dtype_of(DType::I8) == NpyDType::I8);
  CHECK(tensor::npy_dtype_of(DType::U8) == NpyDType::U8);
  CHECK(tensor::npy_dtype_of(DType::I16) == NpyDType::I16);
  CHECK(tensor::npy_dtype_of(DType::U16) == NpyDType::U16);
  CHECK(tensor::npy_dtype_of(DType::U32) == NpyDType::U32);
  CHECK(tensor::npy_dtype_of(DType::FP16) == NpyDType::F16);  // NumPy's float16 (was uint16 bits)
  CHECK_THROWS_WITH(tensor::elements_of({1 << 20, 1 << 20, 2}, "t"),
                    "t: shape [1048576, 1048576, 2] is too large (more than 2^40 elements)");
}

// values(first, count, out): the elements of a range as values() gives them, nothing outside it written.
TEST_CASE("values(first, count, out) converts just that range", "[tensor]") {
  HostTensor b = HostTensor::zeros(DType::BF16, {2, 3});
  for (int i = 0; i < 6; ++i) b.set(i, 1.5f * static_cast<float>(i) - 2.0f);  // -2, -0.5, 1, 2.5, 4, 5.5
  HostTensor f = HostTensor::zeros(DType::F32, {5});
  for (int i = 0; i < 5; ++i) f.set(i, 0.1f * static_cast<float>(i));
  HostTensor n = HostTensor::zeros(DType::I16, {4});
  for (int i = 0; i < 4; ++i) n.set_int(i, -300 + 200 * i);  // -300, -100, 100, 300
  float out[5] = {7, 7, 7, 7, 7};
  b.values(2, 3, out + 1);
  CHECK(std::vector<float>(out, out + 5) == std::vector<float>{7, 1.0f, 2.5f, 4.0f, 7});
  f.values(3, 2, out);
  CHECK(out[0] == 0.3f);
  CHECK(out[1] == 0.4f);
  CHECK(out[2] == 2.5f);
  n.values(1, 3, out);
  CHECK(std::vector<float>(out, out + 4) == std::vector<float>{-100, 100, 300, 4.0f});
  CHECK(b.values() == std::vector<float>{-2.0f, -0.5f, 1.0f, 2.5f, 4.0f, 5.5f});
}
