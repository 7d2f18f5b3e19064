// Calibration ports (kernels/calibration) on reduced shapes: numerics against a host computation (for every
// variant, buffer count and DMA placement the workloads use), and the timing structure the ports give
// (configs/hw/trn2.json, tools/fidelity).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/api/registry.h"
#include "sim/base/error.h"
#include "sim/config/hw_config.h"
#include "sim/isa/semantics.h"
#include "sim/model/run.h"
#include "sim/numerics/float_formats.h"
#include "tests/support/kernel_run.h"

using namespace trnsim;
using nlohmann::json;

namespace {

const config::HwConfig& trn2() {
  static const config::HwConfig hw = config::load_hw_config("trn2");
  return hw;
}

// Values of one input tensor (rounded to its dtype) and their HBM bytes.
struct Tensor {
  std::vector<float> values;
  std::vector<uint8_t> bytes;
};

Tensor random_tensor(size_t n, isa::DType t, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  Tensor r;
  r.values.resize(n);
  if (t == isa::DType::BF16) {
    r.bytes.resize(2 * n);
    for (size_t i = 0; i < n; ++i) {
      const uint16_t b = num::f32_to_bf16(d(gen));
      r.values[i] = num::bf16_to_f32(b);
      std::memcpy(&r.bytes[2 * i], &b, 2);
    }
  } else {
    for (auto& v : r.values) v = d(gen);
    r.bytes.resize(4 * n);
    std::memcpy(r.bytes.data(), r.values.data(), r.bytes.size());
  }
  return r;
}

struct Run {
  std::map<std::string, std::vector<float>> out;
  model::RunStats stats;
};

// Builds `kernel` on one core of trn2, runs it with numerics and returns its outputs as FP32 values.
Run run_named(const std::string& kernel, const json& params, const std::map<std::string, Tensor>& inputs) {
  std::map<std::string, test::Bytes> bytes;
  for (const auto& [name, t] : inputs) bytes[name] = t.bytes;
  const test::KernelRun kr = test::run_kernel(kernel, params, bytes, trn2(), 1);
  Run r;
  r.stats = kr.stats;
  for (const auto& [name, t] : kr.outputs) r.out[name] = t.values();
  return r;
}

// ||y - g|| / ||g||.
double rel_l2(const std::vector<float>& y, const std::vector<double>& g) {
  REQUIRE(y.size() == g.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < y.size(); ++i) num += (y[i] - g[i]) * (y[i] - g[i]), den += g[i] * g[i];
  return std::sqrt(num / den);
}

// result[M, N] = L^T R for L [K, M] (lhs_t) or L [M, K], R [K, N], in double.
std::vector<double> host_matmul(const std::vector<float>& L, const std::vector<float>& R, int64_t M,
                                int64_t N, int64_t K, bool lhs_t) {
  std::vector<double> y(M * N, 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      const double a = lhs_t ? L[k * M + m] : L[m * K + k];
      for (int64_t n = 0; n < N; ++n) y[m * N + n] += a * R[k * N + n];
    }
  return y;
}

// Runs a matmul calibration kernel on random inputs and checks it against the FP64 host product.
void check_matmul(const std::string& kernel, json p, isa::DType t, double bound, const char* lhs = "lhsT") {
  const int64_t M = p["M"], N = p["N"], K = p["K"];
  const bool lhs_t = std::string(lhs) == "lhsT";
  std::map<std::string, Tensor> in{{lhs, random_tensor(M * K, t, 1)}, {"rhs", random_tensor(K * N, t, 2)}};
  const Run r = run_named(kernel, p, in);
  const auto g = host_matmul(in.at(lhs).values, in.at("rhs").values, M, N, K, lhs_t);
  INFO(kernel << " " << p.dump());
  CHECK(rel_l2(r.out.at("result"), g) <= bound);
}

constexpr double kF32Bound = 1e-5;        // FP32 accumulation order only
constexpr double kBf16Bound = 1.0 / 256;  // BF16 output rounding (2^-9 per element) plus accumulation order

}  // namespace

