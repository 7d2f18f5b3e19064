// Pageable host memory (sim/base/host_bytes.h): a mapped .npy reads the same bytes as one read into the heap
// and is never written through; scratch buffers have no name in their folder and copy-on-write copies share
// their bytes without sharing writes; nothing is mapped unless a program turns it on.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "sim/base/host_bytes.h"
#include "sim/io/npy.h"
#include "sim/isa/semantics.h"
#include "sim/tensor/host_tensor.h"

using namespace trnsim;
namespace fs = std::filesystem;

namespace {

// A fresh folder, and pageable memory as the test sets it, both undone at the end.
struct Scratch {
  fs::path dir;
  Scratch() {
    char tmpl[] = "/tmp/trnsim_host_bytes_XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  ~Scratch() {
    set_scratch_in_memory(false);
    set_scratch_dir("");
    set_pageable(false);
    fs::remove_all(dir);
  }
  size_t names() const { return static_cast<size_t>(std::distance(fs::directory_iterator(dir), {})); }
};

std::vector<uint8_t> file_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// 3 x 5000 uint16 values i * 7 + 1: raw BF16 bits, 30000 bytes of data after the header.
fs::path write_npy(const fs::path& dir) {
  std::vector<uint16_t> v(15000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint16_t>(i * 7 + 1);
  const std::vector<uint8_t> image = io::encode_npy(io::NpyDType::U16, {3, 5000}, v.data());
  const fs::path p = dir / "x.npy";
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(image.data()), image.size());
  return p;
}

// `a`: a scratch buffer of 10000 bytes of 0xAB. Its fill, a zero-filled scratch buffer beside it, and
// copies: a copy-on-write one that shares a's bytes but not its writes, and a deep one of its own.
void check_scratch_copies(HostBytes& a) {
  CHECK(a[0] == 0xAB);
  CHECK(a[9999] == 0xAB);
  HostBytes z(8192);  // zeros: the file's own
  CHECK(z.scratch());
  CHECK(z == std::vector<uint8_t>(8192, 0));
  CHECK_FALSE(HostBytes(4095, 1).file_backed());  // small: heap

  a[17] = 3;
  HostBytes cow = a.cow_copy();
  HostBytes deep = a;
  CHECK(cow.file_backed());
  CHECK(deep.scratch());
  CHECK(cow == a);
  CHECK(deep == a);
  cow[17] = 4;  // private: a's byte stays
  deep[18] = 5;
  CHECK(a[17] == 3);
  CHECK(a[18] == 0xAB);
  CHECK(cow[18] == 0xAB);
  CHECK(cow[0] == 0xAB);
}

}  // namespace

TEST_CASE("host bytes: nothing is mapped unless turned on") {
  Scratch s;
  const fs::path p = write_npy(s.dir);
  set_scratch_dir(s.dir.string());  // a folder alone does not turn mapping on
  CHECK_FALSE(io::read_npy(p.string()).bytes.file_backed());
  CHECK_FALSE(HostBytes(1 << 20, 1).file_backed());
}

TEST_CASE("host bytes: a mapped .npy reads the same bytes, and writes never reach the file") {
  Scratch s;
  const fs::path p = write_npy(s.dir);
  const io::NpyArray heap = io::read_npy(p.string());
  set_pageable(true, 30000);  // the data's size exactly: mapped
  io::NpyArray mapped = io::read_npy(p.string());
  REQUIRE(mapped.bytes.file_backed());
  CHECK_FALSE(heap.bytes.file_backed());
  CHECK(mapped.bytes.size() == 30000);
  CHECK(mapped.bytes == heap.bytes);
  CHECK(mapped.data<uint16_t>()[14999] == static_cast<uint16_t>(14999 * 7 + 1));

  // A BF16 input from raw bits shares the file's pages; its bytes are the same as a converted copy's.
  const tensor::HostTensor t = tensor::from_npy(mapped, isa::DType::BF16, {3, 5000}, "x");
  const tensor::HostTensor u = tensor::from_npy(heap, isa::DType::BF16, {3, 5000}, "x");
  CHECK(tensor::shares_npy_pages(mapped, isa::DType::BF16));
  CHECK_FALSE(tensor::shares_npy_pages(heap, isa::DType::BF16));
  CHECK_FALSE(tensor::shares_npy_pages(mapped, isa::DType::U16));  // an integer conversion: a copy
  CHECK(t.bytes.file_backed());
  CHECK(t.bytes == u.bytes);

  // Writing into the tensor (the machine, a test editing an input) copies the page; the file stays.
  const std::vector<uint8_t> before = file_bytes(p);
  tensor::HostTensor w = t;  // a deep copy
  tensor::HostTensor c;
  c.bytes = t.bytes.cow_copy();
  c.bytes[0] ^= 0xFF;
  mapped.bytes[1] ^= 0xFF;
  CHECK(file_bytes(p) == before);
  CHECK(t.bytes == u.bytes);
  CHECK(w.bytes == u.bytes);
  CHECK(c.bytes[0] == static_cast<uint8_t>(u.bytes[0] ^ 0xFF));

  // Smaller than the threshold: read into the heap.
  set_pageable(true, 30001);
  CHECK_FALSE(io::read_npy(p.string()).bytes.file_backed());
}

