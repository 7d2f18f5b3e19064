// Host speed of the MX matmul emulation against OpenBLAS SGEMM at the same thread count, in one run.
//
// The emulation is the simulator's own nc_matmul_mx (isa::execute: x4 FP8 operands dequantized with their
// E8M0 scales, then num::pe_matmul's FP32 accumulation into PSUM, accumulate on) on the README main job's
// tile: stationary [128, 128] and moving [128, 512] x4 (K = 512), PSUM [128, 512]. It runs on the host
// threads the simulator uses (num::host_split_threads). OpenBLAS SGEMM does the same FLOPs on the same
// thread count twice: per tile (128 x 512 x 512, beta 1) and as square 2048^3 products. Rounds alternate
// emulation and SGEMM; each figure is the median round, in wall and in CPU time (on a shared machine the CPU
// figure is the steadier one). A last line compares SGEMM's bytes with the documented order (fused
// multiply-adds in ascending k from the old PSUM value, sim/numerics/pe_matmul.h).
// Usage: trnsim_bench_numerics [GFLOP per round, default 20] [rounds, default 3]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <vector>

#include "sim/isa/patterns.h"
#include "sim/isa/semantics.h"
#include "sim/numerics/host_threads.h"
#include "sim/numerics/pe_matmul.h"

extern "C" void openblas_set_num_threads(int);

namespace {

using namespace trnsim;

struct Times {
  double wall = 0, cpu = 0;
};

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

template <class F>
Times timed(F&& f) {
  const auto w0 = std::chrono::steady_clock::now();
  const double c0 = cpu_seconds();
  f();
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count(), cpu_seconds() - c0};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

isa::AccessPattern onchip(isa::MemSpace m, uint32_t partitions, int64_t offset, isa::DType t, uint32_t cols) {
  isa::AccessPattern a;
  a.space = m;
  a.partition_start = 0;
  a.partitions = partitions;
  a.offset_bytes = offset;
  a.dtype = t;
  a.set_dim(a.ndim++, isa::Dim{1, cols});
  return a;
}

constexpr uint32_t kP = 128, kM = 128, kN = 512, kK = 4 * kP;
constexpr double kTileFlop = 2.0 * kK * kM * kN;

}  // namespace

