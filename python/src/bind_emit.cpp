// The nki front end's emission loop (python/trnsim/nki/_emit.py emit): one builder call per traced
// instruction, in the schedule's order. The loop runs here, and the instructions of a tiled kernel's inner
// loops (nl.load's DMA, a plain nc_matmul, a plain dma_copy, tensor_copy) go straight to the builder: in
// Python each cost a function call, its attribute reads and a pybind11 call whose argument conversion looks
// the View class up by its type name. Every other instruction, and any operand these fast paths do not take
// as they are, goes to the Python function of _emit.EMIT, which makes the same builder call.
#include "kernels/api/nki.h"
#include "python/src/bindings.h"
#include "python/src/py_loc.h"
#include "python/src/py_slots.h"
#include "python/src/py_util.h"

#include <optional>
#include <unordered_map>
#include <vector>

namespace trnsim::py {
namespace pyb = pybind11;
namespace nki = kernels::nki;
using isa::Engine;
using kernels::View;

namespace {

PyObject* intern(const char* s) {
  return PyUnicode_InternFromString(s);  // kept for the process (a few names)
}

// A string field equal to `s` (an interned literal: the front end's names are interned identifiers, so
// the pointer test decides almost always).
bool str_is(PyObject* o, PyObject* s) {
  if (o == s) return true;
  return PyUnicode_CheckExact(o) && PyUnicode_Compare(o, s) == 0;
}

// d[key] (borrowed), or null: a missing key, or `d` no dict (the Python function then raises what it raises).
PyObject* item(PyObject* d, PyObject* key) {
  if (!PyDict_CheckExact(d)) return nullptr;
  return PyDict_GetItemWithError(d, key);
}

// The dict o.name itself (changed in place by both sides; pybind11's dict conversion of an attribute would
// copy it).
pyb::dict dict_attr(pyb::handle o, const char* name) {
  pyb::object d = pyb::getattr(o, name);
  if (!PyDict_CheckExact(d.ptr()))
    throw pyb::type_error(std::string("nki_emit_ops: emitter.") + name + " is no dict");
  return pyb::reinterpret_borrow<pyb::dict>(d);
}

// Truth of a flag that is a bool; -1 for anything else (the Python function then decides).
int flag(PyObject* o) {
  return o == Py_True ? 1 : o == Py_False ? 0 : -1;
}

class Loop {
 public:
  Loop(pyb::handle em, pyb::handle load_attrs, pyb::handle hbm)
      : view_fn_(em.attr("view")),
        dtype_fn_(em.attr("dtype")),
        buffers_(dict_attr(em, "buffers")),
        whole_(dict_attr(em, "whole")),
        cached_(dict_attr(em, "cached")),
        load_attrs_(load_attrs.ptr()),
        hbm_(hbm.ptr()) {
    view_ti_ = pyb::detail::get_type_info(typeid(View));
  }

  // Emits op `op` through a fast path; false when it is left to the Python function.
  bool emit(pyb::handle op) {
    pyb::object name = op_f_.get(op, kName);
    if (str_is(name.ptr(), s_.nc_matmul)) return nc_matmul(op);
    if (str_is(name.ptr(), s_.dma_copy)) return dma_copy(op);
    if (str_is(name.ptr(), s_.tensor_copy)) return tensor_copy(op);
    return false;
  }

 private:
  enum { kName, kArgs, kAttrs, kLoc };
  enum { kBv, kSt, kDtype, kBoff, kDims, kPd, kP0 };
  enum { kSpace, kPhys, kStDtype };

  // The C++ View a Python object holds, or null for anything else.
  const View* as_view(PyObject* o) const {
    if (view_ti_ == nullptr || Py_TYPE(o) != view_ti_->type) return nullptr;
    auto vh = reinterpret_cast<pyb::detail::instance*>(o)->get_value_and_holder(view_ti_, false);
    return vh ? static_cast<const View*>(vh.value_ptr()) : nullptr;
  }

  // An operand as the builder takes it: `held` keeps the Python object alive, `made` an HBM pattern made
  // here.
  struct Operand {
    pyb::object held;
    std::optional<View> made;
    const View* view = nullptr;
  };

  // Emitter.view(v) (_emit.py): the cached builder view, an HBM tensor's pattern, or the Python method for
  // an on-chip operand not made yet (it makes the buffer and caches the view). False: leave the op to Python.
  bool operand(PyObject* v, Operand& out) {
    if (v == nullptr || v == Py_None) return false;
    pyb::object bv = view_f_.get(v, kBv);
    if (bv.is_none()) {
      pyb::object st = view_f_.get(v, kSt);
      if (str_is(st_f_.get(st, kSpace).ptr(), hbm_)) return hbm_pattern(v, st, out);
      bv = whole_buffer(v, st);
      if (!bv) bv = view_fn_(pyb::handle(v));
    }
    out.view = as_view(bv.ptr());
    out.held = std::move(bv);
    return out.view != nullptr;
  }

