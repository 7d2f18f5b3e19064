// Fuzzes the sweep file reader (tools/sweep/spec.h): parse_spec on the input saved as a file (keys, axes and
// their values, listed points, the paths against the base workload's kernel and hardware, the Lua
// constraints' syntax and names), then enumerate (the product filtered by the constraints, at most 4096
// points) and, for the first points, each point's --set assignments applied to the base workload
// (parse_workload; no program build), as `trnsim sweep --dry-run` and the point checks start.
// The input is sweeps/sweep.json in the scratch folder; workloads/ beside it holds copies of the base
// workloads the shipped sweeps name ("../workloads/llama3_8b_mlp_down_bwd_mxfp8.json",
// "../workloads/moe/qwen3_235b_a22b_{bwd,fwd}_mxfp8.json"), so the shipped sweeps are seeds as they are.
#include <cstdint>
#include <filesystem>
#include <string>

#include "kernels/workload/workload.h"
#include "tests/fuzz/fuzz_check.h"
#include "tools/sweep/spec.h"

using namespace trnsim;
namespace fs = std::filesystem;

namespace {

void copy_workloads() {
  static bool done = false;
  if (done) return;
  done = true;
  const fs::path src = fs::path(TRNSIM_SOURCE_DIR) / "configs" / "workloads";
  const fs::path dst = fuzz::scratch_dir() / "workloads";
  fs::create_directories(dst / "moe");
  fs::create_directories(fuzz::scratch_dir() / "sweeps");
  for (const char* w : {"llama3_8b_mlp_down_bwd_mxfp8.json", "moe/qwen3_235b_a22b_bwd_mxfp8.json",
                        "moe/qwen3_235b_a22b_fwd_mxfp8.json"})
    fs::copy_file(src / w, dst / w, fs::copy_options::overwrite_existing);
}

}  // namespace

// The workload library brings libsystemc.so, which references sc_main; nothing here pulls in the model's weak
// one (sim/model/run.cpp).
extern "C" int sc_main(int, char**) {
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  copy_workloads();
  const std::string path = fuzz::write_scratch("sweeps/sweep.json", data, size);
  fuzz::run(size, [&] {
    const sweep::Spec spec = sweep::parse_spec(path);
    const sweep::Enumeration e = sweep::enumerate(spec, 4096);
    for (size_t i = 0; i < e.points.size() && i < 4; ++i)
      workload::parse_workload(spec.workload, e.points[i].sets);
  });
  return 0;
}
