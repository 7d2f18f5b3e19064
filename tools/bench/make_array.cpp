// trnsim_make_array: writes a seeded random 2-D .npy (float32 or raw BF16 bits) made by sim/io/generators,
// for benchmarks and the shipped examples.
//   trnsim_make_array OUT.npy --rows 8192 --cols 8192 --dtype bf16 --seed 1 [--outlier-channels 8]
//                     [--outlier-scale 50] [--std 1] [--threads 2]
#include <CLI/CLI.hpp>
#include <cstdio>
#include <vector>

#include "sim/base/error.h"
#include "sim/io/generators.h"
#include "sim/io/npy.h"
#include "sim/numerics/float_formats.h"

int main(int argc, char** argv) {
  CLI::App app{"Write a seeded random 2-D .npy array (normal activations with optional outlier channels)"};
  std::string out, dtype = "bf16";
  int64_t rows = 0, cols = 0, outliers = 0;
  double std_dev = 1.0, outlier_scale = 1.0;
  uint64_t seed = 1;
  int threads = 1;
  app.add_option("output", out, "output .npy")->required();
  app.add_option("--rows", rows)->required()->check(CLI::PositiveNumber);
  app.add_option("--cols", cols)->required()->check(CLI::PositiveNumber);
  app.add_option("--dtype", dtype, "bf16 (raw uint16 bits) or f32")
      ->capture_default_str()
      ->check(CLI::IsMember({"bf16", "f32"}));
  app.add_option("--seed", seed)->capture_default_str();
  app.add_option("--std", std_dev)->capture_default_str();
  app.add_option("--outlier-channels", outliers, "number of columns scaled by --outlier-scale")
      ->capture_default_str();
  app.add_option("--outlier-scale", outlier_scale)->capture_default_str();
  app.add_option("--threads", threads)->capture_default_str()->check(CLI::Range(1, 256));
  CLI11_PARSE(app, argc, argv);
  try {
    trnsim::io::OutlierActivations p;
    p.std = std_dev;
    p.outlier_channels = outliers;
    p.outlier_scale = outlier_scale;
    std::vector<float> x = trnsim::io::activations_with_outliers(rows, cols, p, seed, threads);
    if (dtype == "f32") {
      trnsim::io::write_npy(out, trnsim::io::NpyDType::F32, {rows, cols}, x.data());
    } else {
      std::vector<uint16_t> b(x.size());
      for (size_t i = 0; i < x.size(); ++i) b[i] = trnsim::num::f32_to_bf16(x[i]);
      trnsim::io::write_npy(out, trnsim::io::NpyDType::U16, {rows, cols}, b.data());
    }
  } catch (const trnsim::Error& e) {
    std::fprintf(stderr, "trnsim_make_array: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
