// A file written in large chunks: the trace writers fill their own buffer and hand it over here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>

namespace trnsim::trace {

class OutputFile {
 public:
  // Creates (truncates) the file. Throws InputError naming the path when it cannot be created.
  explicit OutputFile(const std::filesystem::path& path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Throws InputError naming the path on a short write (disk full, I/O error).
  void write(const void* data, size_t bytes);
  // Flushes and closes; throws InputError on failure. Later calls do nothing.
  void close();

  bool is_open() const { return file_ != nullptr; }
  const std::filesystem::path& path() const { return path_; }
  // Bytes handed to write() so far.
  uint64_t bytes_written() const { return bytes_; }

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  uint64_t bytes_ = 0;
};

}  // namespace trnsim::trace
