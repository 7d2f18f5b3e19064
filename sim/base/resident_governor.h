// Keeping the touched pages of pageable buffers (host_bytes.h) from piling up in the process's resident set
// (docs/architecture.md, "Host memory"). A page of a scratch or .npy mapping that the run has read or written
// stays mapped in the process's page tables, so it counts as the process's RSS although the page cache holds
// it anyway. The governor releases such pages when the process's resident file pages pass a budget:
//   - a shared (scratch) mapping whole, with madvise(MADV_DONTNEED): its data stays in the page cache and
//     the file, and a later touch maps the same page again (a minor fault);
//   - of a private (copy-on-write) mapping only the pages that are still the file's (/proc/self/pagemap):
//     a page the run wrote is the process's own copy, which MADV_DONTNEED would discard, so it is kept.
// Mappings are released oldest first (the order they were made), until the resident file pages are at most
// three quarters of the budget. Nothing is released unless a program starts the governor (`trnsim run`
// does; tests and Python do not), and only when `govern` is called: at points where no other thread writes
// a private mapping (after each input is made, every 1000 completed instructions, before the references);
// and, once `watch` is called, shared mappings also from a thread of the governor's own between those
// points (a 15 GB input generated or scanned in one step no longer piles up in the resident set).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace trnsim::resident {

// Starts the governor with `budget` bytes of resident file pages, or the default: the environment variable
// TRNSIM_MAPPED_RSS_BYTES when set (InputError unless it is a plain decimal byte count), else half of
// MemTotal (/proc/meminfo). nullopt stops it.
void start(std::optional<uint64_t> budget);
// Also stops the watcher.
void stop();
// Asks for a thread that, every `period` until `stop`, releases shared mappings (oldest first, to three
// quarters of the budget) when the resident file pages exceed the budget. That is safe while other threads
// read or write them: MADV_DONTNEED on a shared mapping loses nothing (a dirty page stays in the page
// cache), whereas a private mapping's page written between reading its pagemap flags and dropping it
// would be lost, so private mappings wait for `govern`. The thread starts with the first shared mapping
// (at once if one exists); a second call changes the period.
void watch(std::chrono::milliseconds period);
// The budget in force (nullopt: stopped).
std::optional<uint64_t> budget();

// A mapping the governor may release, for as long as this object lives (host_bytes.cpp makes one per
// mapping and destroys it before unmapping).
class Registration {
 public:
  Registration(void* addr, size_t len, bool shared);
  ~Registration();
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

 private:
  uint64_t id_;
};

// When the governor runs and the process's resident file pages exceed the budget, releases mappings' pages
// (above). Returns the bytes of resident file pages it released (0 when nothing was over).
uint64_t govern();

// The process's resident file-backed and shared-memory bytes (RssFile + RssShmem, /proc/self/statm's third
// field); 0 when it cannot be read.
uint64_t resident_file_bytes();

}  // namespace trnsim::resident
