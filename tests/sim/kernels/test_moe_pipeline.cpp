// MXFP8 pipeline features the MoE kernels use, on the SystemC model (Trn3), each bit-exact against the host
// emulation (mx_exact): one expert of a stacked weight picked on device by a scalar_offset (every operand
// form the loaders have), a paired stationary operand (gate and up sharing the quantized tokens), and
// moving tiles wider than one PSUM bank.
#include <catch2/catch.hpp>

#include "sim/base/error.h"
#include "tests/sim/kernels/test_mxfp8_pipeline_util.h"

using namespace trnsim;
using namespace trnsim::test;

namespace {

constexpr auto kE4 = num::Fp8Format::E4M3FN;
constexpr auto kWrapX = num::QuantScheme::WrapX;

// The expert id as an SBUF int32 [1, 1], from an HBM input "expert" [1, 1].
View expert_register(Kernel& k) {
  View id = k.sbuf({1, 1}, isa::DType::I32, "expert");
  kernels::nki::dma_copy(id, k.input("expert", isa::DType::I32, {1, 1}));
  return id;
}

// Rows [e F, (e + 1) F) of a stacked [E F, K] BF16 matrix.
std::vector<uint16_t> expert_rows(const std::vector<uint16_t>& w, int64_t e, int64_t F, int64_t K) {
  return {w.begin() + e * F * K, w.begin() + (e + 1) * F * K};
}

}  // namespace

TEST_CASE("moe pipeline: a scalar_offset picks one expert of a stacked weight in every operand form") {
  // Y = X W_e^T with W stacked [E, N, K]; the operand views are expert 0's, the offset register holds e.
  const int64_t E = 3, M = 256, K = 640, N = 512, e = 2;
  const auto x = random_bf16(M, K, 21), w = random_bf16(E * N, K, 22);
  const auto we = expert_rows(w, e, N, K);
  const auto ref = mx_exact({&x, K, M, false}, {&we, K, N, false}, kE4, kWrapX);
  struct Case {
    const char* what;
    mx::Layout layout;
    mx::Swizzle swizzle;
  };
  for (const Case& c : {Case{"F-by-K, DGT", mx::Layout::FByK, mx::Swizzle::Dgt},
                        Case{"F-by-K, PE loader", mx::Layout::FByK, mx::Swizzle::Pe},
                        Case{"K-by-F", mx::Layout::KByF, mx::Swizzle::Dgt},
                        Case{"pre-swizzled", mx::Layout::Swizzled, mx::Swizzle::Dgt},
                        Case{"pre-quantized", mx::Layout::Quantized, mx::Swizzle::Dgt}}) {
    INFO(c.what);
    // The stacked tensor in the form's layout, expert by expert.
    Bytes wb, sb;
    std::vector<int64_t> shape, sshape;
    for (int64_t i = 0; i < E; ++i) {
      const auto wi = expert_rows(w, i, N, K);
      const Logical li{&wi, K, N, false};
      Bytes d, s;
      if (c.layout == mx::Layout::FByK) {
        d = as_bytes(wi), shape = {E, N, K};
      } else if (c.layout == mx::Layout::KByF) {
        d = as_bytes(transposed(wi, N, K)), shape = {E, K, N};
      } else if (c.layout == mx::Layout::Swizzled) {
        d = as_bytes(swizzled(li, kWrapX)), shape = {E, K / 4, 4 * N};
      } else {
        std::tie(d, s) = prequantized(li, kWrapX, kE4, false);
        shape = {E, K / 4, N}, sshape = {E, K / 4, N};
      }
      wb.insert(wb.end(), d.begin(), d.end());
      sb.insert(sb.end(), s.begin(), s.end());
    }
    mx::Operand rhs = operand(mx::Source::Hbm, c.layout, "w", c.swizzle);
    if (c.layout == mx::Layout::Quantized) rhs.scales_shape = {K / 4, N}, rhs.scales_name = "w_scales";
    mx::MatmulSpec spec = pipeline_spec(M, K, N, operand(mx::Source::Hbm, mx::Layout::FByK, "x"), rhs);
    const auto plan = mx::plan_matmul(spec, trn3().limits());
    std::map<std::string, Bytes> in{
        {"x", as_bytes(x)}, {"w", wb}, {"expert", i32_bytes({static_cast<int32_t>(e)})}};
    if (!sb.empty()) in["w_scales"] = sb;
    const auto r = run_fn(
        [&](Kernel& k) {
          mx::MatmulSpec s = spec;
          s.lhs.data = k.input("x", isa::DType::BF16, {M, K});
          const isa::DType dt =
              c.layout == mx::Layout::Quantized ? isa::DType::FP8_E4M3FN_X4 : isa::DType::BF16;
          View stacked = k.input("w", dt, shape);
          s.rhs.data = stacked(0).reshape({shape[1], shape[2]});
          if (!sshape.empty())
            s.rhs.scales = k.input("w_scales", isa::DType::E8M0, sshape)(0).reshape({sshape[1], sshape[2]});
          s.rhs.scalar_offset = expert_register(k);
          mx::StoreRows out(k.output("y", isa::DType::F32, {M, N}));
          mx::emit_matmul(k, s, plan, out);
        },
        in);
    CHECK(same(f32_of(r.tensors.at("y")), ref));
  }
}

