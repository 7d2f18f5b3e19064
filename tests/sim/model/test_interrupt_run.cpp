// Ctrl-C during the simulation (sim/base/interrupt.h): the model stops at the next instruction completion and
// the session throws Interrupted; a trace being written is closed, marked incomplete, and named in the error.
#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "kernels/api/nki.h"
#include "sim/base/error.h"
#include "sim/base/interrupt.h"
#include "sim/config/hw_config.h"
#include "sim/run/session.h"

using namespace trnsim;
using namespace trnsim::kernels;

TEST_CASE("a signal during the simulation stops it at the next completion", "[interrupt]") {
  const config::HwConfig hw = config::load_hw_config("trn2");
  // Four independent load -> add -> store chains: 12 instructions.
  const KernelBuild b = build_program(
      [](Kernel& k) {
        for (int i = 0; i < 4; ++i) {
          View x = k.input("x" + std::to_string(i), DType::F32, {128, 64});
          View y = k.output("y" + std::to_string(i), DType::F32, {128, 64});
          View t = k.sbuf({128, 64}, DType::F32, "t");
          nki::dma_copy(t, x);
          nki::tensor_scalar(t, t, nki::AluOp::Add, 1.0);
          nki::dma_copy(y, t);
        }
      },
      {hw.limits(), 1});
  const std::filesystem::path trace =
      std::filesystem::temp_directory_path() / ("trnsim_interrupt_" + std::to_string(::getpid()) + ".json");
  std::signal(SIGINT, SIG_DFL);  // as from a terminal (a script's background job starts with it ignored)
  interrupt::install_handlers();
  run::Session session(b.program, hw);
  run::SessionOptions o;
  o.numerics = false;
  o.trace_path = trace.string();
  o.progress_every = 1;
  o.progress = [](Picoseconds, uint64_t done, uint64_t) {
    if (done == 3) std::raise(SIGINT);  // a cooperative section: this only sets the flag
  };
  std::string what;
  try {
    session.run(o);
  } catch (const Interrupted& e) {
    what = e.what();
  }
  CHECK(interrupt::signal_number() == SIGINT);
  CHECK_THAT(what, Catch::Matchers::StartsWith("interrupted at "));
  CHECK_THAT(what, Catch::Matchers::Contains("after 3 of 12 instructions"));
  CHECK_THAT(what, Catch::Matchers::Contains("the trace up to the failure is in " + trace.string()));
  std::ifstream in(trace);
  std::stringstream text;
  text << in.rdbuf();
  CHECK_THAT(text.str(), Catch::Matchers::Contains("trace incomplete: the run failed"));
  std::filesystem::remove(trace);
}
