// Functional semantics of execute(): each result is computed independently in the test.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "sim/base/error.h"
#include "sim/isa/alu.h"
#include "sim/isa/element.h"
#include "sim/isa/names.h"
#include "sim/isa/operand_view.h"
#include "sim/isa/semantics.h"
#include "sim/numerics/float_formats.h"
#include "sim/numerics/mx.h"
#include "sim/numerics/pe_matmul.h"
#include "tests/unit/isa/isa_test_util.h"

using namespace trnsim;
using namespace trnsim::isa;
using namespace trnsim::isa::test;

namespace {

// E4M3FN decode written out from the format definition (bias 7, 3 mantissa bits), for finite bytes.
double e4m3(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 0xF, m = b & 7;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

struct Machine {
  explicit Machine(Limits l = trn2(), std::vector<TensorDecl> tensors = {}) : limits(l) {
    program.generation = l.generation;
    program.tensors = std::move(tensors);
    state = make_machine_state(program, limits);
  }
  void run(const Instruction& in, int core = 0) {
    check(in, program, limits);
    execute(in, core, program, limits, state);
  }
  uint8_t* s(uint32_t p, int64_t off, int core = 0) { return sb(state, core, limits, p, off); }
  uint8_t* q(uint32_t p, int64_t off) { return ps(state, 0, limits, p, off); }
  Limits limits;
  Program program;
  MachineState state;
};

}  // namespace

TEST_CASE("fresh memory is poisoned: reading never-written floats gives NaN", "[isa]") {
  Machine m(trn2(), {TensorDecl{"t", DType::F32, {4, 4}}});
  CHECK(m.state.cores[0].sbuf.size() == 128u * 224 * 1024);
  CHECK(m.state.cores[1].psum.size() == 128u * 16 * 1024);
  CHECK(m.state.hbm.at(0) == std::vector<uint8_t>(64, 0xFF));
  Instruction in = make(Opcode::TensorCopy, Engine::DVE,
                        {sbuf(0, 2, 0, DType::F32, {{1, 4}}), sbuf(0, 2, 1024, DType::BF16, {{1, 4}})});
  m.run(in);
  CHECK(std::isnan(get<float>(m.s(1, 12))));
  Instruction act = make(Opcode::Activation, Engine::ACT,
                         {sbuf(0, 1, 64, DType::F32, {{1, 2}}), sbuf(0, 1, 2048, DType::F32, {{1, 2}})});
  act.act = ActFunc::Exp;
  act.imm0 = 1.f;
  m.run(act);
  CHECK(std::isnan(get<float>(m.s(0, 68))));
}

TEST_CASE("nc_matmul BF16: dst = stationary^T @ moving, accumulate adds", "[isa]") {
  Machine m;
  const uint32_t K = 32, M = 8, N = 16;
  for (uint32_t k = 0; k < K; ++k) {
    for (uint32_t i = 0; i < M; ++i)
      put(m.s(k, 2 * i), bf16_exact(static_cast<float>((int(k + 2 * i) % 7) - 3)));
    for (uint32_t n = 0; n < N; ++n)
      put(m.s(k, 1024 + 2 * n), bf16_exact(static_cast<float>((int(3 * k + n) % 5) - 2) * 0.5f));
  }
  Instruction in = make(Opcode::NcMatmul, Engine::PE,
                        {psum(0, M, 0, DType::F32, {{1, N}}), sbuf(0, K, 0, DType::BF16, {{1, M}}),
                         sbuf(0, K, 1024, DType::BF16, {{1, N}})});
  m.run(in);
  for (uint32_t i = 0; i < M; ++i)
    for (uint32_t n = 0; n < N; ++n) {
      double want = 0;
      for (uint32_t k = 0; k < K; ++k)
        want += ((int(k + 2 * i) % 7) - 3) * (((int(3 * k + n) % 5) - 2) * 0.5);
      REQUIRE(get<float>(m.q(i, 4 * n)) == static_cast<float>(want));
    }
  in.flags = kAccumulate;
  m.run(in);
  double want00 = 0;
  for (uint32_t k = 0; k < K; ++k) want00 += ((int(k) % 7) - 3) * (((int(3 * k) % 5) - 2) * 0.5);
  CHECK(get<float>(m.q(0, 0)) == static_cast<float>(2 * want00));
}

TEST_CASE("nc_matmul FP32: products fused into an FP32 sum in ascending k", "[isa]") {
  Machine m;
  const uint32_t K = 16, M = 3, N = 5;
  auto a = [](uint32_t k, uint32_t i) {
    return 0.1f * static_cast<float>(k + 1) + 0.37f * static_cast<float>(i);
  };
  auto b = [](uint32_t k, uint32_t n) { return 1.0f / static_cast<float>(k + n + 3); };
  for (uint32_t k = 0; k < K; ++k) {
    for (uint32_t i = 0; i < M; ++i) put(m.s(k, 4 * i), a(k, i));
    for (uint32_t n = 0; n < N; ++n) put(m.s(k, 512 + 4 * n), b(k, n));
  }
  m.run(make(Opcode::NcMatmul, Engine::PE,
             {psum(0, M, 2048, DType::F32, {{1, N}}), sbuf(0, K, 0, DType::F32, {{1, M}}),
              sbuf(0, K, 512, DType::F32, {{1, N}})}));
  for (uint32_t i = 0; i < M; ++i)
    for (uint32_t n = 0; n < N; ++n) {
      float c = 0.f;
      for (uint32_t k = 0; k < K; ++k) c = std::fma(a(k, i), b(k, n), c);
      REQUIRE(get<float>(m.q(i, 2048 + 4 * n)) == c);
    }
}

TEST_CASE("nc_matmul FP8 double_row contracts K = 2 x partitions", "[isa]") {
  Machine m;
  const uint8_t vals[] = {0x38, 0x30, 0x3C, 0x40, 0xB8, 0x28};  // 1, 0.5, 1.5, 2, -1, 0.25
  const uint32_t K = 32, M = 4, N = 8;
  for (uint32_t k = 0; k < K; ++k)
    for (uint32_t h = 0; h < 2; ++h) {
      for (uint32_t i = 0; i < M; ++i) *m.s(k, h * M + i) = vals[(k + 3 * h + i) % 6];
      for (uint32_t n = 0; n < N; ++n) *m.s(k, 256 + h * N + n) = vals[(2 * k + h + n) % 6];
    }
  Instruction in =
      make(Opcode::NcMatmul, Engine::PE,
           {psum(0, M, 0, DType::F32, {{1, N}}), sbuf(0, K, 0, DType::FP8_E4M3FN, {{M, 2}, {1, M}}),
            sbuf(0, K, 256, DType::FP8_E5M2, {{N, 2}, {1, N}})});
  in.ops[2].dtype = DType::FP8_E4M3FN;
  in.flags = kDoubleRow;
  m.run(in);
  for (uint32_t i = 0; i < M; ++i)
    for (uint32_t n = 0; n < N; ++n) {
      double want = 0;
      for (uint32_t h = 0; h < 2; ++h)
        for (uint32_t k = 0; k < K; ++k)
          want += e4m3(vals[(k + 3 * h + i) % 6]) * e4m3(vals[(2 * k + h + n) % 6]);
      REQUIRE(get<float>(m.q(i, 4 * n)) == static_cast<float>(want));
    }
  CHECK(work_of(in, m.program).flops == 2ull * 64 * M * N);
}

TEST_CASE("nc_matmul transpose mode moves bits", "[isa]") {
  Machine m;
  for (uint32_t k = 0; k < 4; ++k)
    for (uint32_t i = 0; i < 3; ++i) put<uint16_t>(m.s(k, 2 * i), static_cast<uint16_t>(0x7F80 + 16 * k + i));
  Instruction in = make(Opcode::NcMatmul, Engine::PE,
                        {psum(0, 3, 0, DType::BF16, {{1, 4}}), sbuf(0, 4, 0, DType::BF16, {{1, 3}}),
                         sbuf(0, 4, 64, DType::BF16, {{1, 4}})});
  in.flags = kIsTranspose;
  m.run(in);
  for (uint32_t i = 0; i < 3; ++i)
    for (uint32_t k = 0; k < 4; ++k) REQUIRE(get<uint16_t>(m.q(i, 2 * k)) == 0x7F80 + 16 * k + i);
}

TEST_CASE("nc_matmul_mx: x4 packing k + 128j, quadrant scale rows with offsets", "[isa]") {
  Machine m(trn3());
  const uint8_t vals[] = {0x38, 0x30, 0x3C, 0x40, 0xB8, 0x28};
  const uint32_t K = 32, M = 4, N = 6;  // 32 partitions = 4 MX groups, 128 logical K
  auto sa = [](uint32_t g, uint32_t i) { return static_cast<uint8_t>(126 + (g + i) % 3); };
  auto sbv = [](uint32_t g, uint32_t n) { return static_cast<uint8_t>(126 + (2 * g + n) % 3); };
  for (uint32_t k = 0; k < K; ++k)
    for (uint32_t j = 0; j < 4; ++j) {
      for (uint32_t i = 0; i < M; ++i) *m.s(k, 4 * i + j) = vals[(k + i + 2 * j) % 6];
      for (uint32_t n = 0; n < N; ++n) *m.s(k, 1024 + 4 * n + j) = vals[(k * 5 + n + j) % 6];
    }
  for (uint32_t g = 0; g < 4; ++g) {
    for (uint32_t i = 0; i < M; ++i) *m.s(g + 4, 4096 + i) = sa(g, i);  // stationary scales at offset 4
    for (uint32_t n = 0; n < N; ++n) *m.s(g, 8192 + n) = sbv(g, n);     // moving scales at offset 0
  }
  Instruction in = make(Opcode::NcMatmulMx, Engine::PE,
                        {psum(0, M, 0, DType::F32, {{1, N}}), sbuf(0, K, 0, DType::FP8_E4M3FN_X4, {{1, M}}),
                         sbuf(0, K, 1024, DType::FP8_E4M3FN_X4, {{1, N}}),
                         sbuf(0, 8, 4096, DType::E8M0, {{1, M}}), sbuf(0, 4, 8192, DType::E8M0, {{1, N}})});
  in.scale_offset = 4;
  m.run(in);
  for (uint32_t i = 0; i < M; ++i)
    for (uint32_t n = 0; n < N; ++n) {
      double want = 0;
      for (uint32_t k = 0; k < K; ++k)
        for (uint32_t j = 0; j < 4; ++j)
          want += e4m3(vals[(k + i + 2 * j) % 6]) * std::ldexp(1.0, sa(k / 8, i) - 127) *
                  e4m3(vals[(k * 5 + n + j) % 6]) * std::ldexp(1.0, sbv(k / 8, n) - 127);
      REQUIRE(get<float>(m.q(i, 4 * n)) == static_cast<float>(want));
    }
  CHECK(work_of(in, m.program).flops == 2ull * 128 * M * N);
}

TEST_CASE("quantize_mx matches num::quantize_block on hand-gathered groups", "[isa]") {
  Machine m(trn3());
  const uint32_t P = 64, F = 3;  // src [64, 12] BF16 -> dst x4 [64, 3], 8 groups over 2 quadrants
  auto x = [](uint32_t p, uint32_t c) {
    return static_cast<float>(static_cast<int>((p * 13 + c * 7) % 29) - 14) *
           std::ldexp(1.0f, int(p % 5) - 2);
  };
  for (uint32_t p = 0; p < P; ++p)
    for (uint32_t c = 0; c < 4 * F; ++c) put(m.s(p, 2 * c), bf16_exact(x(p, c)));
  Instruction in = make(Opcode::QuantizeMx, Engine::DVE,
                        {sbuf(0, P, 512, DType::FP8_E5M2_X4, {{1, F}}),
                         sbuf(0, P, 0, DType::BF16, {{1, 4 * F}}), sbuf(0, P, 1024, DType::E8M0, {{1, F}})});
  in.scale_offset = 8;
  m.run(in);
  for (uint32_t g = 0; g < P / 8; ++g)
    for (uint32_t f = 0; f < F; ++f) {
      float v[32];
      uint8_t q[32];
      for (uint32_t r = 0; r < 8; ++r)
        for (uint32_t j = 0; j < 4; ++j) v[r * 4 + j] = x(8 * g + r, 4 * f + j);
      const uint8_t scale = num::quantize_block(v, q, num::Fp8Format::E5M2, num::ScaleRule::Trn3);
      REQUIRE(*m.s((g / 4) * 32 + g % 4 + 8, 1024 + f) == scale);
      for (uint32_t r = 0; r < 8; ++r)
        for (uint32_t j = 0; j < 4; ++j) REQUIRE(*m.s(8 * g + r, 512 + 4 * f + j) == q[r * 4 + j]);
    }
  CHECK(*m.s(0, 1024) == 0xFF);  // rows outside the scale slots are left alone
  CHECK(*m.s(12, 1024) == 0xFF);
}

TEST_CASE("quantize_mx and nc_matmul_mx on full tiles (split over host threads) give the one-thread bytes",
          "[isa]") {
  // Tiles large enough that execute() splits them over the host's threads (MX groups of quantize_mx, the
  // dequantized rows of nc_matmul_mx): the bytes must equal the unsplit definitions, computed here group by
  // group and through num::pe_matmul on one thread.
  Machine m(trn3());
  const uint32_t P = 128, F = 128;  // quantize: src [128, 512] BF16 -> x4 [128, 128]; matmul M = F, N = 2F
  auto x = [](uint32_t p, uint32_t c) {
    return static_cast<float>(static_cast<int>((p * 131 + c * 71) % 61) - 30) *
           std::ldexp(1.0f, static_cast<int>((p + 3 * c) % 9) - 4);
  };
  for (uint32_t p = 0; p < P; ++p)
    for (uint32_t c = 0; c < 12 * F; ++c) put(m.s(p, 2 * c), bf16_exact(x(p, c)));
  // Stationary from columns [0, 4F), moving from [4F, 12F): x4 [128, F] and [128, 2F].
  Instruction qs = make(Opcode::QuantizeMx, Engine::DVE,
                        {sbuf(0, P, 8192, DType::FP8_E4M3FN_X4, {{1, F}}),
                         sbuf(0, P, 0, DType::BF16, {{1, 4 * F}}), sbuf(0, P, 16384, DType::E8M0, {{1, F}})});
  Instruction qm =
      make(Opcode::QuantizeMx, Engine::DVE,
           {sbuf(0, P, 10240, DType::FP8_E4M3FN_X4, {{1, 2 * F}}),
            sbuf(0, P, 8 * F, DType::BF16, {{1, 8 * F}}), sbuf(0, P, 18432, DType::E8M0, {{1, 2 * F}})});
  m.run(qs);
  m.run(qm);
  for (auto [dst, src_col, scales, cols] : {std::tuple{8192u, 0u, 16384u, F}, {10240u, 4 * F, 18432u, 2 * F}})
    for (uint32_t g = 0; g < P / 8; ++g)
      for (uint32_t f = 0; f < cols; ++f) {
        float v[32];
        uint8_t q[32];
        for (uint32_t r = 0; r < 8; ++r)
          for (uint32_t j = 0; j < 4; ++j) v[r * 4 + j] = x(8 * g + r, src_col + 4 * f + j);
        const uint8_t scale = num::quantize_block(v, q, num::Fp8Format::E4M3FN, num::ScaleRule::Trn3);
        REQUIRE(*m.s((g / 4) * 32 + g % 4, scales + f) == scale);
        for (uint32_t r = 0; r < 8; ++r)
          for (uint32_t j = 0; j < 4; ++j) REQUIRE(*m.s(8 * g + r, dst + 4 * f + j) == q[r * 4 + j]);
      }
  Instruction mm =
      make(Opcode::NcMatmulMx, Engine::PE,
           {psum(0, F, 0, DType::F32, {{1, 2 * F}}), sbuf(0, P, 8192, DType::FP8_E4M3FN_X4, {{1, F}}),
            sbuf(0, P, 10240, DType::FP8_E4M3FN_X4, {{1, 2 * F}}), sbuf(0, P, 16384, DType::E8M0, {{1, F}}),
            sbuf(0, P, 18432, DType::E8M0, {{1, 2 * F}})});
  m.run(mm);
  // Dequantized operands [4P, cols] in logical k = j * P + partition, each value times its group's scale.
  const auto deq = [&](uint32_t data, uint32_t scales, uint32_t cols) {
    std::vector<float> out(4 * P * cols);
    for (uint32_t k = 0; k < P; ++k)
      for (uint32_t c = 0; c < cols; ++c) {
        const uint32_t g = k / 8;
        const float sc = std::ldexp(1.0f, *m.s((g / 4) * 32 + g % 4, scales + c) - 127);
        for (uint32_t j = 0; j < 4; ++j)
          out[(j * P + k) * cols + c] = static_cast<float>(e4m3(*m.s(k, data + 4 * c + j))) * sc;
      }
    return out;
  };
  const std::vector<float> a = deq(8192, 16384, F), b = deq(10240, 18432, 2 * F);
  std::vector<float> want(F * 2 * F);
  num::pe_matmul(a.data(), F, b.data(), 2 * F, want.data(), 2 * F, 4 * P, F, 2 * F, false, 1);
  for (uint32_t i = 0; i < F; ++i)
    for (uint32_t n = 0; n < 2 * F; ++n) REQUIRE(get<float>(m.q(i, 4 * n)) == want[i * 2 * F + n]);
  // Accumulating onto a PSUM value of 2^-110 (column 3): its chain may reach FP32's subnormals, so its
  // columns leave the BF16 pair path for the FP32 one, the others stay on it; every element is still the
  // chain's.
  put(m.q(5, 4 * 3), 0x1p-110f);
  want[5 * 2 * F + 3] = 0x1p-110f;
  mm.flags |= kAccumulate;
  m.run(mm);
  num::pe_matmul(a.data(), F, b.data(), 2 * F, want.data(), 2 * F, 4 * P, F, 2 * F, true, 1);
  for (uint32_t i = 0; i < F; ++i)
    for (uint32_t n = 0; n < 2 * F; ++n) REQUIRE(get<float>(m.q(i, 4 * n)) == want[i * 2 * F + n]);
}

TEST_CASE("nc_matmul_mx dequantizes an operand again once its bytes or scales were rewritten", "[isa]") {
  // The same instruction four times; between runs one moving byte, one moving scale and one stationary byte
  // are rewritten in place (same addresses). Each result must be the new operands' product: an operand
  // image kept from the earlier run (sim/isa/mx_pair_cache.h) must not be served. 32 partitions = 4 MX
  // groups (128 logical K), M = 4, N = 32 (one 32-column panel: the BF16 pair path where the host has it).
  Machine m(trn3());
  const uint8_t vals[] = {0x38, 0x30, 0x3C, 0x40, 0xB8, 0x28};
  const uint32_t K = 32, M = 4, N = 32;
  for (uint32_t k = 0; k < K; ++k)
    for (uint32_t j = 0; j < 4; ++j) {
      for (uint32_t i = 0; i < M; ++i) *m.s(k, 4 * i + j) = vals[(k + i + 2 * j) % 6];
      for (uint32_t n = 0; n < N; ++n) *m.s(k, 1024 + 4 * n + j) = vals[(k * 5 + n + j) % 6];
    }
  for (uint32_t g = 0; g < 4; ++g) {
    for (uint32_t i = 0; i < M; ++i) *m.s(g, 4096 + i) = static_cast<uint8_t>(126 + (g + i) % 3);
    for (uint32_t n = 0; n < N; ++n) *m.s(g, 8192 + n) = static_cast<uint8_t>(126 + (2 * g + n) % 3);
  }
  Instruction in = make(Opcode::NcMatmulMx, Engine::PE,
                        {psum(0, M, 0, DType::F32, {{1, N}}), sbuf(0, K, 0, DType::FP8_E4M3FN_X4, {{1, M}}),
                         sbuf(0, K, 1024, DType::FP8_E4M3FN_X4, {{1, N}}),
                         sbuf(0, 4, 4096, DType::E8M0, {{1, M}}), sbuf(0, 4, 8192, DType::E8M0, {{1, N}})});
  // The product of what memory holds now, from the bytes (every partial sum exact in FP32).
  const auto check = [&] {
    for (uint32_t i = 0; i < M; ++i)
      for (uint32_t n = 0; n < N; ++n) {
        double want = 0;
        for (uint32_t k = 0; k < K; ++k)
          for (uint32_t j = 0; j < 4; ++j)
            want += e4m3(*m.s(k, 4 * i + j)) * std::ldexp(1.0, *m.s(k / 8, 4096 + i) - 127) *
                    e4m3(*m.s(k, 1024 + 4 * n + j)) * std::ldexp(1.0, *m.s(k / 8, 8192 + n) - 127);
        REQUIRE(get<float>(m.q(i, 4 * n)) == static_cast<float>(want));
      }
  };
  m.run(in);
  check();
  const float before = get<float>(m.q(1, 4 * 7));
  *m.s(17, 1024 + 4 * 7 + 2) = 0x40;  // moving (17, 7) byte 2: 2.0 where it was -1.0 (vals[(85 + 7 + 2) % 6])
  m.run(in);
  check();
  CHECK(get<float>(m.q(1, 4 * 7)) != before);
  *m.s(2, 8192 + 9) = 130;  // moving scale of group 2, column 9: 2^3
  m.run(in);
  check();
  *m.s(30, 4 * 3 + 1) = 0xB8;  // stationary (30, 3) byte 1: -1.0 where it was 0.25 (vals[(30 + 3 + 2) % 6])
  m.run(in);
  check();
}

TEST_CASE("dma_copy casts through FP32: BF16 RNE ties, FP8 satfinite", "[isa]") {
  Machine m(trn2(), {TensorDecl{"x", DType::F32, {2, 4}}});
  const float in[8] = {1.0f + 0x1p-8f,
                       1.0f + 3 * 0x1p-8f,
                       -1.0f - 0x1p-8f,
                       1000.f,
                       -1e6f,
                       std::numeric_limits<float>::infinity(),
                       3.0f,
                       3 * 0x1p-9f};
  std::memcpy(m.state.hbm[0].data(), in, sizeof in);
  Instruction bf = make(Opcode::DmaCopy, Engine::SP,
                        {sbuf(0, 2, 0, DType::BF16, {{1, 4}}), hbm(0, 0, DType::F32, 4, 2, {{1, 4}})});
  m.run(bf);
  CHECK(get<uint16_t>(m.s(0, 0)) == 0x3F80);  // tie -> even (1.0)
  CHECK(get<uint16_t>(m.s(0, 2)) == 0x3F82);  // tie -> even (1 + 2^-6)
  CHECK(get<uint16_t>(m.s(0, 4)) == 0xBF80);
  CHECK(get<uint16_t>(m.s(1, 2)) == 0x7F80);  // inf stays
  Instruction f8 = bf;
  f8.ops[0] = sbuf(0, 2, 64, DType::FP8_E4M3FN, {{1, 4}});
  m.run(f8);
  CHECK(*m.s(0, 64 + 3) == 0x7E);  // 1000 -> 448
  CHECK(*m.s(1, 64 + 0) == 0xFE);  // -1e6 -> -448
  CHECK(*m.s(1, 64 + 1) == 0x7E);  // inf -> 448
  CHECK(*m.s(1, 64 + 2) == 0x44);  // 3.0
  CHECK(*m.s(1, 64 + 3) == 0x03);  // 3 * 2^-9 = 3/8 * 2^-6, subnormal
  f8.ops[0].dtype = DType::FP8_E5M2;
  m.run(f8);
  CHECK(*m.s(1, 64 + 0) == 0xFB);  // -1e6 -> -57344
  // Same dtype: bit copy, flattened element order (2 x 4 -> 1 x 8).
  Instruction raw = make(Opcode::DmaCopy, Engine::SP,
                         {sbuf(0, 1, 128, DType::F32, {{1, 8}}), hbm(0, 0, DType::F32, 4, 2, {{1, 4}})});
  m.run(raw);
  CHECK(std::memcmp(m.s(0, 128), in, sizeof in) == 0);
  // DMA-side accumulate: dst += src in FP32, then cast.
  Instruction acc = make(Opcode::DmaCopy, Engine::SP,
                         {sbuf(0, 1, 256, DType::BF16, {{1, 2}}), sbuf(0, 1, 128, DType::F32, {{1, 2}})});
  put(m.s(0, 256), bf16_exact(2.0f));
  put(m.s(0, 258), bf16_exact(-1.0f));
  acc.flags = kDmaAccumulate;
  m.run(acc);
  CHECK(get<uint16_t>(m.s(0, 256)) == 0x4040);  // 2 + (1 + 2^-8) = 3.0039 -> 3.0 (below half an ulp of 2^-6)
  CHECK(get<uint16_t>(m.s(0, 258)) == 0x3C40);  // -1 + (1 + 3 * 2^-8) = 1.5 * 2^-7, exact
}

TEST_CASE("dma_copy casts in flattened element order, from a snapshot of an overlapping source", "[isa]") {
  Machine m(trn2(), {TensorDecl{"x", DType::F32, {2, 4}}});
  const float in[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  std::memcpy(m.state.hbm[0].data(), in, sizeof in);
  // HBM [2, 4] FP32 -> SBUF [4 partitions, 2] BF16: element e goes to partition e / 2, column e % 2.
  m.run(make(Opcode::DmaCopy, Engine::SP,
             {sbuf(0, 4, 0, DType::BF16, {{1, 2}}), hbm(0, 0, DType::F32, 4, 2, {{1, 4}})}));
  const uint16_t bf[8] = {0x3F80, 0x4000, 0x4040, 0x4080, 0x40A0, 0x40C0, 0x40E0, 0x4100};  // 1.0 .. 8.0
  for (uint32_t e = 0; e < 8; ++e) CHECK(get<uint16_t>(m.s(e / 2, 2 * (e % 2))) == bf[e]);
  // SBUF FP32 bytes 64..79 -> BF16 bytes 68..75 of the same partition: dst element 0 overwrites the low half
  // of src element 1 (1 + 2^-8 = 0x3F808000, a tie that rounds to even 1.0 = 0x3F80). Read after that write,
  // it would be 0x3F804040 (3.0's BF16 bits below), above the tie, and round up to 0x3F81.
  const float src[4] = {3.0f, 1.0f + 0x1p-8f, -2.0f, 0.5f};
  std::memcpy(m.s(0, 64), src, sizeof src);
  m.run(make(Opcode::DmaCopy, Engine::SP,
             {sbuf(0, 1, 68, DType::BF16, {{1, 4}}), sbuf(0, 1, 64, DType::F32, {{1, 4}})}));
  CHECK(get<uint16_t>(m.s(0, 68)) == 0x4040);  // 3.0
  CHECK(get<uint16_t>(m.s(0, 70)) == 0x3F80);  // tie -> even, from the old bytes
  CHECK(get<uint16_t>(m.s(0, 72)) == 0xC000);  // -2.0
  CHECK(get<uint16_t>(m.s(0, 74)) == 0x3F00);  // 0.5
}

TEST_CASE("indirect dma_copy gathers 128 rows; out-of-bounds rows skipped or an error", "[isa]") {
  Machine m(trn2(), {TensorDecl{"table", DType::F32, {200, 4}}});
  for (int r = 0; r < 200; ++r)
    for (int c = 0; c < 4; ++c) put(m.state.hbm[0].data() + 16 * r + 4 * c, static_cast<float>(r * 10 + c));
  auto idx = [](uint32_t i) { return i % 9 == 3 ? (i % 2 ? 250 : -1) : static_cast<int32_t>((i * 7) % 200); };
  for (uint32_t i = 0; i < 128; ++i) {
    put<int32_t>(m.s(i, 0), idx(i));
    for (int c = 0; c < 4; ++c) put(m.s(i, 64 + 4 * c), -5.0f);
  }
  Instruction in = make(Opcode::DmaCopy, Engine::POOL,
                        {sbuf(0, 128, 64, DType::F32, {{1, 4}}), hbm(0, 0, DType::F32, 4, 128, {{1, 4}}),
                         sbuf(0, 128, 0, DType::I32, {{1, 1}})});
  in.flags = kOobSkip;
  m.run(in);
  for (uint32_t i = 0; i < 128; ++i)
    for (int c = 0; c < 4; ++c) {
      const float want = i % 9 == 3 ? -5.0f : static_cast<float>(idx(i) * 10 + c);
      REQUIRE(get<float>(m.s(i, 64 + 4 * c)) == want);
    }
  in.flags = 0;
  CHECK_THROWS_MATCHES(
      m.run(in), RuleError,
      Catch::Message("dma_copy on POOL: indirect bounds: vector_offset[3] = 250 is outside rows "
                     "[0, 200) of tensor 'table'"));
  // Scatter: rows of SBUF go to the indexed rows of the tensor.
  Instruction sc = make(Opcode::DmaCopy, Engine::POOL,
                        {hbm(0, 0, DType::F32, 4, 2, {{1, 4}}), sbuf(0, 2, 128, DType::F32, {{1, 4}}),
                         sbuf(0, 2, 0, DType::I32, {{1, 1}})});
  sc.flags = kIndirectDst;
  put<int32_t>(m.s(0, 0), 199);
  put<int32_t>(m.s(1, 0), 5);
  for (int c = 0; c < 4; ++c) {
    put(m.s(0, 128 + 4 * c), 1.5f * c);
    put(m.s(1, 128 + 4 * c), -2.5f * c);
  }
  m.run(sc);
  CHECK(get<float>(m.state.hbm[0].data() + 16 * 199 + 12) == 4.5f);
  CHECK(get<float>(m.state.hbm[0].data() + 16 * 5 + 8) == -5.0f);
  CHECK(get<float>(m.state.hbm[0].data() + 16 * 6 + 8) == 62.0f);
}

TEST_CASE(
    "indirect dma_copy steps by the pattern's row stride: stride 1 gathers and scatters single elements",
    "[isa]") {
  // table [200, 4] F32 seen as 800 elements: the index is a flat element index (row * 4 + column), as a
  // cross-entropy kernel gathers logits[r, target[r]] with index r * V + target[r].
  Machine m(trn2(), {TensorDecl{"table", DType::F32, {200, 4}}});
  for (int e = 0; e < 800; ++e) put(m.state.hbm[0].data() + 4 * e, static_cast<float>(e));
  const int32_t index[4] = {0, 799, 401, 800};
  for (uint32_t i = 0; i < 4; ++i) {
    put<int32_t>(m.s(i, 0), index[i]);
    put(m.s(i, 64), -5.0f);
  }
  Instruction g = make(Opcode::DmaCopy, Engine::POOL,
                       {sbuf(0, 4, 64, DType::F32, {{1, 1}}), hbm(0, 0, DType::F32, 1, 4, {{1, 1}}),
                        sbuf(0, 4, 0, DType::I32, {{1, 1}})});
  g.flags = kOobSkip;
  m.run(g);
  CHECK(get<float>(m.s(0, 64)) == 0.0f);
  CHECK(get<float>(m.s(1, 64)) == 799.0f);
  CHECK(get<float>(m.s(2, 64)) == 401.0f);
  CHECK(get<float>(m.s(3, 64)) == -5.0f);  // 800 is past the last element: skipped
  g.flags = 0;
  CHECK_THROWS_MATCHES(
      m.run(g), RuleError,
      Catch::Message("dma_copy on POOL: indirect bounds: vector_offset[3] = 800 is outside rows "
                     "[0, 800) of tensor 'table'"));
  // A pattern starting at element 2 with two elements per row: index i covers elements 2 + i and 3 + i.
  put<int32_t>(m.s(0, 0), 796);
  Instruction g2 = make(Opcode::DmaCopy, Engine::POOL,
                        {sbuf(0, 1, 64, DType::F32, {{1, 2}}), hbm(0, 8, DType::F32, 1, 1, {{1, 2}}),
                         sbuf(0, 1, 0, DType::I32, {{1, 1}})});
  m.run(g2);
  CHECK(get<float>(m.s(0, 64)) == 798.0f);
  CHECK(get<float>(m.s(0, 68)) == 799.0f);
  put<int32_t>(m.s(0, 0), 797);  // would read element 800
  CHECK_THROWS_MATCHES(
      m.run(g2), RuleError,
      Catch::Message("dma_copy on POOL: indirect bounds: vector_offset[0] = 797 is outside rows "
                     "[0, 797) of tensor 'table'"));
  // Scatter of single elements.
  put<int32_t>(m.s(0, 0), 5);
  put(m.s(0, 128), 42.0f);
  Instruction sc = make(Opcode::DmaCopy, Engine::POOL,
                        {hbm(0, 0, DType::F32, 1, 1, {{1, 1}}), sbuf(0, 1, 128, DType::F32, {{1, 1}}),
                         sbuf(0, 1, 0, DType::I32, {{1, 1}})});
  sc.flags = kIndirectDst;
  m.run(sc);
  CHECK(get<float>(m.state.hbm[0].data() + 4 * 5) == 42.0f);
  CHECK(get<float>(m.state.hbm[0].data() + 4 * 6) == 6.0f);
}

TEST_CASE("activation functions against libm (FP32 within 2 ulp-ish) with vector scale, bias and reduce",
          "[isa]") {
  const std::vector<std::pair<ActFunc, double (*)(double)>> funcs = {
      {ActFunc::Identity, [](double x) { return x; }},
      {ActFunc::Copy, [](double x) { return x; }},
      {ActFunc::Exp, [](double x) { return std::exp(x); }},
      {ActFunc::Log, [](double x) { return std::log(x); }},
      {ActFunc::Silu, [](double x) { return x / (1 + std::exp(-x)); }},
      {ActFunc::Gelu, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {ActFunc::GeluApproxTanh,
       [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }},
      {ActFunc::Sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }},
      {ActFunc::Tanh, [](double x) { return std::tanh(x); }},
      {ActFunc::Relu, [](double x) { return x > 0 ? x : 0.0; }},
      {ActFunc::Square, [](double x) { return x * x; }},
      {ActFunc::Sqrt, [](double x) { return std::sqrt(x); }},
      {ActFunc::Rsqrt, [](double x) { return 1 / std::sqrt(x); }},
      {ActFunc::Reciprocal, [](double x) { return 1 / x; }},
      {ActFunc::Abs, [](double x) { return std::fabs(x); }},
      {ActFunc::Sign, [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }},
      // d/dx x sigmoid(x), the definition of NKI's nl.silu_dx.
      {ActFunc::SiluDx,
       [](double x) {
         const double s = 1 / (1 + std::exp(-x));
         return s + x * s * (1 - s);
       }},
  };
  const bool positive_only[] = {0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0};
  for (const auto& [f, ref] : funcs) {
    Machine m;
    const uint32_t P = 2, N = 9;
    const bool pos = positive_only[static_cast<int>(f)];
    auto x = [&](uint32_t p, uint32_t j) {
      const float v = (static_cast<float>(j) - 4.f) * 0.7f + 0.3f * static_cast<float>(p);
      return pos ? std::fabs(v) + 0.125f : v;
    };
    for (uint32_t p = 0; p < P; ++p) {
      for (uint32_t j = 0; j < N; ++j) put(m.s(p, 4 * j), x(p, j));
      put(m.s(p, 100), 0.5f + static_cast<float>(p));  // scale vector
      put(m.s(p, 104), pos ? 0.25f : -0.25f);          // bias vector
    }
    Instruction in = make(Opcode::Activation, Engine::ACT,
                          {sbuf(0, P, 200, DType::F32, {{1, N}}), sbuf(0, P, 0, DType::F32, {{1, N}}),
                           sbuf(0, P, 104, DType::F32, {{1, 1}}), sbuf(0, P, 108, DType::F32, {{1, 1}}),
                           sbuf(0, P, 100, DType::F32, {{1, 1}})});
    in.act = f;
    in.flags = kOperand0Vector | kBiasVector | kReduce;
    m.run(in);
    for (uint32_t p = 0; p < P; ++p) {
      double sum = 0;
      for (uint32_t j = 0; j < N; ++j) {
        const double arg =
            static_cast<double>(x(p, j) * (0.5f + static_cast<float>(p)) + (pos ? 0.25f : -0.25f));
        const double want = ref(arg);
        sum += want;
        INFO(act_name(f) << " p=" << p << " j=" << j);
        REQUIRE(get<float>(m.s(p, 200 + 4 * j)) == Approx(want).epsilon(1e-6).margin(1e-6));
      }
      REQUIRE(get<float>(m.s(p, 108)) == Approx(sum).epsilon(1e-5).margin(1e-5));
    }
  }
}

TEST_CASE("tensor_tensor: every float ALU op", "[isa]") {
  const float a[] = {3.f, -2.f, 0.5f, 4.f, -0.f, 7.f};
  const float b[] = {2.f, -2.f, -4.f, 0.f, 1.f, 7.5f};
  struct Case {
    AluOp op;
    float (*f)(float, float);
  };
  const Case cases[] = {
      {AluOp::Bypass, [](float x, float) { return x; }},
      {AluOp::Add, [](float x, float y) { return x + y; }},
      {AluOp::Subtract, [](float x, float y) { return x - y; }},
      {AluOp::Multiply, [](float x, float y) { return x * y; }},
      {AluOp::Divide, [](float x, float y) { return x / y; }},
      {AluOp::Max, [](float x, float y) { return std::max(x, y); }},
      {AluOp::Min, [](float x, float y) { return std::min(x, y); }},
      {AluOp::AbsMax, [](float x, float y) { return std::max(std::fabs(x), std::fabs(y)); }},
      {AluOp::Pow, [](float x, float y) { return static_cast<float>(std::pow(double{x}, double{y})); }},
      {AluOp::IsEqual, [](float x, float y) { return x == y ? 1.f : 0.f; }},
      {AluOp::NotEqual, [](float x, float y) { return x != y ? 1.f : 0.f; }},
      {AluOp::IsGt, [](float x, float y) { return x > y ? 1.f : 0.f; }},
      {AluOp::IsGe, [](float x, float y) { return x >= y ? 1.f : 0.f; }},
      {AluOp::IsLt, [](float x, float y) { return x < y ? 1.f : 0.f; }},
      {AluOp::IsLe, [](float x, float y) { return x <= y ? 1.f : 0.f; }},
      {AluOp::LogicalAnd, [](float x, float y) { return x != 0 && y != 0 ? 1.f : 0.f; }},
      {AluOp::LogicalOr, [](float x, float y) { return x != 0 || y != 0 ? 1.f : 0.f; }},
  };
  for (const Case& c : cases) {
    Machine m;
    for (int j = 0; j < 6; ++j) {
      put(m.s(0, 4 * j), a[j]);
      put(m.s(0, 64 + 4 * j), b[j]);
    }
    Instruction in = make(Opcode::TensorTensor, Engine::DVE,
                          {sbuf(0, 1, 128, DType::F32, {{1, 6}}), sbuf(0, 1, 0, DType::F32, {{1, 6}}),
                           sbuf(0, 1, 64, DType::F32, {{1, 6}})});
    in.alu0 = c.op;
    m.run(in);
    for (int j = 0; j < 6; ++j) {
      INFO(alu_name(c.op) << " j=" << j);
      const float want = c.f(a[j], b[j]);
      const float got = get<float>(m.s(0, 128 + 4 * j));
      if (std::isnan(want))
        REQUIRE(std::isnan(got));
      else
        REQUIRE(got == want);
    }
  }
  // NaN propagates through max (poison stays visible).
  Machine m;
  put(m.s(0, 64), 1.f);
  Instruction in = make(Opcode::TensorTensor, Engine::DVE,
                        {sbuf(0, 1, 128, DType::F32, {{1, 1}}), sbuf(0, 1, 0, DType::F32, {{1, 1}}),
                         sbuf(0, 1, 64, DType::F32, {{1, 1}})});
  in.alu0 = AluOp::Max;
  m.run(in);
  CHECK(std::isnan(get<float>(m.s(0, 128))));
}

TEST_CASE("tensor_tensor: bitwise ops and shifts on int32", "[isa]") {
  const int32_t a[] = {0x0F0F, -8, 0x12345678, 1};
  const int32_t b[] = {0x00FF, 1, 4, 33};
  struct Case {
    AluOp op;
    int32_t want[4];
  };
  const Case cases[] = {
      {AluOp::BitwiseAnd, {0x000F, 0, 0, 1}},
      {AluOp::BitwiseOr, {0x0FFF, -7, 0x1234567C, 33}},
      {AluOp::BitwiseXor, {0x0FF0, -7, 0x1234567C, 32}},
      {AluOp::ShiftLeft, {0, -16, 0x23456780, 0}},  // shifts of 32 or more give 0
      {AluOp::ShiftRight, {0, 0x7FFFFFFC, 0x01234567, 0}},
  };
  for (const Case& c : cases) {
    Machine m;
    for (int j = 0; j < 4; ++j) {
      put(m.s(0, 4 * j), a[j]);
      put(m.s(0, 64 + 4 * j), b[j]);
    }
    Instruction in = make(Opcode::TensorTensor, Engine::DVE,
                          {sbuf(0, 1, 128, DType::I32, {{1, 4}}), sbuf(0, 1, 0, DType::I32, {{1, 4}}),
                           sbuf(0, 1, 64, DType::I32, {{1, 4}})});
    in.alu0 = c.op;
    m.run(in);
    for (int j = 0; j < 4; ++j) {
      INFO(alu_name(c.op) << " j=" << j);
      REQUIRE(get<int32_t>(m.s(0, 128 + 4 * j)) == c.want[j]);
    }
  }
}

TEST_CASE("tensor_scalar: immediate and vector operands, reverse flags", "[isa]") {
  Machine m;
  for (uint32_t p = 0; p < 2; ++p) {
    for (int j = 0; j < 3; ++j) put(m.s(p, 4 * j), static_cast<float>(j + 1 + 10 * p));
    put(m.s(p, 32), 100.f * static_cast<float>(p + 1));
  }
  // (operand0 - data) * 0.5 with operand0 a per-partition vector.
  Instruction in = make(Opcode::TensorScalar, Engine::DVE,
                        {sbuf(0, 2, 64, DType::F32, {{1, 3}}), sbuf(0, 2, 0, DType::F32, {{1, 3}}),
                         sbuf(0, 2, 32, DType::F32, {{1, 1}})});
  in.alu0 = AluOp::Subtract;
  in.alu1 = AluOp::Multiply;
  in.imm1 = 0.5f;
  in.flags = kOperand0Vector | kReverse0;
  m.run(in);
  CHECK(get<float>(m.s(0, 64)) == (100.f - 1.f) * 0.5f);
  CHECK(get<float>(m.s(1, 72)) == (200.f - 13.f) * 0.5f);
  // data / 4 then 1 / x via reverse1: 4 / data.
  in.ops[2] = AccessPattern{};
  in.flags = kReverse1;
  in.alu0 = AluOp::Divide;
  in.imm0 = 4.f;
  in.alu1 = AluOp::Divide;
  in.imm1 = 1.f;
  m.run(in);
  CHECK(get<float>(m.s(0, 68)) == 1.f / (2.f / 4.f));
}

TEST_CASE("tensor_reduce over the innermost axes, negate, output cast", "[isa]") {
  Machine m;
  for (int o = 0; o < 2; ++o)
    for (int i = 0; i < 3; ++i)
      for (int t = 0; t < 4; ++t)
        put(m.s(0, 4 * (o * 12 + i * 4 + t)), static_cast<float>(o * 100 + i * 10 + t));
  Instruction in =
      make(Opcode::TensorReduce, Engine::DVE,
           {sbuf(0, 1, 512, DType::BF16, {{1, 2}}), sbuf(0, 1, 0, DType::F32, {{12, 2}, {4, 3}, {1, 4}})});
  in.alu0 = AluOp::Add;
  in.reduce_axes = 2;
  in.flags = kNegate;
  m.run(in);
  CHECK(from_bf16(get<uint16_t>(m.s(0, 512))) == -138.f);   // 4 * (0 + 10 + 20) + 3 * (0 + 1 + 2 + 3)
  CHECK(from_bf16(get<uint16_t>(m.s(0, 514))) == -1336.f);  // 1200 + 138 = 1338 -> BF16 (ulp 8) 1336
  in.reduce_axes = 1;
  in.flags = 0;
  in.alu0 = AluOp::Max;
  in.ops[0] = sbuf(0, 1, 512, DType::F32, {{3, 2}, {1, 3}});
  m.run(in);
  CHECK(get<float>(m.s(0, 512 + 4 * 5)) == 123.f);
}

TEST_CASE("tensor_copy bit-exact, cast, memset, iota, select", "[isa]") {
  Machine m;
  put<uint32_t>(m.s(0, 0), 0x7FA00001u);  // a signalling NaN payload survives a same-dtype copy
  put(m.s(0, 4), 1.0f + 0x1p-8f);
  Instruction cp = make(Opcode::TensorCopy, Engine::ACT,
                        {sbuf(0, 1, 64, DType::F32, {{1, 2}}), sbuf(0, 1, 0, DType::F32, {{1, 2}})});
  m.run(cp);
  CHECK(get<uint32_t>(m.s(0, 64)) == 0x7FA00001u);
  cp.ops[0] = sbuf(0, 1, 64, DType::BF16, {{1, 2}});
  m.run(cp);
  CHECK(get<uint16_t>(m.s(0, 66)) == 0x3F80);

  Instruction ms = make(Opcode::Memset, Engine::POOL, {sbuf(0, 2, 256, DType::I16, {{2, 3}})});
  ms.imm0 = -2.5f;  // RNE to -2
  m.run(ms);
  CHECK(get<int16_t>(m.s(1, 256 + 8)) == -2);
  CHECK(get<uint16_t>(m.s(1, 256 + 2)) == 0xFFFF);  // stride 2 skips it
  // An integer fill FP32 does not hold is written exactly (split_fill: imm0 + imm1); FP32 made it 2^24.
  Instruction wide = make(Opcode::Memset, Engine::POOL, {sbuf(0, 1, 2048, DType::I32, {{1, 2}})});
  split_fill(DType::I32, 16777217.0, wide.imm0, wide.imm1);
  m.run(wide);
  CHECK(get<int32_t>(m.s(0, 2048 + 4)) == 16777217);
  wide.ops[0].dtype = DType::U32;
  split_fill(DType::U32, 4294967041.0, wide.imm0, wide.imm1);  // 2^32 - 255
  m.run(wide);
  CHECK(get<uint32_t>(m.s(0, 2048)) == 4294967041u);

  Instruction io = make(Opcode::Iota, Engine::POOL, {sbuf(32, 4, 512, DType::I32, {{3, 2}, {1, 3}})});
  io.imm0 = 7.f;
  io.imm1 = 100.f;
  io.iota_steps = {10, -1, 0, 0};
  m.run(io);
  CHECK(get<int32_t>(m.s(34, 512 + 4 * (3 * 1 + 2))) == 7 + 200 + 10 - 2);
  CHECK(get<int32_t>(m.s(32, 512)) == 7);
  // A narrow integer dst saturates as every integer output conversion does (tester23x F4: it wrapped).
  // Partition 0 of [4, 2] int16 at 768: 40000 + 10 j, j = 0, 1: both past 32767.
  Instruction narrow = make(Opcode::Iota, Engine::POOL, {sbuf(0, 4, 768, DType::I16, {{1, 2}})});
  narrow.imm0 = 40000.f;
  narrow.imm1 = -20000.f;  // partition 3: 40000 - 60000 = -20000 (in range)
  narrow.iota_steps = {10, 0, 0, 0};
  m.run(narrow);
  CHECK(get<int16_t>(m.s(0, 768)) == 32767);
  CHECK(get<int16_t>(m.s(0, 770)) == 32767);
  CHECK(get<int16_t>(m.s(3, 770)) == -19990);
  narrow.ops[0].dtype = DType::U8;
  narrow.imm0 = 300.f;
  narrow.imm1 = -200.f;  // partition 2: 300 - 400 = -100, saturates to 0
  m.run(narrow);
  CHECK(m.s(0, 768)[0] == 255);
  CHECK(m.s(2, 768)[0] == 0);
  CHECK(m.s(1, 768)[0] == 100);

  // select: predicate != 0 ? on_true : immediate -inf
  for (int j = 0; j < 4; ++j) {
    put(m.s(0, 1024 + 4 * j), j % 2 ? 1.f : 0.f);
    put(m.s(0, 1040 + 4 * j), static_cast<float>(j));
  }
  Instruction se = make(Opcode::Select, Engine::DVE,
                        {sbuf(0, 1, 1100, DType::F32, {{1, 4}}), sbuf(0, 1, 1024, DType::F32, {{1, 4}}),
                         sbuf(0, 1, 1040, DType::F32, {{1, 4}})});
  se.imm0 = -std::numeric_limits<float>::infinity();
  m.run(se);
  CHECK(get<float>(m.s(0, 1100)) == -std::numeric_limits<float>::infinity());
  CHECK(get<float>(m.s(0, 1104)) == 1.f);
  CHECK(get<float>(m.s(0, 1112)) == 3.f);
}

TEST_CASE("transposes: dma_transpose, nc_transpose on PE and DVE; sendrecv to the peer core", "[isa]") {
  Machine m;
  for (uint32_t p = 0; p < 3; ++p)
    for (uint32_t f = 0; f < 5; ++f) put<uint16_t>(m.s(p, 2 * f), static_cast<uint16_t>(0x100 * p + f));
  m.run(make(Opcode::DmaTranspose, Engine::SP,
             {sbuf(0, 5, 64, DType::BF16, {{1, 3}}), sbuf(0, 3, 0, DType::BF16, {{1, 5}})}));
  m.run(make(Opcode::NcTranspose, Engine::PE,
             {psum(0, 5, 0, DType::BF16, {{1, 3}}), sbuf(0, 3, 0, DType::BF16, {{1, 5}})}));
  m.run(make(Opcode::NcTranspose, Engine::DVE,
             {sbuf(0, 5, 128, DType::BF16, {{1, 3}}), sbuf(0, 3, 0, DType::BF16, {{1, 5}})}));
  for (uint32_t f = 0; f < 5; ++f)
    for (uint32_t p = 0; p < 3; ++p) {
      REQUIRE(get<uint16_t>(m.s(f, 64 + 2 * p)) == 0x100 * p + f);
      REQUIRE(get<uint16_t>(m.q(f, 2 * p)) == 0x100 * p + f);
      REQUIRE(get<uint16_t>(m.s(f, 128 + 2 * p)) == 0x100 * p + f);
    }
  m.run(make(Opcode::SendRecv, Engine::POOL,
             {sbuf(0, 1, 4096, DType::BF16, {{1, 15}}), sbuf(0, 3, 0, DType::BF16, {{1, 5}})}),
        0);
  CHECK(get<uint16_t>(m.s(0, 4096 + 2 * 7, 1)) == 0x102);
  CHECK(get<uint16_t>(m.s(0, 4096 + 2 * 7, 0)) == 0xFFFF);
}

TEST_CASE("dma_transpose of a large tile (split over host threads) moves every element once", "[isa]") {
  // HBM [512, 128] BF16 -> SBUF [128, 512]: 16 tiles of 32 source rows, split over the host's threads by
  // execute(). Every element lands once, bit for bit.
  Machine m(trn3(), {TensorDecl{"a", DType::BF16, {512, 128}}});
  const auto val = [](uint32_t r, uint32_t c) {
    return static_cast<uint16_t>((r * 977u + c * 31u) & 0xFFFFu);
  };
  for (uint32_t r = 0; r < 512; ++r)
    for (uint32_t c = 0; c < 128; ++c) put<uint16_t>(m.state.hbm[0].data() + 2 * (r * 128 + c), val(r, c));
  m.run(make(Opcode::DmaTranspose, Engine::SP,
             {sbuf(0, 128, 0, DType::BF16, {{1, 512}}), hbm(0, 0, DType::BF16, 128, 512, {{1, 128}})}));
  for (uint32_t f = 0; f < 128; ++f)
    for (uint32_t p = 0; p < 512; ++p) REQUIRE(get<uint16_t>(m.s(f, 2 * p)) == val(p, f));
}

TEST_CASE("OperandView::may_overlap: memories, partitions and byte ranges", "[isa]") {
  Machine m(trn2(), {TensorDecl{"t", DType::F32, {64}}});
  const auto v = [&](const AccessPattern& ap) {
    return OperandView(ap, 0, m.program, m.limits, m.state, "t", "x");
  };
  const OperandView a = v(sbuf(0, 4, 0, DType::F32, {{1, 4}}));         // partitions [0, 4), bytes [0, 16)
  CHECK(a.may_overlap(v(sbuf(2, 4, 12, DType::BF16, {{1, 2}}))));       // partitions 2, 3; bytes 12..15
  CHECK_FALSE(a.may_overlap(v(sbuf(4, 4, 0, DType::F32, {{1, 4}}))));   // other partitions
  CHECK_FALSE(a.may_overlap(v(sbuf(0, 4, 16, DType::F32, {{1, 4}}))));  // the next bytes
  CHECK_FALSE(a.may_overlap(v(psum(0, 4, 0, DType::F32, {{1, 4}}))));   // another memory
  CHECK(a.may_overlap(v(sbuf(3, 1, 0, DType::F32, {{-1, 1}, {4, 1}}))));
  const OperandView h = v(hbm(0, 0, DType::F32, 8, 4, {{1, 8}}));  // bytes [0, 128)
  CHECK(h.may_overlap(v(hbm(0, 124, DType::F32, 8, 1, {{1, 1}}))));
  CHECK_FALSE(h.may_overlap(v(hbm(0, 128, DType::F32, 8, 4, {{1, 8}}))));
}

// A large cast (128 x 512 FP32 to BF16: 64 Ki elements, its 8-row groups split over host threads): every
// element rounded to nearest even, as one thread gives it.
TEST_CASE("a large tensor_copy cast converts every row", "[isa]") {
  Machine m;
  // Element (p, j) = 1 + (p * 512 + j) * 2^-12 + 2^-20 (in FP32): 1 to 17, most of them between two BF16
  // values.
  const auto value = [](uint32_t p, int j) {
    return 1.0f + static_cast<float>(p * 512 + j) * 0x1p-12f + 0x1p-20f;
  };
  for (uint32_t p = 0; p < 128; ++p)
    for (int j = 0; j < 512; ++j) put(m.s(p, 4 * j), value(p, j));
  m.run(make(Opcode::TensorCopy, Engine::ACT,
             {sbuf(0, 128, 4096, DType::BF16, {{1, 512}}), sbuf(0, 128, 0, DType::F32, {{1, 512}})}));
  int wrong = 0;
  for (uint32_t p = 0; p < 128; ++p)
    for (int j = 0; j < 512; ++j)
      wrong += get<uint16_t>(m.s(p, 4096 + 2 * j)) != num::f32_to_bf16(value(p, j));
  CHECK(wrong == 0);
  CHECK(get<uint16_t>(m.s(0, 4096)) == 0x3F80);  // 1 + 2^-20 -> 1.0
  // 1 + 65535 * 2^-12 = 16.99976 (+ 2^-20 is below FP32's 2^-19 step there) -> 17.0: BF16 steps by 1/8
  // in [16, 32), exponent 4 + 127 = 0x83, mantissa 1/16 = 0b0001000: 0x4188.
  CHECK(get<uint16_t>(m.s(127, 4096 + 1022)) == 0x4188);
}

TEST_CASE("tensor_copy and transposes between overlapping operands keep the element order", "[isa]") {
  Machine m;
  for (int j = 0; j < 5; ++j) put(m.s(0, 4 * j), static_cast<float>(j + 1));
  // dst element j is src element j + 1: each copy reads what the previous one wrote.
  m.run(make(Opcode::TensorCopy, Engine::DVE,
             {sbuf(0, 1, 4, DType::F32, {{1, 4}}), sbuf(0, 1, 0, DType::F32, {{1, 4}})}));
  for (int j = 0; j < 5; ++j) CHECK(get<float>(m.s(0, 4 * j)) == 1.f);
  // A disjoint copy with a cast takes whole rows: BF16 RNE of each value.
  for (uint32_t p = 0; p < 2; ++p)
    for (int j = 0; j < 3; ++j) put(m.s(p, 64 + 4 * j), 1.f + static_cast<float>(p * 3 + j) * 0x1p-9f);
  m.run(make(Opcode::TensorCopy, Engine::DVE,
             {sbuf(0, 2, 128, DType::BF16, {{1, 3}}), sbuf(0, 2, 64, DType::F32, {{1, 3}})}));
  CHECK(get<uint16_t>(m.s(0, 128 + 2)) == 0x3F80);  // 1 + 2^-9: a quarter ulp, down
  CHECK(get<uint16_t>(m.s(0, 128 + 4)) == 0x3F80);  // 1 + 2^-8: a tie, to even
  CHECK(get<uint16_t>(m.s(1, 128 + 4)) == 0x3F81);  // 1 + 5 * 2^-9: 1.25 ulp, to 1 ulp
  // In-place DVE transpose of a 2 x 2 tile: snapshot semantics, dst[f, p] = old src[p, f].
  put<uint16_t>(m.s(0, 256), 1), put<uint16_t>(m.s(0, 258), 2);
  put<uint16_t>(m.s(1, 256), 3), put<uint16_t>(m.s(1, 258), 4);
  m.run(make(Opcode::NcTranspose, Engine::DVE,
             {sbuf(0, 2, 256, DType::BF16, {{1, 2}}), sbuf(0, 2, 256, DType::BF16, {{1, 2}})}));
  CHECK(get<uint16_t>(m.s(0, 258)) == 3);
  CHECK(get<uint16_t>(m.s(1, 256)) == 2);
}

TEST_CASE("memset and same-dtype tensor_copy over strided, reversed and contiguous patterns", "[isa]") {
  Machine m;
  for (uint32_t p = 0; p < 2; ++p)
    for (int64_t b = 0; b < 64; b += 4) put<uint32_t>(m.s(p, 512 + b), 0);
  // BF16 1.5 = 0x3FC0 (two different bytes) at 2 x 3 elements: stride 8 elements, then -2 elements from
  // element offset 4 (byte 520): bytes 520, 516, 512 and 536, 532, 528 of both partitions; 514 stays zero.
  Instruction ms = make(Opcode::Memset, Engine::POOL, {sbuf(0, 2, 520, DType::BF16, {{8, 2}, {-2, 3}})});
  ms.imm0 = 1.5f;
  m.run(ms);
  for (uint32_t p = 0; p < 2; ++p) {
    for (const int64_t at : {512, 516, 520, 528, 532, 536}) CHECK(get<uint16_t>(m.s(p, at)) == 0x3FC0);
    for (const int64_t at : {514, 518, 522, 530, 538}) CHECK(get<uint16_t>(m.s(p, at)) == 0);
  }
  // Contiguous rows: FP32 -0.0 (one nonzero byte of four), and x4 E4M3 1.0 (0x38 in all four bytes).
  Instruction mz = make(Opcode::Memset, Engine::DVE, {sbuf(0, 2, 1024, DType::F32, {{1, 3}})});
  mz.imm0 = -0.0f;
  m.run(mz);
  CHECK(get<uint32_t>(m.s(1, 1024 + 8)) == 0x80000000u);
  Instruction mx = make(Opcode::Memset, Engine::DVE, {sbuf(0, 2, 2048, DType::FP8_E4M3FN_X4, {{1, 2}})});
  mx.imm0 = 1.0f;
  m.run(mx);
  CHECK(get<uint32_t>(m.s(1, 2048 + 4)) == 0x38383838u);

  // A permuted PSUM tile copied to SBUF in one dtype: dst element (a, b) of [2, 2] is src element b * 2 + a.
  for (uint32_t p = 0; p < 2; ++p)
    for (uint16_t j = 0; j < 4; ++j) put<uint16_t>(m.q(p, 2 * j), static_cast<uint16_t>(100 * p + j + 1));
  m.run(make(Opcode::TensorCopy, Engine::DVE,
             {sbuf(0, 2, 4096, DType::BF16, {{1, 4}}), psum(0, 2, 0, DType::BF16, {{1, 2}, {2, 2}})}));
  for (uint32_t p = 0; p < 2; ++p) {
    const uint16_t want[4] = {1, 3, 2, 4};
    for (int j = 0; j < 4; ++j) CHECK(get<uint16_t>(m.s(p, 4096 + 2 * j)) == 100 * p + want[j]);
  }
}

TEST_CASE("float8_e4m3 (IEEE-style E4M3): RNE, saturation at 240, Inf and NaN codes", "[isa]") {
  Machine m;
  const float inf = std::numeric_limits<float>::infinity();
  // 240 = S.1110.111 (0x77); 244 is the tie between 240 and the Inf code's 256: saturates to 240, as do 1e6
  // and Inf; 3.0 = 1.5 x 2 (0x44); 2^-9 the smallest subnormal (0x01); 12.5 is the tie between 12 (0x54) and
  // 13 (0x55): even mantissa -> 12; NaN -> 0x7F; -0 keeps its sign.
  const float in[10] = {240.f, 244.f, -1e6f, inf, 3.f, 0x1p-9f, 12.5f, std::nanf(""), -0.f, -inf};
  const uint8_t want[10] = {0x77, 0x77, 0xF7, 0x77, 0x44, 0x01, 0x54, 0x7F, 0x80, 0xF7};
  std::memcpy(m.s(0, 0), in, sizeof in);
  m.run(make(Opcode::TensorCopy, Engine::DVE,
             {sbuf(0, 1, 64, DType::FP8_E4M3, {{1, 10}}), sbuf(0, 1, 0, DType::F32, {{1, 10}})}));
  for (int j = 0; j < 10; ++j) CHECK(static_cast<int>(*m.s(0, 64 + j)) == static_cast<int>(want[j]));
  // Decoding: 0x78 is +Inf, 0xF8 -Inf, 0x79 NaN, 0x77 240, 0x08 2^-6 (the smallest normal).
  const uint8_t codes[5] = {0x78, 0xF8, 0x79, 0x77, 0x08};
  std::memcpy(m.s(0, 128), codes, 5);
  m.run(make(Opcode::TensorCopy, Engine::DVE,
             {sbuf(0, 1, 192, DType::F32, {{1, 5}}), sbuf(0, 1, 128, DType::FP8_E4M3, {{1, 5}})}));
  CHECK(get<float>(m.s(0, 192)) == inf);
  CHECK(get<float>(m.s(0, 196)) == -inf);
  CHECK(std::isnan(get<float>(m.s(0, 200))));
  CHECK(get<float>(m.s(0, 204)) == 240.f);
  CHECK(get<float>(m.s(0, 208)) == 0x1p-6f);
}

TEST_CASE("scalar_tensor_tensor, bn_stats, bn_aggr and affine_select", "[isa]") {
  Machine m;
  const float x[4] = {1.f, 2.f, 4.f, 7.f}, y[4] = {10.f, 20.f, 30.f, 40.f};
  std::memcpy(m.s(0, 0), x, sizeof x);
  std::memcpy(m.s(0, 16), y, sizeof y);
  // (x - 1) * y; reverse1 with divide: y / (x - 1) (1 / 0 = inf).
  Instruction stt = make(Opcode::ScalarTensorTensor, Engine::DVE,
                         {sbuf(0, 1, 64, DType::F32, {{1, 4}}),
                          sbuf(0, 1, 0, DType::F32, {{1, 4}}),
                          {},
                          sbuf(0, 1, 16, DType::F32, {{1, 4}})});
  stt.alu0 = AluOp::Subtract;
  stt.imm0 = 1.f;
  stt.alu1 = AluOp::Multiply;
  m.run(stt);
  CHECK(get<float>(m.s(0, 64 + 12)) == 240.f);
  stt.alu1 = AluOp::Divide;
  stt.flags = kReverse1;
  m.run(stt);
  CHECK(get<float>(m.s(0, 64 + 4)) == 20.f);
  CHECK(get<float>(m.s(0, 64)) == std::numeric_limits<float>::infinity());

  // bn_stats of {1, 2, 4, 7}: even {1, 4} -> (2, 2.5, 4.5), odd {2, 7} -> (2, 4.5, 12.5); bn_aggr of the two
  // triples: mean 3.5, variance (4.5 + 12.5 + 2 x 1 + 2 x 1) / 4 = 5.25 (np.var of the four values).
  m.run(make(Opcode::BnStats, Engine::DVE,
             {sbuf(0, 1, 128, DType::F32, {{1, 6}}), sbuf(0, 1, 0, DType::F32, {{1, 4}})}));
  const float stats[6] = {2.f, 2.5f, 4.5f, 2.f, 4.5f, 12.5f};
  for (int j = 0; j < 6; ++j) CHECK(get<float>(m.s(0, 128 + 4 * j)) == stats[j]);
  m.run(make(Opcode::BnAggr, Engine::DVE,
             {sbuf(0, 1, 192, DType::F32, {{1, 2}}), sbuf(0, 1, 128, DType::F32, {{1, 6}})}));
  CHECK(get<float>(m.s(0, 192)) == 3.5f);
  CHECK(get<float>(m.s(0, 196)) == 5.25f);

  // affine_select, causal: keep x where partition - j >= 0 (channel_multiplier 1, step -1), else -1e4.
  for (uint32_t p = 0; p < 2; ++p) std::memcpy(m.s(p, 256), x, sizeof x);
  Instruction as = make(Opcode::AffineSelect, Engine::POOL,
                        {sbuf(0, 2, 320, DType::F32, {{1, 4}}), sbuf(0, 2, 256, DType::F32, {{1, 4}})});
  as.alu0 = AluOp::IsGe;
  as.imm1 = 1.f;
  as.iota_steps = {-1, 0, 0, 0};
  as.imm2 = -1e4f;
  m.run(as);
  CHECK(get<float>(m.s(0, 320)) == 1.f);
  CHECK(get<float>(m.s(0, 324)) == -1e4f);
  CHECK(get<float>(m.s(1, 324)) == 2.f);
  CHECK(get<float>(m.s(1, 328)) == -1e4f);
}

TEST_CASE("max8: the 8 largest per partition, descending, in dst's dtype", "[isa][top8]") {
  Machine m;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // Partition 0 as a [2, 6] BF16 src (12 values, row-major): duplicates, -0 before +0, NaN and -inf.
  // Descending with ties in src order and NaN last: 9, 5, 5, 3, -0, 0, -1, -2 (below: -inf, NaN, -3, -4).
  const float p0[12] = {5.f, -0.f, 3.f, nan, -1.f, 9.f, 0.f, -inf, 5.f, -2.f, -3.f, -4.f};
  // Partition 1: fewer than 8 numbers above NaN: 7, 1, -inf, -inf, NaN, NaN, ... (NaN ranks below -inf).
  const float p1[12] = {nan, -inf, 1.f, nan, nan, nan, 7.f, nan, -inf, nan, nan, nan};
  for (int j = 0; j < 12; ++j) {
    put(m.s(0, 2 * j), bf16_exact(p0[j]));
    put(m.s(1, 2 * j), bf16_exact(p1[j]));
  }
  m.run(make(Opcode::Max8, Engine::DVE,
             {sbuf(0, 2, 64, DType::F32, {{1, 8}}), sbuf(0, 2, 0, DType::BF16, {{6, 2}, {1, 6}})}));
  const uint32_t want0[8] = {0x41100000u, 0x40A00000u, 0x40A00000u, 0x40400000u,
                             0x80000000u, 0x00000000u, 0xBF800000u, 0xC0000000u};
  for (int j = 0; j < 8; ++j) CHECK(get<uint32_t>(m.s(0, 64 + 4 * j)) == want0[j]);
  CHECK(get<float>(m.s(1, 64)) == 7.f);
  CHECK(get<float>(m.s(1, 68)) == 1.f);
  CHECK(get<float>(m.s(1, 72)) == -inf);
  CHECK(get<float>(m.s(1, 76)) == -inf);
  for (int j = 4; j < 8; ++j) CHECK(std::isnan(get<float>(m.s(1, 64 + 4 * j))));
  // A BF16 dst rounds the FP32 values (here exact): 9 is 0x4110.
  m.run(make(Opcode::Max8, Engine::DVE,
             {sbuf(0, 1, 128, DType::BF16, {{1, 8}}), sbuf(0, 1, 0, DType::BF16, {{1, 12}})}));
  CHECK(get<uint16_t>(m.s(0, 128)) == 0x4110);
  CHECK(get<uint16_t>(m.s(0, 128 + 14)) == 0xC000);
}

TEST_CASE("nc_find_index8: first occurrences, repeated vals ascending, all ones where absent",
          "[isa][top8]") {
  Machine m;
  // data (10 values): 4 at 1, 6 and 8; 2 at 3; -0 at 5; 7 at 9.
  const float data[10] = {1.f, 4.f, 3.f, 2.f, 5.f, -0.f, 4.f, 6.f, 4.f, 7.f};
  std::memcpy(m.s(0, 0), data, sizeof data);
  // vals: 4 three times (positions 1, 6, 8 in turn), +0 (matches -0 at 5), 7, 4 a fourth time (none left),
  // 2, and 11 (absent): [1, 6, 8, 5, 9, none, 3, none].
  const float vals[8] = {4.f, 4.f, 4.f, 0.f, 7.f, 4.f, 2.f, 11.f};
  std::memcpy(m.s(0, 64), vals, sizeof vals);
  m.run(make(Opcode::NcFindIndex8, Engine::DVE,
             {sbuf(0, 1, 128, DType::U32, {{1, 8}}), sbuf(0, 1, 0, DType::F32, {{1, 10}}),
              sbuf(0, 1, 64, DType::F32, {{1, 8}})}));
  const uint32_t want[8] = {1, 6, 8, 5, 9, 0xFFFFFFFFu, 3, 0xFFFFFFFFu};
  for (int j = 0; j < 8; ++j) CHECK(get<uint32_t>(m.s(0, 128 + 4 * j)) == want[j]);
  // uint16 indices: the sentinel is 0xFFFF.
  m.run(make(Opcode::NcFindIndex8, Engine::DVE,
             {sbuf(0, 1, 192, DType::U16, {{1, 8}}), sbuf(0, 1, 0, DType::F32, {{1, 10}}),
              sbuf(0, 1, 64, DType::F32, {{1, 8}})}));
  for (int j = 0; j < 8; ++j) CHECK(get<uint16_t>(m.s(0, 192 + 2 * j)) == static_cast<uint16_t>(want[j]));
}

TEST_CASE("nc_match_replace8: NKI's duplicate example, in place, and dst_idx", "[isa][top8]") {
  Machine m;
  const float inf = std::numeric_limits<float>::infinity();
  // NKI's page: data [1, 2, 3, 4, 8 x 7], vals [3, 8 x 7]: vals from the last, so dst_idx = [2, 10, 9, 8, 7,
  // 6, 5, 4] and every 3 and 8 becomes imm.
  const float data[11] = {1.f, 2.f, 3.f, 4.f, 8.f, 8.f, 8.f, 8.f, 8.f, 8.f, 8.f};
  const float vals[8] = {3.f, 8.f, 8.f, 8.f, 8.f, 8.f, 8.f, 8.f};
  std::memcpy(m.s(0, 0), data, sizeof data);
  std::memcpy(m.s(0, 64), vals, sizeof vals);
  Instruction mr = make(Opcode::NcMatchReplace8, Engine::DVE,
                        {sbuf(0, 1, 0, DType::F32, {{1, 11}}), sbuf(0, 1, 0, DType::F32, {{1, 11}}),
                         sbuf(0, 1, 64, DType::F32, {{1, 8}}), sbuf(0, 1, 128, DType::U32, {{1, 8}})});
  mr.imm0 = -inf;
  m.run(mr);
  const uint32_t want_idx[8] = {2, 10, 9, 8, 7, 6, 5, 4};
  for (int j = 0; j < 8; ++j) CHECK(get<uint32_t>(m.s(0, 128 + 4 * j)) == want_idx[j]);
  const float want[11] = {1.f, 2.f, -inf, 4.f, -inf, -inf, -inf, -inf, -inf, -inf, -inf};
  for (int j = 0; j < 11; ++j) CHECK(get<float>(m.s(0, 4 * j)) == want[j]);
  // Again on the replaced data: only 1, 2 and 4 are left, no 3 or 8: dst unchanged, dst_idx all ones.
  m.run(mr);
  for (int j = 0; j < 8; ++j) CHECK(get<uint32_t>(m.s(0, 128 + 4 * j)) == 0xFFFFFFFFu);
  for (int j = 0; j < 11; ++j) CHECK(get<float>(m.s(0, 4 * j)) == want[j]);
  // Without dst_idx, into a BF16 dst apart from data: imm 0.5 at the paired positions.
  std::memcpy(m.s(0, 0), data, sizeof data);
  Instruction plain = make(Opcode::NcMatchReplace8, Engine::DVE,
                           {sbuf(0, 1, 256, DType::BF16, {{1, 11}}), sbuf(0, 1, 0, DType::F32, {{1, 11}}),
                            sbuf(0, 1, 64, DType::F32, {{1, 8}})});
  plain.imm0 = 0.5f;
  m.run(plain);
  const uint16_t want16[11] = {0x3F80, 0x4000, 0x3F00, 0x4080, 0x3F00, 0x3F00,
                               0x3F00, 0x3F00, 0x3F00, 0x3F00, 0x3F00};
  for (int j = 0; j < 11; ++j) CHECK(get<uint16_t>(m.s(0, 256 + 2 * j)) == want16[j]);
}

TEST_CASE("tensor_scalar_reduce: tensor_scalar with one operator, reduced over dst's values", "[isa]") {
  Machine m;
  // x * 2 with x = {1.5, -3, 0.25, 4}: {3, -6, 0.5, 8}; partition 1: x + 1 with its [P, 1] operand0 = 1.
  const float x[4] = {1.5f, -3.f, 0.25f, 4.f};
  for (uint32_t p = 0; p < 2; ++p) std::memcpy(m.s(p, 0), x, sizeof x);
  put(m.s(0, 32), 2.f);
  put(m.s(1, 32), 1.f);
  Instruction in = make(Opcode::TensorScalarReduce, Engine::DVE,
                        {sbuf(0, 2, 64, DType::BF16, {{1, 4}}), sbuf(0, 2, 0, DType::F32, {{1, 4}}),
                         sbuf(0, 2, 32, DType::F32, {{1, 1}}), sbuf(0, 2, 128, DType::F32, {{1, 1}})});
  in.alu0 = AluOp::Multiply;
  in.alu1 = AluOp::Max;
  in.flags = kOperand0Vector;
  m.run(in);
  CHECK(get<uint16_t>(m.s(0, 64 + 2)) == bf16_exact(-6.f));
  CHECK(get<float>(m.s(0, 128)) == 8.f);  // max(3, -6, 0.5, 8)
  CHECK(get<float>(m.s(1, 128)) == 4.f);  // max(1.5, -3, 0.25, 4) * 1
  // add, reverse0 (operand0 - x) and negate: partition 0: 2 - x = {0.5, 5, 1.75, -2}, sum 5.25 -> -5.25.
  in.alu0 = AluOp::Subtract;
  in.alu1 = AluOp::Add;
  in.flags = kOperand0Vector | kReverse0 | kNegate;
  m.run(in);
  CHECK(get<float>(m.s(0, 128)) == -5.25f);
  CHECK(get<uint16_t>(m.s(0, 64 + 6)) == bf16_exact(-2.f));
  // The sum is of dst's values (NKI's formula: reduce_res = reduce_op(dst)), the FP32 results rounded to
  // BF16 (8 significant bits, to nearest even): an immediate operand0 1e-3 gives 1.501 -> 1.5,
  // -2.999 -> -3, 0.251 -> 0.251953125 (a step of 2^-9 there: 0.001 is past half of it), 4.001 -> 4;
  // summed in FP32 left to right. The FP32 results' own sum (as trnsim folded before) differs.
  in.alu0 = AluOp::Add;
  in.flags = 0;
  in.imm0 = 1e-3f;
  m.run(in);
  const float want = ((1.5f + -3.f) + 0.251953125f) + 4.f;
  CHECK(get<float>(m.s(0, 128)) == want);
  CHECK(get<uint16_t>(m.s(0, 64 + 4)) == bf16_exact(0.251953125f));
  CHECK(want != ((((1.5f + 1e-3f) + (-3.f + 1e-3f)) + (0.25f + 1e-3f)) + (4.f + 1e-3f)));
}

TEST_CASE("abs as an ALU operator: |data|, the operand unread", "[isa]") {
  Machine m;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // tensor_scalar(op0=abs, operand0=7) then op1=maximum 2.5: |x| max 2.5; -0 becomes +0, NaN stays NaN.
  const float x[5] = {-3.5f, 2.f, -0.f, -1e-3f, nan};
  std::memcpy(m.s(0, 0), x, sizeof x);
  Instruction ts = make(Opcode::TensorScalar, Engine::DVE,
                        {sbuf(0, 1, 64, DType::F32, {{1, 5}}), sbuf(0, 1, 0, DType::F32, {{1, 5}})});
  ts.alu0 = AluOp::Abs;
  ts.imm0 = 7.f;
  m.run(ts);
  CHECK(get<uint32_t>(m.s(0, 64)) == 0x40600000u);  // 3.5
  CHECK(get<uint32_t>(m.s(0, 68)) == 0x40000000u);  // 2
  CHECK(get<uint32_t>(m.s(0, 72)) == 0x00000000u);  // +0
  CHECK(get<float>(m.s(0, 76)) == 1e-3f);
  CHECK(std::isnan(get<float>(m.s(0, 80))));
  ts.alu1 = AluOp::Max;
  ts.imm1 = 2.5f;
  m.run(ts);
  CHECK(get<float>(m.s(0, 68)) == 2.5f);
  CHECK(get<float>(m.s(0, 72)) == 2.5f);
  // reverse0 takes the operand: |operand0 = -7| for every element.
  ts.alu1 = AluOp::Bypass;
  ts.imm0 = -7.f;
  ts.flags = kReverse0;
  m.run(ts);
  for (int j = 0; j < 5; ++j) CHECK(get<float>(m.s(0, 64 + 4 * j)) == 7.f);
  // tensor_scalar_reduce(op0=abs, reduce_op=max): the NKI library's per-row absmax; BF16 data -> BF16 dst.
  put(m.s(0, 256), bf16_exact(-6.f));
  put(m.s(0, 258), bf16_exact(5.f));
  put(m.s(0, 260), bf16_exact(-0.5f));
  Instruction tsr = make(Opcode::TensorScalarReduce, Engine::DVE,
                         {sbuf(0, 1, 320, DType::BF16, {{1, 3}}),
                          sbuf(0, 1, 256, DType::BF16, {{1, 3}}),
                          {},
                          sbuf(0, 1, 384, DType::F32, {{1, 1}})});
  tsr.alu0 = AluOp::Abs;
  tsr.alu1 = AluOp::Max;
  m.run(tsr);
  CHECK(get<float>(m.s(0, 384)) == 6.f);
  CHECK(get<uint16_t>(m.s(0, 320)) == bf16_exact(6.f));
  CHECK(get<uint16_t>(m.s(0, 324)) == bf16_exact(0.5f));
  // The integer forms: |INT32_MIN| wraps to itself (alu_i32), the exact form is 2^31.
  CHECK(alu_i32(AluOp::Abs, -5, 99) == 5);
  CHECK(alu_i32(AluOp::Abs, INT32_MIN, 0) == INT32_MIN);
  CHECK(alu_int_exact(AluOp::Abs, INT32_MIN, 0) == 2147483648LL);
}

TEST_CASE("tensor_tensor_scan: NKI's recurrence per partition, FP32 state", "[isa]") {
  Machine m;
  // data0 = decay, data1 = input: r = data0[i] * r + data1[i] from initial (partition 0: the immediate 1;
  // partition 1 too). Partition 0: d0 = {0.5, 2, -1, 0.25}, d1 = {1, 3, 0.5, -2}:
  // r = 0.5 * 1 + 1 = 1.5; 2 * 1.5 + 3 = 6; -1 * 6 + 0.5 = -5.5; 0.25 * -5.5 - 2 = -3.375.
  const float d0[4] = {0.5f, 2.f, -1.f, 0.25f}, d1[4] = {1.f, 3.f, 0.5f, -2.f};
  std::memcpy(m.s(0, 0), d0, sizeof d0);
  std::memcpy(m.s(0, 32), d1, sizeof d1);
  // Partition 1: a cumulative sum, d0 = ones: {1, 2, 3, 4} from 1 -> 2, 4, 7, 11.
  const float ones[4] = {1.f, 1.f, 1.f, 1.f}, c[4] = {1.f, 2.f, 3.f, 4.f};
  std::memcpy(m.s(1, 0), ones, sizeof ones);
  std::memcpy(m.s(1, 32), c, sizeof c);
  Instruction in = make(Opcode::TensorTensorScan, Engine::DVE,
                        {sbuf(0, 2, 64, DType::F32, {{1, 4}}),
                         sbuf(0, 2, 0, DType::F32, {{1, 4}}),
                         sbuf(0, 2, 32, DType::F32, {{1, 4}}),
                         {}});
  in.alu0 = AluOp::Multiply;
  in.alu1 = AluOp::Add;
  in.imm0 = 1.f;
  m.run(in);
  const float want0[4] = {1.5f, 6.f, -5.5f, -3.375f}, want1[4] = {2.f, 4.f, 7.f, 11.f};
  for (int j = 0; j < 4; ++j) {
    CHECK(get<float>(m.s(0, 64 + 4 * j)) == want0[j]);
    CHECK(get<float>(m.s(1, 64 + 4 * j)) == want1[j]);
  }
  // initial from a [P, 1] vector (partition 0: 0, partition 1: -10) and reverse1 with subtract: r = data1[i]
  // - (data0[i] * r). Partition 1: 1 - (1 * -10) = 11; 2 - 11 = -9; 3 + 9 = 12; 4 - 12 = -8.
  put(m.s(0, 48), 0.f);
  put(m.s(1, 48), -10.f);
  in.ops[3] = sbuf(0, 2, 48, DType::F32, {{1, 1}});
  in.flags = kOperand0Vector | kReverse1;
  in.alu1 = AluOp::Subtract;
  m.run(in);
  const float want1r[4] = {11.f, -9.f, 12.f, -8.f};
  for (int j = 0; j < 4; ++j) CHECK(get<float>(m.s(1, 64 + 4 * j)) == want1r[j]);
  // reverse0 with subtract: r = r - data0[i] (partition 1 from -10, d0 ones, op1 add d1): -10 - 1 + 1 = -10,
  // -10 - 1 + 2 = -9, -9 - 1 + 3 = -7, -7 - 1 + 4 = -4.
  in.flags = kOperand0Vector | kReverse0;
  in.alu0 = AluOp::Subtract;
  in.alu1 = AluOp::Add;
  m.run(in);
  const float want1s[4] = {-10.f, -9.f, -7.f, -4.f};
  for (int j = 0; j < 4; ++j) CHECK(get<float>(m.s(1, 64 + 4 * j)) == want1s[j]);
  // A BF16 dst: the state stays FP32. A cumulative sum of {1, 2^-8, 2^-8} from 0: FP32 states 1, 1 + 2^-8,
  // 1 + 2^-7, stored as BF16 1 (0x3F80), 1 (the tie rounds to even), 1.0078125 (0x3F81). A state rounded to
  // BF16 each step would stay 1 (1 + 2^-8 rounds to 1 every time).
  const float inc[3] = {1.f, 1.f / 256.f, 1.f / 256.f};
  std::memcpy(m.s(0, 32), inc, sizeof inc);
  std::memcpy(m.s(0, 0), ones, 3 * sizeof(float));
  Instruction sum = make(Opcode::TensorTensorScan, Engine::DVE,
                         {sbuf(0, 1, 96, DType::BF16, {{1, 3}}), sbuf(0, 1, 0, DType::F32, {{1, 3}}),
                          sbuf(0, 1, 32, DType::F32, {{1, 3}})});
  sum.alu0 = AluOp::Multiply;
  sum.alu1 = AluOp::Add;
  m.run(sum);
  CHECK(get<uint16_t>(m.s(0, 96)) == 0x3F80);
  CHECK(get<uint16_t>(m.s(0, 98)) == 0x3F80);
  CHECK(get<uint16_t>(m.s(0, 100)) == 0x3F81);
}

TEST_CASE("tensor_partition_reduce: across partitions in order, FP32 or bit patterns", "[isa]") {
  Machine m;
  // data [3, 2]: add -> {1 + 2^24 + ... } in partition order: (2^24 + 1) + 1 = 2^24 in FP32 (ties to even
  // twice), where 1 + 1 + 2^24 would be 2^24 + 2.
  const float p[3][2] = {{16777216.f, -1.f}, {1.f, 4.f}, {1.f, 2.5f}};
  for (uint32_t i = 0; i < 3; ++i) std::memcpy(m.s(i, 0), p[i], sizeof p[i]);
  Instruction in = make(Opcode::TensorPartitionReduce, Engine::POOL,
                        {sbuf(0, 1, 64, DType::F32, {{1, 2}}), sbuf(0, 3, 0, DType::F32, {{1, 2}})});
  in.alu0 = AluOp::Add;
  m.run(in);
  CHECK(get<float>(m.s(0, 64)) == 16777216.f);
  CHECK(get<float>(m.s(0, 68)) == 5.5f);
  in.alu0 = AluOp::Max;
  m.run(in);
  CHECK(get<float>(m.s(0, 64)) == 16777216.f);
  CHECK(get<float>(m.s(0, 68)) == 4.f);
  // bitwise_or / xor on uint32 patterns.
  const uint32_t u[3] = {0x80000001u, 0x00F0000Fu, 0x00000003u};
  for (uint32_t i = 0; i < 3; ++i) put(m.s(i, 128), u[i]);
  Instruction bits = make(Opcode::TensorPartitionReduce, Engine::POOL,
                          {sbuf(0, 1, 192, DType::U32, {{1, 1}}), sbuf(0, 3, 128, DType::U32, {{1, 1}})});
  bits.alu0 = AluOp::BitwiseOr;
  m.run(bits);
  CHECK(get<uint32_t>(m.s(0, 192)) == 0x80F0000Fu);
  bits.alu0 = AluOp::BitwiseXor;
  m.run(bits);
  CHECK(get<uint32_t>(m.s(0, 192)) == 0x80F0000Du);
}

TEST_CASE("nc_n_gather: a gather within each partition over data's flattened free elements", "[isa]") {
  Machine m;
  // data [2, 2, 3] BF16 (6 per partition, row-major), indices [2, 4] uint32; dst holds the BF16 bytes as
  // they are: partition 0 gathers 5, 0, 0, 3; partition 1 gathers 1, 2, 5, 4.
  for (uint32_t p = 0; p < 2; ++p)
    for (int j = 0; j < 6; ++j) put(m.s(p, 2 * j), static_cast<uint16_t>(0x3F80 + 16 * p + j));
  const uint32_t ix[2][4] = {{5, 0, 0, 3}, {1, 2, 5, 4}};
  for (uint32_t p = 0; p < 2; ++p) std::memcpy(m.s(p, 64), ix[p], sizeof ix[p]);
  Instruction in = make(Opcode::NcNGather, Engine::POOL,
                        {sbuf(0, 2, 128, DType::BF16, {{1, 4}}), sbuf(0, 2, 0, DType::BF16, {{3, 2}, {1, 3}}),
                         sbuf(0, 2, 64, DType::U32, {{1, 4}})});
  m.run(in);
  for (uint32_t p = 0; p < 2; ++p)
    for (int j = 0; j < 4; ++j)
      CHECK(get<uint16_t>(m.s(p, 128 + 2 * j)) == static_cast<uint16_t>(0x3F80 + 16 * p + ix[p][j]));
  // An index past data's 6 elements is an error naming it.
  put(m.s(1, 64 + 8), 6u);
  CHECK_THROWS_MATCHES(
      m.run(in), RuleError,
      Catch::Message("nc_n_gather on POOL: index: indices[1, 2] = 6 is outside data's 6 elements "
                     "per partition"));
}
