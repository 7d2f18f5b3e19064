// The builder (kernels/api/kernel.h, view.h, pool.h), hardware configs and build_program for Python.
#include <pybind11/stl.h>

#include <fmt/format.h>

#include "kernels/api/kernel.h"
#include "python/src/bindings.h"
#include "python/src/kernel_handle.h"
#include "python/src/py_loc.h"
#include "python/src/py_util.h"
#include "sim/config/hw_config.h"
#include "sim/config/lnc.h"
#include "sim/io/output_name.h"
#include "sim/isa/names.h"
#include "sim/isa/opcodes.h"
#include "sim/isa/program_json.h"
#include "sim/isa/semantics.h"

namespace trnsim::py {
namespace pyb = pybind11;
using kernels::Kernel;
using kernels::Slice;
using kernels::View;

namespace {

// One index of View.__getitem__: an int (selects, and drops a free dim) or a slice (step > 0).
Slice to_slice(pyb::handle h) {
  if (PySlice_Check(h.ptr())) {
    auto* s = reinterpret_cast<PySliceObject*>(h.ptr());
    const auto part = [](PyObject* o, int64_t dflt, const char* what) -> int64_t {
      if (o == Py_None) return dflt;
      const int64_t v = pyb::reinterpret_borrow<pyb::object>(o).cast<int64_t>();
      if (v < 0)
        throw pyb::index_error(fmt::format("negative slice {} {} (normalise indices first)", what, v));
      return v;
    };
    const int64_t step = part(s->step, 1, "step");
    if (step <= 0) throw pyb::index_error("slice step must be positive");
    return Slice(part(s->start, 0, "start"), part(s->stop, kernels::kEnd, "stop"), step);
  }
  const int64_t i = pyb::reinterpret_borrow<pyb::object>(h).cast<int64_t>();
  if (i < 0) throw pyb::index_error(fmt::format("negative index {} (normalise indices first)", i));
  return Slice(i);
}

View index_view(const View& v, pyb::handle idx) {
  if (PyTuple_Check(idx.ptr())) {
    const Py_ssize_t n = PyTuple_GET_SIZE(idx.ptr());
    if (n > 8) throw pyb::index_error("too many indices");
    Slice s[8];
    for (Py_ssize_t i = 0; i < n; ++i) s[i] = to_slice(PyTuple_GET_ITEM(idx.ptr(), i));
    return v.index(s, static_cast<size_t>(n));
  }
  if (PyList_Check(idx.ptr())) {
    std::vector<Slice> s;
    for (pyb::handle h : idx) s.push_back(to_slice(h));
    return v.index(s);
  }
  const Slice s = to_slice(idx);
  return v.index(&s, 1);
}

pyb::tuple shape_tuple(const View& v) {
  const int r = v.rank();
  pyb::tuple t(r);
  for (int i = 0; i < r; ++i) t[i] = pyb::int_(v.size(i));
  return t;
}

config::Overrides to_overrides(const pyb::dict& d) {
  config::Overrides o;
  for (auto [k, v] : d) o[pyb::str(k).cast<std::string>()] = to_json(v);
  return o;
}

struct PhaseCtx {
  KernelHandle k;
  std::string name;
  std::optional<uint16_t> prev;
};

}  // namespace

void bind_builder(pyb::module_& m) {
  pyb::class_<isa::Limits>(m, "Limits")
      .def(pyb::init<>())
      .def_readwrite("generation", &isa::Limits::generation)
      .def_readwrite("partitions", &isa::Limits::partitions)
      .def_readwrite("sbuf_bytes_per_partition", &isa::Limits::sbuf_bytes_per_partition)
      .def_readwrite("psum_bytes_per_partition", &isa::Limits::psum_bytes_per_partition)
      .def_readwrite("psum_bank_bytes", &isa::Limits::psum_bank_bytes)
      .def_readwrite("num_semaphores", &isa::Limits::num_semaphores)
      .def_readwrite("num_dma_queues", &isa::Limits::num_dma_queues)
      .def_readwrite("hbm_bytes", &isa::Limits::hbm_bytes)
      .def("__repr__", [](const isa::Limits& l) {
        return fmt::format(
            "Limits({}, partitions={}, sbuf_bytes_per_partition={}, psum_bytes_per_partition={})",
            isa::generation_name(l.generation), l.partitions, l.sbuf_bytes_per_partition,
            l.psum_bytes_per_partition);
      });
  m.def("default_limits", &kernels::default_limits, pyb::arg("generation"));

  pyb::class_<config::HwConfig>(m, "HwConfig")
      .def_readonly("name", &config::HwConfig::name)
      .def_property_readonly("generation", [](const config::HwConfig& h) { return h.limits().generation; })
      .def("limits", &config::HwConfig::limits)
      .def("__repr__", [](const config::HwConfig& h) { return fmt::format("HwConfig('{}')", h.name); });
  m.def(
      "load_hw_config",
      [](const std::string& spec, const pyb::dict& overrides) {
        return config::load_hw_config(spec, to_overrides(overrides));
      },
      pyb::arg("spec"), pyb::arg("overrides") = pyb::dict(),
      "a hardware config by name (a configs/hw/*.json of the source tree, or of $TRNSIM_CONFIG_DIR) or .json "
      "path, with overrides {\"path\": value}");
  m.def("lnc_refusal", &config::lnc_refusal, pyb::arg("hw"), pyb::arg("lnc"),
        "why `lnc` physical cores cannot form one logical NeuronCore on `hw` (sim/config/lnc.h), or None");

  pyb::class_<View>(m, "View")
      .def(pyb::init<>())
      .def_property_readonly("valid", &View::valid)
      .def_property_readonly("space", &View::space)
      .def_property_readonly("dtype", &View::dtype)
      .def_property_readonly("name", &View::name)
      .def_property_readonly("rank", &View::rank)
      .def_property_readonly("shape", &shape_tuple)
      .def_property_readonly(
          "tensor_shape",
          [](const View& v) -> pyb::object {
            if (!v.valid() || v.space() != isa::MemSpace::HBM) return pyb::none();
            return pyb::tuple(pyb::cast(v.tensor_shape()));
          },
          "HBM: the shape the tensor was declared with (a 1-D [n] input is (n,) while its view is (n, 1)); "
          "SBUF/PSUM: None")
      .def("size", &View::size, pyb::arg("dim"))
      .def_property_readonly("partitions", &View::partitions)
      .def_property_readonly("free_elements", &View::free_elements)
      .def_property_readonly("partition_start", &View::partition_start)
      .def_property_readonly("offset_bytes", &View::offset_bytes)
      .def_property_readonly("tensor", &View::tensor)
      .def_property_readonly("kernel_serial", &View::kernel_serial)
      .def("describe", &View::describe)
      .def("__getitem__", &index_view)
      .def("index", [](const View& v, const pyb::list& idx) { return index_view(v, idx); })
      .def("slice", &View::slice, pyb::arg("dim"), pyb::arg("start"), pyb::arg("stop"), pyb::arg("step") = 1)
      .def("reshape", &View::reshape, pyb::arg("shape"))
      .def("permute", &View::permute, pyb::arg("order"))
      .def("bitcast", &View::bitcast, pyb::arg("dtype"))
      .def("broadcast", &View::broadcast, pyb::arg("dim"), pyb::arg("size"))
      .def("index_rows", &View::index_rows, pyb::arg("rows"))
      .def(
          "pattern",
          [](const View& v, isa::DType dtype, int64_t offset_bytes, pyb::handle dims,
             uint32_t partition_start) {
            return v.pattern(dtype, offset_bytes, pattern_dims(dims), partition_start);
          },
          pyb::arg("dtype"), pyb::arg("offset_bytes"), pyb::arg("dims"), pyb::arg("partition_start") = 0)
      .def("__repr__",
           [](const View& v) { return v.valid() ? "View(" + v.describe() + ")" : std::string("View()"); });

  // The allocation rule (kernels/api/alloc_rule.h): one rule for C++ and Python kernels.
  pyb::class_<kernels::InLoop>(m, "InLoop")
      .def(pyb::init([](int64_t trip_count, int64_t tiles, bool dynamic, int64_t reserve,
                        std::optional<int64_t> bufs) {
             return kernels::InLoop{trip_count, tiles, dynamic, reserve, bufs};
           }),
           pyb::kw_only(), pyb::arg("trip_count") = 2, pyb::arg("tiles") = 1, pyb::arg("dynamic") = false,
           pyb::arg("reserve_bytes_per_partition") = 0, pyb::arg("bufs") = pyb::none())
      .def_readwrite("trip_count", &kernels::InLoop::trip_count)
      .def_readwrite("tiles", &kernels::InLoop::tiles)
      .def_readwrite("dynamic", &kernels::InLoop::dynamic)
      .def_readwrite("reserve_bytes_per_partition", &kernels::InLoop::reserve_bytes_per_partition)
      .def_readwrite("bufs", &kernels::InLoop::bufs)
      .def_readwrite("scope", &kernels::InLoop::scope)
      .def_readwrite("rule_reason", &kernels::InLoop::rule_reason);
  pyb::class_<kernels::LoopTileQuery>(m, "LoopTileQuery")
      .def(pyb::init([](isa::MemSpace space, int64_t bytes, const kernels::InLoop& loop, int64_t free) {
             return kernels::LoopTileQuery{space, bytes, loop, free};
           }),
           pyb::kw_only(), pyb::arg("space") = isa::MemSpace::SBUF, pyb::arg("bytes_per_partition") = 0,
           pyb::arg("loop") = kernels::InLoop{}, pyb::arg("free_bytes_per_partition") = 0)
      .def_readwrite("space", &kernels::LoopTileQuery::space)
      .def_readwrite("bytes_per_partition", &kernels::LoopTileQuery::bytes_per_partition)
      .def_readwrite("loop", &kernels::LoopTileQuery::loop)
      .def_readwrite("free_bytes_per_partition", &kernels::LoopTileQuery::free_bytes_per_partition);
  pyb::class_<kernels::BufferChoice>(m, "BufferChoice")
      .def_readonly("bufs", &kernels::BufferChoice::bufs)
      .def_readonly("reason", &kernels::BufferChoice::reason);
  m.def("loop_tile_buffers", &kernels::loop_tile_buffers, pyb::arg("query"));
  m.def("site_scope", &kernels::site_scope, pyb::arg("crossed"),
        "the scope of an allocation site from the loops around it (outermost first: does a tile outlive "
        "its iteration): 0 one iteration of the outermost loop, -1 the kernel");
  m.def(
      "plan_pools",
      [](const isa::Limits& limits,
         const std::vector<std::tuple<isa::MemSpace, int64_t, int64_t, int64_t, int64_t, int64_t,
                                      std::optional<int64_t>>>& s,
         const std::vector<std::tuple<int64_t, int64_t, int64_t>>& inst) {
        std::vector<kernels::PoolSite> sites;
        for (const auto& [space, np, tile_bytes, trip, tiles, reserve, bufs] : s)
          sites.push_back({space, np, tile_bytes,
                           kernels::InLoop{.trip_count = trip,
                                           .tiles = tiles,
                                           .reserve_bytes_per_partition = reserve,
                                           .bufs = bufs}});
        std::vector<kernels::PoolInstance> instances;
        for (const auto& [site, first, last] : inst) instances.push_back({site, first, last});
        kernels::PoolPlan p = kernels::plan_pools(limits, sites, instances);
        pyb::list choices, placements;
        for (const kernels::BufferChoice& c : p.sites) choices.append(pyb::make_tuple(c.bufs, c.reason));
        for (const auto& pl : p.placements) placements.append(pyb::make_tuple(pl.site, pl.offsets, pl.after));
        return pyb::make_tuple(choices, p.placement_of, placements);
      },
      pyb::arg("limits"), pyb::arg("sites"), pyb::arg("instances"),
      "kernels/api/alloc_rule.h plan_pools: sites (space, partitions, tile bytes, trip count, tiles, "
      "reserve, "
      "bufs or None), instances (site, first op, last op) -> ([(bufs, reason)] per site, placement per "
      "instance, [(site, offsets, after)] per placement)");
  m.attr("kCompilerMultiBuffer") = kernels::kCompilerMultiBuffer;
  pyb::class_<kernels::AllocationRecord>(m, "AllocationRecord")
      .def_readonly("name", &kernels::AllocationRecord::name)
      .def_readonly("source", &kernels::AllocationRecord::source)
      .def_readonly("space", &kernels::AllocationRecord::space)
      .def_readonly("bytes_per_partition", &kernels::AllocationRecord::bytes_per_partition)
      .def_readonly("tiles", &kernels::AllocationRecord::tiles)
      .def_readonly("trip_count", &kernels::AllocationRecord::trip_count)
      .def_readonly("bufs", &kernels::AllocationRecord::bufs)
      .def_readonly("by_rule", &kernels::AllocationRecord::by_rule)
      .def_readonly("reason", &kernels::AllocationRecord::reason)
      .def_readonly("declarations", &kernels::AllocationRecord::declarations)
      .def_readonly("scope", &kernels::AllocationRecord::scope);

  pyb::class_<kernels::TilePool>(m, "TilePool")
      .def("next", &kernels::TilePool::next)
      .def("buffer", &kernels::TilePool::buffer, pyb::arg("i"))
      .def_property_readonly("bufs", &kernels::TilePool::bufs)
      .def_property_readonly("handed_out", &kernels::TilePool::handed_out)
      .def_property_readonly("name", &kernels::TilePool::name);

  pyb::class_<kernels::InstRef>(m, "InstRef")
      .def_readonly("engine", &kernels::InstRef::engine)
      .def_readonly("index", &kernels::InstRef::index)
      .def_readonly("seq", &kernels::InstRef::seq)
      .def(
          "depends_on",
          [](const kernels::InstRef& r, const kernels::InstRef& earlier, pyb::handle loc) {
            r.depends_on(earlier, loc_of(loc));
          },
          pyb::arg("earlier"), pyb::arg("loc") = pyb::none());

  pyb::class_<PhaseCtx>(m, "PhaseScope")
      .def("__enter__",
           [](PhaseCtx& c) {
             Kernel& k = c.k.get();
             c.prev = k.set_phase(k.intern_phase(c.name));
             return &c;
           })
      .def("__exit__", [](PhaseCtx& c, pyb::args) {
        if (c.prev) c.k.get().set_phase(*c.prev);
        c.prev.reset();
        return false;
      });

  using KH = KernelHandle;
  const auto hbm = [](int kind) {
    return [kind](const KH& h, const std::string& name, isa::DType dtype, const std::vector<int64_t>& shape,
                  pyb::handle loc) {
      Kernel& k = h.get();
      return kind == 0 ? k.input(name, dtype, shape, loc_of(loc)) : k.output(name, dtype, shape, loc_of(loc));
    };
  };
  pyb::class_<KH>(m, "Kernel")
      .def("program_id", [](const KH& h) { return h.get().program_id(); })
      .def("num_programs", [](const KH& h) { return h.get().num_programs(); })
      .def("generation", [](const KH& h) { return h.get().generation(); })
      .def("limits", [](const KH& h) { return h.get().limits(); })
      .def("serial", &KH::serial)
      .def("declare_only", [](const KH& h) { return h.get().declare_only(); })
      .def("instructions_left", [](const KH& h) { return h.get().instructions_left(); })
      .def(
          "set_disable_dge", [](const KH& h, bool on) { h.get().set_disable_dge(on); }, pyb::arg("on"))
      .def(
          "warn",
          [](const KH& h, const std::string& at, const std::string& message) { h.get().warn(at, message); },
          pyb::arg("at"), pyb::arg("message"))
      .def(
          "fail_instruction_limit",
          [](const KH& h, pyb::handle loc) { h.get().fail_instruction_limit(loc_of(loc)); },
          pyb::arg("loc") = pyb::none())
      .def_static("current",
                  []() -> std::optional<KH> {
                    Kernel* k = Kernel::current();
                    if (k == nullptr) return std::nullopt;
                    return KH(*k);
                  })
      .def("input", hbm(0), pyb::arg("name"), pyb::arg("dtype"), pyb::arg("shape"),
           pyb::arg("loc") = pyb::none())
      .def("output", hbm(1), pyb::arg("name"), pyb::arg("dtype"), pyb::arg("shape"),
           pyb::arg("loc") = pyb::none())
      .def(
          "scratch",
          [](const KH& h, const std::string& name, isa::DType dtype, const std::vector<int64_t>& shape,
             bool private_to_core,
             pyb::handle loc) { return h.get().scratch(name, dtype, shape, private_to_core, loc_of(loc)); },
          pyb::arg("name"), pyb::arg("dtype"), pyb::arg("shape"), pyb::arg("private_to_core") = false,
          pyb::arg("loc") = pyb::none())
      .def("track_rows_together", [](const KH& h, const View& v) { h.get().track_rows_together(v); })
      .def(
          "sbuf",
          [](const KH& h, const std::vector<int64_t>& shape, isa::DType dtype, const std::string& name,
             pyb::handle loc) { return h.get().sbuf(shape, dtype, name, loc_of(loc)); },
          pyb::arg("shape"), pyb::arg("dtype"), pyb::arg("name") = "", pyb::arg("loc") = pyb::none())
      .def(
          "psum",
          [](const KH& h, const std::vector<int64_t>& shape, isa::DType dtype, const std::string& name,
             pyb::handle loc) { return h.get().psum(shape, dtype, name, loc_of(loc)); },
          pyb::arg("shape"), pyb::arg("dtype"), pyb::arg("name") = "", pyb::arg("loc") = pyb::none())
      .def(
          "tile_at",
          [](const KH& h, isa::MemSpace space, int64_t offset, const std::vector<int64_t>& shape,
             isa::DType dtype, const std::string& name,
             pyb::handle loc) { return h.get().tile_at(space, offset, shape, dtype, name, loc_of(loc)); },
          pyb::arg("space"), pyb::arg("offset"), pyb::arg("shape"), pyb::arg("dtype"), pyb::arg("name") = "",
          pyb::arg("loc") = pyb::none(), "a tile at a planned byte offset (Kernel::tile_at)")
      .def(
          "sbuf_pool",
          [](const KH& h, const std::vector<int64_t>& shape, isa::DType dtype, const std::string& name,
             int64_t bufs,
             pyb::handle loc) { return h.get().sbuf_pool(shape, dtype, name, bufs, loc_of(loc)); },
          pyb::arg("shape"), pyb::arg("dtype"), pyb::arg("name"), pyb::arg("bufs"),
          pyb::arg("loc") = pyb::none())
      .def(
          "psum_pool",
          [](const KH& h, const std::vector<int64_t>& shape, isa::DType dtype, const std::string& name,
             int64_t bufs,
             pyb::handle loc) { return h.get().psum_pool(shape, dtype, name, bufs, loc_of(loc)); },
          pyb::arg("shape"), pyb::arg("dtype"), pyb::arg("name"), pyb::arg("bufs"),
          pyb::arg("loc") = pyb::none())
      .def(
          "sbuf_pool",
          [](const KH& h, const std::vector<int64_t>& shape, isa::DType dtype, const std::string& name,
             const kernels::InLoop& loop,
             pyb::handle loc) { return h.get().sbuf_pool(shape, dtype, name, loop, loc_of(loc)); },
          pyb::arg("shape"), pyb::arg("dtype"), pyb::arg("name"), pyb::arg("loop"),
          pyb::arg("loc") = pyb::none())
      .def(
          "psum_pool",
          [](const KH& h, const std::vector<int64_t>& shape, isa::DType dtype, const std::string& name,
             const kernels::InLoop& loop,
             pyb::handle loc) { return h.get().psum_pool(shape, dtype, name, loop, loc_of(loc)); },
          pyb::arg("shape"), pyb::arg("dtype"), pyb::arg("name"), pyb::arg("loop"),
          pyb::arg("loc") = pyb::none())
      .def(
          "record_allocation",
          [](const KH& h, const std::string& name, const std::string& source, isa::MemSpace space,
             int64_t bytes_per_partition, int64_t tiles, int64_t trip_count, int64_t bufs, bool by_rule,
             const std::string& reason, int64_t declarations, const std::string& scope) {
            h.get().record_allocation({name, source, space, bytes_per_partition, tiles, trip_count, bufs,
                                       by_rule, reason, declarations, scope});
          },
          pyb::kw_only(), pyb::arg("name"), pyb::arg("source"), pyb::arg("space"),
          pyb::arg("bytes_per_partition"), pyb::arg("tiles"), pyb::arg("trip_count"), pyb::arg("bufs"),
          pyb::arg("by_rule"), pyb::arg("reason"), pyb::arg("declarations"), pyb::arg("scope"),
          "records an allocation site the caller placed itself (stats.json \"allocations\")")
      .def("set_store_engine", [](const KH& h, isa::Engine e) { h.get().set_store_engine(e); })
      .def("store_engine", [](const KH& h) { return h.get().store_engine(); })
      .def(
          "phase",
          [](const KH& h, const std::string& name) {
            return PhaseCtx{h, name, std::nullopt};
          },
          pyb::arg("name"), "a context manager: the instructions emitted inside are tagged with the phase");

  pyb::class_<isa::Program>(m, "Program")
      .def_readonly("generation", &isa::Program::generation)
      .def_readonly("num_cores", &isa::Program::num_cores)
      .def_readonly("files", &isa::Program::files)
      .def_readonly("phases", &isa::Program::phases)
      .def("instruction_count",
           [](const isa::Program& p) {
             uint64_t n = 0;
             for (const auto& core : p.streams)
               for (const auto& s : core) n += s.size();
             return n;
           })
      .def(
          "instructions",
          [](const isa::Program& p, int core) {
            if (core < 0 || core >= p.num_cores) throw pyb::index_error("no such core");
            pyb::list l;
            for (const auto& stream : p.streams[core])
              for (const isa::Instruction& i : stream)
                l.append(
                    pyb::make_tuple(i.engine, isa::opcode_name(i.op), p.files.at(i.loc.file), i.loc.line));
            return l;
          },
          pyb::arg("core") = 0,
          "(engine, opcode, file, line) of each instruction of a core, engine by engine")
      .def(
          "to_json", [](const isa::Program& p) { return isa::program_to_json(p).dump(); },
          "the program as docs/program-format.md's JSON text (every instruction with its operands): what a "
          "test "
          "compares to show two builds emit the same program")
      .def_property_readonly("tensors", [](const isa::Program& p) {
        pyb::list l;
        for (const isa::TensorDecl& t : p.tensors) l.append(pyb::make_tuple(t.name, t.dtype, t.shape));
        return l;
      });

  pyb::class_<kernels::KernelBuild>(m, "KernelBuild")
      .def_readonly("program", &kernels::KernelBuild::program)
      .def_readonly("inputs", &kernels::KernelBuild::inputs)
      .def_readonly("outputs", &kernels::KernelBuild::outputs)
      .def_readonly("allocations", &kernels::KernelBuild::allocations);

  m.def("output_name_problem", &io::output_name_problem, pyb::arg("name"),
        "sim/io/output_name.h: \"\" when the name is a plain file stem for OUT/<name>.npy, else why not");
  m.def(
      "build_program",
      [](const pyb::function& fn, const isa::Limits& limits, int num_programs, uint64_t max_instructions,
         bool declare_only, std::map<std::string, std::vector<int64_t>> input_values) {
        kernels::BuildOptions o;
        o.limits = limits;
        o.num_programs = num_programs;
        o.max_instructions = max_instructions;
        o.declare_only = declare_only;
        o.input_values = std::move(input_values);
        return kernels::build_program([&](Kernel& k) { fn(KernelHandle(k)); }, o);
      },
      pyb::arg("fn"), pyb::kw_only(), pyb::arg("limits"), pyb::arg("num_programs") = 1,
      pyb::arg("max_instructions") = 4'000'000, pyb::arg("declare_only") = false,
      pyb::arg("input_values") = std::map<std::string, std::vector<int64_t>>{},
      "runs fn(kernel) once per core and returns the KernelBuild; exceptions in fn propagate");
}

}  // namespace trnsim::py
