#include "sim/trace/output_file.h"

#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sim/base/error.h"
#include "sim/io/output_files.h"

namespace trnsim::trace {

OutputFile::OutputFile(const std::filesystem::path& path) : path_(path) {
  try {
    target_ = io::resolved_path(path.string());
  } catch (const InputError& e) {
    throw InputError(fmt::format("cannot create trace file '{}': {}", path.string(), e.what()));
  }
  // A trace named like an output folder's record (.trnsim-files) would replace it: refused, as for every
  // output (the CLI checks this with its other outputs; the Python bindings reach here directly).
  io::check_not_a_record(path.string(), "trace file");
  io::check_not_a_record(target_.string(), "trace file (through a symlink)");
  // Never written through a link to a file (sim/io/output_files.h): only one to a device or FIFO.
  io::check_no_links(path.string(), "trace file");
  std::error_code ec;
  if (std::filesystem::is_directory(target_, ec))
    throw InputError(fmt::format("cannot create trace file '{}': it is a directory", path.string()));
  if (io::is_special_file(target_.string())) {
    file_ = std::fopen(target_.c_str(), "wb");
    if (file_ == nullptr)
      throw InputError(fmt::format("cannot create trace file '{}': {}", path.string(), std::strerror(errno)));
  } else {
    try {
      const io::TempFile t = io::create_temp_for(target_.string(), on_signal_);
      file_ = t.file;
      temp_ = t.path;
    } catch (const InputError& e) {
      throw InputError(fmt::format("cannot create trace file '{}': {}", path.string(), e.what()));
    }
  }
  // The writers already buffer in large chunks; a second copy through stdio would only cost time.
  std::setvbuf(file_, nullptr, _IONBF, 0);
}

OutputFile::~OutputFile() {
  drop();
}

void OutputFile::drop() {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  if (!temp_.empty()) std::remove(temp_.c_str());
  temp_.clear();
  on_signal_.clear();
}

void OutputFile::write(const void* data, size_t bytes) {
  if (bytes == 0) return;
  if (file_ == nullptr) throw InputError(fmt::format("trace file '{}' is already closed", path_.string()));
  if (std::fwrite(data, 1, bytes, file_) != bytes) {
    const int err = errno;
    drop();
    throw InputError(fmt::format("cannot write trace file '{}': {}", path_.string(), std::strerror(err)));
  }
  bytes_ += bytes;
}

void OutputFile::close() {
  if (file_ == nullptr) return;
  std::FILE* f = file_;
  file_ = nullptr;
  // On disk before it replaces what was there (a device or FIFO cannot be synced, and need not be).
  const bool synced = !temp_.empty() ? ::fsync(::fileno(f)) == 0 : true;
  const int sync_err = errno;
  if (std::fclose(f) != 0 || !synced) {
    const int err = synced ? errno : sync_err;
    drop();
    throw InputError(fmt::format("cannot write trace file '{}': {}", path_.string(), std::strerror(err)));
  }
  if (!temp_.empty() && std::rename(temp_.c_str(), target_.c_str()) != 0) {
    const int err = errno;
    drop();
    throw InputError(fmt::format("cannot write trace file '{}': {}", path_.string(), std::strerror(err)));
  }
  temp_.clear();
  on_signal_.clear();
}

}  // namespace trnsim::trace
