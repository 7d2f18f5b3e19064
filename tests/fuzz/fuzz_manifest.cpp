// Fuzzes the output folder's record (sim/io/manifest.h): parse_manifest on the bytes (a record it accepts
// must print back to a record that reads the same), then the bytes as DIR/.trnsim-files of a scratch run
// folder, which open_run_folder reads and, in state "writing", rolls back, and inspect_run_folder judges.
// Whatever the record says, nothing outside the folder is removed, renamed or changed: a canary beside the
// folder, reached from inside through a symlinked folder and a symlinked file, must stay as it was. A set in
// several folders:
// "@OTHER@" in the bytes stands for a second scratch folder, which gets the same record as its journal (so
// the set is rolled back in both); a record naming any folder outside the scratch is only parsed (the
// roll-back would read the machine's files).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "sim/io/manifest.h"
#include "sim/io/output_files.h"
#include "tests/fuzz/fuzz_check.h"

using namespace trnsim;
namespace fs = std::filesystem;

namespace {

void put(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

std::string get(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::run(size, [&] {
    const io::Manifest m = io::parse_manifest(text, "M");
    if (m.version >= 2) {  // JSON (layout 2 or 3): printed with the lowest layout that holds it
      const std::string again = io::manifest_text(m);
      if (io::manifest_text(io::parse_manifest(again, "M")) != again)
        fuzz::die("the manifest does not read back as written", again);
    }
  });
  // The folder: two files (one in a subfolder), a symlinked folder and a symlinked file leading outside.
  const fs::path root = fuzz::scratch_dir(), dir = root / "run", outside = root / "outside",
                 other = root / "other";
  std::string record = text;
  for (size_t at = 0; (at = record.find("@OTHER@", at)) != std::string::npos; at += other.string().size())
    record.replace(at, 7, other.string());
  try {
    for (const io::OtherRecord& o : io::parse_manifest(record, "M").others)
      if (o.folder.rfind(root.string() + "/", 0) != 0) return 0;
  } catch (const std::exception&) {
    // refused: nothing is acted on
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::remove_all(outside, ec);
  fs::remove_all(other, ec);
  fs::create_directories(dir / "inputs");
  fs::create_directories(outside);
  fs::create_directories(other);
  put(dir / "a.npy", "a");
  put(dir / "inputs" / "b.npy", "b");
  put(outside / "canary", "keep");
  put(other / "s.npy", "s");
  fs::create_directory_symlink(outside, dir / "link");
  fs::create_symlink(outside / "canary", dir / "lnk.npy");
  put(dir / io::kManifestName, record);
  put(other / io::kJournalName, record);
  fuzz::run(size, [&] {
    io::inspect_run_folder(dir.string());
    io::open_run_folder(dir.string());
  });
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(outside)) entries += e.path().filename() == "canary" ? 1 : 100;
  if (entries != 1 || get(outside / "canary") != "keep" || !fs::is_symlink(dir / "lnk.npy") ||
      !fs::is_symlink(dir / "link"))
    fuzz::die("a record changed something outside the run folder", text.substr(0, 1000));
  return 0;
}
