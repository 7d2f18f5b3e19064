// Fuzzes `trnsim stats` (sim/run/report.h): load_stats on the input saved as a file, then the printed table
// (format_stats) and the side-by-side comparison of the file with itself (format_compare). A stats.json the
// reader accepts must print without an exception, and without "nan" unless the input holds those letters (a
// name may): a damaged file once printed "nan%".
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>

#include "sim/run/report.h"
#include "tests/fuzz/fuzz_check.h"

using namespace trnsim;

// trnsim_run brings libsystemc.so, which references sc_main; nothing here pulls in the model's weak one
// (sim/model/run.cpp).
extern "C" int sc_main(int, char**) {
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("stats.json", data, size);
  fuzz::run(size, [&] {
    const nlohmann::json j = run::load_stats(path);
    const std::string table = run::format_stats(j, 10);
    std::string text(reinterpret_cast<const char*>(data), size);
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
    if (table.find("nan") != std::string::npos && text.find("nan") == std::string::npos)
      fuzz::die("format_stats printed nan", table.substr(0, 1500));
    run::format_compare(j, j, "a", "b");
  });
  return 0;
}
