// NumPy .npy files: read (versions 1.0, 2.0, 3.0) and write (version 1.0), C order, little-endian only.
//
// Supported dtypes: float32 '<f4', float64 '<f8' (read; written too, but no command emits it), float16 '<f2',
// int32 '<i4', int64 '<i8', int16 '<i2', int8 '|i1', uint32 '<u4', uint16 '<u2' (uint16 values, or raw BF16 /
// FP16 bits),
// uint8 '|u1' (uint8 values, or raw FP8 / E8M0 bits). Big-endian ('>f4'),
// Fortran-order arrays with more than one dimension, structured and object dtypes are rejected.
// Shapes of more than 64 dimensions (NumPy 2's limit) are rejected.
// Trailing bytes after the data are rejected: a file whose size does not match its header is almost always
// the wrong file or a broken copy.
//
// Every failure throws trnsim::InputError whose message starts with the file path.
// Writes are atomic: a temporary file in the destination directory is renamed into place only once it is
// complete, so a failed write never leaves a partial or missing-but-replaced file behind.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "sim/base/error.h"
#include "sim/base/host_bytes.h"

namespace trnsim::io {

enum class NpyDType { F32, F64, I32, I64, U16, U8, I16, I8, U32, F16 };

// The descr string written for a dtype, e.g. "<f4", "|u1".
const char* npy_descr(NpyDType dt);
// User-facing name, NumPy's: "float32", "float64", "int32", "int64", "uint16", "uint8", "int16", "int8",
// "uint32", "float16".
const char* npy_dtype_name(NpyDType dt);
// Bytes per element: 4, 8, 4, 8, 2, 1, 2, 1, 4, 2.
int npy_itemsize(NpyDType dt);
// "(256, 1024)", "(5,)", "()": the way NumPy prints shapes.
std::string shape_str(const std::vector<int64_t>& shape);

// An array as stored: C-order little-endian bytes.
struct NpyArray {
  std::string path;  // where it was read from (used in error messages); empty for in-memory arrays
  NpyDType dtype = NpyDType::F32;
  std::vector<int64_t> shape;
  HostBytes bytes;  // elements() * itemsize bytes; a large file's, mapped (read_npy)

  // Product of the shape (1 for a 0-d array).
  int64_t elements() const;
  // Typed view of the bytes (float for F32, uint16_t for U16, ...). Only the size of T is checked. The
  // buffer comes from operator new, so it is aligned for every supported dtype.
  template <typename T>
  const T* data() const {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);
    if (static_cast<int>(sizeof(T)) != npy_itemsize(dtype))
      throw Error("NpyArray::data: element type size does not match dtype " +
                  std::string(npy_dtype_name(dtype)));
    return reinterpret_cast<const T*>(bytes.data());
  }
};

// Reads a whole .npy file. Throws InputError ("<path>: ...") for a missing or unreadable file, bad magic,
// unsupported version, malformed header, Fortran order, unsupported dtype, element-count overflow,
// truncated data (expected vs found bytes) or trailing bytes.
NpyArray read_npy(const std::string& path);

// Parses an in-memory .npy image; `name` is used in place of a path in error messages.
NpyArray parse_npy(const uint8_t* image, size_t size, const std::string& name);

// Encodes a version 1.0 .npy image (header + data). `data` holds product(shape) elements of `dt`.
std::vector<uint8_t> encode_npy(NpyDType dt, const std::vector<int64_t>& shape, const void* data);
// The header alone (the image's bytes before the data).
std::vector<uint8_t> npy_header(NpyDType dt, const std::vector<int64_t>& shape);

// Writes one .npy file atomically (temporary file + rename). Throws InputError naming the path if the
// directory does not exist or the file cannot be written; the destination is then unchanged.
void write_npy(const std::string& path, NpyDType dt, const std::vector<int64_t>& shape, const void* data);

// One output of write_npy_all. `data` must stay valid during the call.
struct NpyOutput {
  std::string path;
  NpyDType dtype;
  std::vector<int64_t> shape;
  const void* data;
};

// Writes several files all-or-nothing: every file is first written to a temporary next to its destination,
// and only when all of them succeeded are they renamed into place. On failure the temporaries are removed
// and no destination is touched. Two outputs with the same path are an InputError.
void write_npy_all(const std::vector<NpyOutput>& outputs);

// Throws InputError "<path>: <what>: expected a <rank>-D array, found shape (...)" unless arr has `rank`
// dims.
void require_rank(const NpyArray& arr, int rank, const std::string& what);

// Throws InputError "<path>: <what>: unsupported dtype <found> (expected <a> or <b>)" unless arr.dtype is
// one of `allowed`.
void require_dtype(const NpyArray& arr, std::initializer_list<NpyDType> allowed, const std::string& what);

}  // namespace trnsim::io
