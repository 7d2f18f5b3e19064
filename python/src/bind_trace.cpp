// The nki front end's recording of a tiled kernel's usual instruction (python/trnsim/nki/_lower.py: nl.load's
// DMA, nl.matmul's nc_matmul): its new tile (Storage and its whole NkiTensor view) and its Op, made and
// appended to the trace in one call. In Python these were about sixty field stores, a dict, two tuples and
// three calls per instruction, the largest share of tracing. The objects are the classes' own, with the
// fields _ops.new_tile and Trace.record give them (python/tests/test_nki_fast_paths.py compares them with the
// classes' __init__); any case these paths do not cover returns None before changing anything, and the
// caller then takes the Python path.
#include <Python.h>
#include <structmember.h>

#include <array>
#include <cstddef>

#include "python/src/bindings.h"

namespace trnsim::py {
namespace pyb = pybind11;

namespace {

// The fields of one __slots__ class, by offset (the member descriptors of the class itself).
template <size_t N>
struct Fields {
  PyTypeObject* type = nullptr;
  std::array<Py_ssize_t, N> off{};

  bool learn(PyObject* cls, const std::array<const char*, N>& names) {
    if (!PyType_Check(cls)) return false;
    for (size_t i = 0; i < N; ++i) {
      PyObject* n = PyUnicode_InternFromString(names[i]);
      PyObject* d = n ? _PyType_Lookup(reinterpret_cast<PyTypeObject*>(cls), n) : nullptr;  // borrowed
      Py_XDECREF(n);
      if (d == nullptr || !Py_IS_TYPE(d, &PyMemberDescr_Type)) return false;
      const PyMemberDef* m = reinterpret_cast<PyMemberDescrObject*>(d)->d_member;
      if (m->type != T_OBJECT_EX) return false;
      off[i] = m->offset;
    }
    Py_INCREF(cls);
    type = reinterpret_cast<PyTypeObject*>(cls);
    return true;
  }
  // Sets field i of a new instance (its slot empty) to v.
  void set(PyObject* o, size_t i, PyObject* v) const {
    *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(o) + off[i]) = Py_NewRef(v);
  }
  void set_long(PyObject* o, size_t i, Py_ssize_t v) const {
    *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(o) + off[i]) = PyLong_FromSsize_t(v);
  }
};

enum StF {
  kTrace,
  kUid,
  kName,
  kSpace,
  kPrivate,
  kDtype,
  kShape,
  kPdim,
  kPbytes,
  kSite,
  kRole,
  kLoc,
  kFirst,
  kLast,
  kPhys,
  kDirect,
  kMovedTo,
  kOuter,
  kScope,
  kStN
};
enum ViewF { kVSt, kVDtype, kBoff, kDims, kPd, kP0, kVars, kRect, kBv, kViewN };
enum OpF { kOName, kArgs, kReads, kWrites, kAttrs, kOLoc, kIndex, kLoad, kOpN };

struct State {
  Fields<kStN> st;
  Fields<kViewN> view;
  Fields<kOpN> op;
  PyObject* wrapper_code = nullptr;  // the nl.* / nisa.* wrappers' code object (_void.WRAPPER_CODE)
  PyObject* getitem = nullptr;       // NkiTensor's own __getitem__ (Python), for the cases getitem() leaves
};
State* state = nullptr;

PyObject* s(const char* n) {
  return PyUnicode_InternFromString(n);  // kept for the process (a few names)
}
struct Names {
  PyObject *tile_shapes = s("tile_shapes"), *entry_outside = s("entry_outside"),
           *entry_code = s("entry_code"), *entry_tiles = s("entry_tiles"), *foreign = s("foreign"),
           *ops = s("ops"), *limit = s("limit"), *storages = s("storages"), *outer = s("outer"),
           *scope = s("scope"), *fresh = s("fresh"), *name = s("name"), *st = s("st"), *trace = s("trace"),
           *first = s("first"), *last = s("last"), *moved_to = s("moved_to"), *dst = s("dst"),
           *void_ = s("void"), *voiding = s("voiding"), *psum_groups = s("psum_groups"),
           *accumulate = s("accumulate"), *dropped = s("dropped"), *nc_matmul = s("nc_matmul"), *mm = s("mm"),
           *psum = s("psum"), *hbm = s("hbm"), *hbm_slices = s("hbm_slices");
};
const Names& names() {
  static const Names* n = new Names();
  return *n;
}

