// Pieces of sim/io/output_files.cpp that the set protocol (output_set.cpp) uses; not for other callers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/base/host_bytes.h"

namespace trnsim::io::detail {

// InputError unless `path`'s folder exists and `path` is not a directory.
void check_output_path(const std::string& path);
// Writes a device or FIFO `name` in the folder open as `dir_fd` in place; `shown` is the path as the user
// gave it (a symlink to /dev/full). Never truncates or writes a regular file (one put there meanwhile).
void write_through(int dir_fd, const std::string& name, const std::string& shown,
                   const std::vector<uint8_t>& image, const HostBytes& tail);
// Writes a record (sim/io/manifest.h) `name` in the folder open as `dir_fd` (`dir` for messages): a
// temporary synced, renamed over the name (never through a symlink there) and the folder synced. InputError
// "<dir>/<name>: cannot write: <reason>".
void write_record(int dir_fd, const std::string& dir, const std::string& name, const std::string& text);

}  // namespace trnsim::io::detail
