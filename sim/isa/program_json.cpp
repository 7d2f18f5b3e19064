#include "sim/isa/program_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string_view>

#include "sim/base/error.h"
#include "sim/base/json_excerpt.h"
#include "sim/io/json_document.h"
#include "sim/isa/element.h"
#include "sim/isa/names.h"
#include "sim/isa/opcode_table.h"
#include "sim/isa/opcodes.h"
#include "sim/isa/semantics.h"
#include "sim/isa/shuffle_mask.h"

namespace trnsim::isa {
namespace {

using nlohmann::json;

// A JSON value with its path from the document root, for error messages.
class Node {
 public:
  Node(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  const json& value() const { return j_; }
  const std::string& path() const { return path_; }
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(fmt::format("{}: {}", path_.empty() ? "(root)" : path_, what));
  }

  bool has(const char* key) const { return j_.contains(key); }
  Node operator[](const char* key) const {
    if (!j_.contains(key)) fail(fmt::format("missing key '{}'", key));
    return Node(j_.at(key), path_.empty() ? key : path_ + "." + key);
  }
  Node at(size_t i) const { return Node(j_.at(i), fmt::format("{}[{}]", path_, i)); }

  void expect_object() const {
    if (!j_.is_object()) fail("expected an object");
  }
  void expect_array() const {
    if (!j_.is_array()) fail("expected an array");
  }
  void only_keys(const std::set<std::string>& allowed) const {
    expect_object();
    for (auto it = j_.begin(); it != j_.end(); ++it)
      if (!allowed.count(it.key())) fail(fmt::format("unknown key '{}'", it.key()));
  }

  int64_t integer(int64_t lo, int64_t hi) const {
    if (!j_.is_number_integer()) fail("expected an integer");
    const int64_t v = j_.is_number_unsigned() && j_.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                          ? INT64_MAX
                          : j_.get<int64_t>();
    if (v < lo || v > hi) fail(fmt::format("{} is outside [{}, {}]", v, lo, hi));
    return v;
  }
  bool boolean() const {
    if (!j_.is_boolean()) fail("expected true or false");
    return j_.get<bool>();
  }
  std::string string() const {
    if (!j_.is_string()) fail("expected a string");
    return j_.get<std::string>();
  }
  // A number, or "inf", "-inf", "nan" (JSON has no non-finite numbers).
  float number() const { return static_cast<float>(number64()); }
  double number64() const {
    if (j_.is_number()) return j_.get<double>();
    if (j_.is_string()) {
      const auto s = j_.get<std::string>();
      if (s == "inf") return std::numeric_limits<float>::infinity();
      if (s == "-inf") return -std::numeric_limits<float>::infinity();
      if (s == "nan") return std::numeric_limits<float>::quiet_NaN();
    }
    fail("expected a number (or \"inf\", \"-inf\", \"nan\")");
  }

 private:
  const json& j_;
  std::string path_;
};

bool has_control(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; });
}

json number_json(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return static_cast<double>(v);
}

// An instruction's semaphore lists count their entries in 16 bits (SemWaits): a longer list cannot be held.
void sem_list_fits(const Node& list, const char* what) {
  if (list.value().size() > kMaxSemList)
    list.fail(fmt::format("program too big: an instruction holds at most {} {}, found {}", kMaxSemList, what,
                          list.value().size()));
}

constexpr std::array<Engine, kNumEngines> kEngines = {Engine::PE, Engine::DVE, Engine::ACT, Engine::POOL,
                                                      Engine::SP};

class Reader {
 public:
  explicit Reader(Program& p) : p_(p) {}

  void tensors(const Node& n);
  AccessPattern ap(const Node& n) const;
  Instruction instruction(const Node& n, Engine e);

 private:
  void read_attr(const Node& n, const Attr& a, Instruction& in) const;
  DType dtype(const Node& n) const {
    const auto t = parse_dtype(n.string());
    if (!t) n.fail(fmt::format("unknown dtype '{}'", text_excerpt(n.string())));
    return *t;
  }
  AluOp alu(const Node& n) const {
    const auto a = parse_alu(n.string());
    if (!a) n.fail(fmt::format("unknown ALU op '{}'", text_excerpt(n.string())));
    return *a;
  }
  uint32_t file_index(const std::string& f) {
    if (p_.files.empty()) p_.files.push_back("?");
    for (size_t i = 1; i < p_.files.size(); ++i)
      if (p_.files[i] == f) return static_cast<uint32_t>(i);
    p_.files.push_back(f);
    return static_cast<uint32_t>(p_.files.size() - 1);
  }

