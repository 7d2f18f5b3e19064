// The resident-set governor (sim/base/resident_governor.h): past its budget it takes the pages of pageable
// buffers out of the process's resident set, and every byte reads the same afterwards; a written page of a
// private copy keeps its bytes.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "sim/base/available_memory.h"
#include "sim/base/host_bytes.h"
#include "sim/base/resident_governor.h"

using namespace trnsim;
namespace fs = std::filesystem;

namespace {

constexpr size_t kMiB = size_t{1} << 20;

// A fresh scratch folder with TRNSIM_SCRATCH_MIN_BYTES set low (as `trnsim run` reads it), all undone at
// the end, the governor stopped.
struct Scratch {
  fs::path dir;
  Scratch() {
    char tmpl[] = "/tmp/trnsim_resident_XXXXXX";
    dir = ::mkdtemp(tmpl);
    ::setenv("TRNSIM_SCRATCH_MIN_BYTES", "4096", 1);
    set_pageable(true);
    set_scratch_dir(dir.string());
  }
  ~Scratch() {
    resident::stop();
    set_scratch_dir("");
    set_pageable(false);
    ::unsetenv("TRNSIM_SCRATCH_MIN_BYTES");
    fs::remove_all(dir);
  }
};

// RssFile + RssShmem of /proc/self/status, in bytes: the mapped files' pages in this process's page tables.
uint64_t mapped_rss() {
  std::ifstream f("/proc/self/status");
  uint64_t kb = 0;
  for (std::string line; std::getline(f, line);)
    if (line.rfind("RssFile:", 0) == 0 || line.rfind("RssShmem:", 0) == 0) {
      uint64_t v = 0;
      std::istringstream(line.substr(line.find(':') + 1)) >> v;
      kb += v;
    }
  return kb * 1024;
}

uint8_t pattern(size_t i) {
  return static_cast<uint8_t>(i * 31 + i / 4096);
}

}  // namespace

TEST_CASE("resident governor: a scratch buffer's pages leave the resident set, its bytes stay") {
  Scratch s;
  HostBytes a(64 * kMiB);
  REQUIRE(a.scratch());
  for (size_t i = 0; i < a.size(); ++i) a[i] = pattern(i);  // every page written, so resident
  CHECK(resident::govern() == 0);                           // stopped: nothing is released

  resident::start(uint64_t{1} << 40);  // over nothing: nothing is released
  CHECK(resident::govern() == 0);

  const uint64_t before = mapped_rss();
  REQUIRE(before >= 64 * kMiB);
  resident::start(16 * kMiB);  // the test's own file pages (its program) stay; a's 64 MiB go
  const uint64_t released = resident::govern();
  const uint64_t after = mapped_rss();
  CHECK(released >= 60 * kMiB);
  CHECK(after + 60 * kMiB <= before);
  resident::stop();

  size_t wrong = 0;
  for (size_t i = 0; i < a.size(); ++i) wrong += a[i] != pattern(i);
  CHECK(wrong == 0);
}

TEST_CASE("resident governor: a private copy's written pages keep their bytes") {
  Scratch s;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  HostBytes a(16 * kMiB);
  for (size_t i = 0; i < a.size(); ++i) a[i] = pattern(i);
  HostBytes cow = a.cow_copy();  // private: shares a's pages until written
  REQUIRE(cow.file_backed());
  REQUIRE_FALSE(cow.scratch());
  size_t sum = 0;
  for (size_t i = 0; i < cow.size(); i += page) sum += cow[i];  // every page read: the file's, resident
  CHECK(sum > 0);
  const size_t pages = cow.size() / page;
  for (size_t p = 0; p < pages; p += 4) cow[p * page + 5] = static_cast<uint8_t>(~pattern(p * page + 5));

  const uint64_t before = mapped_rss();
  resident::start(0);  // everything that can go, goes: a's 16 MiB and the 12 MiB of cow's unwritten pages
  resident::govern();
  CHECK(mapped_rss() + 24 * kMiB <= before);
  resident::stop();

  size_t wrong_copy = 0, wrong_file = 0;
  for (size_t i = 0; i < cow.size(); ++i) {
    const bool written = (i / page) % 4 == 0 && i % page == 5;
    wrong_copy += cow[i] != (written ? static_cast<uint8_t>(~pattern(i)) : pattern(i));
    wrong_file += a[i] != pattern(i);
  }
  CHECK(wrong_copy == 0);
  CHECK(wrong_file == 0);
}

TEST_CASE("resident governor: the watcher releases shared mappings between govern calls, not private ones") {
  Scratch s;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  HostBytes a(48 * kMiB);
  for (size_t i = 0; i < a.size(); ++i) a[i] = pattern(i);
  HostBytes cow = a.cow_copy();
  size_t sum = 0;
  for (size_t i = 0; i < cow.size(); i += page) sum += cow[i];  // read only: the file's pages, resident
  CHECK(sum > 0);
  const uint64_t before = mapped_rss();
  REQUIRE(before >= 96 * kMiB);

  resident::start(0);
  resident::watch(std::chrono::milliseconds(5));
  HostBytes b(16 * kMiB);
  for (int pass = 0; pass < 8; ++pass)  // written while the watcher drops its pages
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(pattern(i) + pass);
  uint64_t now = mapped_rss();
  for (int waited = 0; waited < 400 && now + 44 * kMiB > before; ++waited) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    now = mapped_rss();
  }
  CHECK(now + 44 * kMiB <= before);  // a's 48 MiB went, with no call to govern
  resident::stop();
  const uint64_t kept = mapped_rss();
  resident::start(0);
  resident::govern();  // cow's unwritten pages: only govern releases a private mapping's
  CHECK(mapped_rss() + 44 * kMiB <= kept);
  resident::stop();

  size_t wrong = 0;
  for (size_t i = 0; i < a.size(); ++i) wrong += (a[i] != pattern(i)) + (cow[i] != pattern(i));
  for (size_t i = 0; i < b.size(); ++i) wrong += b[i] != static_cast<uint8_t>(pattern(i) + 7);
  CHECK(wrong == 0);
}

TEST_CASE("resident governor: TRNSIM_MAPPED_RSS_BYTES sets the budget, else half of MemTotal") {
  Scratch s;
  ::setenv("TRNSIM_MAPPED_RSS_BYTES", "8G", 1);
  CHECK_THROWS_WITH(resident::start(std::nullopt),
                    "environment variable TRNSIM_MAPPED_RSS_BYTES: '8G' is not a byte count (digits only, at "
                    "most 19)");
  ::setenv("TRNSIM_MAPPED_RSS_BYTES", "5000", 1);
  resident::start(std::nullopt);
  CHECK(resident::budget() == uint64_t{5000});
  ::unsetenv("TRNSIM_MAPPED_RSS_BYTES");
  resident::start(std::nullopt);
  REQUIRE(meminfo("MemTotal").has_value());
  CHECK(resident::budget() == *meminfo("MemTotal") / 2);
  resident::stop();
  CHECK_FALSE(resident::budget().has_value());
}
