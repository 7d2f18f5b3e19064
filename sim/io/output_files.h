// Writing a run's output files: all or nothing. Every file is first written to a temporary next to its
// destination; only when all of them are complete are they renamed into place. On any failure the
// temporaries are removed and no destination is touched. The one writer behind .npy outputs, stats.json and
// `trnsim quantize`.
// Errors: InputError "<path>: cannot write: <reason>" (missing directory, a directory in the way, a full
// disk, two outputs with the same path).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trnsim::io {

struct OutputFile {
  std::string path;
  std::vector<uint8_t> bytes;
};

void write_files_atomic(const std::vector<OutputFile>& files);

}  // namespace trnsim::io
