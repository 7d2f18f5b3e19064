// Fuzzes the workload loader and validator (kernels/workload/workload.h): parse_workload on the input saved
// as a file, then prepare_workload (hardware config and overrides, kernel parameters, core count, the program
// build, every input source against the kernel's inputs), as `trnsim validate` does; no simulation.
// The scratch folder beside the file holds two small .npy files a workload may name ("bf16.npy": raw BF16
// [128, 128]; "f32.npy": float32 [64, 64]).
// The program build costs time in proportion to the shapes, so a workload whose "params" hold an integer
// above 2^14, or whose integers above 1 multiply to more than 2^27 (a 512 x 512 x 512 matmul), is only
// parsed: the shipped shapes take seconds each under the sanitizers. The build itself stops after
// kMaxInstructions (the workload's "max_instructions" when smaller): a longer program is the build's
// instruction-limit error, which the target checks as any other; the small seeds emit fewer.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/workload/workload.h"
#include "sim/base/log.h"
#include "sim/config/json_document.h"
#include "sim/io/npy.h"
#include "tests/fuzz/fuzz_check.h"

using namespace trnsim;

namespace {

constexpr uint64_t kMaxInstructions = 4096;

// Integers in `v` (iteratively; the reader bounds the depth anyway).
bool small_shapes(const nlohmann::json& params) {
  double product = 1;
  std::vector<const nlohmann::json*> todo{&params};
  while (!todo.empty()) {
    const nlohmann::json* v = todo.back();
    todo.pop_back();
    if (v->is_structured()) {
      for (const auto& e : *v) todo.push_back(&e);
    } else if (v->is_number()) {
      const double d = std::fabs(v->get<double>());
      if (d > (1 << 14)) return false;
      if (d > 1) product *= d;
    }
  }
  return product <= 0x1p27;
}

void make_npy_files() {
  static bool done = false;
  if (done) return;
  done = true;
  std::vector<uint16_t> b(128 * 128, 0x3F80);  // 1.0
  std::vector<float> f(64 * 64, 0.5f);
  io::write_npy((fuzz::scratch_dir() / "bf16.npy").string(), io::NpyDType::U16, {128, 128}, b.data());
  io::write_npy((fuzz::scratch_dir() / "f32.npy").string(), io::NpyDType::F32, {64, 64}, f.data());
}

}  // namespace

// The workload library brings libsystemc.so, which references sc_main; nothing here pulls in the model's weak
// one (sim/model/run.cpp).
extern "C" int sc_main(int, char**) {
  return 0;
}

// The kernels' warnings (e.g. a read of SBUF no instruction wrote) are made as in a run, not printed: the
// fuzzer's log stays readable at hundreds of inputs a second.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  log::set_level(spdlog::level::err);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  make_npy_files();
  const std::string path = fuzz::write_scratch("workload.json", data, size);
  fuzz::run(size, [&] {
    workload::Workload w = workload::parse_workload(path);
    if (!small_shapes(w.params)) return;
    w.max_instructions = std::min(w.max_instructions.value_or(kMaxInstructions), kMaxInstructions);
    workload::prepare_workload(std::move(w));
  });
  return 0;
}
