// The nki front end's default schedule (python/trnsim/nki/_schedule.py states the rule) over a trace encoded
// as integers: run here because it visits every operand of every instruction, a pass that cost a sixth of the
// tracing time in Python. The result is the same order, key for key, as the rule's tuple keys would sort.
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <utility>
#include <vector>

#include "python/src/bindings.h"
#include "python/src/py_slots.h"
#include "sim/base/error.h"

namespace trnsim::py {
namespace pyb = pybind11;

namespace {

constexpr size_t kKeep = 16;  // accesses remembered per buffer; older ones fold into a floor (conservative)

using Rect = std::array<int64_t, 4>;  // partition lo, hi, byte lo, hi

// An op's sort key, compared lexicographically: any other op's is (program index, 0); a load's is (its
// anchor's first field, its load number), -1 first without an anchor. The rule's key for a load is its
// anchor's key plus its load number, which grows by one field per load anchored at the load before it (13k
// loads in a row: 13k-field keys, quadratic time and memory); two fields order the same: a load's anchor is
// never earlier than the previous load (the anchor starts there), so every load is placed after all earlier
// ones, and a load anchored at a load is anchored at the previous load (its run after the same op grows by
// one, in load-number order).
using Key = std::pair<int64_t, int64_t>;

struct History {
  int floor = -1;   // op whose key is the largest of the folded accesses, -1: none
  int latest = -1;  // op with the largest key of all accesses noted, -1: none
  std::deque<std::pair<int, Rect>> recent;
};

class Scheduler {
 public:
  explicit Scheduler(size_t n) { keys_.reserve(n); }

  bool later(int a, int b) const {  // key of op a > key of op b; -1 is None (less than every key)
    if (a < 0) return false;
    if (b < 0) return true;
    return keys_[b] < keys_[a];
  }

  // The latest access in h overlapping r, if later than anchor.
  int after(int anchor, const History& h, const Rect& r) const {
    if (anchor >= 0 && !later(h.latest, anchor)) return anchor;
    if (h.floor >= 0 && later(h.floor, anchor)) anchor = h.floor;
    for (const auto& [k, b] : h.recent)
      if (r[0] < b[1] && b[0] < r[1] && r[2] < b[3] && b[2] < r[3] && later(k, anchor)) anchor = k;
    return anchor;
  }

  void note(History& h, int k, const Rect& r) const {
    h.recent.emplace_back(k, r);
    if (h.latest < 0 || later(k, h.latest)) h.latest = k;
    if (h.recent.size() > kKeep) {
      const int old = h.recent.front().first;
      h.recent.pop_front();
      if (h.floor < 0 || later(old, h.floor)) h.floor = old;
    }
  }

  std::vector<Key> keys_;
};

// ops: per instruction [kind (0 other, 1 load, 2 fence), program index, reads, writes, then per access
// (storage uid, partition lo, hi, byte lo, hi)]; buffer_of: storage uid -> history key. Returns the positions
// of the instructions in emission order.
std::vector<int64_t> schedule(const std::vector<int64_t>& ops, const std::vector<int64_t>& buffer_of) {
  std::vector<int64_t> starts;
  for (size_t i = 0; i < ops.size();) {
    if (i + 4 > ops.size()) throw Error("nki schedule: truncated op encoding");
    starts.push_back(static_cast<int64_t>(i));
    i += 4 + 5 * static_cast<size_t>(ops[i + 2] + ops[i + 3]);
  }
  const size_t n = starts.size();
  Scheduler s(n);
  std::unordered_map<int64_t, History> reads, writes;
  int last_load = -1, fence = -1;
  int64_t loads = 0;
  auto access = [&](size_t at, Rect& r) {
    const int64_t uid = ops.at(at);
    for (int j = 0; j < 4; ++j) r[j] = ops.at(at + 1 + j);
    return buffer_of.at(static_cast<size_t>(uid));
  };
  for (size_t i = 0; i < n; ++i) {
    const size_t at = static_cast<size_t>(starts[i]);
    const int64_t kind = ops[at], index = ops[at + 1], nr = ops[at + 2], nw = ops[at + 3];
    const size_t r0 = at + 4, w0 = r0 + 5 * static_cast<size_t>(nr);
    Rect r{};
    if (kind == 1) {
      int anchor = last_load;
      if (fence >= 0 && s.later(fence, anchor)) anchor = fence;
      for (int64_t j = 0; j < nr; ++j) {  // read after write
        auto it = writes.find(access(r0 + 5 * j, r));
        if (it != writes.end()) anchor = s.after(anchor, it->second, r);
      }
      for (int64_t j = 0; j < nw; ++j) {  // write after write, write after read
        const int64_t bk = access(w0 + 5 * j, r);
        auto it = writes.find(bk);
        if (it != writes.end()) anchor = s.after(anchor, it->second, r);
        it = reads.find(bk);
        if (it != reads.end()) anchor = s.after(anchor, it->second, r);
      }
      ++loads;
      s.keys_.emplace_back(anchor >= 0 ? s.keys_[anchor].first : -1, loads);
      last_load = static_cast<int>(i);
    } else {
      s.keys_.emplace_back(index, 0);
      if (kind == 2) fence = static_cast<int>(i);
    }
    const int me = static_cast<int>(i);
    for (int64_t j = 0; j < nr; ++j) {
      const int64_t bk = access(r0 + 5 * j, r);
      s.note(reads[bk], me, r);
    }
    for (int64_t j = 0; j < nw; ++j) {
      const int64_t bk = access(w0 + 5 * j, r);
      s.note(writes[bk], me, r);
    }
  }
  std::vector<int64_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int64_t>(i);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return s.later(static_cast<int>(b), static_cast<int>(a));  // keys are unique: no ties to break
  });
  return order;
}