TEST_CASE("nki_tutorial_matmul FP32: every variant matches the host product", "[calibration]") {
  // bufs 1 is what the FP32 workloads use (their tiles fill SBUF); bufs 2 the default.
  for (int bufs : {1, 2}) {
    const json base = {{"dtype", "float32"}, {"bufs", bufs}};
    for (const char* v : {"tiled", "hoisted"}) {
      json p = base;
      p.update({{"variant", v}, {"M", 256}, {"N", 1024}, {"K", 512}});
      check_matmul("nki_tutorial_matmul", p, isa::DType::F32, kF32Bound);
    }
    json p = base;
    p.update({{"variant", "free_dim_blocked"},
              {"M", 512},
              {"N", 2048},
              {"K", 256},
              {"block_m", 2},
              {"block_n", 2}});
    check_matmul("nki_tutorial_matmul", p, isa::DType::F32, kF32Bound);
    p = base;
    p.update({{"variant", "fully_optimized"},
              {"M", 512},
              {"N", 2048},
              {"K", 512},
              {"block_m", 2},
              {"block_n", 2},
              {"block_k", 2}});
    check_matmul("nki_tutorial_matmul", p, isa::DType::F32, kF32Bound);
  }
}

TEST_CASE("nki_tutorial_matmul BF16 fully_optimized (4, 1, 8) matches the host product", "[calibration]") {
  // BF16 partial sums in SBUF (one rounding per K block), FP32 result.
  check_matmul("nki_tutorial_matmul",
               {{"dtype", "bfloat16"},
                {"variant", "fully_optimized"},
                {"M", 1024},
                {"N", 1024},
                {"K", 2048},
                {"block_m", 4},
                {"block_n", 1},
                {"block_k", 8}},
               isa::DType::BF16, kBf16Bound);
}

TEST_CASE("matmul_lhsT_blocked: every PSUM bank count and store placement match the host product",
          "[calibration]") {
  // 2 N blocks, 2 K blocks of 4 k-tiles, 2 M blocks of 4 m-tiles: lhsT, rhs and output sets all reused.
  const json p = {{"M", 1024},      {"N", 1024},      {"K", 1024},
                  {"block_m", 512}, {"block_n", 512}, {"block_k", 512}};
  check_matmul("matmul_lhsT_blocked", p, isa::DType::BF16, kBf16Bound);
  json q = p;
  q.update(
      {{"psum_bufs", 1}, {"store_engine", "scalar"}, {"copy_engine", "vector"}, {"memset_engine", "vector"}});
  check_matmul("matmul_lhsT_blocked", q, isa::DType::BF16, kBf16Bound);
  q = p;
  q["psum_bufs"] = 2;
  check_matmul("matmul_lhsT_blocked", q, isa::DType::BF16, kBf16Bound);
}

TEST_CASE("matmul_lhs_dma_transpose matches the host product", "[calibration]") {
  // 2 M blocks, 2 N tiles, 2 K blocks of 2 k-tiles: every lhsT set transposed twice, rhs sets rotating.
  const json p = {{"M", 2048}, {"N", 1024}, {"K", 512}, {"m_tiles", 8}, {"k_tiles", 2}};
  check_matmul("matmul_lhs_dma_transpose", p, isa::DType::BF16, kBf16Bound, "lhs");
  json q = p;
  q.update({{"store_engine", "gpsimd"}, {"rhs_sets", 1}, {"psum_bufs", 1}});
  check_matmul("matmul_lhs_dma_transpose", q, isa::DType::BF16, kBf16Bound, "lhs");
}

