// Helpers of the MXFP8 matmul kernel tests: BF16 inputs, the host MX reference, the nkilib comparator, and
// building + running a registered kernel on the SystemC model.
#pragma once

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/api/kernel.h"
#include "kernels/api/registry.h"
#include "sim/config/hw_config.h"
#include "sim/isa/semantics.h"
#include "sim/model/run.h"
#include "sim/numerics/float_formats.h"
#include "sim/numerics/mx.h"
#include "sim/numerics/pe_matmul.h"
#include "sim/numerics/scale_layout.h"
#include "tests/support/kernel_run.h"

namespace trnsim::test {

// [rows, cols] BF16 bits, normal(0, 1) rounded to BF16.
inline std::vector<uint16_t> random_bf16(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<uint16_t> v(rows * cols);
  for (auto& x : v) x = num::f32_to_bf16(d(gen));
  return v;
}

inline Bytes as_bytes(const std::vector<uint16_t>& v) {
  Bytes b(v.size() * 2);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Logical [K, F] operand read from a row-major BF16 matrix: at(k, f) = m[k * F + f] (k_by_f) or m[f * K + k].
struct Logical {
  const std::vector<uint16_t>* m;
  int64_t K, F;
  bool k_by_f;
  float at(int64_t k, int64_t f) const { return num::bf16_to_f32((*m)[k_by_f ? k * F + f : f * K + k]); }
};

// Host MX quantize-dequantize of a logical [K, F] operand along K (trn3 rule, the kernel's group scheme).
inline std::vector<double> mx_dequant(const Logical& a, num::Fp8Format fmt, num::QuantScheme s) {
  std::vector<double> out(a.K * a.F);
  float v[32];
  uint8_t q[32];
  for (int64_t g = 0; g < a.K / 32; ++g) {
    const auto ks = num::mx_group_k_indices(g, a.K, s);
    for (int64_t f = 0; f < a.F; ++f) {
      for (int i = 0; i < 32; ++i) v[i] = a.at(ks[i], f);
      const float scale = num::e8m0_to_f32(num::quantize_block(v, q, fmt, num::ScaleRule::Trn3));
      for (int i = 0; i < 32; ++i)
        out[ks[i] * a.F + f] = static_cast<double>(num::fp8_to_f32(q[i], fmt)) * scale;
    }
  }
  return out;
}

inline std::vector<double> unquantized(const Logical& a) {
  std::vector<double> out(a.K * a.F);
  for (int64_t k = 0; k < a.K; ++k)
    for (int64_t f = 0; f < a.F; ++f) out[k * a.F + f] = a.at(k, f);
  return out;
}

// Y[M, N] = A^T B for A [K, M], B [K, N], in double.
inline std::vector<double> matmul_tn(const std::vector<double>& A, const std::vector<double>& B, int64_t K,
                                     int64_t M, int64_t N) {
  std::vector<double> y(M * N, 0.0);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t m = 0; m < M; ++m) {
      const double a = A[k * M + m];
      for (int64_t n = 0; n < N; ++n) y[m * N + n] += a * B[k * N + n];
    }
  return y;
}

inline double rel_l2(const std::vector<float>& y, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < y.size(); ++i) num += (y[i] - ref[i]) * (y[i] - ref[i]), den += ref[i] * ref[i];
  return std::sqrt(num / den);
}

// nkilib check_correctness against the unquantized golden: allclose(atol 0.2 max|g|, rtol 1e-3), cosine >=
// 0.995,
// ||k - g|| / (||k|| + ||g||) <= 0.10.
inline void check_nkilib(const std::vector<float>& y, const std::vector<double>& g) {
  REQUIRE(y.size() == g.size());
  double gmax = 0, dot = 0, yy = 0, gg = 0, dd = 0;
  for (double v : g) gmax = std::max(gmax, std::abs(v));
  size_t bad = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (!(std::abs(y[i] - g[i]) <= 0.2 * gmax + 1e-3 * std::abs(g[i]))) ++bad;
    dot += y[i] * g[i], yy += double(y[i]) * y[i], gg += g[i] * g[i], dd += (y[i] - g[i]) * (y[i] - g[i]);
  }
  CHECK(bad == 0);
  CHECK(dot / std::sqrt(yy * gg) >= 0.995);
  CHECK(std::sqrt(dd) / (std::sqrt(yy) + std::sqrt(gg)) <= 0.10);
}

// Pre-swizzled BF16 [K/4, 4F] of a logical operand.
inline std::vector<uint16_t> swizzled(const Logical& a, num::QuantScheme s) {
  std::vector<uint16_t> kf(a.K * a.F), out(a.K * a.F);
  for (int64_t k = 0; k < a.K; ++k)
    for (int64_t f = 0; f < a.F; ++f) kf[k * a.F + f] = num::f32_to_bf16(a.at(k, f));
  num::swizzle(kf.data(), a.K, a.F, s, out.data());
  return out;
}

// Pre-quantized x4 data [K/4, F] (4 bytes per element) and Trainium scales (unpacked or packed).
inline std::pair<Bytes, Bytes> prequantized(const Logical& a, num::QuantScheme s, num::Fp8Format fmt,
                                            bool packed) {
  std::vector<uint16_t> kf(a.K * a.F);
  for (int64_t k = 0; k < a.K; ++k)
    for (int64_t f = 0; f < a.F; ++f) kf[k * a.F + f] = num::f32_to_bf16(a.at(k, f));
  Bytes data(a.K * a.F), scales(num::trainium_scale_shape(a.K, a.F, packed).size());
  num::quantize_operand_x4(kf.data(), a.K, a.F, s, fmt, num::ScaleRule::Trn3, packed, data.data(),
                           scales.data());
  return {data, scales};
}

