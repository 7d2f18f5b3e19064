#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <tuple>
#include <vector>

#include "sim/numerics/pe_matmul.h"

using trnsim::num::pe_matmul;

namespace {

// Reference written from the documented contract: per element, c = fmaf(a, b, c) for k = 0, 1, ..., K-1.
std::vector<float> reference(const std::vector<float>& A, const std::vector<float>& B, std::vector<float> C,
                             int K, int M, int N, bool accumulate) {
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float c = accumulate ? C[m * N + n] : 0.0f;
      for (int k = 0; k < K; ++k) c = fmaf(A[k * M + m], B[k * N + n], c);
      C[m * N + n] = c;
    }
  return C;
}

// Deterministic values with a wide exponent spread, so the summation order shows in the low bits.
std::vector<float> values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    const int e = static_cast<int>((s >> 8) % 24) - 12;
    x = std::ldexp(static_cast<float>((s >> 12) & 0xFF) - 127.5f, e);
  }
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("pe_matmul adds products in ascending k with FP32 rounding at each step", "[pe_matmul]") {
  // K=3, M=1, N=1: products 2^25, 1, -2^25. Ascending k: (0 + 2^25) + 1 rounds to 2^25 (ulp there is 4),
  // then -2^25 gives exactly 0. The exact sum is 1, so any other order or a wider accumulator would differ.
  std::vector<float> A = {std::ldexp(1.0f, 25), 1.0f, -std::ldexp(1.0f, 25)};
  std::vector<float> B = {1.0f, 1.0f, 1.0f};
  std::vector<float> C = {123.0f};
  pe_matmul(A.data(), 1, B.data(), 1, C.data(), 1, 3, 1, 1, /*accumulate=*/false);
  CHECK(C[0] == 0.0f);
  // Accumulate starts from the PSUM value: 3 + 2^25 rounds to 2^25 + 4 (nearest multiple of 4), + 1 -> 2^25 +
  // 4
  // (+1 is below half an ulp of 4), -2^25 -> 4.
  C[0] = 3.0f;
  pe_matmul(A.data(), 1, B.data(), 1, C.data(), 1, 3, 1, 1, /*accumulate=*/true);
  CHECK(C[0] == 4.0f);
}

TEST_CASE("pe_matmul matches the sequential FMA contract on every tile shape the PE uses", "[pe_matmul]") {
  // Shapes cover the vector blocks (12, 4 and 1 rows x 32 columns; 4x16) and their edges (M and N not
  // multiples of the block), contractions of several 256-row slices with a partial last one, and K = 0.
  for (auto [K, M, N] : {std::tuple{128, 128, 512},
                         {512, 128, 512},
                         {7, 5, 33},
                         {128, 13, 70},
                         {1, 1, 1},
                         {600, 29, 96},
                         {0, 12, 64}}) {
    const auto A = values(static_cast<size_t>(K) * M, 1 + K);
    const auto B = values(static_cast<size_t>(K) * N, 2 + N);
    const auto C0 = values(static_cast<size_t>(M) * N, 3 + M);
    for (bool acc : {false, true}) {
      const auto want = reference(A, B, C0, K, M, N, acc);
      for (int threads : {1, 2, 3}) {
        auto C = C0;
        pe_matmul(A.data(), M, B.data(), N, C.data(), N, K, M, N, acc, threads);
        INFO("K=" << K << " M=" << M << " N=" << N << " accumulate=" << acc << " threads=" << threads);
        CHECK(same_bits(C, want));
      }
    }
  }
}

TEST_CASE("pe_matmul honours leading dimensions of sub-tiles", "[pe_matmul]") {
  // A 2x2 output inside a 4-wide PSUM row, operands inside wider SBUF rows.
  std::vector<float> A = {1, 2, 99, 3, 4, 99};          // [K=2][M=2], lda 3
  std::vector<float> B = {5, 6, 99, 99, 7, 8, 99, 99};  // [K=2][N=2], ldb 4
  std::vector<float> C(8, -1.0f);                       // [M=2][N=2], ldc 4
  pe_matmul(A.data(), 3, B.data(), 4, C.data(), 4, 2, 2, 2, false);
  // C[m][n] = A[0][m]*B[0][n] + A[1][m]*B[1][n]
  CHECK(C[0] == 1 * 5 + 3 * 7);
  CHECK(C[1] == 1 * 6 + 3 * 8);
  CHECK(C[4] == 2 * 5 + 4 * 7);
  CHECK(C[5] == 2 * 6 + 4 * 8);
  CHECK(C[2] == -1.0f);  // untouched outside the tile
  CHECK(C[7] == -1.0f);
}