TEST_CASE("metagemm: every loop order, load position and layout matches the host product", "[calibration]") {
  // M 256 (2 tiles), N 1024 (2 tiles), K 384 (3 tiles), blocks of 1 x 1 x 3 or 2 x 2 x 1 tiles: the loops
  // that run (_get_loop_range), the overlaps and the lhs transposes in every order.
  for (const char* order : {"MNK", "NKM", "KMN"})
    for (const char* layout : {"lhs", "lhsT"})
      for (int pos = 0; pos < 3; ++pos) {
        json p = {{"M", 256},
                  {"N", 1024},
                  {"K", 384},
                  {"layout", layout},
                  {"loop_order", order},
                  {"lhs_position", pos},
                  {"rhs_position", 2 - pos},
                  {"tiles_per_block_m", pos == 1 ? 2 : 1},
                  {"tiles_per_block_n", pos == 1 ? 2 : 1},
                  {"tiles_per_block_k", pos == 1 ? 1 : 3}};
        INFO(p.dump());
        check_matmul("metagemm", p, isa::DType::BF16, kBf16Bound, layout);
      }
  // A block size that does not divide the tiles is refused, naming it.
  CHECK_THROWS_WITH(
      test::build_kernel("metagemm", {{"M", 512}, {"N", 512}, {"K", 512}, {"tiles_per_block_m", 3}}, trn2(),
                         1),
      Catch::Contains("tiles_per_block_m = 3 does not divide the 4 M tiles"));
}

TEST_CASE("metagemm: an operand that must reload inside its missing axis' loop double-buffers",
          "[calibration]") {
  // metagemm_lhs_rhs_4608 (MNK, tiles per block K 12 / M 3 / N 3; 36 / 36 / 9 tiles): rhs does not fit
  // above M's loop (all of it, 36 x 9 tiles of 128 x 512 BF16, is 331776 B per partition), so it reloads
  // once per M block wherever it goes inside. At the N loop (36 x 3 tiles, 110592 B) only one buffer fits
  // beside lhs's two (27648 B each) and the result, so every reload's memset and 108 DMAs wait for the
  // previous block's last matmul; inside the K loop (12 x 3 tiles, 36864 B) it gets two and loads ahead.
  const json p = {{"M", 4608},
                  {"N", 4608},
                  {"K", 4608},
                  {"layout", "lhs"},
                  {"loop_order", "MNK"},
                  {"tiles_per_block_m", 3},
                  {"tiles_per_block_n", 3},
                  {"tiles_per_block_k", 12}};
  const auto rhs_site = [](const kernels::KernelBuild& b) {
    for (const auto& a : b.allocations)
      if (a.name == "rhs_tiles") return a;
    FAIL("no rhs_tiles site");
    return kernels::AllocationRecord{};
  };
  const auto time = [](const kernels::KernelBuild& b) {
    model::RunOptions ro;
    ro.numerics = false;
    return model::run_program(b.program, trn2(), ro).stats.total_time.ns();
  };
  const auto chosen = test::build_kernel("metagemm", p, trn2(), 1);
  CHECK(rhs_site(chosen).bytes_per_partition == 12 * 3 * 512 * 2);
  CHECK(rhs_site(chosen).bufs == 2);
  CHECK(rhs_site(chosen).trip_count == 12 * 3 * 3);
  json at_n = p;
  at_n["rhs_position"] = 1;  // relative 1 of (K, N): just inside N's loop
  const auto outer = test::build_kernel("metagemm", at_n, trn2(), 1);
  CHECK(rhs_site(outer).bytes_per_partition == 36 * 3 * 512 * 2);
  CHECK(rhs_site(outer).bufs == 1);
  // The same bytes and instructions; the single buffer serializes 36 reloads of about 90 us (6.33 against
  // 3.95 ms simulated).
  CHECK(time(outer) > 1.4 * time(chosen));

  // Where the outer position double-buffers it stays (metagemm_lhs_rhs_4096: rhs inside N's loop, 32 x 2
  // tiles, two buffers of 65536 B beside lhs's and the result's).
  const auto r4096 = test::build_kernel("metagemm",
                                        {{"M", 4096},
                                         {"N", 4096},
                                         {"K", 4096},
                                         {"loop_order", "MNK"},
                                         {"tiles_per_block_m", 4},
                                         {"tiles_per_block_n", 2},
                                         {"tiles_per_block_k", 4}},
                                        trn2(), 1);
  CHECK(rhs_site(r4096).bytes_per_partition == 32 * 2 * 512 * 2);
  CHECK(rhs_site(r4096).bufs == 2);
}