inline const config::HwConfig& trn3() {
  static const config::HwConfig hw = config::load_hw_config("trn3");
  return hw;
}

inline kernels::KernelBuild build_mx(const std::string& kernel, const nlohmann::json& params,
                                     const config::HwConfig& hw = trn3()) {
  return test::build_kernel(kernel, params, hw, 2);
}

// Builds and runs `kernel` with `inputs` (HBM tensor name -> bytes) and returns every output.
inline KernelRun run_kernel(const std::string& kernel, const nlohmann::json& params,
                            const std::map<std::string, Bytes>& inputs) {
  return test::run_kernel(kernel, params, inputs, trn3(), 2);
}

// The MXFP8 pipeline's FP32 result of Y[M, N] = A^T B bit for bit (kernels/lib/mxfp8/matmul.h): both operands
// quantized along K (trn3 rule, the group scheme), each K tile's products accumulated by num::pe_matmul in
// the PE's row order (slot j of partition row i is row j * rows + i, as nc_matmul_mx dequantizes), the K
// tiles of a K block accumulated in PSUM (the first overwrites), K blocks added in FP32 in the SBUF
// accumulator.
inline std::vector<float> mx_exact(const Logical& a, const Logical& b, num::Fp8Format fmt, num::QuantScheme s,
                                   int64_t tile_k = 512, int64_t block_k = 1 << 20) {
  const int64_t K = a.K, M = a.F, N = b.F, kp = tile_k / 4, TK = (K + tile_k - 1) / tile_k;
  const auto qa = mx_dequant(a, fmt, s), qb = mx_dequant(b, fmt, s);
  std::vector<float> acc(M * N), ps(M * N), A, B;
  for (int64_t kt = 0; kt < TK; ++kt) {
    const int64_t r0 = kt * kp, kpt = std::min(kp, K / 4 - r0), rows = 4 * kpt;
    A.assign(rows * M, 0.f), B.assign(rows * N, 0.f);
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t i = 0; i < kpt; ++i) {
        const int64_t k = num::unswizzle_pos(r0 + i, j, K, 1, s).k, row = j * kpt + i;
        for (int64_t m = 0; m < M; ++m) A[row * M + m] = static_cast<float>(qa[k * M + m]);
        for (int64_t n = 0; n < N; ++n) B[row * N + n] = static_cast<float>(qb[k * N + n]);
      }
    const bool first_in_block = kt % block_k == 0,
               last_in_block = kt % block_k == block_k - 1 || kt == TK - 1;
    num::pe_matmul(A.data(), M, B.data(), N, ps.data(), N, static_cast<int>(rows), static_cast<int>(M),
                   static_cast<int>(N), !first_in_block);
    if (last_in_block)
      for (int64_t e = 0; e < M * N; ++e) acc[e] = kt < block_k ? ps[e] : acc[e] + ps[e];
  }
  return acc;
}

inline uint16_t bf16_bits(float v) {
  return num::f32_to_bf16(v);
}
inline std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = num::f32_to_bf16(v[i]);
  return o;
}
inline Bytes f32_bytes(const std::vector<float>& v) {
  Bytes b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}
inline Bytes i32_bytes(const std::vector<int32_t>& v) {
  Bytes b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}
inline std::vector<uint16_t> u16_of(const Bytes& b) {
  std::vector<uint16_t> v(b.size() / 2);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}
inline std::vector<float> f32_of(const Bytes& b) {
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

// FNV-1a 64 of a byte string (pins of output bytes).
inline uint64_t fnv1a(const Bytes& b) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t c : b) h = (h ^ c) * 1099511628211ull;
  return h;
}

// A program built from a kernel function on Trn3 and run on the model.
struct ProgramRun {
  isa::Program program;
  std::map<std::string, Bytes> tensors;  // every HBM tensor's final bytes
  model::RunStats stats;
};

// Builds `fn` (num_programs cores) and runs it with the HBM tensors named in `init` set to those bytes (every
// kernel input must be given; other tensors start as the model's 0xFF poison).
inline ProgramRun run_fn(const kernels::KernelFn& fn, const std::map<std::string, Bytes>& init,
                         int num_programs = 1) {
  kernels::BuildOptions o;
  o.limits = trn3().limits();
  o.num_programs = num_programs;
  kernels::KernelBuild b = kernels::build_program(fn, o);
  ProgramRun r;
  r.program = std::move(b.program);
  isa::MachineState st = isa::make_machine_state(r.program, trn3().limits());
  for (const auto& name : b.inputs) {
    INFO("input " << name);
    REQUIRE(init.count(name));
  }
  for (const auto& [name, bytes] : init)
    for (size_t i = 0; i < r.program.tensors.size(); ++i)
      if (r.program.tensors[i].name == name) {
        INFO("tensor " << name);
        REQUIRE(st.hbm[i].size() == bytes.size());
        st.hbm[i] = bytes;
      }
  r.stats = model::run_program(r.program, trn3(), {}, &st).stats;
  for (size_t i = 0; i < r.program.tensors.size(); ++i)
    r.tensors[r.program.tensors[i].name] = st.hbm[i].to_vector();
  return r;
}

}  // namespace trnsim::test
