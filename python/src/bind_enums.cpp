// The enums of the ISA and the builder, with the names C++ gives them (`None` is `None_` in Python), and
// NKI's spellings through the *_name / parse_* functions (sim/isa/names.h).
#include "python/src/bindings.h"

#include <pybind11/stl.h>

#include "kernels/api/dma_mode.h"
#include "kernels/api/nki.h"
#include "sim/isa/names.h"
#include "sim/isa/partition_start.h"
#include "sim/isa/semantics.h"

namespace trnsim::py {
namespace pyb = pybind11;

void bind_enums(pyb::module_& m) {
  pyb::enum_<isa::DType>(m, "DType")
      .value("F32", isa::DType::F32)
      .value("BF16", isa::DType::BF16)
      .value("FP16", isa::DType::FP16)
      .value("FP8_E4M3FN", isa::DType::FP8_E4M3FN)
      .value("FP8_E5M2", isa::DType::FP8_E5M2)
      .value("E8M0", isa::DType::E8M0)
      .value("FP8_E4M3FN_X4", isa::DType::FP8_E4M3FN_X4)
      .value("FP8_E5M2_X4", isa::DType::FP8_E5M2_X4)
      .value("I32", isa::DType::I32)
      .value("U32", isa::DType::U32)
      .value("I16", isa::DType::I16)
      .value("U16", isa::DType::U16)
      .value("I8", isa::DType::I8)
      .value("U8", isa::DType::U8)
      .value("FP8_E4M3", isa::DType::FP8_E4M3);
  pyb::enum_<isa::Engine>(m, "Engine")
      .value("PE", isa::Engine::PE)
      .value("DVE", isa::Engine::DVE)
      .value("ACT", isa::Engine::ACT)
      .value("POOL", isa::Engine::POOL)
      .value("SP", isa::Engine::SP);
  pyb::enum_<isa::MemSpace>(m, "MemSpace")
      .value("SBUF", isa::MemSpace::SBUF)
      .value("PSUM", isa::MemSpace::PSUM)
      .value("HBM", isa::MemSpace::HBM);
  pyb::enum_<isa::Generation>(m, "Generation")
      .value("Trn2", isa::Generation::Trn2)
      .value("Trn3", isa::Generation::Trn3)
      .value("Trn1", isa::Generation::Trn1);
  pyb::enum_<isa::AluOp>(m, "AluOp")
      .value("Bypass", isa::AluOp::Bypass)
      .value("Add", isa::AluOp::Add)
      .value("Subtract", isa::AluOp::Subtract)
      .value("Multiply", isa::AluOp::Multiply)
      .value("Divide", isa::AluOp::Divide)
      .value("Max", isa::AluOp::Max)
      .value("Min", isa::AluOp::Min)
      .value("AbsMax", isa::AluOp::AbsMax)
      .value("Pow", isa::AluOp::Pow)
      .value("IsEqual", isa::AluOp::IsEqual)
      .value("NotEqual", isa::AluOp::NotEqual)
      .value("IsGt", isa::AluOp::IsGt)
      .value("IsGe", isa::AluOp::IsGe)
      .value("IsLt", isa::AluOp::IsLt)
      .value("IsLe", isa::AluOp::IsLe)
      .value("LogicalAnd", isa::AluOp::LogicalAnd)
      .value("LogicalOr", isa::AluOp::LogicalOr)
      .value("BitwiseAnd", isa::AluOp::BitwiseAnd)
      .value("BitwiseOr", isa::AluOp::BitwiseOr)
      .value("BitwiseXor", isa::AluOp::BitwiseXor)
      .value("ShiftLeft", isa::AluOp::ShiftLeft)
      .value("ShiftRight", isa::AluOp::ShiftRight)
      .value("Abs", isa::AluOp::Abs);
  pyb::enum_<isa::ActFunc>(m, "ActFunc")
      .value("Identity", isa::ActFunc::Identity)
      .value("Copy", isa::ActFunc::Copy)
      .value("Exp", isa::ActFunc::Exp)
      .value("Log", isa::ActFunc::Log)
      .value("Silu", isa::ActFunc::Silu)
      .value("Gelu", isa::ActFunc::Gelu)
      .value("GeluApproxTanh", isa::ActFunc::GeluApproxTanh)
      .value("Sigmoid", isa::ActFunc::Sigmoid)
      .value("Tanh", isa::ActFunc::Tanh)
      .value("Relu", isa::ActFunc::Relu)
      .value("Square", isa::ActFunc::Square)
      .value("Sqrt", isa::ActFunc::Sqrt)
      .value("Rsqrt", isa::ActFunc::Rsqrt)
      .value("Reciprocal", isa::ActFunc::Reciprocal)
      .value("Abs", isa::ActFunc::Abs)
      .value("Sign", isa::ActFunc::Sign)
      .value("SiluDx", isa::ActFunc::SiluDx)
      .value("Sin", isa::ActFunc::Sin)
      .value("Cos", isa::ActFunc::Cos)
      .value("Arctan", isa::ActFunc::Arctan)
      .value("Erf", isa::ActFunc::Erf)
      .value("ErfDx", isa::ActFunc::ErfDx)
      .value("Softplus", isa::ActFunc::Softplus)
      .value("Mish", isa::ActFunc::Mish)
      .value("GeluDx", isa::ActFunc::GeluDx)
      .value("Floor", isa::ActFunc::Floor)
      .value("Ceil", isa::ActFunc::Ceil)
      .value("Trunc", isa::ActFunc::Trunc);
  pyb::enum_<kernels::nki::PerfMode>(m, "PerfMode")
      .value("None_", kernels::nki::PerfMode::None)
      .value("DoubleRow", kernels::nki::PerfMode::DoubleRow);
  pyb::enum_<kernels::nki::OobMode>(m, "OobMode")
      .value("Error", kernels::nki::OobMode::Error)
      .value("Skip", kernels::nki::OobMode::Skip);
  pyb::enum_<kernels::DgeMode>(m, "DgeMode")
      .value("Unknown", kernels::DgeMode::Unknown)
      .value("None_", kernels::DgeMode::None)
      .value("Swdge", kernels::DgeMode::Swdge)
      .value("Hwdge", kernels::DgeMode::Hwdge);

  m.def("dtype_name", [](isa::DType d) { return std::string(isa::dtype_name(d)); });
  m.def(
      "dtype_size", [](isa::DType d) { return isa::dtype_size(d); }, "bytes per element");
  m.def("parse_dtype", [](const std::string& s) { return isa::parse_dtype(s); });
  m.def("engine_name", [](isa::Engine e) { return std::string(isa::engine_name(e)); });
  m.def("parse_engine", [](const std::string& s) { return isa::parse_engine(s); });
  m.def("alu_name", [](isa::AluOp o) { return std::string(isa::alu_name(o)); });
  m.def("parse_alu", [](const std::string& s) { return isa::parse_alu(s); });
  m.def("engine_start_partitions", &isa::engine_start_partitions, pyb::arg("partitions"),
        "the partitions a compute engine's operand of this many partitions may start at (isa::check's rule)");
  m.def("engine_start_rule", &isa::engine_start_rule, pyb::arg("partitions"));
  m.def("act_name", [](isa::ActFunc f) { return std::string(isa::act_name(f)); });
  m.def("parse_act", [](const std::string& s) { return isa::parse_act(s); });
}

}  // namespace trnsim::py
