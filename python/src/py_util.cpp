#include "python/src/py_util.h"

#include <pybind11/stl.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>

#include "sim/base/error.h"
#include "sim/isa/element.h"
#include "sim/isa/semantics.h"

namespace trnsim::py {
namespace pyb = pybind11;
using nlohmann::json;

json to_json(pyb::handle h) {
  if (h.is_none()) return nullptr;
  if (pyb::isinstance<pyb::bool_>(h)) return h.cast<bool>();
  if (pyb::isinstance<pyb::int_>(h)) return h.cast<int64_t>();
  if (pyb::isinstance<pyb::float_>(h)) return h.cast<double>();
  if (pyb::isinstance<pyb::str>(h)) return h.cast<std::string>();
  if (pyb::isinstance<pyb::dict>(h)) {
    json o = json::object();
    for (auto [k, v] : pyb::reinterpret_borrow<pyb::dict>(h)) o[pyb::str(k).cast<std::string>()] = to_json(v);
    return o;
  }
  if (pyb::isinstance<pyb::list>(h) || pyb::isinstance<pyb::tuple>(h)) {
    json a = json::array();
    for (pyb::handle v : h) a.push_back(to_json(v));
    return a;
  }
  // NumPy scalars
  if (pyb::hasattr(h, "item") && pyb::hasattr(h, "dtype") && !pyb::isinstance<pyb::array>(h))
    return to_json(h.attr("item")());
  throw pyb::type_error(fmt::format("{} cannot be a JSON value", pyb::repr(h).cast<std::string>()));
}

pyb::object from_json(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return pyb::none();
    case json::value_t::boolean:
      return pyb::bool_(j.get<bool>());
    case json::value_t::number_integer:
      return pyb::int_(j.get<int64_t>());
    case json::value_t::number_unsigned:
      return pyb::int_(j.get<uint64_t>());
    case json::value_t::number_float:
      return pyb::float_(j.get<double>());
    case json::value_t::string:
      return pyb::str(j.get<std::string>());
    case json::value_t::array: {
      pyb::list l;
      for (const json& v : j) l.append(from_json(v));
      return l;
    }
    case json::value_t::object: {
      pyb::dict d;
      for (const auto& [k, v] : j.items()) d[pyb::str(k)] = from_json(v);
      return d;
    }
    default:
      return pyb::none();
  }
}

std::optional<isa::DType> dtype_of_numpy(pyb::handle array) {
  const pyb::dtype dt = pyb::reinterpret_borrow<pyb::array>(array).dtype();
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (kind == 'f' && size == 4) return isa::DType::F32;
  if (kind == 'f' && size == 2) return isa::DType::FP16;
  if (kind == 'i' && size == 4) return isa::DType::I32;
  if (kind == 'i' && size == 2) return isa::DType::I16;
  if (kind == 'i' && size == 1) return isa::DType::I8;
  if (kind == 'u' && size == 4) return isa::DType::U32;
  if (kind == 'u' && size == 2) return isa::DType::U16;
  if (kind == 'u' && size == 1) return isa::DType::U8;
  return std::nullopt;
}

tensor::HostTensor to_host(pyb::handle obj, isa::DType dtype, const std::vector<int64_t>& shape,
                           const std::string& what) {
  pyb::array a = pyb::array::ensure(obj, pyb::array::c_style);
  if (!a) throw InputError(fmt::format("{}: expected a NumPy array", what));
  const pyb::dtype dt = a.dtype();
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  io::NpyArray n;
  n.path = what;
  // The .npy dtypes are taken as they are; the others are widened exactly first.
  if (kind == 'f' && size == 4) {
    n.dtype = io::NpyDType::F32;
  } else if (kind == 'f' && size == 8) {
    n.dtype = io::NpyDType::F64;
  } else if (kind == 'f' && size == 2) {
    a = a.attr("astype")("float32");
    n.dtype = io::NpyDType::F32;
  } else if (kind == 'i' && size == 4) {
    n.dtype = io::NpyDType::I32;
  } else if (kind == 'i' && size == 8) {
    n.dtype = io::NpyDType::I64;
  } else if (kind == 'u' && size == 2) {
    n.dtype = io::NpyDType::U16;
  } else if (kind == 'u' && size == 1) {
    n.dtype = io::NpyDType::U8;
  } else if ((kind == 'i' && size < 4) || (kind == 'u' && size == 4)) {
    a = a.attr("astype")("int64");
    n.dtype = io::NpyDType::I64;
  } else if (kind == 'b') {
    a = a.attr("astype")("uint8");
    n.dtype = io::NpyDType::U8;
  } else {
    throw InputError(
        fmt::format("{}: NumPy dtype {} has no Trainium counterpart", what,
                    pyb::str(pyb::handle(reinterpret_cast<PyObject*>(dt.ptr()))).cast<std::string>()));
  }
  a = pyb::array::ensure(a, pyb::array::c_style);
  for (pyb::ssize_t i = 0; i < a.ndim(); ++i) n.shape.push_back(a.shape(i));
  n.bytes.resize(static_cast<size_t>(a.nbytes()));
  if (a.nbytes() > 0) std::memcpy(n.bytes.data(), a.data(), n.bytes.size());
  const std::vector<int64_t> s =
      shape.empty() ? (n.shape.empty() ? std::vector<int64_t>{1} : n.shape) : shape;
  // n.path names the input already: the checks name the dtype and shape it is given as ("dtype float32 does
  // not fit int8 [128, 64]").
  return tensor::from_npy(n, dtype, s, fmt::format("{} [{}]", isa::dtype_name(dtype), fmt::join(s, ", ")));
}

