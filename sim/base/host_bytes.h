// The bytes of a host tensor, an HBM tensor of the simulated machine or a .npy array: memory the OS can page
// when it is large, so that a layer whose tensors exceed the host's RAM still runs (docs/architecture.md,
// "Host memory").
//
// A HostBytes is one of:
//   - anonymous: ordinary heap memory (small buffers, and every buffer when no scratch folder is set);
//   - scratch: a shared mapping of a scratch file of its own, opened with O_TMPFILE in the scratch folder
//     (or created and unlinked at once where O_TMPFILE is refused), so it has no name and nothing is left
//     behind however the process ends; its blocks are reserved up front (posix_fallocate), so a full disk
//     is found when it is made, never as a SIGBUS later. The kernel writes its dirty pages to that file
//     instead of keeping them in RAM when memory runs short. While set_scratch_in_memory is on, the file is
//     a memory file instead (memfd_create: as nameless, its pages RAM only, never written to disk);
//   - a private mapping of a file read from disk (map_file: a .npy's data): read-only pages shared with the
//     page cache; a write copies the page (copy-on-write), never changing the file.
// Nothing is mapped until a program turns it on (set_pageable; `trnsim run` does, tests and Python do not).
// Then .npy files of at least `min_bytes` of data are mapped (io::read_npy), and once a scratch folder is
// set (`trnsim run`: its output folder, so the scratch lives on the output's filesystem) every new buffer
// of at least `min_bytes` is a scratch mapping. Copies are deep (a new buffer by the same rule) except
// cow_copy, which maps the same file again privately: the copy shares the pages until one side writes. The
// file behind a private mapping must not change while the run reads it (as with any input file); a truncated
// file makes the reads fault (SIGBUS), which the handler of sim/base/interrupt.h reports naming the file
// ("changed size while the run read it"), cleaning up and exiting with status 1. Errors: InputError "<path>:
// cannot map: <reason>" from map_file; std::bad_alloc when neither a scratch mapping nor the heap can hold a
// buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace trnsim {

class HostBytes {
 public:
  HostBytes() = default;
  // `n` bytes of `fill`.
  explicit HostBytes(size_t n, uint8_t fill = 0);
  HostBytes(std::vector<uint8_t>&& v);       // NOLINT(google-explicit-constructor): takes the buffer
  HostBytes(const std::vector<uint8_t>& v);  // NOLINT(google-explicit-constructor)
  HostBytes(const HostBytes& o);
  HostBytes(HostBytes&& o) noexcept;
  HostBytes& operator=(const HostBytes& o);
  HostBytes& operator=(HostBytes&& o) noexcept;
  ~HostBytes();

  // `size` bytes of the file at `path` from byte `offset`, privately mapped (above).
  static HostBytes map_file(const std::string& path, uint64_t offset, size_t size);
  // The same bytes: a second private mapping of the same file (scratch or mapped file), else a deep copy.
  HostBytes cow_copy() const;

  uint8_t* data() { return p_; }
  const uint8_t* data() const { return p_; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  uint8_t& operator[](size_t i) { return p_[i]; }
  const uint8_t& operator[](size_t i) const { return p_[i]; }
  uint8_t* begin() { return p_; }
  uint8_t* end() { return p_ + n_; }
  const uint8_t* begin() const { return p_; }
  const uint8_t* end() const { return p_ + n_; }
  // A new buffer of `n` bytes of `fill` (by the rule above).
  void assign(size_t n, uint8_t fill);
  // Keeps the first min(n, size()) bytes; new bytes are 0.
  void resize(size_t n);
  std::vector<uint8_t> to_vector() const { return {begin(), end()}; }

  bool file_backed() const { return map_ != nullptr; }
  bool scratch() const;  // a scratch-file mapping

  friend bool operator==(const HostBytes& a, const HostBytes& b);
  friend bool operator==(const HostBytes& a, const std::vector<uint8_t>& b);

 private:
  struct Mapping;
  std::vector<uint8_t> vec_;  // anonymous
  std::shared_ptr<Mapping> map_;
  uint8_t* p_ = nullptr;
  size_t n_ = 0;
};

inline constexpr uint64_t kPageableMinBytes = uint64_t{64} << 20;
// Turns mapping on (or off) with this threshold (above). The environment variable TRNSIM_SCRATCH_MIN_BYTES,
// when set, replaces `min_bytes` (tests map small tensors with it): InputError unless it is a plain decimal
// byte count.
void set_pageable(bool on, uint64_t min_bytes = kPageableMinBytes);
// The scratch folder (above); "" turns scratch mappings off.
void set_scratch_dir(const std::string& dir);
// Whether new scratch buffers are memory files (above) rather than files in the scratch folder; off at
// first. For a run whose memory fits in RAM with room (`trnsim run` decides: tools/trnsim/host_memory.h):
// the first write into a memory file's page costs a fraction of a scratch file's (no read of the file's
// hole, no block reservation, no writeback to disk), and nothing can page it out (no swap).
void set_scratch_in_memory(bool on);
// Whether a file's data of `n` bytes is mapped now (mapping is on and n >= the threshold).
bool maps_files(uint64_t n);
// Whether a new buffer of `n` bytes is a scratch mapping now (mapping is on, a folder is set, n >= the
// threshold).
bool makes_scratch(uint64_t n);
// Free bytes of the filesystem holding `dir` (statvfs, for unprivileged users); nullopt if unknown.
std::optional<uint64_t> free_disk_bytes(const std::string& dir);

}  // namespace trnsim
