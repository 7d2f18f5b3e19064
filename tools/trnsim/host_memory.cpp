#include "tools/trnsim/host_memory.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>

#include "sim/base/env_bytes.h"
#include "sim/base/error.h"
#include "sim/base/host_bytes.h"
#include "sim/numerics/host_threads.h"

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

// Measured: a run's report (report.html) of matmul_mxfp8_bwd_512_trn3 is 195 KB. Its plots and tables draw
// stats.json's lists, which are capped (above), so it grows as stats.json does: counted as four times
// stats.json's estimate.
double report_bytes(size_t tensors) {
  return 4 * (256 * 1024.0 + 2 * 1024.0 * static_cast<double>(tensors));
}

// Measured: a .pftrace takes 0.33-0.43 KiB and a .json 0.9-1.3 KiB per instruction (cs149_vector_add n =
// 160000, 2500 instructions; matmul_lhsT_blocked at 2048, 1728 instructions). Counted as 4 KiB per
// instruction + 64 KiB, for either format.
double trace_bytes(uint64_t instructions) {
  return 64 * 1024.0 + 4096.0 * static_cast<double>(instructions);
}

double thread_stack_bytes(bool numerics) {
  return numerics ? 8.0 * 1024 * 1024 * (2.0 + num::host_split_threads()) : 0.0;
}

bool scratch_in_memory(const HostMemoryNeed& need, bool numerics) {
  std::optional<uint64_t> room = env_byte_count("TRNSIM_SCRATCH_IN_MEMORY_BYTES");
  const std::optional<uint64_t> have = available_host_bytes();
  if (!room && have) room = *have / 2;
  const double total = need.anonymous + thread_stack_bytes(numerics) + need.scratch;
  // Memory files cannot be paged out (no swap is assumed): never more than the machine has, whatever the
  // variable says.
  return room && *room > 0 && total <= static_cast<double>(*room) &&
         (!have || total <= static_cast<double>(*have));
}

HostMemoryNeed placed(HostMemoryNeed need, bool in_memory) {
  if (in_memory) need.anonymous += need.scratch, need.scratch = 0;
  return need;
}

void check_host_memory_need(const HostMemoryNeed& need, const std::string& file, bool numerics,
                            bool dump_inputs, const std::string& out_dir, const std::string& trace,
                            const std::string& report) {
  const std::string instead = !numerics && !dump_inputs ? "free room there"
                              : !numerics               ? "run without --dump-inputs"
                              : dump_inputs ? "run with --no-numerics (timing only) and without --dump-inputs"
                                            : "run with --no-numerics (timing only)";
  const std::string what = numerics
                               ? "the host's copy of the inputs, the simulated machine's HBM tensors, SBUF "
                                 "and PSUM, and the references' copies of their operands"
                               : "the inputs to dump";
  const double anonymous = need.anonymous + thread_stack_bytes(numerics);
  const double paged = need.scratch + need.mapped;
  const std::string besides =
      paged > 0 ? fmt::format(
                      ", besides {} that the OS can page ({} of scratch files on the output's "
                      "filesystem, {} of mapped .npy inputs)",
                      size_text(paged), size_text(need.scratch), size_text(need.mapped))
                : "";
  const std::optional<uint64_t> have = available_host_bytes();
  if (have && anonymous > static_cast<double>(*have))
    throw InputError(fmt::format(
        "{}: this run needs at least {} of host memory ({}){}, and {} is available: {}, or on a machine with "
        "more memory",
        file, size_text(anonymous), what, besides, size_text(static_cast<double>(*have)), instead));
  const std::optional<uint64_t> room = address_space_headroom();
  if (room && anonymous + paged > static_cast<double>(*room))
    throw InputError(fmt::format(
        "{}: this run needs at least {} of host memory ({}){}, and the address-space limit (ulimit -v) "
        "leaves {}: {}, or with a higher limit",
        file, size_text(anonymous), what, besides, size_text(static_cast<double>(*room)), instead));
  // The trace and the report count with the output's files when they land on the same filesystem, else each
  // on its own.
  const fs::path dir = existing_folder(out_dir);
  double apart_here = 0;
  std::string with_files;
  const auto count = [&](double bytes, const std::string& path, const char* option, const char* estimate,
                         const char* instead_of) {
    if (bytes <= 0 || path.empty()) return;
    const fs::path tdir =
        existing_folder(fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path());
    struct stat a {
    }, b{};
    const bool same = ::stat(dir.c_str(), &a) == 0 && ::stat(tdir.c_str(), &b) == 0 && a.st_dev == b.st_dev;
    if (same) {
      apart_here += bytes;
      with_files += fmt::format(", and up to {} of {} {}", size_text(bytes), option, path);
      return;
    }
    const std::optional<uint64_t> tdisk = free_disk_bytes(tdir.string());
    if (tdisk && bytes > static_cast<double>(*tdisk))
      throw InputError(fmt::format(
          "{}: {} {} needs up to {} on its filesystem ({}), and {} is free there: {} into a filesystem with "
          "more room, or run without {}",
          file, option, path, size_text(bytes), estimate, size_text(static_cast<double>(*tdisk)), instead_of,
          option));
  };
  count(need.trace, trace, "--trace", "an upper estimate from the instruction count", "trace");
  count(need.report, report, "--report", "an upper estimate", "write it");
  const double on_disk = need.scratch + need.written + apart_here;
  if (on_disk <= 0) return;
  const std::optional<uint64_t> disk = free_disk_bytes(dir.string());
  if (disk && on_disk > static_cast<double>(*disk))
    throw InputError(fmt::format(
        "{}: this run needs {} on the filesystem of {} ({} of scratch files for its large tensors, which the "
        "OS can page, and {} of new files it writes (an upper estimate for stats.json, host.json and the "
        "record), beside the earlier run's until they are replaced{}; and {} of host memory besides), and {} "
        "is free there: {}, --out on a filesystem with more room, or on a machine with more memory",
        file, size_text(on_disk), out_dir, size_text(need.scratch), size_text(need.written), with_files,
        size_text(anonymous), size_text(static_cast<double>(*disk)), instead));
}

bool place_and_check_host_memory(const HostMemoryNeed& need, const std::string& file, bool numerics,
                                 bool dump_inputs, const std::string& out_dir, const std::string& trace,
                                 const std::string& report) {
  const bool in_memory = scratch_in_memory(need, numerics);
  check_host_memory_need(placed(need, in_memory), file, numerics, dump_inputs, out_dir, trace, report);
  return in_memory;
}

}  // namespace trnsim::cli