int main(int argc, char** argv) {
  const double gflop = argc > 1 ? std::atof(argv[1]) : 20.0;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  if (!(gflop > 0) || rounds < 1) {
    std::fprintf(stderr, "usage: trnsim_bench_numerics [GFLOP per round > 0] [rounds >= 1]\n");
    return 1;
  }
  const int threads = num::host_split_threads();
  openblas_set_num_threads(threads);
  std::mt19937 rng(1);

  // The simulator's machine: x4 E4M3FN operands of finite codes, scales around 2^0, PSUM accumulating.
  isa::Limits limits;
  limits.generation = isa::Generation::Trn3;
  limits.sbuf_bytes_per_partition = 256 * 1024;
  isa::Program program;
  program.generation = limits.generation;
  isa::MachineState state = isa::make_machine_state(program, limits);
  const int64_t st_off = 0, mv_off = 4 * kM, ss_off = mv_off + 4 * kN, ms_off = ss_off + kM;
  for (uint32_t p = 0; p < kP; ++p) {
    uint8_t* row = state.cores[0].sbuf.data() + static_cast<size_t>(p) * limits.sbuf_bytes_per_partition;
    for (uint32_t i = 0; i < 4 * (kM + kN); ++i) {
      const auto b = static_cast<uint8_t>(rng() & 0xFF);
      row[i] = (b & 0x7F) == 0x7F ? 0x3F : b;  // no NaN codes
    }
    for (uint32_t i = 0; i < kM + kN; ++i) row[ss_off + i] = static_cast<uint8_t>(120 + rng() % 8);
  }
  std::memset(state.cores[0].psum.data(), 0, state.cores[0].psum.size());
  isa::Instruction mm =
      isa::make_instruction(isa::Opcode::NcMatmulMx, isa::Engine::PE,
                            {onchip(isa::MemSpace::PSUM, kM, 0, isa::DType::F32, kN),
                             onchip(isa::MemSpace::SBUF, kP, st_off, isa::DType::FP8_E4M3FN_X4, kM),
                             onchip(isa::MemSpace::SBUF, kP, mv_off, isa::DType::FP8_E4M3FN_X4, kN),
                             onchip(isa::MemSpace::SBUF, kP, ss_off, isa::DType::E8M0, kM),
                             onchip(isa::MemSpace::SBUF, kP, ms_off, isa::DType::E8M0, kN)});
  mm.flags |= isa::kAccumulate;
  isa::check(mm, program, limits);

  // SGEMM operands: the tile's shapes (A [K, M] as the stationary, B [K, N], C [M, N]) and 2048^3.
  std::normal_distribution<float> nd;
  std::vector<float> a(kK * kM), b(kK * kN), c(kM * kN, 0.0f);
  for (float& x : a) x = nd(rng);
  for (float& x : b) x = nd(rng);
  constexpr int kSq = 2048;
  std::vector<float> sa(kSq * kSq), sb(sa.size()), sc(sa.size(), 0.0f);
  for (float& x : sa) x = nd(rng);
  for (float& x : sb) x = nd(rng);

  const int tiles = std::max(1, static_cast<int>(gflop * 1e9 / kTileFlop));
  const int squares = std::max(1, static_cast<int>(gflop * 1e9 / (2.0 * kSq * kSq * kSq)));
  std::vector<double> emu_w, emu_c, tile_w, tile_c, sq_w, sq_c;
  for (int r = 0; r < rounds; ++r) {
    const Times e = timed([&] {
      for (int i = 0; i < tiles; ++i) isa::execute(mm, 0, program, limits, state);
    });
    const Times t = timed([&] {
      for (int i = 0; i < tiles; ++i)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kM, kN, kK, 1.0f, a.data(), kM, b.data(), kN,
                    1.0f, c.data(), kN);
    });
    const Times s = timed([&] {
      for (int i = 0; i < squares; ++i)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kSq, kSq, kSq, 1.0f, sa.data(), kSq, sb.data(),
                    kSq, 1.0f, sc.data(), kSq);
    });
    const double ef = tiles * kTileFlop / 1e9, sf = squares * 2.0 * kSq * kSq * kSq / 1e9;
    emu_w.push_back(ef / e.wall), emu_c.push_back(ef / e.cpu * threads);
    tile_w.push_back(ef / t.wall), tile_c.push_back(ef / t.cpu * threads);
    sq_w.push_back(sf / s.wall), sq_c.push_back(sf / s.cpu * threads);
  }
  std::printf("MX matmul emulation vs OpenBLAS SGEMM, %d host thread(s), %d rounds of %.1f GFLOP (medians)\n",
              threads, rounds, tiles * kTileFlop / 1e9);
  std::printf("%-44s %12s %12s\n", "", "GFLOP/s wall", "GFLOP/s cpu*");
  std::printf("%-44s %12.1f %12.1f\n", "nc_matmul_mx emulation (128x512x512 tiles)", median(emu_w),
              median(emu_c));
  std::printf("%-44s %12.1f %12.1f\n", "SGEMM same tiles (beta 1)", median(tile_w), median(tile_c));
  std::printf("%-44s %12.1f %12.1f\n", "SGEMM 2048^3", median(sq_w), median(sq_c));
  std::printf("ratio emulation / SGEMM tiles   %.2f wall, %.2f cpu (target >= 0.8)\n",
              median(emu_w) / median(tile_w), median(emu_c) / median(tile_c));
  std::printf("ratio emulation / SGEMM 2048^3  %.2f wall, %.2f cpu (target >= 0.8)\n",
              median(emu_w) / median(sq_w), median(emu_c) / median(sq_c));
  std::printf("(cpu*: FLOPs per CPU second times the thread count, i.e. the rate on an unshared machine)\n");

  // SGEMM's bytes against the documented order, on MX-like values (products exact in FP32), accumulating
  // onto a nonzero PSUM tile as nc_matmul_mx with accumulate does.
  std::vector<float> qa(kK * kM), qb(kK * kN), c0(kM * kN);
  std::uniform_int_distribution<int> code(-15, 15), ex(-6, 6);
  for (float& x : qa) x = static_cast<float>(code(rng)) * std::ldexp(1.0f, ex(rng));
  for (float& x : qb) x = static_cast<float>(code(rng)) * std::ldexp(1.0f, ex(rng));
  for (float& x : c0) x = nd(rng);
  std::vector<float> want = c0, got = c0;
  num::pe_matmul(qa.data(), kM, qb.data(), kN, want.data(), kN, kK, kM, kN, true, 1);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kM, kN, kK, 1.0f, qa.data(), kM, qb.data(), kN, 1.0f,
              got.data(), kN);
  int64_t differ = 0;
  for (size_t i = 0; i < want.size(); ++i) differ += std::memcmp(&want[i], &got[i], 4) != 0;
  std::printf("SGEMM vs the documented accumulation order: %lld of %zu PSUM values differ in their bits\n",
              static_cast<long long>(differ), want.size());
  return 0;
}