// nki_trace_types(Storage, NkiTensor, Op, wrapper_code): the classes nki_new_tile_op makes.
PyObject* trace_types(PyObject*, PyObject* const* a, Py_ssize_t n) {
  if (n != 4) {
    PyErr_SetString(PyExc_TypeError, "nki_trace_types(Storage, NkiTensor, Op, wrapper_code)");
    return nullptr;
  }
  PyObject* own =
      PyObject_GetAttrString(a[1], "__getitem__");  // (the Python function, before it is replaced)
  if (own == nullptr) return nullptr;
  if (!PyFunction_Check(own)) {  // (registered before: the function it keeps)
    Py_DECREF(own);
    own = state != nullptr ? Py_NewRef(state->getitem) : nullptr;
    if (own == nullptr) {
      PyErr_SetString(PyExc_TypeError, "nki_trace_types: NkiTensor.__getitem__ is no function");
      return nullptr;
    }
  }
  auto* st = new State();
  const bool ok = st->st.learn(a[0], {"trace", "uid", "name", "space", "private", "dtype", "shape", "pdim",
                                      "pbytes", "site", "role", "loc", "first", "last", "phys", "direct",
                                      "moved_to", "outer", "scope"}) &&
                  st->view.learn(a[1], {"st", "dtype", "boff", "dims", "pd", "p0", "vars", "_rect", "_bv"}) &&
                  st->op.learn(a[2], {"name", "args", "reads", "writes", "attrs", "loc", "index", "load"});
  if (!ok) {
    Py_DECREF(own);
    delete st;
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "nki_trace_types: a class without those slots");
    return nullptr;
  }
  st->wrapper_code = Py_NewRef(a[3]);
  st->getitem = own;
  state = st;  // (the first State, if any, stays: objects made with it may still be alive)
  Py_RETURN_NONE;
}

// A new reference to attribute `n` of o, or null (an error set when it was not an AttributeError).
PyObject* attr(PyObject* o, PyObject* n) {
  PyObject* v = PyObject_GetAttr(o, n);
  if (v == nullptr && PyErr_ExceptionMatches(PyExc_AttributeError)) PyErr_Clear();
  return v;
}

// Attribute `n` of the trace from its instance dict `d` when there (a new reference), else attr().
PyObject* tattr(PyObject* d, PyObject* t, PyObject* n) {
  PyObject* v = d != nullptr ? PyDict_GetItemWithError(d, n) : nullptr;
  if (v != nullptr) return Py_NewRef(v);
  if (PyErr_Occurred()) return nullptr;
  return attr(t, n);
}

// Field i of o when o is exactly of the class `f` describes and the slot is set (a new reference), else
// attribute `n`'s value (attr()).
template <size_t N>
PyObject* field(const Fields<N>& f, PyObject* o, size_t i, PyObject* n) {
  if (Py_TYPE(o) == f.type) {
    PyObject* v = *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(o) + f.off[i]);
    if (v != nullptr) return Py_NewRef(v);
  }
  return attr(o, n);
}

struct Ref {  // owns one reference
  PyObject* p = nullptr;
  Ref() = default;
  explicit Ref(PyObject* o) : p(o) {}
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  ~Ref() { Py_XDECREF(p); }
  void reset(PyObject* o) {
    Py_XDECREF(p);
    p = o;
  }
  PyObject* release() {
    PyObject* r = p;
    p = nullptr;
    return r;
  }
  explicit operator bool() const { return p != nullptr; }
};

// None, or null with the error set when one was raised on the way.
PyObject* miss() {
  if (PyErr_Occurred()) return nullptr;
  Py_RETURN_NONE;
}