  // Emitter.view's usual on-chip case: a view of a whole buffer already made (a new tile's), which is the
  // buffer's own view: noted in em.cached and cached on the view. Null for any other view (Emitter.view).
  pyb::object whole_buffer(PyObject* v, const pyb::object& st) {
    pyb::object phys = st_f_.get(st, kPhys);
    PyObject* base = PyDict_GetItemWithError(buffers_.ptr(), phys.ptr());
    PyObject* whole = base ? PyDict_GetItemWithError(whole_.ptr(), phys.ptr()) : nullptr;
    if (whole == nullptr) {
      if (PyErr_Occurred()) throw pyb::error_already_set();
      return {};
    }
    pyb::object pd = view_f_.get(v, kPd), boff = view_f_.get(v, kBoff), p0 = view_f_.get(v, kP0);
    const auto zero = [](const pyb::object& o) {
      return PyLong_CheckExact(o.ptr()) && PyLong_AsLong(o.ptr()) == 0;
    };
    if (!zero(pd) || !zero(boff) || !zero(p0) || !view_f_.get(v, kDtype).is(st_f_.get(st, kStDtype)))
      return {};
    const int same = PyObject_RichCompareBool(view_f_.get(v, kDims).ptr(), whole, Py_EQ);
    if (same < 0) throw pyb::error_already_set();
    if (!same) return {};
    PyObject* list = PyDict_GetItemWithError(cached_.ptr(), phys.ptr());
    if (list == nullptr) {
      if (PyErr_Occurred()) throw pyb::error_already_set();
      pyb::list fresh;
      if (PyDict_SetItem(cached_.ptr(), phys.ptr(), fresh.ptr()) < 0) throw pyb::error_already_set();
      list = fresh.ptr();
    }
    if (PyList_Append(list, v) < 0 || PyObject_SetAttr(v, s_.bv, base) < 0) throw pyb::error_already_set();
    return pyb::reinterpret_borrow<pyb::object>(base);
  }

  // The pattern of an HBM view (Emitter.view's HBM case): st.phys.pattern(dtype, boff, dims, 0).
  bool hbm_pattern(PyObject* v, const pyb::object& st, Operand& out) {
    pyb::object dims = view_f_.get(v, kDims), boff = view_f_.get(v, kBoff);
    if (!PyTuple_CheckExact(dims.ptr()) || PyTuple_GET_SIZE(dims.ptr()) < 2 || !PyLong_CheckExact(boff.ptr()))
      return false;  // (a view of fewer than two dims is padded by the Python method)
    pyb::object phys = st_f_.get(st, kPhys);
    const View* base = as_view(phys.ptr());
    const std::optional<isa::DType> dt = dtype(view_f_.get(v, kDtype));
    if (base == nullptr || !dt) return false;
    int overflow = 0;
    const long long off = PyLong_AsLongLongAndOverflow(boff.ptr(), &overflow);
    if (overflow) return false;
    out.made = base->pattern(*dt, off, pattern_dims(dims), 0);
    out.view = &*out.made;
    return true;
  }

  // Emitter.dtype(d), cached by the dtype object.
  std::optional<isa::DType> dtype(const pyb::object& d) {
    auto it = dtypes_.find(d.ptr());
    if (it != dtypes_.end()) return it->second.second;
    pyb::object e = dtype_fn_(d);
    std::optional<isa::DType> r;
    if (pyb::isinstance<isa::DType>(e)) r = e.cast<isa::DType>();
    dtypes_.emplace(d.ptr(), std::make_pair(d, r));
    return r;
  }

  kernels::Loc loc(pyb::handle op) {
    pyb::object l = op_f_.get(op, kLoc);
    const int truth = PyObject_IsTrue(l.ptr());  // `op.loc or None`
    if (truth < 0) throw pyb::error_already_set();
    return loc_of(truth ? pyb::handle(l) : pyb::handle(Py_None));
  }

