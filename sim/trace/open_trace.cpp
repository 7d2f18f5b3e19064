#include "sim/trace/open_trace.h"

#include <fmt/format.h>

#include "sim/base/error.h"
#include "sim/trace/json_trace_writer.h"
#include "sim/trace/perfetto_writer.h"

namespace trnsim::trace {

void check_trace_path(const std::filesystem::path& path) {
  const std::string ext = path.extension().string();
  if (ext != ".json" && ext != ".pftrace" && ext != ".perfetto-trace" && ext != ".pb")
    throw InputError(
        fmt::format("trace file '{}': unknown extension '{}' (expected .pftrace, .perfetto-trace, .pb "
                    "or .json)",
                    path.string(), ext));
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(fmt::format("cannot create trace file '{}': it is a directory", path.string()));
}

std::unique_ptr<TraceSink> open_trace_file(const std::filesystem::path& path) {
  check_trace_path(path);
  if (path.extension() == ".json") return std::make_unique<JsonTraceWriter>(path);
  return std::make_unique<PerfettoWriter>(path);
}

}  // namespace trnsim::trace