// The (site, Loc) the trace noted for the kernel-function instruction that made the nki call whose
// implementation called us (Trace.entry_tiles, as _ops.new_tile finds it with `depth`: the kernel's frame is
// depth - 1 frames above our caller's, one more when one of them is an nki wrapper); borrowed, or null.
PyObject* entry_site(PyObject* d, PyObject* t, long depth) {
  const Names& n = names();
  Ref outside(tattr(d, t, n.entry_outside));
  if (!outside || outside.p != Py_True) return nullptr;
  PyFrameObject* f = PyEval_GetFrame();  // borrowed: our caller's frame
  if (f == nullptr) return nullptr;
  Ref held(reinterpret_cast<PyObject*>(f));
  Py_INCREF(f);
  for (long k = 1; k < depth; ++k) {
    PyFrameObject* b = PyFrame_GetBack(reinterpret_cast<PyFrameObject*>(held.p));
    if (b == nullptr) return nullptr;
    held.reset(reinterpret_cast<PyObject*>(b));
  }
  Ref code(reinterpret_cast<PyObject*>(PyFrame_GetCode(reinterpret_cast<PyFrameObject*>(held.p))));
  if (code.p == state->wrapper_code) {
    PyFrameObject* b = PyFrame_GetBack(reinterpret_cast<PyFrameObject*>(held.p));
    if (b == nullptr) return nullptr;
    held.reset(reinterpret_cast<PyObject*>(b));
    code.reset(reinterpret_cast<PyObject*>(PyFrame_GetCode(reinterpret_cast<PyFrameObject*>(held.p))));
  }
  Ref entry(tattr(d, t, n.entry_code));
  if (!entry || code.p != entry.p) return nullptr;
  Ref tiles(tattr(d, t, n.entry_tiles));
  if (!tiles || !PyDict_CheckExact(tiles.p)) return nullptr;
  Ref lasti(PyLong_FromLong(PyFrame_GetLasti(reinterpret_cast<PyFrameObject*>(held.p))));
  if (!lasti) return nullptr;
  PyObject* hit = PyDict_GetItemWithError(tiles.p, lasti.p);  // borrowed, alive in the dict
  if (hit == nullptr || !PyTuple_CheckExact(hit) || PyTuple_GET_SIZE(hit) != 2) return nullptr;
  return hit;
}