  // _emit._nc_matmul's lean case: no perf mode, no transpose, a bool accumulate.
  bool nc_matmul(pyb::handle op) {
    pyb::object args = op_f_.get(op, kArgs), attrs = op_f_.get(op, kAttrs);
    PyObject* perf = item(attrs.ptr(), s_.perf_mode);
    PyObject* transpose = item(attrs.ptr(), s_.is_transpose);
    PyObject* acc = item(attrs.ptr(), s_.accumulate);
    if (perf == nullptr || transpose == nullptr || acc == nullptr || flag(acc) < 0 || flag(transpose) != 0 ||
        !PyUnicode_CheckExact(perf) || PyUnicode_Compare(perf, s_.double_row) == 0)
      return clear();
    Operand d, s, m;
    if (!operand(item(args.ptr(), s_.dst), d) || !operand(item(args.ptr(), s_.stationary), s) ||
        !operand(item(args.ptr(), s_.moving), m))
      return clear();
    nki::nc_matmul(*d.view, *s.view, *m.view, {flag(acc) == 1, nki::PerfMode::None, false}, loc(op));
    return true;
  }

  // _emit._dma_copy's lean cases: nl.load's DMA (attrs is _LOAD_ATTRS), and a dma_copy with the binding's
  // defaults (no offsets, engine or dge_mode, oob_mode error, no accumulate).
  bool dma_copy(pyb::handle op) {
    pyb::object args = op_f_.get(op, kArgs), attrs = op_f_.get(op, kAttrs);
    if (attrs.ptr() != load_attrs_) {
      PyObject* vo = item(args.ptr(), s_.vector_offset);
      PyObject* so = item(args.ptr(), s_.scalar_offset);
      PyObject* engine = item(attrs.ptr(), s_.engine);
      PyObject* dge = item(attrs.ptr(), s_.dge_mode);
      PyObject* oob = item(attrs.ptr(), s_.oob_mode);
      PyObject* acc = item(attrs.ptr(), s_.accumulate);
      if (vo != Py_None || so != Py_None || engine != Py_None || dge == nullptr || !str_is(dge, s_.unknown) ||
          oob == nullptr || !PyUnicode_CheckExact(oob) || str_is(oob, s_.skip) || acc == nullptr ||
          flag(acc) != 0)
        return clear();
    }
    Operand d, s;
    if (attrs.ptr() == load_attrs_) {
      // nl.load's: the HBM source's pattern first, as the Python function makes it, then the tile.
      PyObject* src = item(args.ptr(), s_.src);
      if (src == nullptr || !view_f_.get(src, kBv).is_none()) return clear();
      pyb::object st = view_f_.get(src, kSt);
      if (!str_is(st_f_.get(st, kSpace).ptr(), hbm_) || !hbm_pattern(src, st, s) ||
          !operand(item(args.ptr(), s_.dst), d))
        return clear();
    } else if (!operand(item(args.ptr(), s_.dst), d) || !operand(item(args.ptr(), s_.src), s)) {
      return clear();
    }
    nki::dma_copy(*d.view, *s.view, {}, loc(op));
    return true;
  }

  // _emit._tensor_copy: an engine named by one of the bindings' Engine names.
  bool tensor_copy(pyb::handle op) {
    pyb::object args = op_f_.get(op, kArgs), attrs = op_f_.get(op, kAttrs);
    PyObject* e = item(attrs.ptr(), s_.engine);
    if (e == nullptr || !PyUnicode_CheckExact(e)) return clear();
    std::optional<Engine> engine;
    for (const auto& [n, v] : s_.engines)
      if (str_is(e, n)) engine = v;
    if (!engine) return clear();
    Operand d, s;
    if (!operand(item(args.ptr(), s_.dst), d) || !operand(item(args.ptr(), s_.src), s)) return clear();
    nki::tensor_copy(*d.view, *s.view, *engine, loc(op));
    return true;
  }

  // Leaves the op to the Python function (a failed dict lookup's error, if any, is its to raise).
  static bool clear() {
    if (PyErr_Occurred()) throw pyb::error_already_set();
    return false;
  }

  struct Names {
    PyObject* nc_matmul = intern("nc_matmul");
    PyObject* dma_copy = intern("dma_copy");
    PyObject* tensor_copy = intern("tensor_copy");
    PyObject* perf_mode = intern("perf_mode");
    PyObject* is_transpose = intern("is_transpose");
    PyObject* accumulate = intern("accumulate");
    PyObject* double_row = intern("double_row");
    PyObject* dst = intern("dst");
    PyObject* src = intern("src");
    PyObject* stationary = intern("stationary");
    PyObject* moving = intern("moving");
    PyObject* vector_offset = intern("vector_offset");
    PyObject* scalar_offset = intern("scalar_offset");
    PyObject* engine = intern("engine");
    PyObject* dge_mode = intern("dge_mode");
    PyObject* oob_mode = intern("oob_mode");
    PyObject* unknown = intern("unknown");
    PyObject* skip = intern("skip");
    PyObject* bv = intern("_bv");
    std::array<std::pair<PyObject*, Engine>, 5> engines{{{intern("PE"), Engine::PE},
                                                         {intern("DVE"), Engine::DVE},
                                                         {intern("ACT"), Engine::ACT},
                                                         {intern("POOL"), Engine::POOL},
                                                         {intern("SP"), Engine::SP}}};
  };
  static const Names& names() {
    static const Names* n = new Names();
    return *n;
  }

