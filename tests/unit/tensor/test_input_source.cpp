// Input sources (sim/tensor/input_source.h): the one list of generators and keys, their defaults, their
// errors, and the bytes they give.
#include <catch2/catch.hpp>

#include <cstring>

#include "sim/base/error.h"
#include "sim/numerics/float_formats.h"
#include "sim/tensor/input_source.h"

using namespace trnsim;
using isa::DType;
using nlohmann::json;

namespace {

std::string error_of(const json& spec) {
  try {
    tensor::parse_input_source(spec, "inputs.x", "");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("generators: defaults are filled in and keys checked", "[tensor]") {
  const tensor::InputSource s = tensor::parse_input_source({{"generator", "uniform"}, {"seed", 3}}, "p", "");
  CHECK_FALSE(s.is_npy);
  CHECK(s.generator.seed == 3);
  CHECK(s.generator.args == json{{"low", -1.0}, {"high", 1.0}});
  CHECK(error_of({{"generator", "uniform"}, {"seed", 1}, {"lo", 0}}) ==
        "inputs.x.lo: unknown key for generator 'uniform' (expected generator, seed, low, high)");
  CHECK(error_of({{"generator", "gauss"}, {"seed", 1}}) ==
        "inputs.x.generator: unknown generator 'gauss' (expected normal, uniform, heavy_tailed, "
        "activations_with_outliers, randint, arange, constant, zeros)");
  CHECK(error_of({{"generator", "normal"}}) ==
        "inputs.x.seed: missing (every random generator needs a seed)");
  CHECK(error_of({{"generator", "normal"}, {"seed", -1}}) ==
        "inputs.x.seed: expected a non-negative integer, found -1");
  CHECK(error_of({{"generator", "randint"}, {"seed", 1}}) ==
        "inputs.x.high: missing (generator 'randint' needs it)");
  CHECK(error_of({{"generator", "randint"}, {"seed", 1}, {"low", 5}, {"high", 5}}) ==
        "inputs.x.high: must be greater than low (5)");
  CHECK(error_of({{"generator", "constant"}, {"value", "x"}}) ==
        "inputs.x.value: expected a finite number, found \"x\"");
  CHECK(error_of({{"generator", "zeros"}, {"npy", "a.npy"}}) ==
        "inputs.x: expected exactly one of \"generator\" or \"npy\"");
  CHECK(error_of(json::array({1, 2})) ==
        "inputs.x: expected {\"generator\": ...}, {\"npy\": \"file.npy\"} or a .npy path, found an array of "
        "2 elements");
  const tensor::InputSource n = tensor::parse_input_source("a.npy", "p", "dir");
  CHECK(n.is_npy);
  CHECK(n.npy == "dir/a.npy");
}

TEST_CASE("generators: values in the tensor's dtype, whatever the thread count", "[tensor]") {
  const auto gen = [](const json& spec, DType t, std::vector<int64_t> shape, int threads) {
    const tensor::InputSource s = tensor::parse_input_source(spec, "p", "");
    tensor::check_generator_fits(s.generator, t, shape, "p");
    return tensor::generate(s.generator, t, shape, threads);
  };
  const json ri = {{"generator", "randint"}, {"seed", 9}, {"low", -3}, {"high", 4}};
  const tensor::HostTensor a = gen(ri, DType::I32, {50000}, 1), b = gen(ri, DType::I32, {50000}, 7);
  CHECK(a.bytes == b.bytes);
  int64_t lo = 99, hi = -99;
  for (int64_t i = 0; i < a.elements(); ++i)
    lo = std::min(lo, a.int_value(i)), hi = std::max(hi, a.int_value(i));
  CHECK(lo == -3);
  CHECK(hi == 3);
  // BF16 from a float stream: 7 x 85715 = 600005 elements are three parts of the split conversion (256 Ki
  // each, the last one short); every element is its FP32 value rounded to nearest even, with 1, 2 or 7
  // threads.
  for (const json& spec : {json{{"generator", "normal"}, {"seed", 4}, {"mean", 0.0}, {"std", 0.02}},
                           json{{"generator", "activations_with_outliers"},
                                {"seed", 5},
                                {"mean", 0.0},
                                {"std", 1.0},
                                {"outlier_channels", 3},
                                {"outlier_scale", 20.0}}}) {
    const tensor::HostTensor one = gen(spec, DType::BF16, {7, 85715}, 1),
                             two = gen(spec, DType::BF16, {7, 85715}, 2),
                             f32 = gen(spec, DType::F32, {7, 85715}, 1);
    CHECK(one.bytes == two.bytes);
    CHECK(gen(spec, DType::BF16, {7, 85715}, 7).bytes == one.bytes);
    int64_t wrong = 0;
    for (int64_t i = 0; i < one.elements(); ++i) {
      uint16_t h;
      std::memcpy(&h, one.bytes.data() + 2 * i, 2);
      wrong += h != num::f32_to_bf16(f32.value(i));
    }
    CHECK(wrong == 0);
  }
  const tensor::HostTensor r =
      gen({{"generator", "arange"}, {"start", 2}, {"step", 3}}, DType::I32, {2, 2}, 1);
  CHECK(r.int_value(3) == 11);
  const tensor::HostTensor c = gen({{"generator", "constant"}, {"value", 1.5}}, DType::BF16, {3}, 1);
  CHECK(c.value(2) == 1.5f);
  // A float generator cannot fill an integer tensor; x4 tensors come from .npy only.
  const tensor::InputSource nrm = tensor::parse_input_source({{"generator", "normal"}, {"seed", 1}}, "p", "");
  CHECK_THROWS_WITH(tensor::check_generator_fits(nrm.generator, DType::I32, {4}, "inputs.t"),
                    "inputs.t: generator 'normal' makes floats; the tensor is int32 (use randint, arange, "
                    "constant or zeros)");
  CHECK_THROWS_WITH(tensor::check_generator_fits(nrm.generator, DType::FP8_E4M3FN_X4, {4}, "inputs.t"),
                    Catch::Contains("packed FP8: use an .npy file"));
  // Integer generators make whole numbers the dtype holds: nothing rounds or wraps silently.
  const auto fits = [](const json& spec, DType t, std::vector<int64_t> shape) {
    const tensor::InputSource s = tensor::parse_input_source(spec, "p", "");
    try {
      tensor::check_generator_fits(s.generator, t, shape, "inputs.t");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("fits");
  };
  CHECK(fits({{"generator", "constant"}, {"value", 1e10}}, DType::I32, {1}) ==
        "inputs.t.value: the value 10000000000 is not a whole number in int32's range [-2147483648, "
        "2147483647]");
  CHECK(fits({{"generator", "constant"}, {"value", 3.5}}, DType::I32, {1}) ==
        "inputs.t.value: the value 3.5 is not a whole number in int32's range [-2147483648, 2147483647]");
  CHECK(fits({{"generator", "constant"}, {"value", -1}}, DType::U8, {1}) ==
        "inputs.t.value: the value -1 is not a whole number in uint8's range [0, 255]");
  CHECK(fits({{"generator", "randint"}, {"seed", 1}, {"low", 0}, {"high", 257}}, DType::U8, {4}) ==
        "inputs.t.high: the highest value (high - 1) 256 is not a whole number in uint8's range [0, 255]");
  // arange's last value: 2^31 - 4 + 3 * 2 = 2^31 + 2 overflows int32 at element 2 of 3.
  CHECK(fits({{"generator", "arange"}, {"start", 2147483644}, {"step", 3}}, DType::I32, {3}) ==
        "inputs.t.step: the last value 2147483650 is not a whole number in int32's range [-2147483648, "
        "2147483647]");
  CHECK(fits({{"generator", "arange"}, {"start", 2147483644}, {"step", 3}}, DType::I32, {2}) == "fits");
  CHECK(fits({{"generator", "constant"}, {"value", 2147483647}}, DType::I32, {1}) == "fits");
}
