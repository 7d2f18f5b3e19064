#include "sim/base/resident_governor.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "sim/base/available_memory.h"
#include "sim/base/env_bytes.h"

namespace trnsim::resident {
namespace {

constexpr uint64_t kOff = std::numeric_limits<uint64_t>::max();

struct Region {
  uint8_t* addr;
  size_t len;
  bool shared;
};

std::atomic<uint64_t> g_budget{kOff};
std::atomic<uint64_t> g_next_id{1};
std::mutex g_mutex;                    // the regions, and releasing them
std::map<uint64_t, Region> g_regions;  // by id: the order they were made

size_t page_size() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

// /proc/self/pagemap's flags of a page (Documentation/admin-guide/mm/pagemap.rst).
constexpr uint64_t kPresent = uint64_t{1} << 63;
constexpr uint64_t kSwapped = uint64_t{1} << 62;
constexpr uint64_t kFilePage = uint64_t{1} << 61;  // file-page or shared-anon: not a private copy

// A page of a private mapping that may be dropped: absent, or mapping the file's page (never written here).
bool still_the_files(uint64_t entry) {
  if (entry & kSwapped) return false;
  return !(entry & kPresent) || (entry & kFilePage);
}

// Drops the pages of private region `r` that are still the file's, in runs, reading their flags from the
// open /proc/self/pagemap `pagemap`.
void release_private(const Region& r, int pagemap) {
  const size_t ps = page_size();
  const size_t pages = (r.len + ps - 1) / ps;
  const uint64_t first = reinterpret_cast<uintptr_t>(r.addr) / ps;
  std::vector<uint64_t> flags(std::min<size_t>(pages, 8192));
  size_t run = pages;  // start of the current run of droppable pages; `pages`: none
  const auto drop_until = [&](size_t end) {
    if (run < end) ::madvise(r.addr + run * ps, (end - run) * ps, MADV_DONTNEED);
    run = pages;
  };
  for (size_t at = 0; at < pages;) {
    const size_t n = std::min(flags.size(), pages - at);
    const ssize_t got = ::pread(pagemap, flags.data(), n * sizeof(uint64_t),
                                static_cast<off_t>((first + at) * sizeof(uint64_t)));
    if (got != static_cast<ssize_t>(n * sizeof(uint64_t))) {  // unknown: keep the rest
      drop_until(at);
      return;
    }
    for (size_t i = 0; i < n; ++i) {
      if (still_the_files(flags[i])) {
        if (run == pages) run = at + i;
      } else {
        drop_until(at + i);
      }
    }
    at += n;
  }
  drop_until(pages);
}

std::optional<uint64_t> default_budget() {
  if (const std::optional<uint64_t> given = env_byte_count("TRNSIM_MAPPED_RSS_BYTES")) return given;
  if (const std::optional<uint64_t> total = meminfo("MemTotal")) return *total / 2;
  return std::nullopt;
}

// Releases mappings, oldest first, while the resident file pages exceed the budget: shared ones whole,
// private ones (`with_private`) in their pages that are still the file's.
uint64_t release(bool with_private) {
  const uint64_t b = g_budget.load(std::memory_order_relaxed);
  if (b == kOff) return 0;
  const uint64_t before = resident_file_bytes();
  if (before <= b) return 0;
  const uint64_t target = b / 4 * 3;
  std::lock_guard<std::mutex> lock(g_mutex);
  const int pagemap = with_private ? ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC) : -1;
  uint64_t now = before;
  for (const auto& [id, r] : g_regions) {
    if (r.shared)
      ::madvise(r.addr, r.len, MADV_DONTNEED);
    else if (pagemap >= 0)
      release_private(r, pagemap);
    else
      continue;  // not asked to, or cannot tell written pages from the file's: keep them
    now = resident_file_bytes();
    if (now <= target) break;
  }
  if (pagemap >= 0) ::close(pagemap);
  return before > now ? before - now : 0;
}

// The thread `watch` asks for, started with the first shared mapping (a run that maps none, e.g. one under
// `ulimit -v`, makes no thread). Defined after the regions, so destroyed (and joined) before them.
class Watcher {
 public:
  ~Watcher() { halt(); }

  void request(std::chrono::milliseconds period) {
    std::lock_guard<std::mutex> lock(m_);
    period_ = period;
    requested_ = true;
  }

  // Starts the thread if it was asked for and is not running.
  void ensure_running() {
    std::lock_guard<std::mutex> lock(m_);
    if (!requested_ || thread_.joinable()) return;
    try {
      thread_ = std::thread([this] { loop(); });
    } catch (const std::system_error&) {
      requested_ = false;  // no thread to spare (ulimit -u): `govern`'s calls alone keep the budget
    }
  }

  void halt() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stopping_ = true;
      requested_ = false;  // so no registration starts it again meanwhile
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> lock(m_);
    stopping_ = false;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(m_);
    while (!cv_.wait_for(lock, period_, [this] { return stopping_; })) {
      lock.unlock();
      release(false);
      lock.lock();
    }
  }

  std::mutex m_;
  std::condition_variable cv_;
  std::thread thread_;
  std::chrono::milliseconds period_{0};
  bool requested_ = false;
  bool stopping_ = false;
};

Watcher g_watcher;
std::atomic<uint64_t> g_shared{0};  // shared mappings registered

}  // namespace

void start(std::optional<uint64_t> budget) {
  const std::optional<uint64_t> b = budget ? budget : default_budget();
  g_budget.store(b ? std::min(*b, kOff - 1) : kOff);
}

void stop() {
  g_watcher.halt();
  g_budget.store(kOff);
}

void watch(std::chrono::milliseconds period) {
  g_watcher.request(period);
  if (g_shared.load() > 0) g_watcher.ensure_running();
}

std::optional<uint64_t> budget() {
  const uint64_t b = g_budget.load();
  if (b == kOff) return std::nullopt;
  return b;
}

Registration::Registration(void* addr, size_t len, bool shared) : id_(g_next_id.fetch_add(1)) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_regions.emplace(id_, Region{static_cast<uint8_t*>(addr), len, shared});
  }
  if (shared) {
    g_shared.fetch_add(1);
    g_watcher.ensure_running();
  }
}

Registration::~Registration() {
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto it = g_regions.find(id_);
  if (it->second.shared) g_shared.fetch_sub(1);
  g_regions.erase(it);
}

uint64_t resident_file_bytes() {
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[256];
  const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  // "size resident shared text lib data dt", in pages: the third field.
  const char* p = buf;
  for (int field = 0; field < 2; ++field) {
    while (*p != '\0' && *p != ' ') ++p;
    while (*p == ' ') ++p;
  }
  uint64_t pages = 0;
  for (; *p >= '0' && *p <= '9'; ++p) pages = pages * 10 + static_cast<uint64_t>(*p - '0');
  return pages * page_size();
}

uint64_t govern() {
  return release(true);
}

}  // namespace trnsim::resident
