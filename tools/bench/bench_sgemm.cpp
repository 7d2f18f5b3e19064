// Single-threaded OpenBLAS SGEMM throughput for a given number of FLOPs: the yardstick the workload benchmark
// compares trnsim's host numerics against (tools/bench/bench_workload.sh).
// Usage: trnsim_bench_sgemm TOTAL_GFLOP  -> prints {"gflop": ..., "seconds": ..., "gflops": ...}
#include <cblas.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" void openblas_set_num_threads(int);

int main(int argc, char** argv) {
  const double total_gflop = argc > 1 ? std::atof(argv[1]) : 100.0;
  if (!(total_gflop > 0)) {
    std::fprintf(stderr, "usage: trnsim_bench_sgemm TOTAL_GFLOP (a positive number)\n");
    return 1;
  }
  openblas_set_num_threads(1);
  constexpr int n = 2048;  // one square SGEMM is 2 n^3 = 17.2 GFLOP
  std::vector<float> a(static_cast<size_t>(n) * n), b(a.size()), c(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(std::sin(0.001 * static_cast<double>(i)));
    b[i] = static_cast<float>(std::cos(0.002 * static_cast<double>(i)));
  }
  const double per_call = 2.0 * n * n * static_cast<double>(n) / 1e9;
  const int calls = std::max(1, static_cast<int>(std::ceil(total_gflop / per_call)));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                i == 0 ? 0.0f : 1.0f, c.data(), n);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("{\"gflop\": %.1f, \"seconds\": %.3f, \"gflops\": %.2f, \"check\": %g}\n", calls * per_call, s,
              calls * per_call / s, static_cast<double>(c[12345]));
  return 0;
}
