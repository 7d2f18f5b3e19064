// A tensor on the host in one of the ISA dtypes: its bytes exactly as the simulated HBM holds them
// (row-major, little-endian), plus the one mapping between those bytes and .npy files.
//
// .npy inputs (from_npy): the array's shape must equal the tensor's (size-1 dims may differ: [N] fits
// [N, 1]); its dtype must fit the tensor's:
//   float32, bfloat16, float16 tensors   float32 or float64 values (rounded to nearest even); uint16 raw bits
//                                        for bfloat16 / float16; float16 for float16 (its bits as they are)
//   float8_e4m3fn, float8_e5m2            float32 or float64 values (RNE, saturating); uint8 raw bits
//   float8_e8m0fnu                        uint8 raw bits
//   float8_*_x4                           int32 raw bits (four FP8 bytes per element)
//   int32, uint32, int16, uint16, int8, uint8   values of any integer .npy dtype (int8 to int64, uint8 to
//                                        uint32) in the tensor dtype's range
// Outputs (npy_dtype_of) are written as float32 (float32), float16 (float16), uint16 raw bits (bfloat16),
// uint8 raw bits (FP8, E8M0), int32 raw bits (x4), and each integer dtype as the NumPy dtype of the same name
// (int8 as int8, uint32 as uint32, ...).
// Errors: InputError "<npy path>: <what is wrong> ... <what>", `what` naming the tensor with its dtype and
// shape (e.g. "kernel input 'x' bfloat16 [256, 512]").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/base/host_bytes.h"
#include "sim/io/npy.h"
#include "sim/isa/instruction.h"

namespace trnsim::tensor {

struct HostTensor {
  isa::DType dtype = isa::DType::F32;
  std::vector<int64_t> shape;
  HostBytes bytes;  // large ones file-backed when a scratch folder is set (sim/base/host_bytes.h)

  // A tensor of `shape` with every byte zero (0.0 in every dtype). InputError if the size overflows.
  static HostTensor zeros(isa::DType dtype, const std::vector<int64_t>& shape);

  int64_t elements() const;
  // Element i (row-major) as FP32 / as an integer (isa/element.h conversions). x4 dtypes: RuleError.
  float value(int64_t i) const;
  int64_t int_value(int64_t i) const;
  void set(int64_t i, float v);
  void set_int(int64_t i, int64_t v);
  // All elements as FP32 (x4 dtypes: RuleError).
  std::vector<float> values() const;
  // Elements [first, first + count) as FP32 into out[0, count) (as values() gives them).
  void values(int64_t first, int64_t count, float* out) const;
};

// Product of a shape; InputError ("<what>: shape ... is too large") beyond 2^40 elements.
int64_t elements_of(const std::vector<int64_t>& shape, const std::string& what = "tensor");
std::string shape_str(const std::vector<int64_t>& shape);  // "[4, 128]"

// The tensor a .npy array gives for a kernel input of `dtype` and `shape` (rules above).
HostTensor from_npy(const io::NpyArray& a, isa::DType dtype, const std::vector<int64_t>& shape,
                    const std::string& what);
// Whether from_npy gives a tensor sharing the mapped file's pages (a mapped .npy, sim/base/host_bytes.h,
// whose elements are the tensor's bytes: raw bits, or float32 for float32) rather than a converted copy.
bool shares_npy_pages(const io::NpyArray& a, isa::DType dtype);
// Checks only (no conversion): shape and dtype fit. Same errors as from_npy.
void check_npy_fits(const io::NpyArray& a, isa::DType dtype, const std::vector<int64_t>& shape,
                    const std::string& what);

// The .npy dtype an output of `dtype` is written as (rules above).
io::NpyDType npy_dtype_of(isa::DType dtype);
// An output file for write_npy_all; `t` must outlive the write.
io::NpyOutput npy_output(const std::string& path, const HostTensor& t);

}  // namespace trnsim::tensor