// nki_new_tile_op(trace, shape, dtype, space, name, depth, op_name, keys, srcs, attrs, load): a new tile
// (_ops.new_tile(shape, dtype, space, name, None, depth)) and the op writing it, recorded
// (trace.record(op_name, {"dst": tile, keys[j]: srcs[j]...}, srcs, (tile,), attrs, the tile's loc), its
// `load` flag set, and noted as the tile's maker in trace.fresh); returns the tile. None, changing nothing,
// unless the tile's shape was checked before, the call came from the kernel function at an instruction seen
// before, and recording needs none of Trace.record's checks.
PyObject* new_tile_op(PyObject*, PyObject* const* a, Py_ssize_t nargs) {
  if (nargs != 11) {
    PyErr_SetString(
        PyExc_TypeError,
        "nki_new_tile_op(trace, shape, dtype, space, name, depth, op_name, keys, srcs, attrs, load)");
    return nullptr;
  }
  PyObject *t = a[0], *shape = a[1], *dtype = a[2], *space = a[3], *name = a[4], *op_name = a[6],
           *keys = a[7], *srcs = a[8], *attrs = a[9], *load = a[10];
  if (state == nullptr || !PyTuple_CheckExact(shape) || !PyTuple_CheckExact(keys) ||
      !PyTuple_CheckExact(srcs) || PyTuple_GET_SIZE(keys) != PyTuple_GET_SIZE(srcs))
    return miss();
  const long depth = PyLong_AsLong(a[5]);
  if (depth < 2) return miss();
  const Names& n = names();
  // The shape checked before: (dims, rect, bytes per partition) of its whole tile.
  Ref dname(attr(dtype, n.name));
  if (!dname) return miss();
  Ref key(PyTuple_Pack(3, shape, space, dname.p));
  PyObject** dp = _PyObject_GetDictPtr(t);  // (the trace's fields: its instance dict)
  PyObject* d = dp != nullptr ? *dp : nullptr;
  Ref checked(tattr(d, t, n.tile_shapes));
  if (!key || !checked || !PyDict_CheckExact(checked.p)) return miss();
  PyObject* whole = PyDict_GetItemWithError(checked.p, key.p);
  if (whole == nullptr || !PyTuple_CheckExact(whole) || PyTuple_GET_SIZE(whole) != 3) return miss();
  PyObject* hit = entry_site(d, t, depth);
  if (hit == nullptr) return miss();
  PyObject *site = PyTuple_GET_ITEM(hit, 0), *loc = PyTuple_GET_ITEM(hit, 1);
  const int loc_true = PyObject_IsTrue(loc);
  if (loc_true <= 0) return miss();  // (record's `loc or caller_loc()`)
  // Trace.record's checks: no foreign thread, under the limit, operands of this trace that are no
  // retargeted results.
  Ref foreign(tattr(d, t, n.foreign)), ops(tattr(d, t, n.ops)), limit(tattr(d, t, n.limit)),
      storages(tattr(d, t, n.storages));
  if (!foreign || !ops || !limit || !storages || !PyList_CheckExact(ops.p) || !PyList_CheckExact(storages.p))
    return miss();
  const int busy = PyObject_IsTrue(foreign.p);
  if (busy != 0) return miss();
  const Py_ssize_t i = PyList_GET_SIZE(ops.p);
  int overflow = 0;
  const long long lim = PyLong_AsLongLongAndOverflow(limit.p, &overflow);
  if ((lim == -1 && PyErr_Occurred()) || (!overflow && i >= lim) || overflow < 0) return miss();
  const Py_ssize_t ns = PyTuple_GET_SIZE(srcs);
  std::array<PyObject*, 4> sts{};  // the operands' storages (owned)
  if (ns > static_cast<Py_ssize_t>(sts.size())) return miss();
  struct Drop {
    std::array<PyObject*, 4>& v;
    ~Drop() {
      for (PyObject* o : v) Py_XDECREF(o);
    }
  } drop{sts};
  const State& S = *state;
  const Py_ssize_t uid = PyList_GET_SIZE(storages.p);
  Ref at(PyLong_FromSsize_t(i)), u(PyLong_FromSsize_t(uid));  // (op index, storage uid)
  if (!at || !u) return nullptr;
  for (Py_ssize_t j = 0; j < ns; ++j) {
    sts[j] = field(S.view, PyTuple_GET_ITEM(srcs, j), kVSt, n.st);
    if (sts[j] == nullptr) return miss();
    Ref tr(field(S.st, sts[j], kTrace, n.trace)), first(field(S.st, sts[j], kFirst, n.first));
    if (!tr || tr.p != t || !first || !PyLong_CheckExact(first.p)) return miss();
    if (PyLong_AsLong(first.p) < 0) {
      Ref moved(field(S.st, sts[j], kMovedTo, n.moved_to));
      if (!moved || moved.p != Py_None) return miss();
    }
  }
  Ref outer(tattr(d, t, n.outer)), scope(tattr(d, t, n.scope)), fresh(tattr(d, t, n.fresh));
  if (!outer || !scope || !fresh || !PyDict_CheckExact(fresh.p)) return miss();
  // The storage (Storage.__init__'s fields; first and last: this op, as record() sets them).
  Ref st(S.st.type->tp_alloc(S.st.type, 0));
  if (!st) return nullptr;
  S.st.set(st.p, kTrace, t);
  S.st.set(st.p, kUid, u.p);
  S.st.set(st.p, kName, name);
  S.st.set(st.p, kSpace, space);
  S.st.set(st.p, kPrivate, Py_False);
  S.st.set(st.p, kDtype, dtype);
  S.st.set(st.p, kShape, shape);
  S.st.set_long(st.p, kPdim, 0);
  S.st.set(st.p, kPbytes, PyTuple_GET_ITEM(whole, 2));
  S.st.set(st.p, kSite, site);
  S.st.set(st.p, kRole, Py_None);
  S.st.set(st.p, kLoc, loc);
  S.st.set(st.p, kFirst, at.p);
  S.st.set(st.p, kLast, at.p);
  S.st.set(st.p, kPhys, Py_None);
  S.st.set(st.p, kDirect, Py_None);
  S.st.set(st.p, kMovedTo, Py_None);
  S.st.set(st.p, kOuter, outer.p);
  S.st.set(st.p, kScope, scope.p);
  // Its whole view (NkiTensor.whole's fields).
  Ref v(S.view.type->tp_alloc(S.view.type, 0));
  if (!v) return nullptr;
  S.view.set(v.p, kVSt, st.p);
  S.view.set(v.p, kVDtype, dtype);
  S.view.set_long(v.p, kBoff, 0);
  S.view.set(v.p, kDims, PyTuple_GET_ITEM(whole, 0));
  S.view.set_long(v.p, kPd, 0);
  S.view.set_long(v.p, kP0, 0);
  S.view.set(v.p, kVars, Py_None);
  S.view.set(v.p, kRect, PyTuple_GET_ITEM(whole, 1));
  S.view.set(v.p, kBv, Py_None);
  // The op (Trace.record's fields).
  Ref args(PyDict_New()), writes(PyTuple_Pack(1, v.p)), op(S.op.type->tp_alloc(S.op.type, 0));
  if (!args || !writes || !op || PyDict_SetItem(args.p, n.dst, v.p) < 0) return nullptr;
  for (Py_ssize_t j = 0; j < ns; ++j)
    if (PyDict_SetItem(args.p, PyTuple_GET_ITEM(keys, j), PyTuple_GET_ITEM(srcs, j)) < 0) return nullptr;
  S.op.set(op.p, kOName, op_name);
  S.op.set(op.p, kArgs, args.p);
  S.op.set(op.p, kReads, srcs);
  S.op.set(op.p, kWrites, writes.p);
  S.op.set(op.p, kAttrs, attrs);
  S.op.set(op.p, kOLoc, loc);
  S.op.set(op.p, kIndex, at.p);
  S.op.set(op.p, kLoad, PyObject_IsTrue(load) > 0 ? Py_True : Py_False);
  if (PyList_Append(storages.p, st.p) < 0 || PyList_Append(ops.p, op.p) < 0) return nullptr;
  for (Py_ssize_t j = 0; j < ns; ++j) {
    Ref first(field(S.st, sts[j], kFirst, n.first));
    if (!first) return nullptr;
    if (PyLong_AsLong(first.p) < 0 && PyObject_SetAttr(sts[j], n.first, at.p) < 0) return nullptr;
    if (PyObject_SetAttr(sts[j], n.last, at.p) < 0) return nullptr;
  }
  if (PyDict_SetItem(fresh.p, u.p, op.p) < 0) return nullptr;
  return v.release();
}

