#include "sim/trace/open_trace.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sim/base/error.h"
#include "sim/io/made_folders.h"
#include "sim/io/output_files.h"
#include "sim/trace/json_trace_writer.h"
#include "sim/trace/perfetto_writer.h"

namespace trnsim::trace {

namespace {

bool known_extension(const std::filesystem::path& path) {
  const std::string ext = path.extension().string();
  return ext == ".json" || ext == ".pftrace" || ext == ".perfetto-trace" || ext == ".pb";
}

}  // namespace

void check_trace_path(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  // A device or FIFO (/dev/null, /dev/stdout, a pipe to a reader) takes the Perfetto format whatever its
  // name.
  const bool special = io::is_special_file(path.string());
  io::check_no_links(path.string(), "trace file");
  if (!known_extension(path) && !special)
    throw InputError(
        fmt::format("trace file '{}': unknown extension '{}' (expected .pftrace, .perfetto-trace, .pb "
                    "or .json)",
                    path.string(), path.extension().string()));
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw InputError(fmt::format("cannot create trace file '{}': it is a directory", path.string()));
  // Its folder: created later if missing (never through a dangling link); one that exists must be a folder
  // this process can write into.
  io::check_no_dangling_link(path.parent_path().string(),
                             fmt::format("cannot create trace file '{}'", path.string()));
  fs::path dir = fs::path(io::resolved_path(path.string())).parent_path();
  while (!dir.empty() && !fs::exists(dir, ec) && dir != dir.parent_path()) dir = dir.parent_path();
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw InputError(
        fmt::format("cannot create trace file '{}': '{}' is not a directory", path.string(), dir.string()));
  if (!special && fs::is_directory(dir, ec) && ::access(dir.c_str(), W_OK | X_OK) != 0)
    throw InputError(fmt::format("cannot create trace file '{}': cannot write into '{}' ({})", path.string(),
                                 dir.string(), std::strerror(errno)));
}

std::unique_ptr<TraceSink> open_trace_file(const std::filesystem::path& path) {
  check_trace_path(path);
  if (path.extension() == ".json") return std::make_unique<JsonTraceWriter>(path);
  return std::make_unique<PerfettoWriter>(path);
}

}  // namespace trnsim::trace
