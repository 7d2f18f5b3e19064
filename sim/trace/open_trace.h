// Picks a trace writer from the file name, for the CLI's --trace option.
#pragma once

#include <filesystem>
#include <memory>

#include "sim/trace/trace_sink.h"

namespace trnsim::trace {

// ".json" gives a JsonTraceWriter; ".pftrace", ".perfetto-trace" or ".pb" a PerfettoWriter, and so does a
// device or FIFO of any name (/dev/null). Throws InputError naming the path for any other extension or when
// the file cannot be created.
std::unique_ptr<TraceSink> open_trace_file(const std::filesystem::path& path);

// The checks open_trace_file makes before it creates anything (the extension, no directory at the path, an
// existing folder on the way that is a file or not writable), for a caller that wants a bad --trace
// reported before a long run. Throws InputError naming the path.
void check_trace_path(const std::filesystem::path& path);

}  // namespace trnsim::trace
