#include "sim/isa/names.h"

#include <array>

#include "sim/isa/opcodes.h"
#include "sim/isa/semantics.h"

namespace trnsim::isa {
namespace {

constexpr std::array<const char*, kNumEngines> kEngineNames = {"PE", "DVE", "ACT", "POOL", "SP"};
constexpr std::array<const char*, 15> kDtypeNames = {
    "float32",        "bfloat16",         "float16",        "float8_e4m3fn", "float8_e5m2",
    "float8_e8m0fnu", "float8_e4m3fn_x4", "float8_e5m2_x4", "int32",         "uint32",
    "int16",          "uint16",           "int8",           "uint8",         "float8_e4m3"};
constexpr std::array<uint32_t, 15> kDtypeSizes = {4, 2, 2, 1, 1, 1, 4, 4, 4, 4, 2, 2, 1, 1, 1};
constexpr std::array<const char*, 23> kAluNames = {
    "bypass",        "add",         "subtract",   "multiply",    "divide",     "maximum",
    "minimum",       "abs_max",     "power",      "equal",       "not_equal",  "greater",
    "greater_equal", "less",        "less_equal", "logical_and", "logical_or", "bitwise_and",
    "bitwise_or",    "bitwise_xor", "left_shift", "right_shift", "abs"};
constexpr std::array<const char*, 28> kActNames = {
    "identity", "copy",     "exp",     "log",     "silu",  "gelu",   "gelu_apprx_tanh",
    "sigmoid",  "tanh",     "relu",    "square",  "sqrt",  "rsqrt",  "reciprocal",
    "abs",      "sign",     "silu_dx", "sin",     "cos",   "arctan", "erf",
    "erf_dx",   "softplus", "mish",    "gelu_dx", "floor", "ceil",   "trunc"};

template <typename E, size_t N>
std::optional<E> find_name(const std::array<const char*, N>& names, std::string_view s) {
  for (size_t i = 0; i < N; ++i)
    if (s == names[i]) return static_cast<E>(i);
  return std::nullopt;
}

template <size_t N>
const char* name_at(const std::array<const char*, N>& names, size_t i) {
  return i < N ? names[i] : "?";
}

}  // namespace

const char* engine_name(Engine e) {
  return name_at(kEngineNames, static_cast<size_t>(e));
}
const char* dtype_name(DType t) {
  return name_at(kDtypeNames, static_cast<size_t>(t));
}
uint32_t dtype_size(DType t) {
  const auto i = static_cast<size_t>(t);
  return i < kDtypeSizes.size() ? kDtypeSizes[i] : 1;
}
const char* alu_name(AluOp op) {
  return name_at(kAluNames, static_cast<size_t>(op));
}
const char* act_name(ActFunc f) {
  return name_at(kActNames, static_cast<size_t>(f));
}
const char* mem_name(MemSpace m) {
  switch (m) {
    case MemSpace::SBUF:
      return "sbuf";
    case MemSpace::PSUM:
      return "psum";
    case MemSpace::HBM:
      return "hbm";
  }
  return "?";
}
const char* generation_name(Generation g) {
  return g == Generation::Trn3 ? "trn3" : g == Generation::Trn1 ? "trn1" : "trn2";
}

std::optional<Opcode> parse_opcode(std::string_view s) {
  for (const OpcodeInfo& o : opcode_table())
    if (s == o.name) return o.op;
  return std::nullopt;
}
std::optional<Engine> parse_engine(std::string_view s) {
  return find_name<Engine>(kEngineNames, s);
}
std::optional<DType> parse_dtype(std::string_view s) {
  return find_name<DType>(kDtypeNames, s);
}
std::optional<AluOp> parse_alu(std::string_view s) {
  return find_name<AluOp>(kAluNames, s);
}
std::optional<ActFunc> parse_act(std::string_view s) {
  return find_name<ActFunc>(kActNames, s);
}
std::optional<Generation> parse_generation(std::string_view s) {
  if (s == "trn2") return Generation::Trn2;
  if (s == "trn3") return Generation::Trn3;
  if (s == "trn1") return Generation::Trn1;
  return std::nullopt;
}

}  // namespace trnsim::isa
