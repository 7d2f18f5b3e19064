// The ISA calls (kernels/api/nki.h) as trnsim._core.nki: positional operands as in C++, every option (the
// C++ option structs' fields) a keyword argument with the C++ default, and `loc` (py_loc.h).
#include <pybind11/stl.h>

#include "kernels/api/nki.h"
#include "python/src/bindings.h"
#include "python/src/py_loc.h"

namespace trnsim::py {
namespace pyb = pybind11;
namespace nki = kernels::nki;
using isa::Engine;
using kernels::View;

namespace {

// An FP32 immediate or a [P, 1] View.
nki::Operand operand(pyb::handle h) {
  if (pyb::isinstance<View>(h)) return nki::Operand(h.cast<const View&>());
  return nki::Operand(h.cast<double>());
}

View opt_view(pyb::handle h) {
  return h.is_none() ? View() : h.cast<View>();
}

std::optional<Engine> opt_engine(pyb::handle h) {
  if (h.is_none()) return std::nullopt;
  return h.cast<Engine>();
}

}  // namespace

void bind_nki(pyb::module_& top) {
  pyb::module_ m = top.def_submodule("nki", "the ISA calls of kernels/api/nki.h");
  using pyb::arg;
  const auto loc = arg("loc") = pyb::none();

  m.def(
      "nc_matmul",
      [](const View& dst, const View& st, const View& mv, bool accumulate, nki::PerfMode perf_mode,
         bool is_transpose, pyb::handle l) {
        return nki::nc_matmul(dst, st, mv, {accumulate, perf_mode, is_transpose}, loc_of(l));
      },
      arg("dst"), arg("stationary"), arg("moving"), pyb::kw_only(), arg("accumulate") = false,
      arg("perf_mode") = nki::PerfMode::None, arg("is_transpose") = false, loc);
  m.def(
      "nc_matmul_mx",
      [](const View& dst, const View& st, const View& mv, const View& st_scale, const View& mv_scale,
         bool accumulate, uint8_t st_off, uint8_t mv_off, pyb::handle l) {
        return nki::nc_matmul_mx(dst, st, mv, st_scale, mv_scale, {accumulate, st_off, mv_off}, loc_of(l));
      },
      arg("dst"), arg("stationary"), arg("moving"), arg("stationary_scale"), arg("moving_scale"),
      pyb::kw_only(), arg("accumulate") = false, arg("stationary_scale_offset") = 0,
      arg("moving_scale_offset") = 0, loc);
  m.def(
      "quantize_mx",
      [](const View& dst, const View& src, const View& dst_scale, uint8_t scale_offset, pyb::handle l) {
        return nki::quantize_mx(dst, src, dst_scale, scale_offset, loc_of(l));
      },
      arg("dst"), arg("src"), arg("dst_scale"), pyb::kw_only(), arg("scale_offset") = 0, loc);
  m.def(
      "nc_transpose",
      [](const View& dst, const View& data, Engine engine, pyb::handle l) {
        return nki::nc_transpose(dst, data, engine, loc_of(l));
      },
      arg("dst"), arg("data"), pyb::kw_only(), arg("engine") = Engine::PE, loc);
  m.def(
      "activation",
      [](const View& dst, isa::ActFunc op, const View& data, pyb::handle bias, pyb::handle scale,
         pyb::handle reduce_res, Engine engine, pyb::handle l) {
        return nki::activation(dst, op, data, operand(bias), operand(scale), opt_view(reduce_res), engine,
                               loc_of(l));
      },
      arg("dst"), arg("op"), arg("data"), pyb::kw_only(), arg("bias") = 0.0, arg("scale") = 1.0,
      arg("reduce_res") = pyb::none(), arg("engine") = Engine::ACT, loc);
  m.def(
      "tensor_tensor",
      [](const View& dst, const View& d1, const View& d2, isa::AluOp op, Engine engine, pyb::handle l) {
        return nki::tensor_tensor(dst, d1, d2, op, engine, loc_of(l));
      },
      arg("dst"), arg("data1"), arg("data2"), arg("op"), pyb::kw_only(), arg("engine") = Engine::DVE, loc);
  m.def(
      "tensor_scalar",
      [](const View& dst, const View& data, isa::AluOp op0, pyb::handle operand0, bool reverse0,
         isa::AluOp op1, pyb::handle operand1, bool reverse1, Engine engine, pyb::handle l) {
        return nki::tensor_scalar(dst, data, op0, operand(operand0), reverse0, op1, operand(operand1),
                                  reverse1, engine, loc_of(l));
      },
      arg("dst"), arg("data"), arg("op0"), arg("operand0"), pyb::kw_only(), arg("reverse0") = false,
      arg("op1") = isa::AluOp::Bypass, arg("operand1") = 0.0, arg("reverse1") = false,
      arg("engine") = Engine::DVE, loc);
  m.def(
      "tensor_reduce",
      [](const View& dst, isa::AluOp op, const View& data, const std::vector<int>& axis, bool negate,
         Engine engine,
         pyb::handle l) { return nki::tensor_reduce(dst, op, data, axis, negate, engine, loc_of(l)); },
      arg("dst"), arg("op"), arg("data"), arg("axis"), pyb::kw_only(), arg("negate") = false,
      arg("engine") = Engine::DVE, loc);
  m.def(
      "tensor_copy",
      [](const View& dst, const View& src, Engine engine, pyb::handle l) {
        return nki::tensor_copy(dst, src, engine, loc_of(l));
      },
      arg("dst"), arg("src"), pyb::kw_only(), arg("engine") = Engine::DVE, loc);
  m.def(
      "memset",
      [](const View& dst, double value, Engine engine, pyb::handle l) {
        return nki::memset(dst, value, engine, loc_of(l));
      },
      arg("dst"), arg("value"), pyb::kw_only(), arg("engine") = Engine::DVE, loc);
  m.def(
      "iota",
      [](const View& dst, const std::vector<int32_t>& pattern, double offset, double channel_multiplier,
         Engine engine,
         pyb::handle l) { return nki::iota(dst, pattern, offset, channel_multiplier, engine, loc_of(l)); },
      arg("dst"), arg("pattern"), pyb::kw_only(), arg("offset") = 0.0, arg("channel_multiplier") = 0.0,
      arg("engine") = Engine::POOL, loc);
  m.def(
      "affine_select",
      [](const View& dst, const std::vector<int32_t>& pattern, double offset, double channel_multiplier,
         const View& on_true_tile, double on_false_value, isa::AluOp cmp_op, Engine engine, pyb::handle l) {
        return nki::affine_select(dst, pattern, offset, channel_multiplier, on_true_tile, on_false_value,
                                  cmp_op, engine, loc_of(l));
      },
      arg("dst"), arg("pattern"), arg("offset"), arg("channel_multiplier"), arg("on_true_tile"),
      arg("on_false_value"), pyb::kw_only(), arg("cmp_op") = isa::AluOp::IsEqual,
      arg("engine") = Engine::POOL, loc);
  m.def(
      "scalar_tensor_tensor",
      [](const View& dst, const View& data, isa::AluOp op0, pyb::handle operand0, isa::AluOp op1,
         const View& operand1, bool reverse0, bool reverse1, Engine engine, pyb::handle l) {
        return nki::scalar_tensor_tensor(dst, data, op0, operand(operand0), op1, operand1, reverse0, reverse1,
                                         engine, loc_of(l));
      },
      arg("dst"), arg("data"), arg("op0"), arg("operand0"), arg("op1"), arg("operand1"), pyb::kw_only(),
      arg("reverse0") = false, arg("reverse1") = false, arg("engine") = Engine::DVE, loc);
  m.def(
      "bn_stats",
      [](const View& dst, const View& data, pyb::handle l) { return nki::bn_stats(dst, data, loc_of(l)); },
      arg("dst"), arg("data"), pyb::kw_only(), loc);
  m.def(
      "bn_aggr",
      [](const View& dst, const View& data, pyb::handle l) { return nki::bn_aggr(dst, data, loc_of(l)); },
      arg("dst"), arg("data"), pyb::kw_only(), loc);
  m.def(
      "tensor_scalar_reduce",
      [](const View& dst, const View& data, isa::AluOp op0, pyb::handle operand0, isa::AluOp reduce_op,
         const View& reduce_res, bool reverse0, bool negate, pyb::handle l) {
        return nki::tensor_scalar_reduce(dst, data, op0, operand(operand0), reduce_op, reduce_res, reverse0,
                                         negate, loc_of(l));
      },
      arg("dst"), arg("data"), arg("op0"), arg("operand0"), arg("reduce_op"), arg("reduce_res"),
      pyb::kw_only(), arg("reverse0") = false, arg("negate") = false, loc);
  m.def(
      "max8", [](const View& dst, const View& src, pyb::handle l) { return nki::max8(dst, src, loc_of(l)); },
      arg("dst"), arg("src"), pyb::kw_only(), loc);
  m.def(
      "nc_find_index8",
      [](const View& dst, const View& data, const View& vals, pyb::handle l) {
        return nki::nc_find_index8(dst, data, vals, loc_of(l));
      },
      arg("dst"), arg("data"), arg("vals"), pyb::kw_only(), loc);
  m.def(
      "nc_match_replace8",
      [](const View& dst, const View& data, const View& vals, double imm, pyb::handle dst_idx,
         pyb::handle l) {
        return nki::nc_match_replace8(dst, data, vals, imm, opt_view(dst_idx), loc_of(l));
      },
      arg("dst"), arg("data"), arg("vals"), arg("imm"), pyb::kw_only(), arg("dst_idx") = pyb::none(), loc);
  m.def(
      "tensor_tensor_scan",
      [](const View& dst, const View& data0, const View& data1, pyb::handle initial, isa::AluOp op0,
         isa::AluOp op1, bool reverse0, bool reverse1, pyb::handle l) {
        return nki::tensor_tensor_scan(dst, data0, data1, operand(initial), op0, op1, reverse0, reverse1,
                                       loc_of(l));
      },
      arg("dst"), arg("data0"), arg("data1"), arg("initial"), arg("op0"), arg("op1"), pyb::kw_only(),
      arg("reverse0") = false, arg("reverse1") = false, loc);
  m.def(
      "tensor_partition_reduce",
      [](const View& dst, isa::AluOp op, const View& data, pyb::handle l) {
        return nki::tensor_partition_reduce(dst, op, data, loc_of(l));
      },
      arg("dst"), arg("op"), arg("data"), pyb::kw_only(), loc);
  m.def(
      "nc_n_gather",
      [](const View& dst, const View& data, const View& indices, pyb::handle l) {
        return nki::nc_n_gather(dst, data, indices, loc_of(l));
      },
      arg("dst"), arg("data"), arg("indices"), pyb::kw_only(), loc);
  m.def(
      "nonzero_with_count",
      [](const View& dst, const View& src, int32_t index_offset, int32_t padding_val, pyb::handle l) {
        return nki::nonzero_with_count(dst, src, index_offset, padding_val, loc_of(l));
      },
      arg("dst"), arg("src"), pyb::kw_only(), arg("index_offset") = 0, arg("padding_val") = -1, loc);
  m.def(
      "nc_stream_shuffle",
      [](const View& dst, const View& src, const std::vector<int>& shuffle_mask, pyb::handle l) {
        return nki::nc_stream_shuffle(dst, src, shuffle_mask, loc_of(l));
      },
      arg("dst"), arg("src"), arg("shuffle_mask"), pyb::kw_only(), loc);
  m.def(
      "select",
      [](const View& dst, const View& predicate, const View& on_true, pyb::handle on_false, Engine engine,
         pyb::handle l) {
        return nki::select(dst, predicate, on_true, operand(on_false), engine, loc_of(l));
      },
      arg("dst"), arg("predicate"), arg("on_true"), arg("on_false"), pyb::kw_only(),
      arg("engine") = Engine::DVE, loc);
  m.def(
      "dma_copy",
      [](const View& dst, const View& src, pyb::handle vector_offset, bool indirect_dst,
         nki::OobMode oob_mode, bool accumulate, kernels::DgeMode dge_mode, pyb::handle engine, int queue,
         pyb::handle scalar_offset, bool scalar_offset_dst, int32_t scalar_offset_stride, pyb::handle l) {
        nki::DmaOpts o;
        o.vector_offset = opt_view(vector_offset);
        o.indirect_dst = indirect_dst;
        o.oob_mode = oob_mode;
        o.accumulate = accumulate;
        o.dge_mode = dge_mode;
        o.engine = opt_engine(engine);
        o.queue = queue;
        o.scalar_offset = opt_view(scalar_offset);
        o.scalar_offset_dst = scalar_offset_dst;
        o.scalar_offset_stride = scalar_offset_stride;
        return nki::dma_copy(dst, src, o, loc_of(l));
      },
      arg("dst"), arg("src"), pyb::kw_only(), arg("vector_offset") = pyb::none(), arg("indirect_dst") = false,
      arg("oob_mode") = nki::OobMode::Error, arg("accumulate") = false,
      arg("dge_mode") = kernels::DgeMode::Unknown, arg("engine") = pyb::none(), arg("queue") = -1,
      arg("scalar_offset") = pyb::none(), arg("scalar_offset_dst") = false, arg("scalar_offset_stride") = 0,
      loc);
  // The front end's emitter (trnsim/nki/_emit.py) calls these for its commonest instructions: positional
  // arguments only and no result, the same instruction as the calls above with their defaults (a keyword
  // argument and a returned InstRef each cost the binding call more than the builder's own work).
  m.def(
      "emit_dma_copy",
      [](const View& dst, const View& src, pyb::handle l) { nki::dma_copy(dst, src, {}, loc_of(l)); },
      arg("dst"), arg("src"), arg("loc"));
  m.def(
      "emit_nc_matmul",
      [](const View& dst, const View& st, const View& mv, bool accumulate, pyb::handle l) {
        nki::nc_matmul(dst, st, mv, {accumulate, nki::PerfMode::None, false}, loc_of(l));
      },
      arg("dst"), arg("stationary"), arg("moving"), arg("accumulate"), arg("loc"));
  m.def(
      "emit_tensor_copy",
      [](const View& dst, const View& src, Engine engine, pyb::handle l) {
        nki::tensor_copy(dst, src, engine, loc_of(l));
      },
      arg("dst"), arg("src"), arg("engine"), arg("loc"));
  m.def(
      "dma_transpose",
      [](const View& dst, const View& src, pyb::handle engine, int queue, kernels::DgeMode dge_mode,
         pyb::handle scalar_offset, std::vector<int> axes, pyb::handle l) {
        nki::DmaQueueOpts o;
        o.engine = opt_engine(engine);
        o.queue = queue;
        o.dge_mode = dge_mode;
        o.scalar_offset = opt_view(scalar_offset);
        o.axes = std::move(axes);
        return nki::dma_transpose(dst, src, o, loc_of(l));
      },
      arg("dst"), arg("src"), pyb::kw_only(), arg("engine") = pyb::none(), arg("queue") = -1,
      arg("dge_mode") = kernels::DgeMode::Unknown, arg("scalar_offset") = pyb::none(),
      arg("axes") = std::vector<int>{}, loc);
  m.def(
      "core_barrier",
      [](const View& data, Engine engine, pyb::handle l) {
        return nki::core_barrier(data, engine, loc_of(l));
      },
      arg("data"), pyb::kw_only(), arg("engine") = Engine::POOL, loc);
  m.def(
      "sendrecv",
      [](const View& src, const View& dst, pyb::handle engine, int queue, pyb::handle l) {
        nki::DmaQueueOpts o;
        o.engine = opt_engine(engine);
        o.queue = queue;
        return nki::sendrecv(src, dst, o, loc_of(l));
      },
      arg("src"), arg("dst"), pyb::kw_only(), arg("engine") = pyb::none(), arg("queue") = -1, loc);
}

}  // namespace trnsim::py
