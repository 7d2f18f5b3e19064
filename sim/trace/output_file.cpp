#include "sim/trace/output_file.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sim/base/error.h"
#include "sim/io/output_files.h"
#include "sim/io/replace_check.h"

namespace trnsim::trace {

OutputFile::OutputFile(const std::filesystem::path& path) : path_(path) {
  // A trace named like an output folder's record (.trnsim-files) would replace it: refused, as for every
  // output (the CLI checks this with its other outputs; the Python bindings reach here directly).
  io::check_not_a_record(path.string(), "trace file");
  try {
    io::check_not_a_record(io::resolved_path(path.string()), "trace file (through a symlink)");
  } catch (const InputError& e) {
    throw InputError(fmt::format("cannot create trace file '{}': {}", path.string(), e.what()));
  }
  // Never written through a link to a file (sim/io/output_files.h): only one to a device or FIFO.
  io::Destination d = [&] {
    try {
      return io::destination_of(path.string(), "trace file");
    } catch (const InputError& e) {
      const std::string what = e.what();
      if (what.find("it is a directory") != std::string::npos)
        throw InputError(fmt::format("cannot create trace file '{}': it is a directory", path.string()));
      if (what.rfind("trace file", 0) == 0) throw;
      throw InputError(fmt::format("cannot create trace file '{}': {}", path.string(), what));
    }
  }();
  dir_ = std::move(d.dir);
  name_ = d.name;
  if (d.special) {
    const int fd = ::openat(dir_.get(), name_.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    file_ = fd < 0 ? nullptr : ::fdopen(fd, "wb");
    if (file_ == nullptr)
      throw InputError(fmt::format("cannot create trace file '{}': {}", path.string(), std::strerror(errno)));
  } else {
    io::check_may_replace_at(dir_.get(), name_, path.string(), "trace file");
    sha_ = std::make_unique<io::Sha256>();
    try {
      const io::TempFile t =
          io::create_temp_in(dir_.get(), name_, path.string(), on_signal_, io::kTraceTempPrefix);
      file_ = t.file;
      temp_ = t.name;
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
  drop(file_);
  file_ = nullptr;
}

void OutputFile::drop(std::FILE* f) {
  // Removed while still open, so locked (io::create_temp_in): never taken for a killed run's meanwhile.
  if (!temp_.empty()) ::unlinkat(dir_.get(), temp_.c_str(), 0);
  if (f != nullptr) std::fclose(f);
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
  if (sha_) sha_->update(data, bytes);
}

void OutputFile::close() {
  if (file_ == nullptr) return;
  std::FILE* f = file_;
  file_ = nullptr;
  if (temp_.empty()) {  // a device or FIFO: nothing to sync or rename
    if (std::fclose(f) != 0)
      throw InputError(fmt::format("cannot write trace file '{}': {}", path_.string(), std::strerror(errno)));
    return;
  }
  // On disk before it replaces what was there. The temporary stays open (locked: io::create_temp_in) until it
  // is renamed or removed, also while the rename waits for the folder's lock: a trnsim in another PID
  // namespace must not take it for a killed run's.
  struct stat st {};
  const bool have_inode = ::fstat(::fileno(f), &st) == 0;
  if (std::fflush(f) != 0 || ::fsync(::fileno(f)) != 0) {
    const int err = errno;
    drop(f);
    throw InputError(fmt::format("cannot write trace file '{}': {}", path_.string(), std::strerror(err)));
  }
  // Renamed and recorded under the folder's lock, waiting while another trnsim (or another program) holds it,
  // as every set of files is written: a writer there meanwhile (a quantize, another trace) never sees the
  // trace in place before its record names it, and a kill while waiting leaves the earlier file as it was.
  // A folder no longer at its path (moved meanwhile) or held for minutes: renamed unlocked, as before.
  const std::filesystem::path parent = path_.has_parent_path() ? path_.parent_path() : ".";
  std::vector<io::DirLock> locks;
  try {
    locks = io::lock_folders({parent.string()});
    // What killed trnsims left there (an unfinished trace of a SIGKILL, a record's temporary) goes, as a run
    // or quantize writing into the folder removes it.
    io::remove_killed_temporaries(dir_.get());
  } catch (const InputError&) {
  }
  // What is at the destination now is what may be replaced: a file put there while the trace was written is
  // the user's.
  try {
    io::check_may_replace_at(dir_.get(), name_, path_.string(), "trace file");
  } catch (const InputError&) {
    drop(f);
    throw;
  }
  if (::renameat(dir_.get(), temp_.c_str(), dir_.get(), name_.c_str()) != 0) {
    const int err = errno;
    drop(f);
    throw InputError(fmt::format("cannot write trace file '{}': {}", path_.string(), std::strerror(err)));
  }
  std::fclose(f);       // synced above: nothing left to fail
  ::fsync(dir_.get());  // the rename on disk too (some file systems refuse: nothing more to do then)
  temp_.clear();
  on_signal_.clear();
  if (have_inode && sha_) {
    io::record_written(dir_.get(), parent.string(),
                       {{name_, bytes_, static_cast<uint64_t>(st.st_ino), sha_->hex()}});
  }
}

}  // namespace trnsim::trace
