// The MXFP8 pipeline's epilogues on the SystemC model (Trn3): scatter by row index, read-modify-write and
// DMA-side accumulation (plain and indexed, -1 padding skipped), transpose-then-accumulate into one expert's
// slice of a stacked weight gradient. Every result is checked bit for bit against the host: the bit-exact
// matmul (mx_exact) and the epilogue's own rounding (cast, then an FP32 add rounded to the destination).
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>

#include "sim/base/error.h"
#include "tests/sim/kernels/test_mxfp8_pipeline_util.h"

using namespace trnsim;
using namespace trnsim::test;

namespace {

constexpr auto kE4 = num::Fp8Format::E4M3FN;

float bf(uint16_t b) {
  return num::bf16_to_f32(b);
}

// Y = X W^T [M, N] and its bit-exact host value.
struct Problem {
  int64_t M, K, N;
  std::vector<uint16_t> x, w;
  std::vector<float> y;
  Problem(int64_t m, int64_t k, int64_t n, uint32_t seed)
      : M(m), K(k), N(n), x(random_bf16(m, k, seed)), w(random_bf16(n, k, seed + 1)) {
    y = mx_exact({&x, K, M, false}, {&w, K, N, false}, kE4, num::QuantScheme::WrapX);
  }
  mx::MatmulSpec spec() const {
    return pipeline_spec(M, K, N, operand(mx::Source::Hbm, mx::Layout::FByK, "x"),
                         operand(mx::Source::Hbm, mx::Layout::FByK, "w"));
  }
  // Builds and runs the matmul with the epilogue `make` returns (given the kernel context).
  ProgramRun run(const std::function<std::unique_ptr<mx::Epilogue>(Kernel&)>& make,
                 std::map<std::string, Bytes> init,
                 int64_t reserved = mx::TransposeAccumulate::kSbufBytes) const {
    mx::MatmulSpec s = spec();
    s.reserved_sbuf_bytes = reserved;
    const auto plan = mx::plan_matmul(s, trn3().limits());
    init["x"] = as_bytes(x), init["w"] = as_bytes(w);
    return run_fn(
        [&](Kernel& k) {
          mx::MatmulSpec b = s;
          b.lhs.data = k.input("x", isa::DType::BF16, {M, K});
          b.rhs.data = k.input("w", isa::DType::BF16, {N, K});
          auto epi = make(k);
          mx::emit_matmul(k, b, plan, *epi);
        },
        init);
  }
};

// A BF16 [rows, cols] pattern with values that are not small relative to Y.
std::vector<uint16_t> pattern(int64_t rows, int64_t cols, uint32_t seed) {
  return random_bf16(rows, cols, seed);
}

std::vector<int32_t> tokens(int64_t B, int64_t T) {
  std::vector<int32_t> t(B);
  for (int64_t i = 0; i < B; ++i) t[i] = i % 6 == 5 ? -1 : static_cast<int32_t>((11 * i + 3) % T);
  return t;
}

}  // namespace

TEST_CASE("mxfp8 epilogues: scatter rows by index with a cast, -1 rows dropped") {
  const Problem p(256, 512, 384, 21);
  const int64_t T = 400, C = 512, col0 = 64;
  const auto tok = tokens(p.M, T);
  const auto old = pattern(T, C, 23);
  const auto r = p.run(
      [&](Kernel& k) -> std::unique_ptr<mx::Epilogue> {
        const View idx = load_row_index(k, k.input("tokens", isa::DType::I32, {p.M}));
        return std::make_unique<mx::ScatterRows>(k.output("out", isa::DType::BF16, {T, C}),
                                                 mx::RowIndex{idx, mx::Padding::Skip}, col0);
      },
      {{"tokens", i32_bytes(tok)}, {"out", as_bytes(old)}});
  auto want = old;
  for (int64_t i = 0; i < p.M; ++i)
    if (tok[i] >= 0)
      for (int64_t n = 0; n < p.N; ++n) want[tok[i] * C + col0 + n] = bf16_bits(p.y[i * p.N + n]);
  CHECK(u16_of(r.tensors.at("out")) == want);
}

