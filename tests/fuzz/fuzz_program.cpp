// Fuzzes instruction-stream programs (docs/program-format.md): the one JSON reader, program_from_json, the
// round trip through program_to_json, isa::check on every instruction against the hardware config of the
// program's generation, and a bounded simulation with numerics: programs of at most 64 instructions and
// 1 MiB of HBM tensors run on the SystemC model with a simulated-time limit of 1 ms.
// Every run elaborates a fresh SystemC context (sim/model/run.h), which leaves the previous one allocated
// (about 20 KB with its processes and events): over a million runs that is gigabytes, and LeakSanitizer
// stops the fuzzer at the first. The target deletes the previous context once the next run has replaced it
// (its modules are gone by then), so ASan also checks that a finished context can be destroyed. The first
// context is kept: SystemC's static events (sc_event::none) belong to it and unregister from it at exit.
#include <systemc>

#include <cstdint>
#include <string>

#include "sim/config/hw_config.h"
#include "sim/config/json_document.h"
#include "sim/isa/program_json.h"
#include "sim/isa/semantics.h"
#include "sim/model/run.h"
#include "tests/fuzz/fuzz_check.h"

using namespace trnsim;

namespace {

const config::HwConfig& hw_for(isa::Generation g) {
  static const config::HwConfig trn2 = config::load_hw_config("trn2");
  static const config::HwConfig trn3 = config::load_hw_config("trn3");
  return g == isa::Generation::Trn3 ? trn3 : trn2;
}

constexpr uint64_t kMaxInstructions = 64;
constexpr double kMaxHbmBytes = 1 << 20;
constexpr Picoseconds kMaxTime{1'000'000'000};  // 1 ms

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::run(size, [&] {
    const isa::Program p = isa::program_from_json(config::parse_json_document(text, "program.json"));
    const nlohmann::json j = isa::program_to_json(p);
    if (isa::program_to_json(isa::program_from_json(j)) != j)
      fuzz::die("program_to_json", "does not round-trip");

    const config::HwConfig& hw = hw_for(p.generation);
    const isa::Limits limits = hw.limits();
    uint64_t instructions = 0;
    for (const auto& core : p.streams)
      for (const auto& stream : core) {
        instructions += stream.size();
        for (const isa::Instruction& in : stream) {
          try {
            isa::check(in, p, limits);
          } catch (const RuleError& e) {
            fuzz::check_message(e.what(), size);
          }
        }
      }
    double hbm = 0;
    for (const isa::TensorDecl& t : p.tensors) {
      double b = isa::dtype_size(t.dtype);
      for (int64_t d : t.shape) b *= static_cast<double>(d);
      hbm += b;
    }
    if (instructions > kMaxInstructions || hbm > kMaxHbmBytes) return;
    model::RunOptions o;
    o.numerics = true;
    o.max_time = kMaxTime;
    static sc_core::sc_simcontext* const first = sc_core::sc_get_curr_simcontext();
    sc_core::sc_simcontext* previous = sc_core::sc_curr_simcontext;
    struct Release {
      sc_core::sc_simcontext* previous;
      ~Release() {
        if (previous && previous != first && previous != sc_core::sc_curr_simcontext) delete previous;
      }
    } release{previous};
    model::run_program(p, hw, o);
  });
  return 0;
}