TEST_CASE("moe pipeline: an expert id outside the stacked weight stops the run with the tensor's name") {
  const int64_t E = 2, M = 128, K = 512, N = 256;
  mx::MatmulSpec spec = pipeline_spec(M, K, N, operand(mx::Source::Hbm, mx::Layout::FByK, "x"),
                                      operand(mx::Source::Hbm, mx::Layout::FByK, "w"));
  const auto plan = mx::plan_matmul(spec, trn3().limits());
  CHECK_THROWS_WITH(
      run_fn(
          [&](Kernel& k) {
            mx::MatmulSpec s = spec;
            s.lhs.data = k.input("x", isa::DType::BF16, {M, K});
            s.rhs.data = k.input("w", isa::DType::BF16, {E, N, K})(0).reshape({N, K});
            s.rhs.scalar_offset = expert_register(k);
            mx::StoreRows out(k.output("y", isa::DType::F32, {M, N}));
            mx::emit_matmul(k, s, plan, out);
          },
          {{"x", as_bytes(random_bf16(M, K, 1))},
           {"w", as_bytes(random_bf16(E * N, K, 2))},
           {"expert", i32_bytes({2})}}),
      Catch::Contains("scalar_offset = 2 moves src by 2 rows of 262144 bytes, outside tensor 'w' "
                      "[2 rows]"));
}

