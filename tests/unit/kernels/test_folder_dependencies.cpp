// The folders' dependencies go one way (docs/architecture.md, "Layout"): the ISA below the hardware config,
// and the kernels layer (but its workload pipeline, kernels/workload) below the simulator's model and run.
// Checked on the source tree's #include lines, so a new include against the direction fails here.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Rule {
  const char* folder;                     // below the source tree
  const char* except;                     // a subfolder the rule leaves out ("" none)
  std::vector<const char*> not_included;  // include path prefixes its files must not include
};

// "file:line: #include ..." of each include in `rule.folder` against the rule.
std::vector<std::string> violations(const Rule& rule) {
  std::vector<std::string> out;
  const fs::path root = fs::path(TRNSIM_SOURCE_DIR) / rule.folder;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".h" && ext != ".cpp")) continue;
    const std::string rel = fs::relative(e.path(), TRNSIM_SOURCE_DIR).string();
    if (*rule.except && rel.rfind(std::string(rule.folder) + "/" + rule.except + "/", 0) == 0) continue;
    std::ifstream f(e.path());
    std::string line;
    for (int n = 1; std::getline(f, line); ++n)
      for (const char* prefix : rule.not_included)
        if (line.rfind(std::string("#include \"") + prefix, 0) == 0)
          out.push_back(rel + ":" + std::to_string(n) + ": " + line);
  }
  return out;
}

}  // namespace

TEST_CASE("sim/isa includes nothing of the hardware config or the model above it", "[layers]") {
  // Fails before the program JSON reader took the JSON document from sim/io (it included sim/config's).
  const auto v =
      violations({"sim/isa", "", {"sim/config/", "sim/timing/", "sim/model/", "sim/run/", "kernels/"}});
  INFO((v.empty() ? std::string() : v.front()));
  CHECK(v.empty());
}

TEST_CASE("the kernels layer reaches neither sim/run nor the SystemC model (but kernels/workload)",
          "[layers]") {
  const auto v = violations({"kernels", "workload", {"sim/run/", "sim/model/", "sim/timing/", "tools/"}});
  INFO((v.empty() ? std::string() : v.front()));
  CHECK(v.empty());
}

TEST_CASE("one check result type: sim/tensor's, with no second header of that name in sim/run", "[layers]") {
  CHECK(fs::exists(fs::path(TRNSIM_SOURCE_DIR) / "sim/tensor/check_result.h"));
  CHECK_FALSE(fs::exists(fs::path(TRNSIM_SOURCE_DIR) / "sim/run/check_result.h"));
}