TEST_CASE("mxfp8 epilogues: accumulate into HBM rows, read-modify-write and DMA-side, plain and by index") {
  const Problem p(256, 512, 640, 31);  // N = 640: two read-modify-write chunks of at most 512 columns
  const int64_t T = 300;
  const auto tok = tokens(p.M, T);
  for (auto mode : {mx::AccumulateMode::ReadModifyWrite, mx::AccumulateMode::DmaAccumulate})
    for (bool indexed : {false, true})
      for (auto dt : {isa::DType::BF16, isa::DType::F32}) {
        const bool rmw = mode == mx::AccumulateMode::ReadModifyWrite, b16 = dt == isa::DType::BF16;
        INFO("rmw " << rmw << " indexed " << indexed << " bf16 " << b16);
        const int64_t R = indexed ? T : p.M;
        const auto old16 = pattern(R, p.N, 33);
        std::vector<float> old32(old16.size());
        for (size_t i = 0; i < old16.size(); ++i) old32[i] = bf(old16[i]) * 0.75f;
        const auto r = p.run(
            [&](Kernel& k) -> std::unique_ptr<mx::Epilogue> {
              View dst = k.output("out", dt, {R, p.N});
              std::optional<mx::RowIndex> rows;
              if (indexed)
                rows = mx::RowIndex{load_row_index(k, k.input("tokens", isa::DType::I32, {p.M})),
                                    mx::Padding::Skip};
              return std::make_unique<mx::AccumulateRows>(dst, rows, 0, mode);
            },
            {{"tokens", i32_bytes(tok)}, {"out", b16 ? as_bytes(old16) : f32_bytes(old32)}});
        // Expected: Y row i lands in row (indexed ? tok[i] : i).
        std::vector<float> want32 = old32;
        auto want16 = old16;
        for (int64_t i = 0; i < p.M; ++i) {
          const int64_t row = indexed ? tok[i] : i;
          if (row < 0) continue;
          for (int64_t n = 0; n < p.N; ++n) {
            const float y = p.y[i * p.N + n];
            if (b16) {  // RMW: cast to BF16 first, then the FP32 sum rounded; DMA: the FP32 sum rounded once
              const float a = rmw ? bf(bf16_bits(y)) : y;
              want16[row * p.N + n] = bf16_bits(bf(old16[row * p.N + n]) + a);
            } else {
              want32[row * p.N + n] = old32[row * p.N + n] + y;
            }
          }
        }
        if (b16)
          CHECK(u16_of(r.tensors.at("out")) == want16);
        else
          CHECK(f32_of(r.tensors.at("out")) == want32);
      }
}

TEST_CASE("mxfp8 epilogues: transpose then accumulate into one expert's slice of [E, H, 2, I]") {
  // Phase-3 shape: Y [I, H] accumulated as Y^T into gate_up_grad[e, :, slot, :] ([E*H, 2*I] rows).
  const int64_t E = 3, I = 256, H = 384, e = 1;
  const Problem p(I, 512, H, 41);
  const auto old = pattern(E * H, 2 * I, 43);
  const std::vector<int32_t> expert(128, static_cast<int32_t>(e));
  for (int slot : {0, 1})
    for (bool dynamic : {false, true}) {
      INFO("slot " << slot << " device-side expert " << dynamic);
      const auto r = p.run(
          [&](Kernel& k) -> std::unique_ptr<mx::Epilogue> {
            View g = k.output("grad", isa::DType::BF16, {E * H, 2 * I});
            if (!dynamic)
              return std::make_unique<mx::TransposeAccumulate>(
                  g(S(e * H, e * H + H), S(slot * I, slot * I + I)));
            View id = k.sbuf({128, 1}, isa::DType::I32, "expert");
            kernels::nki::dma_copy(id, k.input("expert", isa::DType::I32, {128, 1}));
            return std::make_unique<mx::TransposeAccumulate>(
                g, mx::RowIndex{mx::expert_row_index(k, id, H, 0, H), mx::Padding::ZeroRow}, slot * I);
          },
          {{"grad", as_bytes(old)}, {"expert", i32_bytes(expert)}});
      auto want = old;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < I; ++i) {
          const int64_t at = (e * H + h) * 2 * I + slot * I + i;
          want[at] = bf16_bits(bf(old[at]) + bf(bf16_bits(p.y[i * H + h])));
        }
      CHECK(u16_of(r.tensors.at("grad")) == want);
    }
}

TEST_CASE("mxfp8 epilogues: ToSbuf hands over every finished row tile once, in global coordinates") {
  // LNC2 sharding N: each core reports its half; together the tiles cover Y exactly once.
  const Problem p(384, 512, 512, 51);
  mx::MatmulSpec s = p.spec();
  s.run_with_lnc2 = true;
  s.tiling.tile_n = 128;
  const auto plan = mx::plan_matmul(s, trn3().limits());
  REQUIRE(plan.lnc2);
  std::vector<int> covered(p.M * p.N, 0);
  const auto r = run_fn(
      [&](Kernel& k) {
        mx::MatmulSpec b = s;
        b.lhs.data = k.input("x", isa::DType::BF16, {p.M, p.K});
        b.rhs.data = k.input("w", isa::DType::BF16, {p.N, p.K});
        View y = k.output("y", isa::DType::F32, {p.M, p.N});
        mx::ToSbuf cb([&](const mx::OutTile& t) {
          const int64_t n = t.tile.partitions(), c = t.tile.free_elements();
          for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < c; ++j) ++covered[(t.row + i) * p.N + t.col + j];
          kernels::nki::dma_copy(y(S(t.row, t.row + n), S(t.col, t.col + c)), t.tile);
        });
        mx::emit_matmul(k, b, plan, cb);
      },
      {{"x", as_bytes(p.x)}, {"w", as_bytes(p.w)}}, 2);
  CHECK(std::all_of(covered.begin(), covered.end(), [](int c) { return c == 1; }));
  CHECK(same(f32_of(r.tensors.at("y")), p.y));
}
