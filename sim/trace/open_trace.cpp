#include "sim/trace/open_trace.h"

#include <fmt/format.h>

#include "sim/base/error.h"
#include "sim/trace/json_trace_writer.h"
#include "sim/trace/perfetto_writer.h"

namespace trnsim::trace {

std::unique_ptr<TraceSink> open_trace_file(const std::filesystem::path& path) {
  const std::string ext = path.extension().string();
  if (ext == ".json") return std::make_unique<JsonTraceWriter>(path);
  if (ext == ".pftrace" || ext == ".perfetto-trace" || ext == ".pb")
    return std::make_unique<PerfettoWriter>(path);
  throw InputError(
      fmt::format("trace file '{}': unknown extension '{}' (expected .pftrace, .perfetto-trace, .pb "
                  "or .json)",
                  path.string(), ext));
}

}  // namespace trnsim::trace