  Program& p_;
};

void Reader::tensors(const Node& n) {
  n.expect_array();
  std::set<std::string> names;
  for (size_t i = 0; i < n.value().size(); ++i) {
    const Node t = n.at(i);
    t.only_keys({"name", "dtype", "shape", "private_to_core", "init", "output"});
    TensorDecl d;
    d.name = t["name"].string();
    if (d.name.empty() || d.name.size() > 200 || has_control(d.name))
      t["name"].fail(fmt::format("expected a name of 1-200 bytes of printable characters, found '{}'",
                                 text_excerpt(d.name)));
    if (!names.insert(d.name).second) t["name"].fail(fmt::format("duplicate tensor name '{}'", d.name));
    d.dtype = dtype(t["dtype"]);
    const Node shape = t["shape"];
    shape.expect_array();
    if (shape.value().empty()) shape.fail("expected at least one dimension");
    for (size_t k = 0; k < shape.value().size(); ++k)
      d.shape.push_back(shape.at(k).integer(0, int64_t{1} << 40));
    if (t.has("private_to_core")) d.private_to_core = static_cast<int>(t["private_to_core"].integer(-1, 1));
    if (t.has("init")) d.init = t.value().at("init").dump();
    if (t.has("output")) d.output = t.value().at("output").dump();
    p_.tensors.push_back(std::move(d));
  }
}

AccessPattern Reader::ap(const Node& n) const {
  n.expect_object();
  AccessPattern a;
  const bool hbm = n.has("tensor");
  if (hbm == n.has("mem")) n.fail("expected exactly one of 'mem' (sbuf/psum) or 'tensor' (HBM)");
  const Node pattern = n["pattern"];
  pattern.expect_array();
  std::vector<std::pair<int64_t, int64_t>> dims;
  for (size_t i = 0; i < pattern.value().size(); ++i) {
    const Node d = pattern.at(i);
    if (!d.value().is_array() || d.value().size() != 2) d.fail("expected [stride, size]");
    dims.emplace_back(d.at(0).integer(INT64_MIN / 2, INT64_MAX / 2), d.at(1).integer(0, UINT32_MAX));
  }
  if (hbm) {
    n.only_keys({"tensor", "offset", "dtype", "pattern"});
    const std::string name = n["tensor"].string();
    size_t idx = 0;
    while (idx < p_.tensors.size() && p_.tensors[idx].name != name) ++idx;
    if (idx == p_.tensors.size()) n["tensor"].fail(fmt::format("unknown tensor '{}'", text_excerpt(name)));
    a.space = MemSpace::HBM;
    a.tensor = static_cast<uint32_t>(idx);
    a.dtype = n.has("dtype") ? dtype(n["dtype"]) : p_.tensors[idx].dtype;
    if (dims.empty()) pattern.fail("expected [[row_stride, rows], [stride, size]...]");
    a.partition_stride = dims[0].first;
    a.partitions = static_cast<uint32_t>(dims[0].second);
    dims.erase(dims.begin());
  } else {
    n.only_keys({"mem", "partition", "offset", "dtype", "pattern"});
    const std::string mem = n["mem"].string();
    if (mem == "sbuf")
      a.space = MemSpace::SBUF;
    else if (mem == "psum")
      a.space = MemSpace::PSUM;
    else
      n["mem"].fail(fmt::format("expected \"sbuf\" or \"psum\", got \"{}\"", text_excerpt(mem)));
    const Node part = n["partition"];
    if (!part.value().is_array() || part.value().size() != 2) part.fail("expected [start, count]");
    a.partition_start = static_cast<uint32_t>(part.at(0).integer(0, UINT32_MAX));
    a.partitions = static_cast<uint32_t>(part.at(1).integer(0, UINT32_MAX));
    a.dtype = dtype(n["dtype"]);
  }
  if (a.partitions == 0) n.fail("expected at least one partition/row");
  if (dims.size() > 4) pattern.fail(fmt::format("at most 4 free dims, got {}", dims.size()));
  a.ndim = static_cast<uint8_t>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    a.set_dim(i, Dim{dims[i].first, static_cast<uint32_t>(dims[i].second)});
  if (n.has("offset")) a.offset_bytes = n["offset"].integer(INT64_MIN / 2, INT64_MAX / 2);
  return a;
}

