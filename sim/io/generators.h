// Seeded input generators for workloads and examples. Results are float32 and bit-identical on every
// platform, compiler and thread count:
// - the random bits of element i come from a counter-based splitmix64 keyed by (seed, stream, i), so any
//   chunk of the output can be computed independently;
// - the transcendental functions (log, exp, sin, cos) are computed here with basic IEEE double operations
//   only (no libm, no std::*_distribution), and this file is compiled without FMA contraction.
// Bad parameters throw trnsim::InputError naming the generator and the parameter.
#pragma once

#include <cstdint>
#include <vector>

namespace trnsim::io {

// The splitmix64 sequence (Steele, Lea, Flood 2014): next() returns mix(state += 0x9E3779B97F4A7C15).
struct SplitMix64 {
  uint64_t state;
  explicit SplitMix64(uint64_t seed) : state(seed) {}
  uint64_t next();
};

// The splitmix64 output function: a bijective 64-bit mixer (inline: input recipes call it per element).
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Deterministic helpers (exposed for tests): natural log for x > 0, exp, and sin/cos of 2*pi*t for t in [0,
// 1). Accurate to a few ulp; identical results everywhere.
double det_log(double x);
double det_exp(double x);
void det_sincos_turns(double t, double& s, double& c);

// The standard normal pairs [first_pair, first_pair + n) of seed's normal stream (samples 2k and 2k + 1 of
// normal(..., 0.0, 1.0, seed) before rounding to float): z0[i], z1[i]. simd = false takes the one-pair path
// the AVX-512 path must match bit for bit (exposed for that test).
void normal_pairs(uint64_t seed, int64_t first_pair, int64_t n, double* z0, double* z1, bool simd = true);

// n samples of N(mean, std^2). Requires std > 0 and finite parameters.
std::vector<float> normal(int64_t n, double mean, double std, uint64_t seed, int threads = 1);

// n samples uniform in [lo, hi) (before rounding to float32). Requires lo < hi, both finite.
std::vector<float> uniform(int64_t n, double lo, double hi, uint64_t seed, int threads = 1);

// Elements [first, first + n) of normal(first + n, ...) or uniform(first + n, ...) into out[0, n): the
// same values, without the rest of the stream. normal's `first` is even (its samples come in pairs).
void normal_chunk(float* out, int64_t first, int64_t n, double mean, double std, uint64_t seed,
                  int threads = 1);
void uniform_chunk(float* out, int64_t first, int64_t n, double lo, double hi, uint64_t seed,
                   int threads = 1);

// n integers uniform in [low, high). Requires low < high.
std::vector<int64_t> randint(int64_t n, int64_t low, int64_t high, uint64_t seed, int threads = 1);

// n samples of scale * T, T Student-t with nu degrees of freedom (heavy tails: nu = 3..5 is typical of
// gradients; variance scale^2 * nu / (nu - 2) for nu > 2). Requires nu > 0 and scale > 0.
std::vector<float> student_t(int64_t n, double nu, double scale, uint64_t seed, int threads = 1);

// Activations [rows, cols] row-major: N(mean, std^2) everywhere, and `outlier_channels` columns (chosen
// at random from the seed, without repetition) multiplied by `outlier_scale`, as in LLM activations.
struct OutlierActivations {
  double mean = 0.0;
  double std = 1.0;
  int64_t outlier_channels = 0;  // 0 <= count <= cols
  double outlier_scale = 1.0;    // finite, non-zero
};
std::vector<float> activations_with_outliers(int64_t rows, int64_t cols, const OutlierActivations& p,
                                             uint64_t seed, int threads = 1);
// Elements [first, first + n) of activations_with_outliers(rows, cols, ...) into out[0, n): the same values,
// without the rest of the tensor. `first` is even (the normal samples come in pairs).
void activations_with_outliers_chunk(float* out, int64_t first, int64_t n, int64_t rows, int64_t cols,
                                     const OutlierActivations& p, uint64_t seed, int threads = 1);

// The columns activations_with_outliers scales for (cols, count, seed), sorted ascending.
std::vector<int64_t> outlier_columns(int64_t cols, int64_t count, uint64_t seed);

}  // namespace trnsim::io
