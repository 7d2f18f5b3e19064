#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "sim/base/error.h"
#include "sim/io/npy.h"
#include "sim/io/output_files.h"
#include "tests/unit/numerics/allow_overwrite.h"
#include "tests/unit/numerics/temp_dir.h"

using namespace trnsim::io;
using trnsim::InputError;
namespace fs = std::filesystem;

namespace {

// A fresh directory per test case, removed at the end.
struct TempDir : trnsim::test_util::TempDir {
  TempDir() : trnsim::test_util::TempDir("trnsim_test_npy_") {}
};

void write_raw(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string read_raw(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A .npy image with the given version and header dict (padded to 64 bytes as NumPy does) and data bytes.
std::string image(const std::string& dict, const std::string& data, int major = 1) {
  size_t prefix = major == 1 ? 10 : 12;
  std::string h = dict;
  h.append((64 - (prefix + h.size() + 1) % 64) % 64, ' ');
  h += '\n';
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  out += static_cast<char>(h.size() & 0xFF);
  out += static_cast<char>((h.size() >> 8) & 0xFF);
  if (major != 1) out += std::string(2, '\0');
  return out + h + data;
}

std::string f32_bytes(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

}  // namespace

TEST_CASE("encode_npy writes NumPy's version 1.0 header", "[npy]") {
  const float v[6] = {1, 2, 3, 4, 5, 6};
  std::vector<uint8_t> img = encode_npy(NpyDType::F32, {2, 3}, v);
  REQUIRE(img.size() == 128 + 24);
  std::string s(img.begin(), img.end());
  CHECK(s.substr(0, 10) == std::string("\x93NUMPY\x01\x00\x76\x00", 10));
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  CHECK(s.substr(10, 118) == dict + std::string(58, ' ') + "\n");
  CHECK(std::memcmp(img.data() + 128, v, 24) == 0);
  // npy_header: the image's first 128 bytes; written with the data as an OutputFile's tail, the same file.
  CHECK(npy_header(NpyDType::F32, {2, 3}) == std::vector<uint8_t>(img.begin(), img.begin() + 128));
  TempDir t;
  write_files_atomic(
      {{t / "a.npy", npy_header(NpyDType::F32, {2, 3}), std::vector<uint8_t>(img.begin() + 128, img.end())}});
  std::ifstream in(t / "a.npy", std::ios::binary);
  CHECK(std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {}) == img);
  CHECK(shape_str({}) == "()");
  CHECK(shape_str({5}) == "(5,)");
  CHECK(shape_str({256, 1024}) == "(256, 1024)");
}

TEST_CASE("write_npy then read_npy round-trips every dtype", "[npy]") {
  TempDir t;
  const float f32[4] = {1.5f, -2.0f, 0.0f, 3.25f};
  const double f64[2] = {1e300, -0.5};
  const int32_t i32[3] = {-7, 0, 2147483647};
  const int64_t i64[2] = {-1, 1ll << 40};
  const uint16_t u16[4] = {0x3F80, 0xBF80, 0x7FC0, 0x0001};
  const uint8_t u8[5] = {0x00, 0x7E, 0x7F, 0x80, 0xFF};
  const int16_t i16[3] = {-32768, -4, 32767};
  const int8_t i8[3] = {-128, -4, 127};
  const uint32_t u32[2] = {0, 4294967295u};
  struct Case {
    NpyDType dt;
    std::vector<int64_t> shape;
    const void* data;
    size_t bytes;
    const char* descr;
  };
  for (const Case& c : {Case{NpyDType::F32, {2, 2}, f32, 16, "<f4"}, Case{NpyDType::F64, {2}, f64, 16, "<f8"},
                        Case{NpyDType::I32, {3, 1}, i32, 12, "<i4"},
                        Case{NpyDType::I64, {1, 2}, i64, 16, "<i8"}, Case{NpyDType::I16, {3}, i16, 6, "<i2"},
                        Case{NpyDType::I8, {3}, i8, 3, "|i1"}, Case{NpyDType::U32, {2}, u32, 8, "<u4"},
                        Case{NpyDType::U16, {1, 4}, u16, 8, "<u2"}, Case{NpyDType::U8, {5}, u8, 5, "|u1"}}) {
    INFO(c.descr);
    std::string path = t / "a.npy";
    write_npy(path, c.dt, c.shape, c.data);
    CHECK(read_raw(path).find(std::string("'descr': '") + c.descr + "'") != std::string::npos);
    NpyArray a = read_npy(path);
    CHECK(a.path == path);
    CHECK(a.dtype == c.dt);
    CHECK(a.shape == c.shape);
    REQUIRE(a.bytes.size() == c.bytes);
    CHECK(std::memcmp(a.bytes.data(), c.data, c.bytes) == 0);
    CHECK(npy_descr(c.dt) == std::string(c.descr));
  }
  NpyArray a = read_npy(t / "a.npy");
  CHECK(a.elements() == 5);
  CHECK(a.data<uint8_t>()[1] == 0x7E);
  CHECK_THROWS_WITH(a.data<float>(), "NpyArray::data: element type size does not match dtype uint8");
  // Nothing but the output and the folder's record of it is left in the directory (no temporaries).
  CHECK(t.files() == std::vector<std::string>{".trnsim-written", "a.npy"});
}

TEST_CASE("read_npy reads versions 2.0 and 3.0, 0-d and empty arrays", "[npy]") {
  TempDir t;
  write_raw(t / "v2.npy",
            image("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }", f32_bytes({1, 2}), 2));
  NpyArray a = read_npy(t / "v2.npy");
  CHECK(a.shape == std::vector<int64_t>{1, 2});
  CHECK(a.data<float>()[1] == 2.0f);
  // Version 3.0 (utf8 header), double quotes, no trailing comma, Python 2 long suffix.
  write_raw(t / "v3.npy",
            image("{\"descr\": \"<f4\", \"shape\": (2L,), \"fortran_order\": False}", f32_bytes({3, 4}), 3));
  a = read_npy(t / "v3.npy");
  CHECK(a.shape == std::vector<int64_t>{2});
  CHECK(a.data<float>()[0] == 3.0f);
  write_raw(t / "scalar.npy",
            image("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", f32_bytes({7})));
  a = read_npy(t / "scalar.npy");
  CHECK(a.shape.empty());
  CHECK(a.elements() == 1);
  write_raw(t / "empty.npy", image("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 32), }", ""));
  CHECK(read_npy(t / "empty.npy").elements() == 0);
  // A 1-D Fortran-order array is the same as C order.
  write_raw(t / "f1.npy",
            image("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", f32_bytes({1, 2})));
  CHECK(read_npy(t / "f1.npy").elements() == 2);
}

TEST_CASE("read_npy rejects bad files with the path and the reason", "[npy]") {
  TempDir t;
  const std::string p = t / "x.npy";
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  const std::string data = std::string(24, '\0');

  CHECK_THROWS_WITH(read_npy(t / "missing.npy"),
                    t / "missing.npy" + ": cannot open: No such file or directory");
  CHECK_THROWS_WITH(read_npy(t.dir.string()), t.dir.string() + ": cannot read: it is a directory");
  // A FIFO nobody writes to would block the open for ever; a device has no size.
  REQUIRE(::mkfifo((t / "fifo.npy").c_str(), 0600) == 0);
  CHECK_THROWS_WITH(read_npy(t / "fifo.npy"),
                    t / "fifo.npy" + ": cannot read: not a regular file (a FIFO, device or socket)");
  CHECK_THROWS_WITH(read_npy("/dev/zero"),
                    "/dev/zero: cannot read: not a regular file (a FIFO, device or socket)");

  write_raw(p, "hello world, not an array");
  CHECK_THROWS_WITH(read_npy(p),
                    p + ": not a .npy file (bad magic: expected the bytes \\x93NUMPY at the start)");
  write_raw(p, "");
  CHECK_THROWS_WITH(read_npy(p),
                    p + ": not a .npy file (bad magic: expected the bytes \\x93NUMPY at the start)");
  write_raw(p, std::string("\x93NUMPY\x01", 7));
  CHECK_THROWS_WITH(read_npy(p), p + ": truncated header: the file has only 7 bytes");

  std::string v4 = image(ok, data);
  v4[6] = 4;
  write_raw(p, v4);
  CHECK_THROWS_WITH(read_npy(p), p + ": unsupported .npy version 4.0 (supported: 1.0, 2.0, 3.0)");

  write_raw(p, image(ok, data).substr(0, 50));
  CHECK_THROWS_WITH(read_npy(p),
                    p + ": truncated header: the header needs 118 bytes, the file has 40 after the "
                        "length field");

  write_raw(p, std::string("\x93NUMPY\x02\x00\xff\xff\xff\x7f", 12) + std::string(100, ' '));
  CHECK_THROWS_WITH(read_npy(p), p + ": malformed header: its length 2147483647 exceeds 1048576 bytes");

  write_raw(p, image("{'descr': '<f4', 'shape': (2, 3), }", data));
  CHECK_THROWS_WITH(read_npy(p), Catch::StartsWith(p + ": malformed header: missing key 'fortran_order'"));
  write_raw(p, image("{'descr': '<f4', 'fortran_order': false, 'shape': (2, 3), }", data));
  CHECK_THROWS_WITH(read_npy(p),
                    Catch::StartsWith(p + ": malformed header: expected True or False at offset 34"));
  write_raw(p, image("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", data));
  CHECK_THROWS_WITH(read_npy(p),
                    Catch::StartsWith(p + ": malformed header: expected a non-negative integer dimension"));
  write_raw(p, image("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}", data));
  CHECK_THROWS_WITH(read_npy(p), Catch::StartsWith(p + ": malformed header: unexpected key 'x'"));
  write_raw(p, image("['descr', '<f4']", data));
  CHECK_THROWS_WITH(read_npy(p), Catch::StartsWith(p + ": malformed header: expected '{' at offset 0"));
  write_raw(p, image("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", data));
  CHECK_THROWS_WITH(read_npy(p), p + ": unsupported dtype: structured arrays are not supported");

  write_raw(p, image("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", data));
  CHECK_THROWS_WITH(read_npy(p),
                    p + ": Fortran-order arrays are not supported (shape (2, 3)); save a C-order "
                        "copy (numpy.ascontiguousarray)");

  const std::string supported =
      "(supported: '<f4' float32, '<f8' float64, '<f2' float16, '<i4' int32, '<i8' int64, '<i2' int16, '|i1' "
      "int8, '<u4' "
      "uint32, '<u2' uint16 (or raw BF16 bits), '|u1' uint8 (or raw FP8/E8M0 bits); big-endian data is not "
      "supported)";
  write_raw(p, image("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", data));
  CHECK_THROWS_WITH(read_npy(p), p + ": unsupported dtype '>f4' " + supported);
  write_raw(p, image("{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }", data));
  CHECK_THROWS_WITH(read_npy(p), p + ": unsupported dtype '<c8' " + supported);
  // float16 is read (a float16 tensor's input; it was refused): 12 elements in the 24 bytes.
  write_raw(p, image("{'descr': '<f2', 'fortran_order': False, 'shape': (2, 6), }", data));
  CHECK(read_npy(p).dtype == NpyDType::F16);

  write_raw(p, image(ok, data.substr(0, 20)));
  CHECK_THROWS_WITH(read_npy(p),
                    p + ": truncated data: shape (2, 3) of float32 needs 24 bytes of data, found 20");
  write_raw(p, image(ok, data + "xyz"));
  CHECK_THROWS_WITH(read_npy(p),
                    p + ": 3 unexpected trailing bytes after the data (shape (2, 3) of float32 needs "
                        "24 bytes of data, found 27)");

  write_raw(p, image("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", data));
  CHECK_THROWS_WITH(read_npy(p), p + ": element count overflows: shape (4294967296, 4294967296) of float32");
  write_raw(p, image("{'descr': '<f8', 'fortran_order': False, 'shape': (1152921504606846976, 2), }", data));
  CHECK_THROWS_WITH(read_npy(p), p + ": element count overflows: shape (1152921504606846976, 2) of float64");
  write_raw(p, image("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", data));
  CHECK_THROWS_WITH(read_npy(p), p + ": element count overflows: a dimension does not fit in 64 bits");

  // More dimensions than NumPy allows (64); a header that is not text is shown escaped and cut.
  std::string dims65;
  for (int i = 0; i < 65; ++i) dims65 += "1, ";
  write_raw(p, image("{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims65 + "), }", data));
  CHECK_THROWS_WITH(read_npy(p), p + ": the shape has 65 dimensions (NumPy allows at most 64)");
  write_raw(p, image(std::string("{'descr': '<f4',\x01\x02") + std::string(200, 'z'), data));
  CHECK_THROWS_WITH(read_npy(p), Catch::StartsWith(p + ": malformed header: ") &&
                                     Catch::Contains("'<f4',\\x01\\x02zzz") && Catch::EndsWith("z...\""));

  // parse_npy gives the same errors for an in-memory image.
  std::string img = image(ok, data.substr(0, 4));
  CHECK_THROWS_AS(parse_npy(reinterpret_cast<const uint8_t*>(img.data()), img.size(), "mem"), InputError);
}

TEST_CASE("require_rank and require_dtype name the file and what was found", "[npy]") {
  NpyArray a;
  a.path = "in.npy";
  a.dtype = NpyDType::I32;
  a.shape = {1024};
  CHECK_THROWS_WITH(require_rank(a, 2, "quantize input"),
                    "in.npy: quantize input: expected a 2-D array, found shape (1024,)");
  a.shape = {2, 3, 4};
  CHECK_THROWS_WITH(require_rank(a, 2, "x"), "in.npy: x: expected a 2-D array, found shape (2, 3, 4)");
  CHECK_NOTHROW(require_rank(a, 3, "x"));
  CHECK_THROWS_WITH(require_dtype(a, {NpyDType::F32, NpyDType::U16}, "x"),
                    "in.npy: x: unsupported dtype int32 (expected float32 or uint16)");
  CHECK_THROWS_WITH(require_dtype(a, {NpyDType::F32, NpyDType::F64, NpyDType::U16}, "x"),
                    "in.npy: x: unsupported dtype int32 (expected float32, float64 or uint16)");
  CHECK_NOTHROW(require_dtype(a, {NpyDType::I32}, "x"));
}

TEST_CASE("writes are atomic and all-or-nothing", "[npy]") {
  TempDir t;
  const float v[2] = {1, 2};
  const std::string missing_dir = (t.dir / "nope" / "a.npy").string();
  CHECK_THROWS_WITH(
      write_npy(missing_dir, NpyDType::F32, {2}, v),
      missing_dir + ": cannot write: directory '" + (t.dir / "nope").string() + "' does not exist");
  CHECK(t.files().empty());

  // An existing file is kept unchanged when a later output of the same batch fails. (It is not one trnsim
  // wrote: replaced on purpose, --overwrite.)
  const trnsim::test_util::AllowOverwrite overwrite;
  write_raw(t / "old.npy", "previous content");
  CHECK_THROWS_WITH(
      write_npy_all({{t / "old.npy", NpyDType::F32, {2}, v}, {missing_dir, NpyDType::F32, {2}, v}}),
      Catch::StartsWith(missing_dir + ": cannot write: directory"));
  CHECK(read_raw(t / "old.npy") == "previous content");
  CHECK(t.files() == std::vector<std::string>{"old.npy"});

  CHECK_THROWS_WITH(
      write_npy_all({{t / "a.npy", NpyDType::F32, {2}, v}, {t / "./a.npy", NpyDType::F32, {2}, v}}),
      t / "./a.npy" + ": the same output path is given twice");
  CHECK_THROWS_WITH(write_npy(t.dir.string(), NpyDType::F32, {2}, v),
                    t.dir.string() + ": cannot write: it is a directory");
  CHECK(t.files() == std::vector<std::string>{"old.npy"});

  write_npy_all({{t / "a.npy", NpyDType::F32, {2}, v}, {t / "old.npy", NpyDType::F32, {1}, v}});
  CHECK(t.files() == std::vector<std::string>{".trnsim-written", "a.npy", "old.npy"});
  CHECK(read_npy(t / "old.npy").shape == std::vector<int64_t>{1});
}

TEST_CASE("a replaced output keeps its permissions, long names fit, leftovers are stepped over", "[npy]") {
  TempDir t;
  const float v[2] = {1, 2};
  // A name of 250 bytes: its temporary's name is cut to fit in 255.
  const std::string longest = t / (std::string(246, 'n') + ".npy");
  write_npy(longest, NpyDType::F32, {2}, v);
  CHECK(read_npy(longest).shape == std::vector<int64_t>{2});
  CHECK(temp_path_for(longest).size() == t.dir.string().size() + 1 + 255);
  fs::remove(longest);

  // A read-only output is replaced (its folder is writable) and stays read-only (not one trnsim wrote: with
  // --overwrite).
  const trnsim::test_util::AllowOverwrite overwrite;
  write_raw(t / "ro.npy", "old");
  fs::permissions(t / "ro.npy", fs::perms::owner_read | fs::perms::group_read);
  write_npy(t / "ro.npy", NpyDType::F32, {2}, v);
  CHECK(fs::status(t / "ro.npy").permissions() == (fs::perms::owner_read | fs::perms::group_read));
  fs::remove(t / "ro.npy");

  // Leftovers of a killed run with this process's PID (a container restarts with the same one) at the next
  // three names: never opened, never removed; the fourth name is used.
  const std::string probe = temp_path_for(t / "x.npy");  // ".x.npy.tmp.PID.K": the next call takes K + 1
  const size_t dot = probe.rfind('.');
  const uint64_t k = std::stoull(probe.substr(dot + 1));
  std::vector<std::string> leftovers;
  for (uint64_t i = 1; i <= 3; ++i) {
    leftovers.push_back(probe.substr(0, dot + 1) + std::to_string(k + i));
    write_raw(leftovers.back(), "leftover");
  }
  write_npy(t / "x.npy", NpyDType::F32, {2}, v);
  CHECK(read_npy(t / "x.npy").shape == std::vector<int64_t>{2});
  for (const std::string& l : leftovers) CHECK(read_raw(l) == "leftover");
}

TEST_CASE("outputs through symlinks are refused (a dangling one and a loop too), not a link to a device",
          "[npy]") {
  TempDir t;
  const float v[2] = {1, 2};
  fs::create_directory(t.dir / "real");
  write_raw(t / "real/old.npy", "mine");
  fs::create_symlink("real/old.npy", t.dir / "link.npy");
  CHECK_THROWS_WITH(
      write_npy(t / "link.npy", NpyDType::F32, {2}, v),
      "output '" + t / "link.npy" + "': cannot write: " + t / "link.npy" +
          " is a symlink (to real/old.npy): trnsim does not write through links (it would replace "
          "the file the link points to); remove the link or choose another path");
  CHECK(read_raw(t / "real/old.npy") == "mine");
  fs::create_symlink("real/new.npy", t.dir / "dangling.npy");
  CHECK_THROWS_WITH(write_npy(t / "dangling.npy", NpyDType::F32, {2}, v),
                    Catch::Contains("dangling.npy is a symlink (to real/new.npy)"));
  CHECK(!fs::exists(t.dir / "real/new.npy"));
  fs::create_symlink("loop2.npy", t.dir / "loop1.npy");
  fs::create_symlink("loop1.npy", t.dir / "loop2.npy");
  CHECK_THROWS_WITH(write_npy(t / "loop1.npy", NpyDType::F32, {2}, v),
                    Catch::Contains("loop1.npy is a symlink (to loop2.npy)"));
  CHECK(fs::is_symlink(t.dir / "loop1.npy"));
  CHECK(std::vector<fs::path>(fs::directory_iterator(t.dir / "real"), {}).size() == 1);  // nothing created
  // A link to a device is an output written in place.
  fs::create_symlink("/dev/null", t.dir / "null.npy");
  write_npy(t / "null.npy", NpyDType::F32, {2}, v);
  CHECK(fs::is_symlink(t.dir / "null.npy"));
}
