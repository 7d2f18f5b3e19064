// The sample traces in traces/ open as they are: the .pftrace decodes with no rule broken and holds both
// cores' engine tracks and the counters traces/README.md lists; the .json is Chrome trace JSON with the same
// number of slices.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "sim/trace/reader/pftrace_reader.h"

using namespace trnsim;

namespace {
const std::string kDir = std::string(TRNSIM_SOURCE_DIR) + "/traces/";
}

TEST_CASE("sample traces: the .pftrace and .json in traces/ open and agree", "[trace]") {
  const trace::ReadTrace t = trace::read_perfetto_trace(kDir + "sample_mlp_down_bwd_mxfp8_lnc2.pftrace");
  CHECK(t.problems.empty());
  std::set<std::string> names;
  for (const auto& k : t.tracks) names.insert(k.name);
  for (const char* n :
       {"PE matmul", "DVE", "ACT", "SP", "HBM read", "DMA outstanding", "SBUF occupancy", "PSUM occupancy"})
    CHECK(names.count(n) == 1);
  int processes = 0;
  for (const auto& k : t.tracks) processes += k.kind == trace::ReadTrackKind::kProcess;
  CHECK(processes == 2);  // an LNC2 pair: one process per physical core

  std::ifstream f(kDir + "sample_mlp_down_bwd_mxfp8_lnc2.json");
  REQUIRE(f);
  const nlohmann::json j = nlohmann::json::parse(f);
  size_t complete = 0;
  for (const auto& e : j.at("traceEvents")) complete += e.value("ph", "") == "X";
  CHECK(complete == t.slices.size());
}
