#include "sim/trace/output_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "sim/base/error.h"

namespace trnsim::trace {

OutputFile::OutputFile(const std::filesystem::path& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "wb");
  if (file_ == nullptr) {
    throw InputError(fmt::format("cannot create trace file '{}': {}", path.string(), std::strerror(errno)));
  }
  // The writers already buffer in large chunks; a second copy through stdio would only cost time.
  std::setvbuf(file_, nullptr, _IONBF, 0);
}

OutputFile::~OutputFile() {
  if (file_ != nullptr) std::fclose(file_);
}

void OutputFile::write(const void* data, size_t bytes) {
  if (bytes == 0) return;
  if (file_ == nullptr) throw InputError(fmt::format("trace file '{}' is already closed", path_.string()));
  if (std::fwrite(data, 1, bytes, file_) != bytes) {
    const int err = errno;
    std::fclose(file_);
    file_ = nullptr;
    throw InputError(fmt::format("cannot write trace file '{}': {}", path_.string(), std::strerror(err)));
  }
  bytes_ += bytes;
}

void OutputFile::close() {
  if (file_ == nullptr) return;
  std::FILE* f = file_;
  file_ = nullptr;
  if (std::fclose(f) != 0) {
    throw InputError(fmt::format("cannot write trace file '{}': {}", path_.string(), std::strerror(errno)));
  }
}

}  // namespace trnsim::trace