TEST_CASE("one PSUM bank serializes the drains with the matmuls; two rotating banks do not",
          "[calibration]") {
  const auto time = [&](int bufs) {
    const json p = {{"M", 1024},      {"N", 512},        {"K", 1024},        {"block_m", 512},
                    {"block_n", 512}, {"block_k", 1024}, {"psum_bufs", bufs}};
    auto b = test::build_kernel("matmul_lhsT_blocked", p, trn2(), 1);
    model::RunOptions ro;
    ro.numerics = false;
    return model::run_program(b.program, trn2(), ro).stats.total_time.ns();
  };
  // 16 accumulation groups (8 m-tiles x 2 K blocks) of 8 matmuls (8 x 213 ns). One bank: each group's first
  // matmul waits for the previous group's PSUM copy on ACT (480 ns: 512 FP32 elements from PSUM); with two
  // the copy overlaps the next group. Each group loses at least a few hundred ns.
  const double one = time(1), two = time(2);
  CHECK(one - two > 16 * 150);
}

TEST_CASE("cs149_vector_add: tiled and stream variants add exactly", "[calibration]") {
  const std::vector<json> cases = {
      {{"n", 64}, {"variant", "tiled"}, {"row_chunk", 1}},
      {{"n", 512}, {"variant", "tiled"}, {"row_chunk", 128}},
      {{"n", 512}, {"variant", "tiled"}, {"row_chunk", 128}, {"bufs", 1}},
      {{"n", 512}, {"variant", "stream"}, {"free_dim", 2}},
      {{"n", 25600}, {"variant", "stream"}, {"free_dim", 200}},
      {{"n", 2048}, {"variant", "stream"}, {"free_dim", 4}, {"bufs", 3}},
      {{"n", 2048}, {"variant", "stream"}, {"free_dim", 8}, {"bufs", 1}},
  };
  for (const json& p : cases) {
    INFO(p.dump());
    const int64_t n = p["n"];
    std::map<std::string, Tensor> in{{"a", random_tensor(n, isa::DType::F32, 3)},
                                     {"b", random_tensor(n, isa::DType::F32, 4)}};
    const Run r = run_named("cs149_vector_add", p, in);
    const auto& out = r.out.at("out");
    REQUIRE(out.size() == static_cast<size_t>(n));
    size_t bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += out[i] != in.at("a").values[i] + in.at("b").values[i];
    CHECK(bad == 0);
  }
  json bad = {{"n", 300}, {"variant", "stream"}, {"free_dim", 2}};
  CHECK_THROWS_AS(test::build_kernel("cs149_vector_add", bad, trn2(), 1), InputError);
}

TEST_CASE("vector_add_tiled ROW_CHUNK=1: one tile set serialises the iterations, two buffers overlap pairs",
          "[calibration]") {
  const auto per_iter = [](int bufs) {
    const auto time = [bufs](int64_t n) {
      std::map<std::string, Tensor> in{{"a", random_tensor(n, isa::DType::F32, 5)},
                                       {"b", random_tensor(n, isa::DType::F32, 6)}};
      return run_named("cs149_vector_add", {{"n", n}, {"variant", "tiled"}, {"row_chunk", 1}, {"bufs", bufs}},
                       in)
          .stats.total_time.ns();
    };
    return (time(40) - time(20)) / 20;
  };
  // One tile set (configs/hw/trn2.json), per iteration: the two loads are hardware-DGE DMAs on SP, one at a
  // time in DGE block 0 (2 x dma.hwdge_instruction_ns = 1200 ns; b's starts second), setup 1000 + HBM latency
  // 240, 4 bytes on 1 engine: its packet and the completion-semaphore packet, 2 x dma.packet_ns 96 = 192 ns,
  // the completion write (10 ns), the add: 100 + 2 DVE cycles at 0.96 GHz = 106.25 ns plus
  // dve.completion_latency_cycles 199 / 0.96 GHz = 207.29 ns before its semaphore, which reaches SP 10 ns
  // later; the next loads overwrite the tiles the add read. The store (on ACT, DGE block 1) is off this
  // chain. About 1200 + 1240 + 202 + 313.5 + 10 = 2965.5 ns.
  CHECK(per_iter(1) == Approx(2965.5).margin(5));
  // Two buffers (the allocation rule): SP issues iteration i + 1's loads before iteration i's store, so two
  // iterations share one such chain: about 2965.5 / 2 = 1482.8 ns (the measurement: 1.458 us per iteration).
  CHECK(per_iter(2) == Approx(2965.5 / 2).margin(5));
}