// An int field of the encoding: a Python int read with the C API (pybind11's conversion, with its errors,
// for anything else).
int64_t int_of(PyObject* o) {
  if (PyLong_CheckExact(o)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (!overflow) return v;
  }
  return pyb::reinterpret_borrow<pyb::object>(o).cast<int64_t>();
}

// The same encoding as _schedule.py's, read from the trace's Op objects (their load, name, index, reads and
// writes; each view's storage uid and rectangle, `_rect` or rect()): the Python loop that built it was a
// third of the scheduling time. The fields are read as slots (py_slots.h): attribute access was most of this
// pass. `after`: {op index: [storage uid, ...]} of the allocation plan.
std::vector<int64_t> encode_ops(pyb::handle ops, pyb::handle after) {
  enum { kLoad, kName, kIndex, kReads, kWrites };
  Slots<5> op_f({"load", "name", "index", "reads", "writes"});
  enum { kRectField, kSt };
  Slots<2> view_f({"_rect", "st"});
  Slots<1> st_f({"uid"});
  static PyObject* const s_rect = PyUnicode_InternFromString("rect");
  const pyb::dict after_d = pyb::reinterpret_borrow<pyb::dict>(after);
  std::vector<int64_t> enc;
  enc.reserve(static_cast<size_t>(pyb::len(ops)) * 14);
  const auto views = [&](const pyb::tuple& vs) {
    for (pyb::handle v : vs) {
      pyb::object r = view_f.get(v, kRectField);
      if (r.is_none()) r = pyb::reinterpret_steal<pyb::object>(PyObject_CallMethodNoArgs(v.ptr(), s_rect));
      if (!r) throw pyb::error_already_set();
      enc.push_back(int_of(st_f.get(view_f.get(v, kSt), 0).ptr()));
      if (PyTuple_CheckExact(r.ptr()))
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(r.ptr()); ++j)
          enc.push_back(int_of(PyTuple_GET_ITEM(r.ptr(), j)));
      else
        for (pyb::handle x : pyb::reinterpret_borrow<pyb::tuple>(r)) enc.push_back(x.cast<int64_t>());
    }
  };
  for (pyb::handle op : ops) {
    const pyb::tuple reads = op_f.get(op, kReads), writes = op_f.get(op, kWrites);
    const pyb::object index = op_f.get(op, kIndex);
    const pyb::handle extra = after_d.empty() ? pyb::handle() : PyDict_GetItem(after_d.ptr(), index.ptr());
    const pyb::object name = op_f.get(op, kName), load_o = op_f.get(op, kLoad);
    const bool load = load_o.ptr() == Py_True ? true : load_o.ptr() == Py_False ? false : load_o.cast<bool>();
    const auto is = [&](const char* n) {
      return PyUnicode_Check(name.ptr()) ? PyUnicode_CompareWithASCIIString(name.ptr(), n) == 0
                                         : name.cast<std::string>() == n;
    };
    enc.push_back(load ? 1 : (is("core_barrier") || is("sendrecv")) ? 2 : 0);
    enc.push_back(int_of(index.ptr()));
    enc.push_back(static_cast<int64_t>(reads.size()));
    enc.push_back(static_cast<int64_t>(writes.size() + (extra ? pyb::len(extra) : 0)));
    views(reads);
    views(writes);
    if (extra)
      for (pyb::handle uid : extra)
        enc.insert(enc.end(), {uid.cast<int64_t>(), 0, 1 << 20, 0, int64_t{1} << 40});
  }
  return enc;
}

}  // namespace

void bind_schedule(pyb::module_& m) {
  m.def(
      "nki_schedule_ops",
      [](pyb::handle ops, const std::vector<int64_t>& buffer_of, pyb::handle after) {
        return schedule(encode_ops(ops, after), buffer_of);
      },
      pyb::arg("ops"), pyb::arg("buffer_of"), pyb::arg("after"),
      "nki_schedule of the trace's Op objects themselves (python/trnsim/nki/_schedule.py): the same order");
  m.def(
      "nki_schedule", &schedule, pyb::arg("ops"), pyb::arg("buffer_of"),
      "the nki front end's default instruction order (python/trnsim/nki/_schedule.py): ops encoded as "
      "[kind (0 other, 1 load, 2 fence), program index, reads, writes, (storage uid, partition lo, hi, byte "
      "lo, "
      "hi) per access] per instruction, buffer_of[storage uid] its history key; returns positions in order");
}

}  // namespace trnsim::py
