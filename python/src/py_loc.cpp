#include "python/src/py_loc.h"

#include <frameobject.h>

#include <deque>
#include <unordered_map>
#include <vector>

namespace trnsim::py {
namespace {

struct FileInfo {
  const char* name;
  bool internal;
};

struct LocState {
  std::deque<std::string> names;  // stable storage of interned names
  std::unordered_map<std::string, const char*> by_name;
  // By the code object's filename string (kept alive by a reference): a frame's file is found by pointer.
  std::unordered_map<PyObject*, FileInfo> by_object;
  std::vector<std::string> internal;
  FileInfo overflow{nullptr, false};
};

LocState& state() {
  static LocState* s = new LocState();  // never destroyed: Locs may outlive static destruction order
  return *s;
}

bool is_internal(const std::string& file) {
  for (const std::string& p : state().internal)
    if (file.compare(0, p.size(), p) == 0) return true;
  return false;
}

const FileInfo& info_of(PyObject* filename) {
  LocState& s = state();
  auto it = s.by_object.find(filename);
  if (it != s.by_object.end()) return it->second;
  Py_ssize_t n = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(filename, &n);
  std::string name = utf8 ? std::string(utf8, static_cast<size_t>(n)) : std::string("<python>");
  if (!utf8) PyErr_Clear();
  const FileInfo info{intern_file(name), is_internal(name)};
  // Kept by pointer (the string held alive) up to a bound: a caller making a new string per call must not
  // grow the table without end; past the bound such strings are looked up by content each time.
  if (s.by_object.size() >= 4096) {
    s.overflow = info;
    return s.overflow;
  }
  Py_INCREF(filename);
  return s.by_object.emplace(filename, info).first->second;
}

}  // namespace

const char* intern_file(const std::string& file) {
  LocState& s = state();
  auto it = s.by_name.find(file);
  if (it != s.by_name.end()) return it->second;
  s.names.push_back(file);
  const char* p = s.names.back().c_str();
  s.by_name.emplace(file, p);
  return p;
}

void add_internal_path(const std::string& prefix) {
  LocState& s = state();
  for (const std::string& p : s.internal)
    if (p == prefix) return;
  s.internal.push_back(prefix);
  for (auto& [obj, info] : s.by_object) info.internal = is_internal(info.name);
}

kernels::Loc caller_loc() {
  PyFrameObject* f = PyEval_GetFrame();  // borrowed
  if (f == nullptr) return kernels::Loc(intern_file("<python>"), 0);
  Py_INCREF(f);
  kernels::Loc found(nullptr, 0);
  kernels::Loc innermost(nullptr, 0);
  while (f != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(f);  // new reference
    const FileInfo& fi = info_of(code->co_filename);
    Py_DECREF(code);
    if (innermost.file_name() == nullptr)
      innermost = kernels::Loc(fi.name, static_cast<uint32_t>(PyFrame_GetLineNumber(f)));
    if (!fi.internal) {
      found = kernels::Loc(fi.name, static_cast<uint32_t>(PyFrame_GetLineNumber(f)));
      Py_DECREF(f);
      break;
    }
    PyFrameObject* back = PyFrame_GetBack(f);  // new reference or null
    Py_DECREF(f);
    f = back;
  }
  if (found.file_name() != nullptr) return found;
  return innermost;  // every frame is internal (a trnsim module calling directly): its own line
}

kernels::Loc loc_of(pybind11::handle loc) {
  if (loc.is_none()) return caller_loc();
  PyObject* t = loc.ptr();
  if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(t, 0)) ||
      !PyLong_Check(PyTuple_GET_ITEM(t, 1)))
    throw pybind11::type_error("loc: expected (file: str, line: int) or None");
  // The file string object is usually the same one call after call (a code object's co_filename): found by
  // pointer, like a frame's.
  const long line = PyLong_AsLong(PyTuple_GET_ITEM(t, 1));
  if (line < 0 || line > static_cast<long>(UINT32_MAX)) {
    PyErr_Clear();
    throw pybind11::value_error("loc: line out of range");
  }
  return kernels::Loc(info_of(PyTuple_GET_ITEM(t, 0)).name, static_cast<uint32_t>(line));
}

}  // namespace trnsim::py