TEST_CASE("vector_add_stream n = 256000: two 1000-column tiles beat one 2000-column tile when pipelined",
          "[calibration]") {
  const auto time = [](int64_t free_dim, int bufs) {
    const int64_t n = 256000;
    std::map<std::string, Tensor> in{{"a", random_tensor(n, isa::DType::F32, 10)},
                                     {"b", random_tensor(n, isa::DType::F32, 11)}};
    return run_named("cs149_vector_add",
                     {{"n", n}, {"variant", "stream"}, {"free_dim", free_dim}, {"bufs", bufs}}, in)
        .stats.total_time.ns();
  };
  // Measured on Trn2: 26 us (free_dim 1000) < 28 us (free_dim 2000), "pipelining" (the course README).
  CHECK(time(1000, 2) < time(2000, 2));
  // One tile set serialises the two iterations: the order flips, as in the unported kernel.
  CHECK(time(1000, 1) > time(2000, 1));
}

TEST_CASE("vector_add_stream: out is the published [128, n / 128] tensor, so its column-block stores overlap",
          "[calibration]") {
  const auto b = test::build_kernel("cs149_vector_add",
                                    {{"n", 256000}, {"variant", "stream"}, {"free_dim", 1000}}, trn2(), 1);
  const auto& decl = *std::find_if(b.program.tensors.begin(), b.program.tensors.end(),
                                   [](const isa::TensorDecl& t) { return t.name == "out"; });
  CHECK(decl.shape == std::vector<int64_t>{128, 2000});
  // The two stores (on ACT) write out[:, 0:1000] and out[:, 1000:2000]: disjoint, so the second waits for
  // its add (DVE) only, never for the first store's queue semaphore (S[8 + queue]).
  const auto& act = b.program.streams[0][static_cast<int>(isa::Engine::ACT)];
  REQUIRE(act.size() == 2);
  const uint16_t first_store_sem = static_cast<uint16_t>(8 + act[0].dma_queue);
  for (const isa::SemWait& w : act[1].waits) CHECK(w.sem != first_store_sem);
}