// The integer immediates the ISA splits where FP32 does not hold them (element.h split_fill): memset's
// "value" (rest in imm1), iota's "base" and affine_select's "on_false_value" (rest in imm3). Read and written
// whole; null for any other attribute.
template <class I>
auto* split_rest(I& in, const Attr& a) {
  using F = decltype(&in.imm1);
  if (in.op == Opcode::Memset && a.field == AttrField::Imm0) return &in.imm1;
  if ((in.op == Opcode::Iota && a.field == AttrField::Imm0) ||
      (in.op == Opcode::AffineSelect && a.field == AttrField::Imm2))
    return &in.imm3;
  return F{nullptr};
}

// The Instruction field an attribute names (opcodes.h AttrField).
template <class I>
auto& number_field(I& in, AttrField f) {
  return f == AttrField::Imm1 ? in.imm1 : f == AttrField::Imm2 ? in.imm2 : in.imm0;
}
template <class I>
auto& int_field(I& in, AttrField f) {
  return in.iota_steps[f == AttrField::Int1 ? 1 : 0];
}
template <class I>
auto& alu_field(I& in, AttrField f) {
  return f == AttrField::Alu1 ? in.alu1 : in.alu0;
}
template <class I>
auto& byte_field(I& in, AttrField f) {
  return f == AttrField::MovingScaleOffset ? in.moving_scale_offset
         : f == AttrField::ReduceAxes      ? in.reduce_axes
                                           : in.scale_offset;
}

// Reads attribute `a` of `in` from its instruction object `n` (after the operand slots).
void Reader::read_attr(const Node& n, const Attr& a, Instruction& in) const {
  const bool given = n.has(a.key);
  switch (a.kind) {
    case AttrKind::Flag:
      if (given && n[a.key].boolean()) in.flags |= a.flag;
      break;
    case AttrKind::Choice:
      if (given) {
        const std::string m = n[a.key].string();
        if (m == a.on)
          in.flags |= a.flag;
        else if (m != a.off)
          n[a.key].fail(fmt::format("expected \"{}\" or \"{}\", got \"{}\"", a.off, a.on, text_excerpt(m)));
      }
      break;
    case AttrKind::SlotFlag:
      if (in.ops[a.slot].present()) in.flags |= a.flag;
      break;
    case AttrKind::Byte:
      if (given) byte_field(in, a.field) = static_cast<uint8_t>(n[a.key].integer(a.lo, a.hi));
      break;
    case AttrKind::Alu:
      if (given || a.required) alu_field(in, a.field) = alu(n[a.key]);
      break;
    case AttrKind::Func:
      if (given) {
        const auto f = parse_act(n[a.key].string());
        if (!f)
          n[a.key].fail(fmt::format("unknown activation function '{}'", text_excerpt(n[a.key].string())));
        in.act = *f;
      }
      break;
    case AttrKind::Number:
      if (float* rest = split_rest(in, a); rest != nullptr && (given || a.required))
        split_fill(in.ops[0].dtype, n[a.key].number64(), number_field(in, a.field), *rest);
      else
        number_field(in, a.field) = given || a.required ? n[a.key].number() : a.absent;
      break;
    case AttrKind::NumberOrVector:
      // An object is the vector operand; a number (or "inf", "-inf", "nan") the immediate.
      number_field(in, a.field) = a.absent;
      if (!given) break;
      if (n.value().at(a.key).is_object()) {
        in.ops[a.slot] = ap(n[a.key]);
        in.flags |= a.flag;
      } else {
        number_field(in, a.field) = n[a.key].number();
      }
      break;
    case AttrKind::TransposeAxes:
      if (given) {
        const Node ax = n[a.key];
        ax.expect_array();
        std::vector<int64_t> v;
        for (size_t i = 0; i < ax.value().size() && i < 5; ++i) v.push_back(ax.at(i).integer(0, 3));
        if (v == std::vector<int64_t>{2, 1, 0} || v == std::vector<int64_t>{3, 1, 2, 0})
          in.flags |= a.flag;
        else if (v != std::vector<int64_t>{1, 0})
          ax.fail("expected [1, 0], [2, 1, 0] or [3, 1, 2, 0] (NKI's dma_transpose axes)");
      }
      break;
    case AttrKind::IotaSteps:
      if (given) {
        const Node st = n[a.key];
        st.expect_array();
        if (st.value().size() > 4) st.fail("at most 4 steps (one per free dim)");
        for (size_t i = 0; i < st.value().size(); ++i)
          in.iota_steps[i] = static_cast<int32_t>(st.at(i).integer(INT32_MIN, INT32_MAX));
      }
      break;
    case AttrKind::Int32:
      int_field(in, a.field) = given ? static_cast<int32_t>(n[a.key].integer(INT32_MIN, INT32_MAX))
                                     : static_cast<int32_t>(a.absent);
      break;
    case AttrKind::ShuffleMask: {
      const Node m = n[a.key];
      m.expect_array();
      if (m.value().size() != 32) m.fail(fmt::format("expected 32 entries, got {}", m.value().size()));
      ShuffleMask mask{};
      for (size_t i = 0; i < 32; ++i) {
        const int64_t v = m.at(i).integer(0, 255);
        if (!shuffle_entry_ok(v))
          m.at(i).fail(fmt::format("expected a source partition 0-31 or 255 (unmodified), got {}", v));
        mask[i] = static_cast<uint8_t>(v);
      }
      set_shuffle_mask(in, mask);
      break;
    }
  }
}

