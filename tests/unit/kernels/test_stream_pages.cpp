// The builder does not advise its instruction streams as transparent huge pages (kernel.cpp, build_program:
// on a VM with free page reporting each fresh 2 MiB page costs host faults). The kernel would mark an advised
// mapping "hg" in /proc/self/smaps, where transparent huge pages exist at all.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "kernels/api/nki.h"
#include "sim/base/address_limit.h"

using namespace trnsim;
using namespace trnsim::kernels;

namespace {

// The VmFlags of the mapping of this process that holds `address` ("" if none is found).
std::string vm_flags(uintptr_t address) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= address && address < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

}  // namespace

TEST_CASE("a built program's instruction streams are not advised as huge-page memory", "[kernels]") {
  if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled") || address_space_limit()) {
    WARN("no transparent huge pages here, or an address-space limit (no stream is reserved ahead): skipped");
    return;
  }
  const KernelBuild b = build_program(
      [](Kernel& k) {
        View t = k.sbuf({128, 64}, DType::F32);
        for (int i = 0; i < 4; ++i) nki::memset(t, 1.0);
      },
      {default_limits(Generation::Trn2), 1});
  const auto& s = b.program.streams[0][static_cast<int>(Engine::DVE)];
  REQUIRE(s.size() == 4);
  // The reservation (2^18 instructions, a few hundred MB of address space): its middle, a whole 2 MiB page
  // away from either end, was advised before (flags ' hg').
  const auto middle = reinterpret_cast<uintptr_t>(s.data() + s.capacity() / 2);
  const std::string flags = vm_flags(middle);
  INFO(flags);
  REQUIRE(flags.rfind("VmFlags:", 0) == 0);  // the mapping was found
  CHECK(flags.find(" hg") == std::string::npos);
}