TEST_CASE("cs149_vector_add schedule unrolled: the published Trn1 binaries' buffers and DMA engines",
          "[calibration]") {
  const config::HwConfig& trn1 = test::hw_named("trn1");
  // The SBUF offsets the program's DMAs on `engine` write (loads) or read (stores).
  const auto offsets = [](const isa::Program& prog, isa::Engine engine) {
    std::vector<int64_t> r;
    for (const isa::Instruction& i : prog.streams[0][static_cast<int>(engine)])
      for (const isa::AccessPattern& ap : i.ops)
        if (ap.present() && ap.space == isa::MemSpace::SBUF) r.push_back(ap.offset_bytes);
    return r;
  };
  const auto distinct = [](std::vector<int64_t> v) {
    std::sort(v.begin(), v.end());
    return std::unique(v.begin(), v.end()) - v.begin();
  };
  json p = {{"n", 25600}, {"variant", "stream"}, {"free_dim", 2}, {"edition", "2024"}};
  // As written: a_tile and b_tile rotate over the allocation rule's 2 buffers each.
  const auto loop = test::build_kernel("cs149_vector_add", p, trn1, 1);
  CHECK(distinct(offsets(loop.program, isa::Engine::SP)) == 4);
  // As the Trn1 NEFFs compile it (waahm7/asst4-trainium @a4d4676 part1/stream_256k_fd1k.neff: 4 loads to 4
  // SBUF addresses on SP's queue set, 2 stores from 2 addresses on GpSimd's): each of the 100 iterations
  // loads into its own a and b tiles on SP and stores its own result from GpSimd.
  p["schedule"] = "unrolled";
  const auto unrolled = test::build_kernel("cs149_vector_add", p, trn1, 1);
  const auto loads = offsets(unrolled.program, isa::Engine::SP),
             stores = offsets(unrolled.program, isa::Engine::POOL);
  CHECK(loads.size() == 200);
  CHECK(distinct(loads) == 200);
  CHECK(stores.size() == 100);
  CHECK(distinct(stores) == 100);
  // ROW_CHUNK=1 with 2048 iterations: [1, 1] FP32 tiles take a 64 B granule each, so the three tile sets
  // hold 196608 / (3 x 64) = 1024 iterations' buffers (configs/hw/trn1.json: 192 KiB per partition).
  json t = {
      {"n", 2048}, {"variant", "tiled"}, {"row_chunk", 1}, {"edition", "2024"}, {"schedule", "unrolled"}};
  CHECK(distinct(offsets(test::build_kernel("cs149_vector_add", t, trn1, 1).program, isa::Engine::SP)) ==
        2048);
  for (const json& q : {p, t}) {
    INFO(q.dump());
    const int64_t n = q["n"];
    std::map<std::string, Tensor> in{{"a", random_tensor(n, isa::DType::F32, 12)},
                                     {"b", random_tensor(n, isa::DType::F32, 13)}};
    std::map<std::string, test::Bytes> bytes{{"a", in.at("a").bytes}, {"b", in.at("b").bytes}};
    const std::vector<float> out = test::run_kernel("cs149_vector_add", q, bytes, trn1, 1).get("out");
    REQUIRE(out.size() == static_cast<size_t>(n));
    size_t bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += out[i] != in.at("a").values[i] + in.at("b").values[i];
    CHECK(bad == 0);
  }
  // The placement is the precomputed-descriptor one: refused with Trn2's hardware DGE, kept with disable_dge.
  json trn2_p = {{"n", 25600}, {"variant", "stream"}, {"free_dim", 2}, {"schedule", "unrolled"}};
  CHECK_THROWS_AS(test::build_kernel("cs149_vector_add", trn2_p, trn2(), 1), InputError);
  trn2_p["disable_dge"] = true;
  CHECK(distinct(offsets(test::build_kernel("cs149_vector_add", trn2_p, trn2(), 1).program,
                         isa::Engine::SP)) == 200);
  // An explicit bufs is the loop's buffer count: with unrolled it is refused, both keys named (before, bufs
  // was taken and unrolled meant nothing).
  p["bufs"] = 4;
  CHECK_THROWS_WITH(
      test::build_kernel("cs149_vector_add", p, trn1, 1),
      "kernel 'cs149_vector_add': schedule 'unrolled' and bufs = 4 together: unrolled gives each "
      "iteration its own buffers (as many as SBUF holds), bufs sets the buffers of schedule "
      "'loop'; drop one of them");
}

TEST_CASE("trn1 queue sets: n = 256000 FREE_DIM=1000's first add runs under the second iteration's loads",
          "[calibration]") {
  const int64_t n = 256000;
  std::map<std::string, test::Bytes> in{{"a", random_tensor(n, isa::DType::F32, 12).bytes},
                                        {"b", random_tensor(n, isa::DType::F32, 13).bytes}};
  const auto time = [&](int64_t free_dim, const config::HwConfig& hw) {
    const json p = {{"n", n},
                    {"variant", "stream"},
                    {"free_dim", free_dim},
                    {"edition", "2024"},
                    {"schedule", "unrolled"}};
    return test::run_kernel("cs149_vector_add", p, in, hw, 1).stats.total_time.ns();
  };
  const config::HwConfig& sets = test::hw_named("trn1");
  REQUIRE(sets.dma.queue_sets);
  const config::HwConfig no_sets = config::load_hw_config("trn1", {{"dma.queue_sets", false}});
  // With SP's loads in order on its queue set, both rows' loads end together (2 MB on 16 engines) and what
  // FREE_DIM=2000 adds is the exposed half of the work after them: the add's extra 1000 columns, 2 x 1000
  // DVE cycles at 1.12 GHz = 1785.714 ns, and the store's extra 32000 B per engine at 17 B/ns = 1882.353 ns.
  CHECK(time(2000, sets) - time(1000, sets) == Approx(1785.714 + 1882.353).margin(0.01));
  // Without sets the four loads share the engines and land together, so the first add waits for all of them.
  CHECK(time(1000, no_sets) - time(1000, sets) > 1000.0);
}

