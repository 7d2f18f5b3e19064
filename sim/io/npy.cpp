#include "sim/io/npy.h"

#include "sim/base/json_excerpt.h"
#include "sim/io/file_kind.h"
#include "sim/io/output_files.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>

namespace trnsim::io {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
// NumPy itself refuses headers above 10000 bytes unless asked; anything near this is not an array header.
constexpr uint64_t kMaxHeaderLen = 1 << 20;
constexpr size_t kMaxDims = 64;  // NumPy 2's NPY_MAXDIMS (NumPy 1: 32)

struct DTypeInfo {
  NpyDType dt;
  const char* descr;
  const char* name;
  int itemsize;
};

constexpr DTypeInfo kDTypes[] = {
    {NpyDType::F32, "<f4", "float32", 4}, {NpyDType::F64, "<f8", "float64", 8},
    {NpyDType::I32, "<i4", "int32", 4},   {NpyDType::I64, "<i8", "int64", 8},
    {NpyDType::U16, "<u2", "uint16", 2},  {NpyDType::U8, "|u1", "uint8", 1},
    {NpyDType::I16, "<i2", "int16", 2},   {NpyDType::I8, "|i1", "int8", 1},
    {NpyDType::U32, "<u4", "uint32", 4},  {NpyDType::F16, "<f2", "float16", 2},
};

const DTypeInfo& info(NpyDType dt) {
  for (const auto& d : kDTypes)
    if (d.dt == dt) return d;
  throw Error("npy: unknown NpyDType");
}

[[noreturn]] void fail(const std::string& name, const std::string& msg) {
  throw InputError(name + ": " + msg);
}

// Product of the dims, or -1 on overflow of int64 or of the byte count.
int64_t checked_elements(const std::vector<int64_t>& shape, int itemsize) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  }
  int64_t bytes = 0;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(itemsize), &bytes)) return -1;
  return n;
}

// A parser for the Python-literal dict of a .npy header: {'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), }. Only strings, True/False and tuples of non-negative integers are accepted.
class HeaderParser {
 public:
  HeaderParser(std::string text, std::string name) : s_(std::move(text)), name_(std::move(name)) {}