pyb::array to_numpy(const tensor::HostTensor& t, bool raw, bool native) {
  std::vector<pyb::ssize_t> shape(t.shape.begin(), t.shape.end());
  if (raw || isa::is_x4(t.dtype)) {
    const io::NpyDType nd = tensor::npy_dtype_of(t.dtype);
    const char* name = io::npy_dtype_name(nd);  // NumPy's own names
    pyb::array out(pyb::dtype(name), shape);
    // Bytes are copied as the .npy file holds them (x4 as int32 raw bits).
    const size_t n = std::min(static_cast<size_t>(out.nbytes()), t.bytes.size());
    if (n > 0) std::memcpy(out.mutable_data(), t.bytes.data(), n);
    return out;
  }
  if (native) {
    // The dtypes NumPy has are returned as themselves (the .npy bits of float16 are its own); the others
    // (bfloat16, the FP8 dtypes) as float32 values below.
    const char* name = nullptr;
    switch (t.dtype) {
      case isa::DType::F32:
        name = "float32";
        break;
      case isa::DType::FP16:
        name = "float16";
        break;
      case isa::DType::I32:
        name = "int32";
        break;
      case isa::DType::U32:
        name = "uint32";
        break;
      case isa::DType::I16:
        name = "int16";
        break;
      case isa::DType::U16:
        name = "uint16";
        break;
      case isa::DType::I8:
        name = "int8";
        break;
      case isa::DType::U8:
        name = "uint8";
        break;
      default:
        break;
    }
    if (name != nullptr) {
      pyb::array out(pyb::dtype(name), shape);
      const size_t n = std::min(static_cast<size_t>(out.nbytes()), t.bytes.size());
      if (n > 0) std::memcpy(out.mutable_data(), t.bytes.data(), n);
      return out;
    }
  }
  if (isa::is_int(t.dtype)) {
    pyb::array_t<int64_t> out(shape);
    int64_t* d = out.mutable_data();
    for (int64_t i = 0; i < t.elements(); ++i) d[i] = t.int_value(i);
    return out;
  }
  pyb::array_t<float> out(shape);
  if (t.dtype == isa::DType::F32) {
    if (!t.bytes.empty()) std::memcpy(out.mutable_data(), t.bytes.data(), t.bytes.size());
  } else {
    float* d = out.mutable_data();
    for (int64_t i = 0; i < t.elements(); ++i) d[i] = t.value(i);
  }
  return out;
}

std::vector<std::pair<int64_t, int64_t>> pattern_dims(pyb::handle dims) {
  PyObject* seq = dims.ptr();
  if (PyTuple_Check(seq) || PyList_Check(seq)) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject** items = PySequence_Fast_ITEMS(seq);
    std::vector<std::pair<int64_t, int64_t>> out;
    out.reserve(static_cast<size_t>(n));
    bool plain = true;
    for (Py_ssize_t i = 0; i < n && plain; ++i) {
      PyObject* d = items[i];
      if (!PyTuple_Check(d) || PyTuple_GET_SIZE(d) != 2 || !PyLong_CheckExact(PyTuple_GET_ITEM(d, 0)) ||
          !PyLong_CheckExact(PyTuple_GET_ITEM(d, 1))) {
        plain = false;
        break;
      }
      int overflow = 0;
      const long long stride = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(d, 0), &overflow);
      const long long size = overflow ? 0 : PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(d, 1), &overflow);
      if (overflow) {
        plain = false;
        break;
      }
      out.emplace_back(stride, size);
    }
    if (plain) return out;
  }
  return dims.cast<std::vector<std::pair<int64_t, int64_t>>>();
}

}  // namespace trnsim::py
