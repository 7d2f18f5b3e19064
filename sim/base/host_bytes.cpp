#include "sim/base/host_bytes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "sim/base/env_bytes.h"
#include "sim/base/error.h"
#include "sim/base/interrupt.h"
#include "sim/base/resident_governor.h"
#include "sim/base/scratch_dir.h"

namespace trnsim {
namespace {

std::mutex g_mutex;
bool g_on = false;
int g_dir_fd = -1;         // the scratch folder, open (a duplicate this module owns)
bool g_in_memory = false;  // scratch buffers are memory files (set_scratch_in_memory)
uint64_t g_min = kPageableMinBytes;

// A file descriptor, closed with the last mapping that needs it.
struct Fd {
  int fd;
  explicit Fd(int f) : fd(f) {}
  ~Fd() { ::close(fd); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

size_t page_size() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

// A nameless file of `n` reserved bytes in the folder open as `dir_fd`, or -1.
int scratch_file(int dir_fd, size_t n) {
  int fd = ::openat(dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {  // filesystems without O_TMPFILE: a name nothing has, removed at once
    static std::atomic<uint64_t> counter{0};
    for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
      const std::string name =
          ".trnsim-scratch-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
      fd = ::openat(dir_fd, name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd >= 0)
        ::unlinkat(dir_fd, name.c_str(), 0);
      else if (errno != EEXIST)
        return -1;
    }
    if (fd < 0) return -1;
  }
  if (::posix_fallocate(fd, 0, static_cast<off_t>(n)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A nameless memory file of `n` bytes (memfd_create: its pages are RAM, never written to disk), or -1. Its
// pages are taken when first touched, not reserved: posix_fallocate would clear every page now, and the
// caller writes them anyway.
int memory_file(size_t n) {
  const int fd = ::memfd_create("trnsim-scratch", MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (::ftruncate(fd, static_cast<off_t>(n)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

struct HostBytes::Mapping {
  std::shared_ptr<Fd> file;
  void* addr = nullptr;
  size_t len = 0;
  uint64_t file_offset = 0;  // of addr
  size_t skip = 0;           // from addr to the data
  std::string path;          // of a file read from disk
  bool scratch = false;
  std::unique_ptr<interrupt::MappedInput> input;     // a file read from disk: a SIGBUS here names it
  std::unique_ptr<resident::Registration> governed;  // resident_governor.h may release its pages
  ~Mapping() {
    governed.reset();  // before the range is unmapped
    input.reset();
    if (addr != nullptr) ::munmap(addr, len);
  }
};

HostBytes::HostBytes(size_t n, uint8_t fill) {
  assign(n, fill);
}

HostBytes::HostBytes(std::vector<uint8_t>&& v) : vec_(std::move(v)), p_(vec_.data()), n_(vec_.size()) {}
HostBytes::HostBytes(const std::vector<uint8_t>& v) : HostBytes(v.size()) {
  if (n_) std::memcpy(p_, v.data(), n_);
}

HostBytes::HostBytes(const HostBytes& o) : HostBytes(o.n_) {
  if (n_) std::memcpy(p_, o.p_, n_);
}

HostBytes::HostBytes(HostBytes&& o) noexcept
    : vec_(std::move(o.vec_)), map_(std::move(o.map_)), p_(o.p_), n_(o.n_) {
  if (!map_) p_ = vec_.data();
  o.vec_.clear();
  o.p_ = nullptr;
  o.n_ = 0;
}

HostBytes& HostBytes::operator=(const HostBytes& o) {
  if (this != &o) *this = HostBytes(o);
  return *this;
}

HostBytes& HostBytes::operator=(HostBytes&& o) noexcept {
  if (this != &o) {
    vec_ = std::move(o.vec_);
    map_ = std::move(o.map_);
    n_ = o.n_;
    p_ = map_ ? o.p_ : vec_.data();
    o.vec_.clear();
    o.p_ = nullptr;
    o.n_ = 0;
  }
  return *this;
}

HostBytes::~HostBytes() = default;

void HostBytes::assign(size_t n, uint8_t fill) {
  int dir = -1;  // a duplicate of the scratch folder's handle, valid while this call lasts
  bool in_memory = false;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_on && n > 0 && n >= g_min && g_dir_fd >= 0) {
      dir = ::fcntl(g_dir_fd, F_DUPFD_CLOEXEC, 0);
      in_memory = g_in_memory;
    }
  }
  const Fd dir_owner(dir);
  map_.reset();
  vec_.clear();
  vec_.shrink_to_fit();
  if (dir >= 0) {
    int fd = in_memory ? memory_file(n) : -1;
    if (fd < 0) fd = scratch_file(dir, n);
    if (fd >= 0) {
      auto file = std::make_shared<Fd>(fd);
      void* a = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (a != MAP_FAILED) {
        map_ = std::make_shared<Mapping>();
        map_->file = std::move(file);
        map_->addr = a;
        map_->len = n;
        map_->scratch = true;
        map_->governed = std::make_unique<resident::Registration>(a, n, true);
        p_ = static_cast<uint8_t*>(a);
        n_ = n;
        if (fill != 0) std::memset(p_, fill, n_);  // the file reads as zeros
        return;
      }
    }
  }
  vec_.assign(n, fill);
  p_ = vec_.data();
  n_ = n;
}

void HostBytes::resize(size_t n) {
  if (n == n_) return;
  HostBytes b(n);
  if (n_ && n) std::memcpy(b.p_, p_, std::min(n, n_));
  *this = std::move(b);
}

HostBytes HostBytes::map_file(const std::string& path, uint64_t offset, size_t size) {
  HostBytes b;
  if (size == 0) return b;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path + ": cannot map: " + std::strerror(errno));
  auto file = std::make_shared<Fd>(fd);
  const uint64_t start = offset / page_size() * page_size();
  const size_t len = static_cast<size_t>(offset - start) + size;
  void* a = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd,
                   static_cast<off_t>(start));
  if (a == MAP_FAILED) throw InputError(path + ": cannot map: " + std::strerror(errno));
  b.map_ = std::make_shared<Mapping>();
  b.map_->file = std::move(file);
  b.map_->addr = a;
  b.map_->len = len;
  b.map_->file_offset = start;
  b.map_->skip = static_cast<size_t>(offset - start);
  b.map_->path = path;
  b.map_->input = std::make_unique<interrupt::MappedInput>(a, len, path);
  b.map_->governed = std::make_unique<resident::Registration>(a, len, false);
  b.p_ = static_cast<uint8_t*>(a) + b.map_->skip;
  b.n_ = size;
  return b;
}

HostBytes HostBytes::cow_copy() const {
  if (!map_) return *this;
  void* a = ::mmap(nullptr, map_->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, map_->file->fd,
                   static_cast<off_t>(map_->file_offset));
  if (a == MAP_FAILED) return *this;  // a deep copy instead
  HostBytes b;
  b.map_ = std::make_shared<Mapping>();
  b.map_->file = map_->file;
  b.map_->addr = a;
  b.map_->len = map_->len;
  b.map_->file_offset = map_->file_offset;
  b.map_->skip = map_->skip;
  if (!map_->scratch) b.map_->input = std::make_unique<interrupt::MappedInput>(a, map_->len, map_->path);
  b.map_->path = map_->path;
  b.map_->governed = std::make_unique<resident::Registration>(a, map_->len, false);
  b.p_ = static_cast<uint8_t*>(a) + b.map_->skip;
  b.n_ = n_;
  return b;
}

bool HostBytes::scratch() const {
  return map_ && map_->scratch;
}

bool operator==(const HostBytes& a, const HostBytes& b) {
  return a.n_ == b.n_ && (a.n_ == 0 || std::memcmp(a.p_, b.p_, a.n_) == 0);
}

bool operator==(const HostBytes& a, const std::vector<uint8_t>& b) {
  return a.n_ == b.size() && (a.n_ == 0 || std::memcmp(a.p_, b.data(), a.n_) == 0);
}

void set_pageable(bool on, uint64_t min_bytes) {
  uint64_t m = min_bytes;
  if (on)
    if (const std::optional<uint64_t> given = env_byte_count("TRNSIM_SCRATCH_MIN_BYTES")) m = *given;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_on = on;
  g_min = m;
}

void set_scratch_dir(int dir_fd) {
  // A handle of its own (not a duplicate: that would share, and keep, a lock held on `dir_fd`).
  const int dup = dir_fd >= 0 ? ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_dir_fd >= 0) ::close(g_dir_fd);
  g_dir_fd = dup;
}

void set_scratch_dir(const std::string& dir) {
  const int fd = dir.empty() ? -1 : ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  set_scratch_dir(fd);
  if (fd >= 0) ::close(fd);
}

void set_scratch_in_memory(bool on) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_in_memory = on;
}

bool maps_files(uint64_t n) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_on && n > 0 && n >= g_min;
}

bool makes_scratch(uint64_t n) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_on && g_dir_fd >= 0 && n > 0 && n >= g_min;
}

std::optional<uint64_t> free_disk_bytes(const std::string& dir) {
  struct statvfs s {};
  if (::statvfs(dir.c_str(), &s) != 0) return std::nullopt;
  return static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
}

}  // namespace trnsim