  pyb::object view_fn_, dtype_fn_;      // Emitter.view, Emitter.dtype
  pyb::dict buffers_, whole_, cached_;  // Emitter.buffers, whole, cached (changed in place only)
  PyObject* load_attrs_;
  PyObject* hbm_;
  const pyb::detail::type_info* view_ti_ = nullptr;
  const Names& s_ = names();
  Slots<4> op_f_{{"name", "args", "attrs", "loc"}};
  Slots<7> view_f_{{"_bv", "st", "dtype", "boff", "dims", "pd", "p0"}};
  Slots<3> st_f_{{"space", "phys", "dtype"}};
  std::unordered_map<PyObject*, std::pair<pyb::object, std::optional<isa::DType>>> dtypes_;
};

// _emit.emit's loop over the ordered ops: each op through Loop or emit_fns[op.name](em, op), and after an
// op each on-chip buffer whose last access it is (in this order) released with em.release(buffer), so the
// builder may give its space to the buffer placed there next. A buffer is a storage's `phys` that is a tuple
// (pool uid, index); an HBM tensor's phys is its builder view, never released here.
void emit_ops(pyb::handle em, pyb::handle ops, pyb::handle emit_fns, pyb::handle load_attrs,
              pyb::handle hbm) {
  const pyb::list order(pyb::reinterpret_borrow<pyb::object>(ops));
  const size_t n = order.size();
  const auto at = [&](size_t i) {
    return pyb::handle(PyList_GET_ITEM(order.ptr(), static_cast<Py_ssize_t>(i)));
  };
  Slots<3> op_f({"reads", "writes", "name"});
  Slots<1> view_f({"st"});
  Slots<1> st_f({"phys"});
  // The last op (in emission order) to access each phys, keyed as a dict keys them (equal tuples are one).
  pyb::dict slot_of;
  std::vector<size_t> last;
  for (size_t i = 0; i < n; ++i) {
    for (size_t f = 0; f < 2; ++f) {
      const pyb::tuple vs = op_f.get(at(i), f);
      for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(vs.ptr()); ++j) {
        pyb::object phys = st_f.get(view_f.get(PyTuple_GET_ITEM(vs.ptr(), j), 0), 0);
        PyObject* k = PyDict_GetItemWithError(slot_of.ptr(), phys.ptr());
        if (k == nullptr) {
          if (PyErr_Occurred()) throw pyb::error_already_set();
          slot_of[phys] = pyb::int_(last.size());
          last.push_back(i);
        } else {
          last[PyLong_AsSize_t(k)] = i;
        }
      }
    }
  }
  std::vector<std::vector<pyb::handle>> ends(n);
  for (auto [phys, k] : slot_of)
    if (PyTuple_CheckExact(phys.ptr())) ends[last[k.cast<size_t>()]].push_back(phys);
  Loop loop(em, load_attrs, hbm);
  const pyb::object release = em.attr("release");
  for (size_t i = 0; i < n; ++i) {
    const pyb::handle op = at(i);
    try {
      if (!loop.emit(op)) emit_fns[op_f.get(op, 2)](em, op);  // builder errors name the op's kernel line
    } catch (...) {
      em.attr("failed_op") = op;  // for the front end's message, which names the kernel's call (_emit.emit)
      throw;
    }
    for (pyb::handle buf : ends[i]) release(buf);
  }
}

}  // namespace

void bind_emit(pyb::module_& m) {
  m.def("nki_emit_ops", &emit_ops, pyb::arg("emitter"), pyb::arg("ops"), pyb::arg("emit_fns"),
        pyb::arg("load_attrs"), pyb::arg("hbm"),
        "the nki front end's emission loop (python/trnsim/nki/_emit.py emit): each op of the ordered list "
        "emitted, the common cases here, the rest by emit_fns[op.name](emitter, op); emitter.release(buffer) "
        "after each on-chip buffer's last access");
}

}  // namespace trnsim::py
