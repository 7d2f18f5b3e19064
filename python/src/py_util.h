// Conversions between Python objects and the library's values: JSON (parameters, overrides, stats), NumPy
// arrays and host tensors (the same rules as .npy files: sim/tensor/host_tensor.h).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "sim/tensor/host_tensor.h"

namespace trnsim::py {

nlohmann::json to_json(pybind11::handle h);  // TypeError for what JSON cannot hold
pybind11::object from_json(const nlohmann::json& j);

// A NumPy array as a tensor of `dtype` and `shape` (empty: the array's), converted as a .npy input of that
// tensor is (float32/float64 values rounded RNE; raw bits as uint16/uint8/int32). InputError naming `what`.
tensor::HostTensor to_host(pybind11::handle array, isa::DType dtype, const std::vector<int64_t>& shape,
                           const std::string& what);
// A host tensor as NumPy: float32 values for float dtypes, int64 for integers; `raw`: the .npy bits
// (tensor::npy_dtype_of); `native`: the tensor's own dtype when NumPy has it (float32, float16, the integer
// dtypes; what nki.simulate_kernel returns), float32 values for the others (bfloat16, FP8).
pybind11::array to_numpy(const tensor::HostTensor& t, bool raw = false, bool native = false);

// The Trainium dtype a NumPy dtype maps to by default (float32, float16, the integers); nullopt otherwise.
std::optional<isa::DType> dtype_of_numpy(pybind11::handle array);

// View::pattern's dims, [(stride, size), ...]: a tuple or list of 2-tuples read with the C API (the front end
// makes one pattern per HBM operand, so the generic list-of-pairs conversion showed in its tracing time);
// anything else goes through pybind11's conversion, with its errors.
std::vector<std::pair<int64_t, int64_t>> pattern_dims(pybind11::handle dims);

}  // namespace trnsim::py