Instruction Reader::instruction(const Node& n, Engine e) {
  n.expect_object();
  Instruction in;
  in.engine = e;
  const auto op = parse_opcode(n["op"].string());
  if (!op) n["op"].fail(fmt::format("unknown opcode '{}'", text_excerpt(n["op"].string())));
  in.op = *op;
  std::set<std::string> keys = {"op", "wait", "update", "line", "file"};
  if (is_dma(in.op)) keys.insert({"queue", "dge_mode"});
  if (e == Engine::PE) keys.insert({"mm_wait", "ls_update"});
  for (const char* s : operand_names(in.op)) keys.insert(s);
  const OpcodeInfo& info = opcode_info(in.op);
  for (int a = 0; a < info.num_attrs; ++a) keys.insert(info.attrs[a].key);
  n.only_keys(keys);

  const auto& names = operand_names(in.op);
  // Operands given as numbers are immediates (activation scale/bias, tensor_scalar operands, select
  // on_false).
  for (size_t s = 0; s < names.size(); ++s) {
    if (!n.has(names[s]) || !n.value().at(names[s]).is_object()) continue;
    in.ops[s] = ap(n[names[s]]);
  }
  for (int a = 0; a < info.num_attrs; ++a) read_attr(n, info.attrs[a], in);

  if (n.has("queue")) in.dma_queue = static_cast<uint8_t>(n["queue"].integer(0, 255));
  if (n.has("line")) in.loc.line = static_cast<uint32_t>(n["line"].integer(0, UINT32_MAX));
  if (n.has("file")) {
    const std::string f = n["file"].string();
    if (f.size() > 4096 || has_control(f))
      n["file"].fail(fmt::format(
          "expected a source file name of at most 4096 printable characters, found '{}'", text_excerpt(f)));
    in.loc.file = file_index(f);
  }
  const auto waits = [&](const char* key, SemWaits& out) {
    if (!n.has(key)) return;
    const Node w = n[key];
    w.expect_array();
    sem_list_fits(w, "semaphore waits");
    for (size_t i = 0; i < w.value().size(); ++i) {
      const Node x = w.at(i);
      if (!x.value().is_array() || x.value().size() != 2) x.fail("expected [semaphore, value]");
      out.push_back(SemWait{static_cast<uint16_t>(x.at(0).integer(0, UINT16_MAX)),
                            static_cast<uint32_t>(x.at(1).integer(0, UINT32_MAX))});
    }
  };
  const auto updates = [&](const char* key, SemUpdates& out) {
    if (!n.has(key)) return;
    const Node u = n[key];
    u.expect_array();
    sem_list_fits(u, "semaphore updates");
    for (size_t i = 0; i < u.value().size(); ++i) {
      const Node x = u.at(i);
      SemUpdate su;
      if (x.value().is_array()) {
        if (x.value().size() != 2) x.fail("expected [semaphore, delta] or {\"sem\", \"delta\", \"peer\"}");
        su.sem = static_cast<uint16_t>(x.at(0).integer(0, UINT16_MAX));
        su.delta = static_cast<int32_t>(x.at(1).integer(INT32_MIN, INT32_MAX));
      } else if (x.value().is_object()) {
        x.only_keys({"sem", "delta", "peer"});
        su.sem = static_cast<uint16_t>(x["sem"].integer(0, UINT16_MAX));
        if (x.has("delta")) su.delta = static_cast<int32_t>(x["delta"].integer(INT32_MIN, INT32_MAX));
        if (x.has("peer")) su.peer = x["peer"].boolean();
      } else {
        x.fail("expected [semaphore, delta] or {\"sem\", \"delta\", \"peer\"}");
      }
      out.push_back(su);
    }
  };
  waits("wait", in.waits);
  waits("mm_wait", in.mm_waits);
  updates("update", in.updates);
  updates("ls_update", in.ls_updates);
  if (n.has("dge_mode")) {
    const std::string m = n["dge_mode"].string();
    if (m == "none")
      in.dge = DgeMode::None;
    else if (m == "hwdge")
      in.dge = DgeMode::Hwdge;
    else if (m == "swdge")
      in.dge = DgeMode::Swdge;
    else
      n["dge_mode"].fail(fmt::format("expected \"none\", \"hwdge\" or \"swdge\", got \"{}\"", m));
  }
  uint8_t nops = 0;
  for (int s = 0; s < 5; ++s)
    if (in.ops[s].present()) nops = static_cast<uint8_t>(s + 1);
  in.nops = nops;
  return in;
}