TEST_CASE("pe_matmul called from several host threads at once gives the one-thread bytes", "[pe_matmul]") {
  // The split calls share the process's helper threads; a caller that finds them busy starts its own. Either
  // way every caller's result is the sequential contract's.
  constexpr int K = 300, M = 20, N = 256;
  const auto A = values(static_cast<size_t>(K) * M, 11);
  const auto B = values(static_cast<size_t>(K) * N, 12);
  const auto want = reference(A, B, std::vector<float>(static_cast<size_t>(M) * N), K, M, N, false);
  std::vector<std::vector<float>> got(4, std::vector<float>(static_cast<size_t>(M) * N));
  std::vector<std::thread> callers;
  for (auto& C : got)
    callers.emplace_back([&] {
      for (int rep = 0; rep < 20; ++rep) pe_matmul(A.data(), M, B.data(), N, C.data(), N, K, M, N, false, 2);
    });
  for (auto& t : callers) t.join();
  for (const auto& C : got) CHECK(same_bits(C, want));
}

TEST_CASE("pe_matmul takes the BF16 pair path on an AVX512_BF16 host", "[pe_matmul]") {
  // The path is used only after its check against std::fma passes at first use; on this kind of host it must.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16"))
    CHECK(trnsim::num::pe_matmul_bf16_pairs());
}

TEST_CASE("pe_matmul gives the FMA chain's bits where the BF16 pair path must not run", "[pe_matmul]") {
  // K = 3 as the first test, 32 columns (a whole panel): 2^25 + 1 - 2^25 = 0 with a rounding after each step,
  // where one rounding over two steps would give 1.
  {
    std::vector<float> A = {std::ldexp(1.0f, 25), 1.0f, -std::ldexp(1.0f, 25)};
    std::vector<float> B(3 * 32, 1.0f);
    std::vector<float> C(32, 7.0f);
    pe_matmul(A.data(), 1, B.data(), 32, C.data(), 32, 3, 1, 32, /*accumulate=*/false);
    CHECK(same_bits(C, std::vector<float>(32, 0.0f)));
  }
  // Operands whose values are BF16 pairs' (odd K: the last step pairs with -0) but whose products or PSUM
  // values fall below 2^-126: the pair instruction flushes those to zero, the FMA chain keeps them
  // (2^-70 * 2^-70 = 2^-140, a subnormal). Every case must give the reference's bits.
  constexpr int K = 33, M = 13, N = 64;
  const auto base_a = values(static_cast<size_t>(K) * M, 21);
  const auto base_b = values(static_cast<size_t>(K) * N, 22);
  const auto base_c = values(static_cast<size_t>(M) * N, 23);
  const auto scaled = [](std::vector<float> v, int e) {
    for (auto& x : v) x = std::ldexp(x, e);
    return v;
  };
  struct Case {
    const char* what;
    std::vector<float> A, B, C;
  };
  // Row m = 1: 2^-63 * 2^-63 (1 + 2^-7) - 2^-63 * 2^-63 = 2^-133, products normal, their sum subnormal.
  auto tiny_a = base_a, tiny_b = base_b;
  for (int k = 0; k < K; ++k) tiny_a[k * M + 1] = 0.0f;
  tiny_a[1] = std::ldexp(1.0f, -63);
  tiny_a[M + 1] = -std::ldexp(1.0f, -63);
  for (int n = 0; n < N; ++n) {
    tiny_b[n] = std::ldexp(1.0f + std::ldexp(1.0f, -7), -63);
    tiny_b[N + n] = std::ldexp(1.0f, -63);
  }
  // Row m = 0 of A all zero: C[0, 5] = 2^-140 stays as it is when accumulating.
  auto zero_row = base_a;
  for (int k = 0; k < K; ++k) zero_row[k * M] = 0.0f;
  auto subnormal_c = base_c;
  subnormal_c[5] = std::ldexp(1.0f, -140);
  auto not_bf16 = base_b;
  not_bf16[N + 40] = 1.0f + std::ldexp(1.0f, -20);
  const std::vector<Case> cases = {
      {"in range", base_a, base_b, base_c},
      {"subnormal products", scaled(base_a, -64), scaled(base_b, -64), base_c},
      {"a subnormal partial sum", tiny_a, tiny_b, base_c},
      {"a subnormal PSUM value", zero_row, base_b, subnormal_c},
      {"a value that is not BF16", base_a, not_bf16, base_c},
      {"products past FP32's range", scaled(base_a, 60), scaled(base_b, 60), base_c},
  };
  for (const Case& c : cases)
    for (bool acc : {false, true}) {
      const auto want = reference(c.A, c.B, c.C, K, M, N, acc);
      for (int threads : {1, 2}) {
        auto C = c.C;
        pe_matmul(c.A.data(), M, c.B.data(), N, C.data(), N, K, M, N, acc, threads);
        INFO(c.what << " accumulate=" << acc << " threads=" << threads);
        CHECK(same_bits(C, want));
      }
    }
}

