// Writes seed programs for fuzz_program: for each workload file given, the program its kernel builds, cut to
// the first two instructions of each engine stream, as compact JSON (so every opcode a kernel emits is in
// some seed, and programs stay small enough to simulate once the fuzzer shrinks their tensors).
//   make_program_seeds OUT_DIR WORKLOAD.json...
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "kernels/workload/workload.h"
#include "sim/base/error.h"
#include "sim/isa/program_json.h"

using namespace trnsim;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: make_program_seeds OUT_DIR WORKLOAD.json...\n");
    return 1;
  }
  const std::filesystem::path out = argv[1];
  std::filesystem::create_directories(out);
  for (int i = 2; i < argc; ++i) {
    try {
      workload::PreparedWorkload p = workload::prepare_workload(workload::parse_workload(argv[i]));
      isa::Program prog = p.build.program;
      for (auto& core : prog.streams)
        for (auto& stream : core)
          if (stream.size() > 2) stream.resize(2);
      const std::string name = std::filesystem::path(argv[i]).stem().string() + ".json";
      std::ofstream((out / name).string()) << isa::program_to_json(prog).dump() << "\n";
    } catch (const Error& e) {
      std::fprintf(stderr, "%s: %s\n", argv[i], e.what());
    }
  }
  return 0;
}
