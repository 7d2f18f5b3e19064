// A trace file written in large chunks while the model runs: the trace writers fill their own buffer and
// hand it over here. The chunks go to a temporary in the destination's folder (io::create_temp_in,
// .trnsim-trace.PID.N, locked while it lives, so a killed run's is removed by the next trnsim writing there:
// io::remove_killed_temporaries), renamed into
// place by close(), both in the folder opened at the start (io::destination_of: in a run's locked --out,
// through its handle, so a folder moved meanwhile still gets the trace): whatever was at the destination
// stays as it was until then, and is never touched if the file is dropped (destroyed without close(), a write
// error, a signal that ends the process). A symlink is refused (io::check_no_links), unless it points to a
// device or FIFO; a device or FIFO (/dev/null) is written in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include "sim/base/interrupt.h"
#include "sim/io/content_hash.h"
#include "sim/io/dir_lock.h"

namespace trnsim::trace {

class OutputFile {
 public:
  // Creates the temporary. Throws InputError naming the path when it cannot be created (missing folder,
  // a directory at the path, no permission) or a file is there that trnsim will not replace
  // (sim/io/replace_check.h: not one it wrote, or changed since, without --overwrite).
  explicit OutputFile(const std::filesystem::path& path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Throws InputError naming the path on a short write (disk full, I/O error); the file is dropped.
  void write(const void* data, size_t bytes);
  // Flushes, closes and renames the file into place, and adds it to its folder's DIR/.trnsim-written (so a
  // later trace may replace it), both under the folder's lock (io::lock_folders: waits while another process
  // holds it); throws InputError on failure (the file is dropped), also when a file trnsim will not replace
  // was put at the path meanwhile. Later calls do nothing.
  void close();

  bool is_open() const { return file_ != nullptr; }
  const std::filesystem::path& path() const { return path_; }
  // Bytes handed to write() so far.
  uint64_t bytes_written() const { return bytes_; }

 private:
  void drop();
  void drop(std::FILE* f);      // removes the temporary, then closes `f` (taken from file_)
  std::filesystem::path path_;  // as given
  io::Fd dir_;                  // the folder it lands in
  std::string name_;            // its name there
  std::string temp_;            // the temporary's name there; empty when in place
  std::vector<interrupt::CleanupPath> on_signal_;  // the temporary
  std::FILE* file_ = nullptr;
  uint64_t bytes_ = 0;
  std::unique_ptr<io::Sha256> sha_;  // of the bytes written (a regular file's)
};

}  // namespace trnsim::trace
