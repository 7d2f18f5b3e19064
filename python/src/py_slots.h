// Fast reads of the __slots__ fields of the nki front end's record objects (Op, NkiTensor, Storage) from C++:
// a slot is a fixed offset in the instance, read without PyObject_GetAttr's type lookup and descriptor call
// (the schedule and the emission read a few fields of every instruction and operand).
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>
#include <structmember.h>

#include <array>
#include <cstddef>

namespace trnsim::py {

// The fields `names` of the instances of one class, learnt from the first instance seen. get() of an
// instance of another class, or of a field that is no plain slot or is unset, is PyObject_GetAttr's (with
// its AttributeError), so the result is always what attribute access gives.
template <size_t N>
class Slots {
 public:
  explicit Slots(const std::array<const char*, N>& names) {
    for (size_t i = 0; i < N; ++i) names_[i] = PyUnicode_InternFromString(names[i]);
  }
  ~Slots() {
    for (PyObject* n : names_) Py_XDECREF(n);
    Py_XDECREF(reinterpret_cast<PyObject*>(type_));
  }
  Slots(const Slots&) = delete;
  Slots& operator=(const Slots&) = delete;

  // Field i of o (a new reference); throws error_already_set when attribute access fails.
  pybind11::object get(pybind11::handle o, size_t i) {
    PyObject* p = o.ptr();
    if (Py_TYPE(p) != type_) learn(Py_TYPE(p));
    if (Py_TYPE(p) == type_ && offsets_[i] >= 0) {
      PyObject* v = *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(p) + offsets_[i]);
      if (v != nullptr) return pybind11::reinterpret_borrow<pybind11::object>(v);
    }
    PyObject* v = PyObject_GetAttr(p, names_[i]);
    if (v == nullptr) throw pybind11::error_already_set();
    return pybind11::reinterpret_steal<pybind11::object>(v);
  }

 private:
  // Takes `t` as the class when the class seen so far is none (the first instance): later classes go
  // through PyObject_GetAttr.
  void learn(PyTypeObject* t) {
    if (type_ != nullptr) return;
    type_ = t;
    Py_INCREF(t);
    for (size_t i = 0; i < N; ++i) {
      offsets_[i] = -1;
      // A slot is a member descriptor of an object field on the class itself; anything else (a property, an
      // instance dict entry) is read by attribute access.
      PyObject* d = _PyType_Lookup(t, names_[i]);  // borrowed
      if (d == nullptr || !Py_IS_TYPE(d, &PyMemberDescr_Type)) continue;
      const PyMemberDef* m = reinterpret_cast<PyMemberDescrObject*>(d)->d_member;
      if (m->type == T_OBJECT_EX && !(m->flags & READ_RESTRICTED)) offsets_[i] = m->offset;
    }
  }

  std::array<PyObject*, N> names_{};
  std::array<Py_ssize_t, N> offsets_{};
  PyTypeObject* type_ = nullptr;
};

}  // namespace trnsim::py
