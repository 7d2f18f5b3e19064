#include "tools/trnsim/host_memory.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "sim/base/error.h"
#include "sim/base/host_bytes.h"

namespace trnsim::cli {
namespace {

namespace fs = std::filesystem;

std::string size_text(double b) {
  return b >= 1e9 ? fmt::format("{:.1f} GB", b / 1e9) : fmt::format("{:.1f} MB", b / 1e6);
}

// The nearest existing folder of `path` (the output folder or trace may not exist yet): its filesystem is the
// one written into.
fs::path existing_folder(const fs::path& path) {
  fs::path dir = fs::absolute(path);
  std::error_code ec;
  while (!dir.empty() && !fs::is_directory(dir, ec) && dir != dir.parent_path()) dir = dir.parent_path();
  return dir;
}

}  // namespace

// Measured on this repository's kernels (trnsim run W --trace ...): stats.json is 37-169 KB (its long lists
// are capped: 400 critical-path segments, the top source lines), growing past that only by a few hundred
// bytes per tensor (allocations, numerics rows); host.json is under 100 bytes; a record entry is about 170
// bytes (with a temporary's and a backup's name while the set is written, and the record's new copy beside
// the old one). Counted with room to spare: 256 KiB + 2 KiB per tensor, 4 KiB, and 2 KiB per file + 4 KiB,
// and every file rounded up by a 4 KiB block.
double run_files_bytes(size_t tensors, size_t files) {
  constexpr double kKiB = 1024;
  const double stats = 256 * kKiB + 2 * kKiB * static_cast<double>(tensors);
  const double host = 4 * kKiB;
  const double record = 4 * kKiB + 2 * kKiB * static_cast<double>(files);
  return stats + host + record + 4 * kKiB * static_cast<double>(files + 3);
}

// Measured: a .pftrace takes 0.33-0.43 KiB and a .json 0.9-1.3 KiB per instruction (cs149_vector_add n =
// 160000, 2500 instructions; matmul_lhsT_blocked at 2048, 1728 instructions). Counted as 4 KiB per
// instruction + 64 KiB, for either format.
double trace_bytes(uint64_t instructions) {
  return 64 * 1024.0 + 4096.0 * static_cast<double>(instructions);
}

void check_host_memory_need(const HostMemoryNeed& need, const std::string& file, bool numerics,
                            bool dump_inputs, const std::string& out_dir, const std::string& trace) {
  const std::string instead = !numerics && !dump_inputs ? "free room there"
                              : !numerics               ? "run without --dump-inputs"
                              : dump_inputs ? "run with --no-numerics (timing only) and without --dump-inputs"
                                            : "run with --no-numerics (timing only)";
  const std::string what = numerics
                               ? "the host's copy of the inputs, the simulated machine's HBM tensors, SBUF "
                                 "and PSUM, and the references' copies of their operands"
                               : "the inputs to dump";
  const double paged = need.scratch + need.mapped;
  const std::string besides =
      paged > 0 ? fmt::format(
                      ", besides {} that the OS can page ({} of scratch files on the output's "
                      "filesystem, {} of mapped .npy inputs)",
                      size_text(paged), size_text(need.scratch), size_text(need.mapped))
                : "";
  const std::optional<uint64_t> have = available_host_bytes();
  if (have && need.anonymous > static_cast<double>(*have))
    throw InputError(fmt::format(
        "{}: this run needs at least {} of host memory ({}){}, and {} is available: {}, or on a machine with "
        "more memory",
        file, size_text(need.anonymous), what, besides, size_text(static_cast<double>(*have)), instead));
  const std::optional<uint64_t> room = address_space_headroom();
  if (room && need.anonymous + paged > static_cast<double>(*room))
    throw InputError(fmt::format(
        "{}: this run needs at least {} of host memory ({}){}, and the address-space limit (ulimit -v) "
        "leaves {}: {}, or with a higher limit",
        file, size_text(need.anonymous), what, besides, size_text(static_cast<double>(*room)), instead));
  // The trace counts with the output's files when it lands on the same filesystem, else on its own.
  const fs::path dir = existing_folder(out_dir);
  double trace_apart = 0, trace_here = 0;
  if (need.trace > 0 && !trace.empty()) {
    const fs::path tdir = existing_folder(
        fs::path(trace).parent_path().empty() ? fs::path(".") : fs::path(trace).parent_path());
    struct stat a {
    }, b{};
    const bool same = ::stat(dir.c_str(), &a) == 0 && ::stat(tdir.c_str(), &b) == 0 && a.st_dev == b.st_dev;
    (same ? trace_here : trace_apart) = need.trace;
    const std::optional<uint64_t> tdisk = same ? std::nullopt : free_disk_bytes(tdir.string());
    if (tdisk && trace_apart > static_cast<double>(*tdisk))
      throw InputError(fmt::format(
          "{}: --trace {} needs up to {} on its filesystem (an upper estimate from the instruction count), "
          "and {} is free there: trace into a filesystem with more room, or run without --trace",
          file, trace, size_text(trace_apart), size_text(static_cast<double>(*tdisk))));
  }
  const double on_disk = need.scratch + need.written + trace_here;
  if (on_disk <= 0) return;
  const std::optional<uint64_t> disk = free_disk_bytes(dir.string());
  const std::string with_trace =
      trace_here > 0 ? fmt::format(", and up to {} of --trace {}", size_text(trace_here), trace) : "";
  if (disk && on_disk > static_cast<double>(*disk))
    throw InputError(fmt::format(
        "{}: this run needs {} on the filesystem of {} ({} of scratch files for its large tensors, which the "
        "OS can page, and {} of new files it writes (an upper estimate for stats.json, host.json and the "
        "record), beside the earlier run's until they are replaced{}; and {} of host memory besides), and {} "
        "is free there: {}, --out on a filesystem with more room, or on a machine with more memory",
        file, size_text(on_disk), out_dir, size_text(need.scratch), size_text(need.written), with_trace,
        size_text(need.anonymous), size_text(static_cast<double>(*disk)), instead));
}

}  // namespace trnsim::cli
