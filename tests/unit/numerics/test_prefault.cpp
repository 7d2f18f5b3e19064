// prefault() and the Prefaulter (sim/base/prefault.h, prefaulter.h): the ranges they map keep their bytes,
// fresh anonymous pages are resident once drain() returns, and the Prefaulter can be destroyed with ranges
// still queued.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "sim/base/prefault.h"
#include "sim/base/prefaulter.h"

using trnsim::prefault;
using trnsim::Prefaulter;

namespace {

// Pages of [p, p + bytes) the process has mapped (mincore).
size_t resident_pages(void* p, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((bytes + page - 1) / page);
  REQUIRE(mincore(p, bytes, in.data()) == 0);
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

#ifndef MADV_POPULATE_WRITE
constexpr int MADV_POPULATE_WRITE = 23;
#endif

}  // namespace

TEST_CASE("prefault: written bytes stay as they were, at any alignment", "[prefault]") {
  std::vector<uint8_t> bytes(3 * 4096 + 123);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 1);
  const std::vector<uint8_t> before = bytes;
  prefault(bytes.data() + 5, bytes.size() - 5);
  prefault(bytes.data(), 0);
  CHECK(bytes == before);
  Prefaulter pf;
  pf.request(bytes.data() + 1, 4096);
  pf.request(bytes.data() + 4097, bytes.size() - 4097);
  pf.drain();
  CHECK(bytes == before);
}

TEST_CASE("Prefaulter: a fresh anonymous range is mapped once drain() returns, and reads zero",
          "[prefault]") {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t pages = 64;
  void* p = mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  CHECK(resident_pages(p, pages * page) == 0);
  // A kernel without MADV_POPULATE_WRITE (before Linux 5.14) maps nothing ahead: then only the bytes count.
  const bool populates = madvise(p, page, MADV_POPULATE_WRITE) == 0;
  {
    Prefaulter pf;
    pf.request(static_cast<char*>(p) + page, 31 * page);
    pf.request(static_cast<char*>(p) + 32 * page, 32 * page);
    pf.drain();
    if (populates) CHECK(resident_pages(p, pages * page) == pages);
  }
  const auto* b = static_cast<const unsigned char*>(p);
  size_t nonzero = 0;
  for (size_t i = 0; i < pages * page; ++i) nonzero += b[i] != 0;
  CHECK(nonzero == 0);
  munmap(p, pages * page);
}

TEST_CASE("Prefaulter: destroyed with ranges queued, it stops without mapping them all", "[prefault]") {
  std::vector<uint8_t> bytes(1 << 20, 0xAB);
  {
    Prefaulter pf;
    for (int i = 0; i < 256; ++i) pf.request(bytes.data() + i * 4096, 4096);
  }  // the destructor drops what is still queued and joins its thread
  size_t changed = 0;
  for (uint8_t x : bytes) changed += x != 0xAB;
  CHECK(changed == 0);
}
