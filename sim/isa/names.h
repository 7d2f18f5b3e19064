// Names of the ISA enums as NKI spells them (docs/facts/trainium-hardware.md §3), and their inverses.
// engine_name / dtype_name / dtype_size are declared in semantics.h, opcode_name and operand_names in
// opcodes.h.
#pragma once

#include <optional>
#include <string_view>

#include "sim/isa/instruction.h"

namespace trnsim::isa {

const char* alu_name(AluOp op);             // e.g. "add", "maximum", "bitwise_and"
const char* act_name(ActFunc f);            // e.g. "exp", "gelu_apprx_tanh"
const char* mem_name(MemSpace m);           // "sbuf", "psum", "hbm"
const char* generation_name(Generation g);  // "trn1", "trn2", "trn3"

std::optional<Opcode> parse_opcode(std::string_view s);
std::optional<Engine> parse_engine(std::string_view s);
std::optional<DType> parse_dtype(std::string_view s);
std::optional<AluOp> parse_alu(std::string_view s);
std::optional<ActFunc> parse_act(std::string_view s);
std::optional<Generation> parse_generation(std::string_view s);

}  // namespace trnsim::isa