json ap_json(const AccessPattern& a, const Program& p) {
  json j = json::object();
  json pattern = json::array();
  if (a.space == MemSpace::HBM) {
    j["tensor"] = a.tensor < p.tensors.size() ? p.tensors[a.tensor].name : fmt::format("#{}", a.tensor);
    pattern.push_back({a.partition_stride, a.partitions});
  } else {
    j["mem"] = a.space == MemSpace::SBUF ? "sbuf" : "psum";
    j["partition"] = {a.partition_start, a.partitions};
  }
  j["offset"] = a.offset_bytes;
  j["dtype"] = dtype_name(a.dtype);
  for (int d = 0; d < a.ndim && d < 4; ++d) pattern.push_back({a.strides[d], a.sizes[d]});
  j["pattern"] = pattern;
  return j;
}

// Writes attribute `a` of `in` into its instruction object `j` (after the operand slots).
void write_attr(const Attr& a, const Instruction& in, json& j) {
  const bool set = (in.flags & a.flag) != 0;
  switch (a.kind) {
    case AttrKind::Flag:
      if (set) j[a.key] = true;
      break;
    case AttrKind::Choice:
      if (a.slot >= 0 ? in.ops[a.slot].present() : set) j[a.key] = set ? a.on : a.off;
      break;
    case AttrKind::SlotFlag:
      if (!set) j.erase(a.key);
      break;
    case AttrKind::Byte:
      j[a.key] = byte_field(in, a.field);
      break;
    case AttrKind::Alu:
      j[a.key] = alu_name(alu_field(in, a.field));
      break;
    case AttrKind::Func:
      j[a.key] = act_name(in.act);
      break;
    case AttrKind::Number:
      if (const float* rest = split_rest(in, a); rest != nullptr && *rest != 0.f)
        j[a.key] =
            fill_value(number_field(in, a.field), *rest);  // an integer FP32 does not hold (split_fill)
      else
        j[a.key] = number_json(number_field(in, a.field));
      break;
    case AttrKind::NumberOrVector:
      if (a.flag != 0 ? !set : !in.ops[a.slot].present()) j[a.key] = number_json(number_field(in, a.field));
      break;
    case AttrKind::TransposeAxes:
      if (set) j[a.key] = {2, 1, 0};
      break;
    case AttrKind::IotaSteps:
      j[a.key] = json::array();
      for (int d = 0; d < in.ops[0].ndim && d < 4; ++d) j[a.key].push_back(in.iota_steps[d]);
      break;
    case AttrKind::Int32:
      if (!a.omit_absent || int_field(in, a.field) != static_cast<int32_t>(a.absent))
        j[a.key] = int_field(in, a.field);
      break;
    case AttrKind::ShuffleMask:
      j[a.key] = shuffle_mask(in);
      break;
  }
}

