// Where an input tensor's values come from: a seeded generator or a .npy file. The one list of generator
// names and keys, used by workloads ("inputs": docs/workloads.md) and by programs (tensor "init":
// docs/program-format.md):
//
//   {"generator": "normal", "seed": 1, "mean": 0, "std": 1}
//   {"generator": "uniform", "seed": 1, "low": -1, "high": 1}                 values in [low, high)
//   {"generator": "heavy_tailed", "seed": 1, "nu": 4, "scale": 1}            scale * Student-t(nu)
//   {"generator": "activations_with_outliers", "seed": 1, "mean": 0, "std": 1, "outlier_channels": 0,
//    "outlier_scale": 1}       N(mean, std^2), with `outlier_channels` columns of the tensor viewed as
//                              [dim 0, rest] scaled by outlier_scale
//   {"generator": "randint", "seed": 1, "low": 0, "high": 10}                integers in [low, high)
//   {"generator": "arange", "start": 0, "step": 1}                           start + step * i
//   {"generator": "constant", "value": 0.5}
//   {"generator": "zeros"}
//   {"npy": "x.npy"} or "x.npy"                relative to the workload's or program's folder
//
// Keys shown are the defaults (a "seed", a non-negative integer, is required by the random generators).
// Generated values are computed in FP32 (ints exactly) and then stored in the tensor's dtype (RNE; FP8
// saturating). Random generators are bit-identical on every platform and thread count (sim/io/generators.h).
// The float generators (normal, uniform, heavy_tailed, activations_with_outliers) do not fill integer
// tensors. Errors: InputError "<path>.<key>: <what is wrong>", path being the JSON path of the spec.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "sim/tensor/host_tensor.h"

namespace trnsim::tensor {

struct GeneratorSpec {
  std::string name;
  uint64_t seed = 0;
  nlohmann::json args;  // every key of the generator, defaults filled in
};

struct InputSource {
  bool is_npy = false;
  GeneratorSpec generator;  // when !is_npy
  std::string npy;          // resolved path when is_npy
};

const std::vector<std::string>& generator_names();

// Parses {"generator": ...}, {"npy": ...} or a bare .npy path string. `base_dir` resolves relative paths.
InputSource parse_input_source(const nlohmann::json& spec, const std::string& path,
                               const std::string& base_dir);
GeneratorSpec parse_generator(const nlohmann::json& spec, const std::string& path);

// InputError "<path>: ..." if the generator cannot fill a tensor of this dtype and shape (a float
// generator for an integer tensor, an x4 tensor, outlier_channels beyond the columns).
void check_generator_fits(const GeneratorSpec& g, isa::DType dtype, const std::vector<int64_t>& shape,
                          const std::string& path);
HostTensor generate(const GeneratorSpec& g, isa::DType dtype, const std::vector<int64_t>& shape, int threads);

// Reads the .npy or runs the generator for a tensor of `dtype` and `shape` (`what` names it in messages).
HostTensor make_input(const InputSource& s, isa::DType dtype, const std::vector<int64_t>& shape,
                      const std::string& what, int threads);

// Host threads for generators: the hardware concurrency, 1..64 (results do not depend on it).
int generator_threads();

}  // namespace trnsim::tensor
