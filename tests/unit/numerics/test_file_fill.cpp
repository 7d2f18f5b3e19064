// write_head_and_tail: the file holds head then tail byte for byte, whether it went to the disk directly (a
// large file: aligned chunks, then a partial block) or through the page cache, and the descriptor's flags
// are as given afterwards.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "sim/io/file_fill.h"
#include "tests/unit/numerics/temp_dir.h"

using trnsim::io::write_head_and_tail;

namespace {

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed;
  for (auto& b : v) b = static_cast<uint8_t>((x = x * 1664525u + 1013904223u) >> 24);
  return v;
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("write_head_and_tail writes head then tail", "[io][file_fill]") {
  const trnsim::test_util::TempDir dir("trnsim_test_file_fill_");
  // Small (page cache), a multiple of the chunk, and large with a partial last block; heads of an .npy
  // header's size and of none.
  const size_t MiB = size_t{1} << 20;
  const std::vector<std::pair<size_t, size_t>> sizes = {
      {128, 1000}, {0, 16 * MiB}, {128, 16 * MiB - 128}, {128, 24 * MiB + 4096 * 3 + 77}, {5000, 17 * MiB}};
  int k = 0;
  for (const auto& [h, t] : sizes) {
    const std::vector<uint8_t> head = pattern(h, 1 + k), tail = pattern(t, 100 + k);
    const std::string path = dir / ("f" + std::to_string(k++));
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    const int flags = ::fcntl(fd, F_GETFL);
    CHECK(write_head_and_tail(fd, head.data(), head.size(), tail.data(), tail.size()));
    CHECK(::fcntl(fd, F_GETFL) == flags);
    CHECK(::fdatasync(fd) == 0);
    ::close(fd);
    std::vector<uint8_t> want = head;
    want.insert(want.end(), tail.begin(), tail.end());
    INFO("head " << h << ", tail " << t);
    CHECK(read_all(path) == want);
  }
}