TEST_CASE("moe pipeline: a paired stationary gives both products from one pass over the moving operand") {
  // Gate and up of one expert, transposed: G^T = W_g X^T [I, B] and U^T = W_u X^T, W stacked [2, I, H].
  const int64_t I = 384, B = 512, H = 1024;
  const auto w = random_bf16(2 * I, H, 31), x = random_bf16(B, H, 32);
  const auto wg = expert_rows(w, 0, I, H), wu = expert_rows(w, 1, I, H);
  for (const int64_t tile_n : {int64_t{512}, int64_t{256}}) {
    INFO("tile_n " << tile_n);
    mx::MatmulSpec spec = pipeline_spec(I, H, B, operand(mx::Source::Hbm, mx::Layout::FByK, "gate"),
                                        operand(mx::Source::Hbm, mx::Layout::FByK, "x"));
    spec.lhs2 = operand(mx::Source::Hbm, mx::Layout::FByK, "up");
    spec.tiling.tile_n = tile_n;
    const auto plan = mx::plan_matmul(spec, trn3().limits());
    int tiles = 0;
    const auto r = run_fn(
        [&](Kernel& k) {
          mx::MatmulSpec s = spec;
          View wv = k.input("w", isa::DType::BF16, {2, I, H});
          s.lhs.data = wv(0).reshape({I, H});
          s.lhs2->data = wv(1).reshape({I, H});
          s.rhs.data = k.input("x", isa::DType::BF16, {B, H});
          View g = k.output("g", isa::DType::F32, {I, B}), u = k.output("u", isa::DType::F32, {I, B});
          mx::ToSbuf both([&](const mx::OutTile& t) {
            ++tiles;
            REQUIRE(t.tile2.valid());
            const int64_t n = t.tile.partitions(), c = t.tile.free_elements();
            kernels::nki::dma_copy(g(S(t.row, t.row + n), S(t.col, t.col + c)), t.tile);
            kernels::nki::dma_copy(u(S(t.row, t.row + n), S(t.col, t.col + c)), t.tile2);
          });
          mx::emit_matmul(k, s, plan, both);
        },
        {{"w", as_bytes(w)}, {"x", as_bytes(x)}});
    CHECK(tiles == static_cast<int>(I / 128 * (B / (plan.block_n * plan.tile_n))));
    CHECK(same(f32_of(r.tensors.at("g")), mx_exact({&wg, H, I, false}, {&x, H, B, false}, kE4, kWrapX)));
    CHECK(same(f32_of(r.tensors.at("u")), mx_exact({&wu, H, I, false}, {&x, H, B, false}, kE4, kWrapX)));
  }
}

TEST_CASE("moe pipeline: moving tiles of 1024 to 4096 columns span PSUM banks") {
  const int64_t M = 256, K = 1024, N = 4096;
  const auto x = random_bf16(M, K, 41), w = random_bf16(N, K, 42);
  const auto ref = mx_exact({&x, K, M, false}, {&w, K, N, false}, kE4, kWrapX);
  for (const int64_t tile_n : {int64_t{1024}, int64_t{2048}, int64_t{4096}}) {
    INFO("tile_n " << tile_n);
    mx::MatmulSpec spec = pipeline_spec(M, K, N, operand(mx::Source::Hbm, mx::Layout::FByK, "x"),
                                        operand(mx::Source::Hbm, mx::Layout::FByK, "w"));
    spec.tiling.tile_n = tile_n;
    const auto plan = mx::plan_matmul(spec, trn3().limits());
    const auto r = run_fn(
        [&](Kernel& k) {
          mx::MatmulSpec s = spec;
          s.lhs.data = k.input("x", isa::DType::BF16, {M, K});
          s.rhs.data = k.input("w", isa::DType::BF16, {N, K});
          mx::StoreRows out(k.output("y", isa::DType::F32, {M, N}));
          mx::emit_matmul(k, s, plan, out);
        },
        {{"x", as_bytes(x)}, {"w", as_bytes(w)}});
    CHECK(same(f32_of(r.tensors.at("y")), ref));
    // One nc_matmul_mx per (M tile, N tile, K tile).
    int64_t mms = 0;
    for (const auto& in : r.program.streams[0][static_cast<int>(isa::Engine::PE)])
      mms += in.op == isa::Opcode::NcMatmulMx;
    CHECK(mms == (M / 128) * (N / tile_n) * (K / 512));
  }
  mx::MatmulSpec spec = pipeline_spec(M, K, N, operand(mx::Source::Hbm, mx::Layout::FByK, "x"),
                                      operand(mx::Source::Hbm, mx::Layout::FByK, "w"));
  spec.tiling.tile_n = 4128;
  CHECK_THROWS_WITH(
      mx::plan_matmul(spec, trn3().limits()),
      "pipeline test: tile_n = 4128 must be a multiple of 32 and at most 4096 (FP32 PSUM: 8 banks "
      "of 512; a tile above 512 spans several banks)");
}