TEST_CASE("transpose_2d: 128 x 128 tiles through the PE transpose", "[calibration]") {
  const int64_t M = 256, N = 384;
  std::map<std::string, Tensor> in{{"in", random_tensor(M * N, isa::DType::F32, 7)}};
  const Run r = run_named("transpose_2d", {{"M", M}, {"N", N}}, in);
  const auto& out = r.out.at("out");
  REQUIRE(out.size() == static_cast<size_t>(M * N));
  size_t bad = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) bad += out[j * M + i] != in.at("in").values[i * N + j];
  CHECK(bad == 0);
}

TEST_CASE("transpose_2d FP32: the loads' two-buffer chain sets the period, not the FP32 compute",
          "[calibration]") {
  const auto time = [](int64_t M) {
    const int64_t N = 512;
    std::map<std::string, Tensor> in{{"in", random_tensor(M * N, isa::DType::F32, 14)}};
    return run_named("transpose_2d", {{"M", M}, {"N", N}}, in).stats.total_time.ns();
  };
  // Two rotating input tiles: the load of tile i + 2 waits for tile i's LoadStationary to free its buffer,
  // then SP's DGE instruction (600 ns), setup and HBM latency (1240), 8 rows of 512 B per engine under the
  // dma.packet_ns knee and the semaphore write (9 x 96 = 864) plus the 10 ns completion, the FP32
  // LoadStationary (ceil(128 / 4) = 32 PE cycles at 2.4 GHz = 13.333 ns) and 10 ns back to SP: 2737.333 ns
  // per two tiles. 16 more tiles are 8 more periods; the PE transpose (FP32 in transpose mode) and the ACT
  // copy out of PSUM run beside the chain.
  CHECK(time(1024) - time(512) == Approx(8 * 2737.333).margin(0.01));
}

TEST_CASE("kernel launch delay: a one-tile kernel starts after sync.kernel_launch_ns", "[calibration]") {
  const int64_t n = 25600;
  std::map<std::string, Tensor> in{{"a", random_tensor(n, isa::DType::F32, 8)},
                                   {"b", random_tensor(n, isa::DType::F32, 9)}};
  const Run r = run_named("cs149_vector_add", {{"n", n}, {"variant", "stream"}, {"free_dim", 200}}, in);
  // The launch (sync.kernel_launch_ns, fitted); the two loads' DGE instructions on SP (2 x 600 ns); setup
  // and HBM latency (1240 ns); b's 102400 bytes: each of 16 engines moves 8 rows of 800 B, under the
  // 96 x 23 = 2208 B knee of dma.packet_ns, and its semaphore write, 9 x 96 = 864 ns, plus the 10 ns
  // completion write; the add, 100 + 2 x 200 DVE cycles at 0.96 GHz = 520.8 ns, its results posted 207.3 ns
  // later, 10 ns to ACT; the store's trigger on ACT (50 ns: its DGE instruction ran while ACT waited for the
  // add, dma.hwdge_act_lookahead), 1240, 874: launch + 6216.1 ns.
  CHECK(r.stats.total_time.ns() > trn2().sync.kernel_launch_ns + 2 * 1300);
  CHECK(r.stats.total_time.ns() == Approx(trn2().sync.kernel_launch_ns + 6216.1).margin(10));
}