// A field of o by Fields when o is exactly its class and the slot is set (borrowed), else null.
template <size_t N>
PyObject* slot(const Fields<N>& f, PyObject* o, size_t i) {
  if (Py_TYPE(o) != f.type) return nullptr;
  return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(o) + f.off[i]);
}
template <size_t N>
bool set_slot(const Fields<N>& f, PyObject* o, size_t i, PyObject* v) {
  PyObject** p = reinterpret_cast<PyObject**>(reinterpret_cast<char*>(o) + f.off[i]);
  Py_XSETREF(*p, Py_NewRef(v));
  return true;
}
long long as_ll(PyObject* o, bool& ok) {
  if (o == nullptr || !PyLong_CheckExact(o)) {
    ok = false;
    return 0;
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (overflow) ok = false;
  return v;
}

// nki_iadd_matmul(trace, dst, value): `dst += value` for the usual case of _lower.iadd, the trace's last op
// an nc_matmul whose fresh result is value, accumulating into the PSUM tile dst of value's dims whose one
// open accumulation group covers dst as a whole (_ops.touch_psum's first case: a tiled matmul's K loop): that
// op then accumulates straight into dst (_lower._retarget(op, value, dst, None), its `accumulate` set and dst
// read). True when done; None, changing nothing, for any other case (_lower.iadd's Python path).
PyObject* iadd_matmul(PyObject*, PyObject* const* a, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "nki_iadd_matmul(trace, dst, value)");
    return nullptr;
  }
  PyObject *t = a[0], *dst = a[1], *value = a[2];
  if (state == nullptr) return miss();
  const State& S = *state;
  const Names& n = names();
  PyObject *vst = slot(S.view, value, kVSt), *dst_st = slot(S.view, dst, kVSt);
  if (vst == nullptr || dst_st == nullptr || Py_TYPE(vst) != S.st.type || Py_TYPE(dst_st) != S.st.type)
    return miss();
  PyObject** dp = _PyObject_GetDictPtr(t);
  PyObject* d = dp != nullptr ? *dp : nullptr;
  Ref voids(tattr(d, t, n.void_)), voiding(tattr(d, t, n.voiding)), fresh(tattr(d, t, n.fresh)),
      ops(tattr(d, t, n.ops)), groups(tattr(d, t, n.psum_groups));
  if (!voids || !voiding || !fresh || !ops || !groups || voiding.p != Py_None ||
      !PyDict_CheckExact(fresh.p) || !PyList_CheckExact(ops.p) || !PyDict_CheckExact(groups.p) ||
      PyList_GET_SIZE(ops.p) == 0)
    return miss();
  if (PyObject_IsTrue(voids.p) != 0) return miss();  // (void tiles: _void's path)
  // _fresh_op(value): the last op, not dropped, writing value itself.
  PyObject* vuid = slot(S.st, vst, kUid);
  PyObject* op = vuid ? PyDict_GetItemWithError(fresh.p, vuid) : nullptr;
  if (op == nullptr || op != PyList_GET_ITEM(ops.p, PyList_GET_SIZE(ops.p) - 1) || Py_TYPE(op) != S.op.type)
    return miss();
  PyObject *name = slot(S.op, op, kOName), *args = slot(S.op, op, kArgs), *attrs = slot(S.op, op, kAttrs),
           *reads = slot(S.op, op, kReads), *writes = slot(S.op, op, kWrites),
           *index = slot(S.op, op, kIndex);
  if (!name || !args || !attrs || !reads || !writes || !index || name != n.nc_matmul ||
      !PyDict_CheckExact(args) || !PyDict_CheckExact(attrs) || !PyTuple_CheckExact(reads) ||
      !PyTuple_CheckExact(writes))
    return miss();
  PyObject* drop = PyDict_GetItemWithError(attrs, n.dropped);
  if (drop != nullptr && drop != Py_False) return miss();
  PyObject* w = PyDict_GetItemWithError(args, n.dst);
  if (w != value || PyErr_Occurred()) return miss();
  // dst: a PSUM tile of value's dims, no retargeted result, its one open group a matmul's over all of it.
  PyObject *space = slot(S.st, dst_st, kSpace), *moved = slot(S.st, dst_st, kMovedTo);
  PyObject *ddims = slot(S.view, dst, kDims), *vdims = slot(S.view, value, kDims);
  PyObject *dpd = slot(S.view, dst, kPd), *vpd = slot(S.view, value, kPd), *rect = slot(S.view, dst, kRect);
  if (!space || !moved || !ddims || !vdims || !dpd || !vpd || !rect || moved != Py_None || rect == Py_None ||
      !PyUnicode_CheckExact(space) || PyUnicode_Compare(space, n.psum) != 0)
    return miss();
  if (ddims != vdims) {
    const int same = PyObject_RichCompareBool(ddims, vdims, Py_EQ);
    if (same <= 0) return miss();
  }
  if (dpd != vpd) {
    const int same = PyObject_RichCompareBool(dpd, vpd, Py_EQ);
    if (same <= 0) return miss();
  }
  PyObject* duid = slot(S.st, dst_st, kUid);
  PyObject* lst = duid ? PyDict_GetItemWithError(groups.p, duid) : nullptr;
  if (lst == nullptr || !PyList_CheckExact(lst) || PyList_GET_SIZE(lst) != 1) return miss();
  PyObject* g = PyList_GET_ITEM(lst, 0);
  if (!PyTuple_CheckExact(g) || PyTuple_GET_SIZE(g) < 2) return miss();
  PyObject* kind = PyTuple_GET_ITEM(g, 1);
  if (kind != n.mm && (!PyUnicode_CheckExact(kind) || PyUnicode_Compare(kind, n.mm) != 0)) return miss();
  if (PyTuple_GET_ITEM(g, 0) != rect) {
    const int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(g, 0), rect, Py_EQ);
    if (same <= 0) return miss();
  }
  bool ok = true;
  const long long idx = as_ll(index, ok);
  const long long first = as_ll(slot(S.st, dst_st, kFirst), ok), last = as_ll(slot(S.st, dst_st, kLast), ok);
  if (!ok) return miss();
  // Its effects, as matmul_accumulate (accumulate True) and _retarget(op, value, dst, None) make them.
  Ref new_writes, new_reads, moved_to;
  bool read = false;
  if (PyTuple_GET_SIZE(writes) == 1 && PyTuple_GET_ITEM(writes, 0) == value) {
    new_writes.reset(PyTuple_Pack(1, dst));
  } else {
    new_writes.reset(PyTuple_New(PyTuple_GET_SIZE(writes)));
    for (Py_ssize_t j = 0; new_writes && j < PyTuple_GET_SIZE(writes); ++j) {
      PyObject* x = PyTuple_GET_ITEM(writes, j);
      PyTuple_SET_ITEM(new_writes.p, j, Py_NewRef(x == value ? dst : x));
    }
  }
  const Py_ssize_t nr = PyTuple_GET_SIZE(reads);
  for (Py_ssize_t j = 0; j < nr; ++j) read = read || PyTuple_GET_ITEM(reads, j) == value;
  new_reads.reset(PyTuple_New(nr + 1));  // (the op's reads, value replaced, and dst: it accumulates)
  for (Py_ssize_t j = 0; new_reads && j < nr; ++j) {
    PyObject* x = PyTuple_GET_ITEM(reads, j);
    PyTuple_SET_ITEM(new_reads.p, j, Py_NewRef(x == value ? dst : x));
  }
  if (new_reads) PyTuple_SET_ITEM(new_reads.p, nr, Py_NewRef(dst));
  moved_to.reset(PyTuple_Pack(5, dst, op, Py_None, read ? Py_True : Py_False, Py_None));
  Ref minus(PyLong_FromLong(-1));
  if (!new_writes || !new_reads || !moved_to || !minus) return nullptr;
  if (PyDict_SetItem(attrs, n.accumulate, Py_True) < 0 || PyDict_SetItem(args, n.dst, dst) < 0)
    return nullptr;
  set_slot(S.op, op, kWrites, new_writes.p);
  set_slot(S.op, op, kReads, new_reads.p);
  if (first < 0 || first > idx) set_slot(S.st, dst_st, kFirst, index);
  if (last < idx) set_slot(S.st, dst_st, kLast, index);
  set_slot(S.st, vst, kFirst, minus.p);
  set_slot(S.st, vst, kLast, minus.p);
  set_slot(S.st, vst, kMovedTo, moved_to.p);
  if (PyDict_DelItem(fresh.p, vuid) < 0) return nullptr;
  Py_RETURN_TRUE;
}

