// Program JSON: an instruction-stream program (per core, per engine) as a JSON document, and back.
// Format: docs/program-format.md. Round trip: program_from_json(program_to_json(p)) gives p back, except
// fields an opcode does not use (they are not written) and Program::files, which is rebuilt from the
// instructions' "file" keys in first-use order.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "sim/isa/instruction.h"

namespace trnsim::isa {

// Parses a program. Throws InputError "<json path>: <what was expected>", e.g.
// "cores[0].PE[3].moving.partition: expected [start, count]". Unknown keys are errors.
// Tensor "init" / "output" values are kept verbatim as JSON text in TensorDecl::init / ::output.
// Does not check hardware rules: run isa::check() on each instruction for those.
Program program_from_json(const nlohmann::json& j);

// Reads and parses a program file; errors are prefixed with the file path.
Program load_program(const std::string& path);

nlohmann::json program_to_json(const Program& program);

// Writes program_to_json(program) with 1-space indentation; throws InputError if the file cannot be written.
void save_program(const Program& program, const std::string& path);

}  // namespace trnsim::isa
