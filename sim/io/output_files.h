// Writing a run's output files, with one policy for every output (.npy outputs, stats.json, dumped inputs,
// `trnsim quantize`, the trace):
//   - A regular file (or a new one) is written all or nothing: every file is first written to a temporary
//     next to its destination, and only when all of them are complete are they renamed into place. On a
//     failure the temporaries are removed and no destination is touched.
//   - A symlink is written through: its target is replaced (atomically, as above), the link stays.
//   - A character device, FIFO or socket (/dev/null, /dev/stdout) is written through in place, before any
//     rename, so a failing device (/dev/full) leaves every regular destination untouched. It is never
//     replaced by a regular file.
//   - A directory in the way is an error; nothing the run did not create is ever removed.
// Errors: InputError "<path>: cannot write: <reason>".
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/interrupt.h"

namespace trnsim::io {

struct OutputFile {
  std::string path;
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> tail =
      {};  // written after `bytes` (e.g. a tensor's data after its .npy header, uncopied)
};

void write_files_atomic(const std::vector<OutputFile>& files);

// A fresh temporary's name next to `path` (".NAME.tmp.PID.N", hidden, unique within this process; NAME cut
// short to keep it within 255 bytes).
std::string temp_path_for(const std::string& path);

// A new temporary for `path` (a regular file's resolved destination), open for writing: created exclusively
// (the next name is tried while one exists), with the destination's permissions when it exists, and in
// `on_signal` (removed if a signal ends the process) from before it exists. InputError "<path>: cannot
// write: <reason>".
struct TempFile {
  std::FILE* file;
  std::string path;
};
TempFile create_temp_for(const std::string& path, std::vector<interrupt::CleanupPath>& on_signal);

// True for a character or block device, FIFO or socket at `path` (after symlinks): written through in place.
bool is_special_file(const std::string& path);

// Where a write to `path` lands: the final target of a symlink chain (a dangling one too), made absolute and
// normalised (the path itself when it does not exist). InputError for a symlink loop.
std::string resolved_path(const std::string& path);

// One output or input of a run, for distinct_files.
struct NamedPath {
  std::string path;
  std::string what;  // e.g. "--trace", "output 'y'", "input 'x' (inputs.x.npy)"
  bool is_input = false;
};
// InputError if two of `paths` land on the same file (after symlinks; hard links of existing files too) and
// one of them is an output: "<what A> and <what B> are the same file (<path>)". Character devices may be
// shared (two outputs to /dev/null).
void check_distinct_files(const std::vector<NamedPath>& paths);

// InputError "<what> '<path>': cannot write: it is a directory" when an output's path names a directory
// (after symlinks): for a run that wants it reported before it simulates, not after. Inputs are skipped.
void check_not_directories(const std::vector<NamedPath>& paths);

}  // namespace trnsim::io