TEST_CASE("pe_matmul_pairs gives the FMA chain's bits on operands held as BF16 pairs", "[pe_matmul]") {
  // Whichever instruction this host computes the pairs with (VDPBF16PS, or FP32 fused multiply-adds on the
  // widened halves), with the columns it leaves computed by pe_matmul as nc_matmul_mx does: the documented
  // chain's bits, every row block size (M = 29: 12 + 12 + 4 + 1), in range and with subnormal products.
  if (!trnsim::num::pe_matmul_bf16_pairs()) return;
  constexpr int K = 64, M = 29, N = 96, K2 = K / 2;
  const auto bf16 = [](std::vector<float> v, int e) {
    for (auto& x : v) {
      x = std::ldexp(x, e);
      uint32_t u;
      std::memcpy(&u, &x, 4);
      u &= 0xFFFF0000u;
      std::memcpy(&x, &u, 4);
    }
    return v;
  };
  const auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  const auto C0 = values(static_cast<size_t>(M) * N, 33);
  for (int e : {0, -64}) {
    const auto A = bf16(values(static_cast<size_t>(K) * M, 31), e);
    const auto B = bf16(values(static_cast<size_t>(K) * N, 32), e);
    std::vector<uint32_t> ap(static_cast<size_t>(K2) * M);
    for (int kk = 0; kk < K2; ++kk)
      for (int m = 0; m < M; ++m)
        ap[kk * M + m] = bits(A[2 * kk * M + m]) | bits(A[(2 * kk + 1) * M + m]) >> 16;
    alignas(64) static uint32_t bq[N / 32 * K2 * 32];
    for (int kk = 0; kk < K2; ++kk)
      for (int n = 0; n < N; ++n)
        bq[n / 32 * K2 * 32 + kk * 32 + n % 32] =
            bits(B[2 * kk * N + n]) | bits(B[(2 * kk + 1) * N + n]) >> 16;
    const auto ra = trnsim::num::pair_range_scalar(A.data(), K * M);
    const auto rb = trnsim::num::pair_range_scalar(B.data(), K * N);
    for (bool acc : {false, true}) {
      const auto want = reference(A, B, C0, K, M, N, acc);
      for (int threads : {1, 2}) {
        auto C = C0;
        const auto left =
            trnsim::num::pe_matmul_pairs(ap.data(), ra, bq, rb, C.data(), N, K, M, N, acc, threads);
        for (const auto& [n0, n1] : left)
          pe_matmul(A.data(), M, B.data() + n0, N, C.data() + n0, N, K, M, n1 - n0, acc);
        INFO("exponent " << e << " accumulate=" << acc << " threads=" << threads << " left " << left.size());
        if (e == 0) CHECK(left.empty());
        CHECK(same_bits(C, want));
      }
    }
  }
}
