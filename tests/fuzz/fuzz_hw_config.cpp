// Fuzzes the hardware config loader with overrides (sim/config/hw_config.h): the input is a config document,
// optionally followed by a line "#overrides" and one `--set` assignment per line (path=value). The document
// goes through the one JSON reader (config::parse_json_document), the assignments through parse_override,
// then parse_hw_config. An accepted config must honour the accepted ranges that keep a run finite: positive
// clocks and bandwidths, efficiencies in (0, 1], at least one partition, a PSUM bank that divides PSUM.
#include <cmath>
#include <cstdint>
#include <string>

#include "sim/config/hw_config.h"
#include "sim/config/json_document.h"
#include "tests/fuzz/fuzz_check.h"

using namespace trnsim;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const size_t split = text.find("\n#overrides\n");
  fuzz::run(size, [&] {
    const nlohmann::json doc = config::parse_json_document(text.substr(0, split), "hw.json");
    config::Overrides overrides;
    if (split != std::string::npos) {
      size_t pos = split + 12;
      while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        auto [path, value] = config::parse_override(text.substr(pos, end - pos));
        overrides[path] = value;
        pos = end + 1;
      }
    }
    const config::HwConfig c = config::parse_hw_config(doc, "hw.json", overrides);
    for (int e = 0; e < isa::kNumEngines; ++e) {
      const double ghz = c.clock_GHz(static_cast<isa::Engine>(e));
      if (!(ghz > 0) || !std::isfinite(ghz)) fuzz::die("accepted config", "has a clock that is not positive");
    }
    if (!(c.hbm.bandwidth_GBps > 0) || !(c.dma.engine_bandwidth_GBps > 0))
      fuzz::die("accepted config", "has a bandwidth that is not positive");
    for (double bpp : {0.0, 1.0, 512.0, 65536.0, 1e12}) {
      const double eff = c.dma_efficiency(bpp);
      if (!(eff > 0) || eff > 1) fuzz::die("accepted config", "has a DMA efficiency outside (0, 1]");
    }
    const isa::Limits l = c.limits();
    if (l.partitions == 0 || l.psum_bank_bytes == 0 || l.psum_bytes_per_partition % l.psum_bank_bytes != 0)
      fuzz::die("accepted config", "has impossible memory sizes");
  });
  return 0;
}
