// Fuzzes the .npy reader (sim/io/npy.h): parse_npy on the bytes and read_npy on the same bytes as a file must
// agree (the same array, or both an InputError), and an accepted array must survive encode_npy unchanged.
#include <cstdint>
#include <optional>

#include "sim/io/npy.h"
#include "tests/fuzz/fuzz_check.h"

using namespace trnsim;

namespace {

bool same(const io::NpyArray& a, const io::NpyArray& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.bytes == b.bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<io::NpyArray> mem, file;
  fuzz::run(size, [&] { mem = io::parse_npy(data, size, "fuzz.npy"); });
  const std::string path = fuzz::write_scratch("in.npy", data, size);
  fuzz::run(size, [&] { file = io::read_npy(path); });
  if (mem.has_value() != file.has_value()) fuzz::die("parse_npy and read_npy disagree on", "acceptance");
  if (!mem) return 0;
  if (!same(*mem, *file)) fuzz::die("parse_npy and read_npy disagree on", "the array");
  if (mem->bytes.size() != static_cast<size_t>(mem->elements()) * io::npy_itemsize(mem->dtype))
    fuzz::die("byte count", "does not match the shape");
  const std::vector<uint8_t> image = io::encode_npy(mem->dtype, mem->shape, mem->bytes.data());
  if (!same(io::parse_npy(image.data(), image.size(), "re-encoded"), *mem))
    fuzz::die("encode_npy", "does not round-trip");
  return 0;
}