// NkiTensor.__getitem__ (installed as the method by _lower): `hbm_view[a:b, c:d]` sliced the same way before
// is the view that slicing made (the trace's hbm_slices, NkiTensor.__getitem__'s cache, keyed as it keys
// it); anything else is the Python method's.
PyObject* getitem(PyObject*, PyObject* const* a, Py_ssize_t nargs) {
  if (nargs != 2 || state == nullptr) {
    PyErr_SetString(PyExc_TypeError, "NkiTensor.__getitem__(self, idx)");
    return nullptr;
  }
  PyObject *self = a[0], *idx = a[1];
  const State& S = *state;
  const Names& n = names();
  if (Py_TYPE(self) == S.view.type && PyTuple_CheckExact(idx) && PyTuple_GET_SIZE(idx) == 2 &&
      PySlice_Check(PyTuple_GET_ITEM(idx, 0)) && PySlice_Check(PyTuple_GET_ITEM(idx, 1))) {
    PyObject *pd = slot(S.view, self, kPd), *st = slot(S.view, self, kVSt);
    PyObject* space = st != nullptr && Py_TYPE(st) == S.st.type ? slot(S.st, st, kSpace) : nullptr;
    PyObject* tr = st != nullptr && Py_TYPE(st) == S.st.type ? slot(S.st, st, kTrace) : nullptr;
    bool ok = true;
    const long long p = as_ll(pd, ok);
    if (ok && p < 0 && space != nullptr && tr != nullptr && tr != Py_None &&
        (space == n.hbm || (PyUnicode_CheckExact(space) && PyUnicode_Compare(space, n.hbm) == 0))) {
      PyObject** dp = _PyObject_GetDictPtr(tr);
      Ref cache(tattr(dp != nullptr ? *dp : nullptr, tr, n.hbm_slices));
      if (cache && PyDict_CheckExact(cache.p)) {
        auto* e0 = reinterpret_cast<PySliceObject*>(PyTuple_GET_ITEM(idx, 0));
        auto* e1 = reinterpret_cast<PySliceObject*>(PyTuple_GET_ITEM(idx, 1));
        Ref id(PyLong_FromVoidPtr(self));
        Ref key(id ? PyTuple_Pack(7, id.p, e0->start, e0->stop, e0->step, e1->start, e1->stop, e1->step)
                   : nullptr);
        if (!key) return nullptr;
        PyObject* hit = PyDict_GetItemWithError(cache.p, key.p);
        if (hit != nullptr && PyTuple_CheckExact(hit) && PyTuple_GET_SIZE(hit) == 2)
          return Py_NewRef(PyTuple_GET_ITEM(hit, 1));
        PyErr_Clear();  // (an unhashable bound: the Python method says what it is)
      } else if (PyErr_Occurred()) {
        return nullptr;
      }
    } else if (PyErr_Occurred()) {
      return nullptr;
    }
  }
  PyObject* args[2] = {self, idx};
  return PyObject_Vectorcall(S.getitem, args, 2, nullptr);
}