json instruction_json(const Instruction& in, const Program& p) {
  json j = json::object();
  j["op"] = opcode_name(in.op);
  const auto& names = operand_names(in.op);
  for (size_t s = 0; s < names.size(); ++s)
    if (in.ops[s].present()) j[names[s]] = ap_json(in.ops[s], p);
  const OpcodeInfo& info = opcode_info(in.op);
  for (int a = 0; a < info.num_attrs; ++a) write_attr(info.attrs[a], in, j);
  if (is_dma(in.op)) {
    j["queue"] = in.dma_queue;
    if (in.dge != DgeMode::None) j["dge_mode"] = in.dge == DgeMode::Hwdge ? "hwdge" : "swdge";
  }
  const auto waits = [&](const char* key, const SemWaits& ws) {
    if (ws.empty()) return;
    j[key] = json::array();
    for (const SemWait& w : ws) j[key].push_back({w.sem, w.value});
  };
  const auto updates = [&](const char* key, const SemUpdates& us) {
    if (us.empty()) return;
    j[key] = json::array();
    for (const SemUpdate& u : us) {
      if (u.peer)
        j[key].push_back({{"sem", u.sem}, {"delta", u.delta}, {"peer", true}});
      else
        j[key].push_back({u.sem, u.delta});
    }
  };
  waits("wait", in.waits);
  waits("mm_wait", in.mm_waits);
  updates("update", in.updates);
  updates("ls_update", in.ls_updates);
  if (in.loc.line != 0) j["line"] = in.loc.line;
  if (in.loc.file != 0 && in.loc.file < p.files.size()) j["file"] = p.files[in.loc.file];
  return j;
}

}  // namespace

Program program_from_json(const json& j) {
  const Node root(j, "");
  // A file with none of a program's keys is most likely a workload that lost its "kernel" key: say both.
  if (j.is_object() && !j.contains("generation") && !j.contains("num_cores") && !j.contains("tensors") &&
      !j.contains("cores"))
    throw InputError(
        "neither a workload (no \"kernel\" key) nor a program (none of \"generation\", \"num_cores\", "
        "\"tensors\", \"cores\"; docs/program-format.md)");
  root.only_keys({"generation", "num_cores", "tensors", "cores"});
  Program p;
  if (root.has("generation")) {
    const auto g = parse_generation(root["generation"].string());
    if (!g)
      root["generation"].fail(fmt::format("expected \"trn1\", \"trn2\" or \"trn3\", got \"{}\"",
                                          text_excerpt(root["generation"].string())));
    p.generation = *g;
  }
  if (root.has("num_cores")) p.num_cores = static_cast<int>(root["num_cores"].integer(1, 2));
  Reader r(p);
  if (root.has("tensors")) r.tensors(root["tensors"]);
  const Node cores = root["cores"];
  cores.expect_array();
  if (cores.value().size() != static_cast<size_t>(p.num_cores))
    cores.fail(fmt::format("expected {} cores (num_cores), got {}", p.num_cores, cores.value().size()));
  for (size_t c = 0; c < cores.value().size(); ++c) {
    const Node core = cores.at(c);
    core.only_keys({"PE", "DVE", "ACT", "POOL", "SP"});
    for (Engine e : kEngines) {
      const char* en = engine_name(e);
      if (!core.has(en)) continue;
      const Node stream = core[en];
      stream.expect_array();
      for (size_t i = 0; i < stream.value().size(); ++i)
        p.streams[c][static_cast<size_t>(e)].push_back(r.instruction(stream.at(i), e));
    }
  }
  return p;
}

Program load_program(const std::string& path) {
  const json j = io::read_json_document(path);
  try {
    return program_from_json(j);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", path, e.what()));
  }
}

json program_to_json(const Program& p) {
  json j = json::object();
  j["generation"] = generation_name(p.generation);
  j["num_cores"] = p.num_cores;
  j["tensors"] = json::array();
  for (const TensorDecl& t : p.tensors) {
    json tj = {{"name", t.name},
               {"dtype", dtype_name(t.dtype)},
               {"shape", t.shape},
               {"private_to_core", t.private_to_core}};
    if (!t.init.empty()) tj["init"] = json::parse(t.init, nullptr, false);
    if (!t.output.empty()) tj["output"] = json::parse(t.output, nullptr, false);
    j["tensors"].push_back(std::move(tj));
  }
  j["cores"] = json::array();
  for (int c = 0; c < p.num_cores && c < 2; ++c) {
    json cj = json::object();
    for (Engine e : kEngines) {
      json s = json::array();
      for (const Instruction& in : p.streams[c][static_cast<size_t>(e)]) s.push_back(instruction_json(in, p));
      cj[engine_name(e)] = std::move(s);
    }
    j["cores"].push_back(std::move(cj));
  }
  return j;
}

void save_program(const Program& program, const std::string& path) {
  std::ofstream f(path);
  if (!f) throw InputError(fmt::format("{}: cannot write program file", path));
  f << program_to_json(program).dump(1) << "\n";
  if (!f) throw InputError(fmt::format("{}: write failed", path));
}

}  // namespace trnsim::isa
