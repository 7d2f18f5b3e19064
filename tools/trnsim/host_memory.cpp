#include "tools/trnsim/host_memory.h"

#include <fmt/format.h>

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

}  // namespace

void check_host_memory_need(const HostMemoryNeed& need, const std::string& file, bool numerics,
                            bool dump_inputs, const std::string& out_dir) {
  const std::string instead = !numerics     ? "run without --dump-inputs"
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
  const double on_disk = need.scratch + need.written;
  if (on_disk <= 0) return;
  // The output folder may not exist yet: the filesystem of its nearest existing ancestor.
  fs::path dir = fs::absolute(fs::path(out_dir));
  std::error_code ec;
  while (!dir.empty() && !fs::is_directory(dir, ec) && dir != dir.parent_path()) dir = dir.parent_path();
  const std::optional<uint64_t> disk = free_disk_bytes(dir.string());
  if (disk && on_disk > static_cast<double>(*disk))
    throw InputError(fmt::format(
        "{}: this run needs {} on the filesystem of {} ({} of scratch files for its large tensors, which the "
        "OS can page, and {} of new files it writes, beside the earlier run's until they are replaced; and "
        "{} "
        "of host memory besides), and {} is free there: {}, --out on a filesystem with more room, or on a "
        "machine with more memory",
        file, size_text(on_disk), out_dir, size_text(need.scratch), size_text(need.written),
        size_text(need.anonymous), size_text(static_cast<double>(*disk)), instead));
}

}  // namespace trnsim::cli