PyMethodDef methods[] = {
    {"nki_trace_types", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&trace_types)),
     METH_FASTCALL,
     "nki_trace_types(Storage, NkiTensor, Op, wrapper_code): the classes nki_new_tile_op makes "
     "(python/trnsim/nki/_lower.py)"},
    {"nki_new_tile_op", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&new_tile_op)),
     METH_FASTCALL,
     "nki_new_tile_op(trace, shape, dtype, space, name, depth, op_name, keys, srcs, attrs, load): a new tile "
     "and the op writing it, recorded in the trace; None when the Python path must make them "
     "(python/src/bind_trace.cpp)"},
    {"nki_iadd_matmul", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&iadd_matmul)),
     METH_FASTCALL,
     "nki_iadd_matmul(trace, dst, value): `dst += value` of a fresh matmul result into its accumulation "
     "group's PSUM tile, or None when the Python path must do it (python/src/bind_trace.cpp)"},
    {"nki_getitem", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&getitem)), METH_FASTCALL,
     "NkiTensor.__getitem__(self, idx) with HBM slices made before taken from the trace's cache "
     "(python/src/bind_trace.cpp); install it with nki_method"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void bind_trace(pyb::module_& m) {
  if (PyModule_AddFunctions(m.ptr(), methods) < 0) throw pyb::error_already_set();
  // nki_method(f): f as a method (a class attribute that binds its instance), for nki_getitem.
  m.def(
      "nki_method",
      [](pyb::handle f) { return pyb::reinterpret_steal<pyb::object>(PyInstanceMethod_New(f.ptr())); },
      pyb::arg("f"), "f (a builtin) as a method of the class it is set on");
}

}  // namespace trnsim::py