  void parse(std::string& descr, bool& fortran, std::vector<int64_t>& shape) {
    std::set<std::string> seen;
    skip_ws();
    expect('{');
    skip_ws();
    while (peek() != '}') {
      std::string key = parse_string();
      if (!seen.insert(key).second) error("duplicate key '" + key + "'");
      skip_ws();
      expect(':');
      skip_ws();
      if (key == "descr") {
        if (peek() == '[') fail(name_, "unsupported dtype: structured arrays are not supported");
        descr = parse_string();
      } else if (key == "fortran_order") {
        fortran = parse_bool();
      } else if (key == "shape") {
        shape = parse_tuple();
      } else {
        error("unexpected key '" + key + "' (expected 'descr', 'fortran_order' and 'shape')");
      }
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        skip_ws();
      } else if (peek() != '}') {
        error("expected ',' or '}'");
      }
    }
    ++pos_;
    skip_ws();
    if (pos_ != s_.size()) error("unexpected text after the closing '}'");
    for (const char* k : {"descr", "fortran_order", "shape"})
      if (!seen.count(k)) error(std::string("missing key '") + k + "'");
  }

 private:
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  [[noreturn]] void error(const std::string& what) const {
    std::string shown = s_.substr(0, 120);
    while (!shown.empty() && (shown.back() == '\n' || shown.back() == ' ')) shown.pop_back();
    fail(name_, "malformed header: " + what + " at offset " + std::to_string(pos_) + " in \"" +
                    text_excerpt(shown, 120) + "\"");
  }
  void expect(char c) {
    if (peek() != c) error(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string parse_string() {
    char q = peek();
    if (q != '\'' && q != '"') error("expected a quoted string");
    ++pos_;
    size_t end = s_.find(q, pos_);
    if (end == std::string::npos) error("unterminated string");
    std::string out = s_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }
  bool parse_bool() {
    if (s_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (s_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    error("expected True or False");
  }
  std::vector<int64_t> parse_tuple() {
    std::vector<int64_t> dims;
    expect('(');
    skip_ws();
    while (peek() != ')') {
      if (peek() < '0' || peek() > '9') error("expected a non-negative integer dimension");
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (__builtin_mul_overflow(v, int64_t{10}, &v) ||
            __builtin_add_overflow(v, int64_t{peek() - '0'}, &v))
          fail(name_, "element count overflows: a dimension does not fit in 64 bits");
        ++pos_;
      }
      if (peek() == 'L') ++pos_;  // Python 2 long suffix
      dims.push_back(v);
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        skip_ws();
      } else if (peek() != ')') {
        error("expected ',' or ')' in shape");
      }
    }
    ++pos_;
    return dims;
  }

  std::string s_;
  std::string name_;
  size_t pos_ = 0;
};

NpyDType dtype_from_descr(const std::string& descr, const std::string& name) {
  for (const auto& d : kDTypes)
    if (descr == d.descr) return d.dt;
  if (descr == "<u1") return NpyDType::U8;
  if (descr == "<i1") return NpyDType::I8;
  fail(name, "unsupported dtype '" + text_excerpt(descr) +
                 "' (supported: '<f4' float32, '<f8' float64, '<f2' float16, '<i4' int32, '<i8' int64, '<i2' "
                 "int16, '|i1' "
                 "int8, '<u4' uint32, '<u2' uint16 (or raw BF16 bits), '|u1' uint8 (or raw FP8/E8M0 bits); "
                 "big-endian data is not supported)");
}

uint32_t read_le(const uint8_t* p, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Validated header of an image: where the data starts and what it holds.
struct Header {
  NpyDType dtype;
  std::vector<int64_t> shape;
  size_t data_offset;
  int64_t data_bytes;
};

// `p` holds the first `size` bytes of a file of `file_size` bytes (at least the whole header if it fits).
Header parse_header(const uint8_t* p, size_t size, uint64_t file_size, const std::string& name) {
  if (size < kMagicLen || std::memcmp(p, kMagic, kMagicLen) != 0)
    fail(name, "not a .npy file (bad magic: expected the bytes \\x93NUMPY at the start)");
  if (size < 10) fail(name, "truncated header: the file has only " + std::to_string(file_size) + " bytes");
  int major = p[6], minor = p[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    fail(name, "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor) +
                   " (supported: 1.0, 2.0, 3.0)");
  size_t len_bytes = major == 1 ? 2 : 4;
  if (size < 8 + len_bytes)
    fail(name, "truncated header: the file has only " + std::to_string(file_size) + " bytes");
  size_t hlen = read_le(p + 8, static_cast<int>(len_bytes));
  size_t start = 8 + len_bytes;
  if (hlen > kMaxHeaderLen)
    fail(name, "malformed header: its length " + std::to_string(hlen) + " exceeds " +
                   std::to_string(kMaxHeaderLen) + " bytes");
  if (hlen > file_size - start || hlen > size - start)
    fail(name, "truncated header: the header needs " + std::to_string(hlen) + " bytes, the file has " +
                   std::to_string(file_size - start) + " after the length field");
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
  HeaderParser(std::string(reinterpret_cast<const char*>(p + start), hlen), name)
      .parse(descr, fortran, shape);
  NpyDType dt = dtype_from_descr(descr, name);
  if (shape.size() > kMaxDims)
    fail(name, "the shape has " + std::to_string(shape.size()) + " dimensions (NumPy allows at most " +
                   std::to_string(kMaxDims) + ")");
  if (fortran && shape.size() > 1)
    fail(name, "Fortran-order arrays are not supported (shape " + shape_str(shape) +
                   "); save a C-order copy (numpy.ascontiguousarray)");
  int64_t n = checked_elements(shape, info(dt).itemsize);
  if (n < 0) fail(name, "element count overflows: shape " + shape_str(shape) + " of " + info(dt).name);
  return Header{dt, shape, start + hlen, n * info(dt).itemsize};
}

void check_data_size(const Header& h, uint64_t available, const std::string& name) {
  std::string what = "shape " + shape_str(h.shape) + " of " + info(h.dtype).name + " needs " +
                     std::to_string(h.data_bytes) + " bytes of data";
  uint64_t need = static_cast<uint64_t>(h.data_bytes);
  if (available < need) fail(name, "truncated data: " + what + ", found " + std::to_string(available));
  if (available > need)
    fail(name, std::to_string(available - need) + " unexpected trailing bytes after the data (" + what +
                   ", found " + std::to_string(available) + ")");
}

std::string errno_text() {
  return std::strerror(errno);
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

}  // namespace

const char* npy_descr(NpyDType dt) {
  return info(dt).descr;
}
const char* npy_dtype_name(NpyDType dt) {
  return info(dt).name;
}
int npy_itemsize(NpyDType dt) {
  return info(dt).itemsize;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

int64_t NpyArray::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

NpyArray parse_npy(const uint8_t* image, size_t size, const std::string& name) {
  Header h = parse_header(image, size, size, name);
  check_data_size(h, size - h.data_offset, name);
  NpyArray arr;
  arr.path = name;
  arr.dtype = h.dtype;
  arr.shape = h.shape;
  arr.bytes = std::vector<uint8_t>(image + h.data_offset, image + size);
  return arr;
}

// Why a read of `f` came short: the error, or the end of a file that shrank since its size was taken (an
// input changed while trnsim read it; errno says nothing then).
std::string short_read(std::FILE* f) {
  if (std::ferror(f)) return errno_text();
  return "the file changed size while trnsim read it (an input must not change while trnsim reads it)";
}

NpyArray read_npy(const std::string& path) {
  const FileKind kind = file_kind(path);  // a missing file is reported by the open below, with errno
  if (kind == FileKind::kDirectory) fail(path, "cannot read: it is a directory");
  if (kind == FileKind::kSpecial) fail(path, std::string("cannot read: ") + kNotARegularFile);
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) fail(path, "cannot open: " + errno_text());
  if (std::fseek(f.get(), 0, SEEK_END) != 0) fail(path, "cannot read: " + errno_text());
  long end = std::ftell(f.get());
  if (end < 0 || std::fseek(f.get(), 0, SEEK_SET) != 0) fail(path, "cannot read: " + errno_text());
  uint64_t size = static_cast<uint64_t>(end);

  // The header is small; read a prefix, then the data straight into the array's buffer.
  std::vector<uint8_t> head(std::min<uint64_t>(size, 12));
  if (std::fread(head.data(), 1, head.size(), f.get()) != head.size())
    fail(path, "cannot read: " + short_read(f.get()));
  size_t len_bytes = head.size() > 6 && head[6] == 1 ? 2 : 4;
  if (head.size() >= 8 + len_bytes && std::memcmp(head.data(), kMagic, kMagicLen) == 0) {
    uint64_t full = 8 + len_bytes + read_le(head.data() + 8, static_cast<int>(len_bytes));
    if (full <= size && full > head.size() && full <= 12 + kMaxHeaderLen) {
      size_t have = head.size();
      head.resize(full);
      if (std::fread(head.data() + have, 1, full - have, f.get()) != full - have)
        fail(path, "cannot read: " + short_read(f.get()));
    }
  }
  Header h = parse_header(head.data(), head.size(), size, path);
  check_data_size(h, size - h.data_offset, path);

  NpyArray arr;
  arr.path = path;
  arr.dtype = h.dtype;
  arr.shape = h.shape;
  // Large (and aligned for every dtype): the file's own pages (sim/base/host_bytes.h).
  if (maps_files(static_cast<uint64_t>(h.data_bytes)) && h.data_offset % 8 == 0) {
    arr.bytes = HostBytes::map_file(path, h.data_offset, static_cast<size_t>(h.data_bytes));
    return arr;
  }
  arr.bytes.resize(static_cast<size_t>(h.data_bytes));
  if (std::fseek(f.get(), static_cast<long>(h.data_offset), SEEK_SET) != 0 ||
      std::fread(arr.bytes.data(), 1, arr.bytes.size(), f.get()) != arr.bytes.size())
    fail(path, "cannot read the data: " + short_read(f.get()));
  return arr;
}

std::vector<uint8_t> encode_npy(NpyDType dt, const std::vector<int64_t>& shape, const void* data) {
  std::vector<uint8_t> out = npy_header(dt, shape);
  const size_t head = out.size();
  const size_t data_bytes =
      static_cast<size_t>(checked_elements(shape, info(dt).itemsize)) * info(dt).itemsize;
  out.resize(head + data_bytes);
  if (data_bytes) std::memcpy(out.data() + head, data, data_bytes);
  return out;
}

std::vector<uint8_t> npy_header(NpyDType dt, const std::vector<int64_t>& shape) {
  const DTypeInfo& d = info(dt);
  int64_t n = checked_elements(shape, d.itemsize);
  if (n < 0) throw InputError("cannot encode .npy: element count overflows for shape " + shape_str(shape));
  std::string dict = std::string("{'descr': '") + d.descr +
                     "', 'fortran_order': False, 'shape': " + shape_str(shape) + ", }";
  // Pad with spaces so that magic + version + length + dict + '\n' is a multiple of 64 bytes.
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict.push_back('\n');
  if (dict.size() > 0xFFFF)
    throw InputError("cannot encode .npy: header too long for shape " + shape_str(shape));
  std::string head(kMagic, kMagicLen);
  head += '\x01';
  head += '\x00';
  head += static_cast<char>(dict.size() & 0xFF);
  head += static_cast<char>(dict.size() >> 8);
  head += dict;
  return std::vector<uint8_t>(head.begin(), head.end());
}

void write_npy(const std::string& path, NpyDType dt, const std::vector<int64_t>& shape, const void* data) {
  write_npy_all({NpyOutput{path, dt, shape, data}});
}

void write_npy_all(const std::vector<NpyOutput>& outputs) {
  std::vector<OutputFile> files;
  for (const auto& o : outputs) files.push_back({o.path, encode_npy(o.dtype, o.shape, o.data)});
  write_files_atomic(files);
}

void require_rank(const NpyArray& arr, int rank, const std::string& what) {
  if (static_cast<int>(arr.shape.size()) != rank)
    fail(arr.path,
         what + ": expected a " + std::to_string(rank) + "-D array, found shape " + shape_str(arr.shape));
}

void require_dtype(const NpyArray& arr, std::initializer_list<NpyDType> allowed, const std::string& what) {
  std::string expected;
  size_t i = 0;
  for (NpyDType dt : allowed) {
    if (dt == arr.dtype) return;
    if (i) expected += (i + 1 == allowed.size()) ? " or " : ", ";
    expected += info(dt).name;
    ++i;
  }
  fail(arr.path, what + ": unsupported dtype " + info(arr.dtype).name + " (expected " + expected + ")");
}

}  // namespace trnsim::io