TEST_CASE("host bytes: scratch buffers are nameless files, copies are separate") {
  Scratch s;
  set_pageable(true, 4096);
  set_scratch_dir(s.dir.string());
  CHECK(makes_scratch(4096));
  CHECK_FALSE(makes_scratch(4095));
  HostBytes a(10000, 0xAB);
  REQUIRE(a.scratch());
  CHECK(s.names() == 0);  // O_TMPFILE (or unlinked at once): no name in the folder
  check_scratch_copies(a);

  // resize keeps the prefix and zero-fills; moves leave the source empty.
  a.resize(12000);
  CHECK(a.size() == 12000);
  CHECK(a[17] == 3);
  CHECK(a[11999] == 0);
  HostBytes m = std::move(a);
  CHECK(m.size() == 12000);
  CHECK(a.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is documented
  CHECK(s.names() == 0);
}

TEST_CASE("host bytes: in memory, scratch buffers are nameless memory files, copies are separate") {
  Scratch s;
  set_pageable(true, 4096);
  set_scratch_dir(s.dir.string());
  set_scratch_in_memory(true);
  CHECK(makes_scratch(4096));
  HostBytes a(10000, 0xAB);
  REQUIRE(a.scratch());
  CHECK(s.names() == 0);
  std::ifstream maps("/proc/self/maps");
  const std::string text{std::istreambuf_iterator<char>(maps), std::istreambuf_iterator<char>()};
  CHECK(text.find("/memfd:trnsim-scratch") != std::string::npos);
  check_scratch_copies(a);

  // Off again: scratch files in the folder.
  set_scratch_in_memory(false);
  CHECK(HostBytes(8192).scratch());
}

TEST_CASE("host bytes: TRNSIM_SCRATCH_MIN_BYTES must be a byte count") {
  Scratch s;
  ::setenv("TRNSIM_SCRATCH_MIN_BYTES", "12abc", 1);
  CHECK_THROWS_WITH(
      set_pageable(true),
      "environment variable TRNSIM_SCRATCH_MIN_BYTES: '12abc' is not a byte count (digits only, "
      "at most 19)");
  ::setenv("TRNSIM_SCRATCH_MIN_BYTES", "100", 1);
  set_pageable(true);
  CHECK(maps_files(100));
  CHECK_FALSE(maps_files(99));
  ::unsetenv("TRNSIM_SCRATCH_MIN_BYTES");
}

// make_machine_state's poison: a scratch-mapped HBM tensor is filled by the host threads in 4 MiB parts.
TEST_CASE("host bytes: an HBM tensor in a scratch file starts as 0xFF in every byte") {
  Scratch s;
  set_pageable(true, 4096);
  set_scratch_dir(s.dir.string());
  const bool in_memory = GENERATE(false, true);
  INFO("memory files " << in_memory);
  set_scratch_in_memory(in_memory);
  isa::Program p;
  p.num_cores = 1;
  // 3 x 1572865 uint16 = 9 MiB + 6 bytes: two whole 4 MiB parts and a short third; then a tensor on the heap
  // and one the caller gives.
  p.tensors.push_back({"big", isa::DType::U16, {3, 1572865}});
  p.tensors.push_back({"small", isa::DType::U8, {100}});
  p.tensors.push_back({"given", isa::DType::U8, {8192}});
  std::map<uint32_t, HostBytes> initial;
  initial.emplace(2, HostBytes(8192, 7));
  const isa::MachineState m = isa::make_machine_state(p, isa::Limits{}, std::move(initial));
  REQUIRE(m.hbm.size() == 3);
  CHECK(m.hbm[0].scratch());
  CHECK(m.hbm[0] == std::vector<uint8_t>(9437190, 0xFF));
  CHECK_FALSE(m.hbm[1].file_backed());
  CHECK(m.hbm[1] == std::vector<uint8_t>(100, 0xFF));
  CHECK(m.hbm[2] == std::vector<uint8_t>(8192, 7));
}
