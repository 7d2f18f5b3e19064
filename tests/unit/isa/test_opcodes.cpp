// The opcode table (sim/isa/opcodes.h): every row is consistent, and the names, the engine and generation
// check, the hardware config features and work_of agree with it.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "sim/base/error.h"
#include "sim/isa/names.h"
#include "sim/isa/opcode_table.h"
#include "sim/isa/opcodes.h"
#include "sim/isa/semantics.h"
#include "tests/unit/isa/isa_test_util.h"

using namespace trnsim;
using namespace trnsim::isa;
using namespace trnsim::isa::test;

namespace {

constexpr std::array<Generation, 2> kGenerations = {Generation::Trn2, Generation::Trn3};

nlohmann::json hw_features(Generation g) {
  std::ifstream f(std::string(TRNSIM_SOURCE_DIR) + "/configs/hw/" + generation_name(g) + ".json");
  REQUIRE(f.good());
  return nlohmann::json::parse(f).at("features");
}

// The error check() gives `in`, or "" when it passes.
std::string check_error(const Instruction& in, Generation g) {
  Program p;
  p.generation = g;
  try {
    check(in, p, g == Generation::Trn3 ? trn3() : trn2());
  } catch (const RuleError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("opcode table: one row per opcode, in enum order, names unique and parsed back", "[isa][opcodes]") {
  REQUIRE(opcode_table().size() == static_cast<size_t>(kNumOpcodes));
  std::set<std::string> names, profiles;
  for (int i = 0; i < kNumOpcodes; ++i) {
    const auto op = static_cast<Opcode>(i);
    const OpcodeInfo& info = opcode_info(op);
    INFO(info.name);
    CHECK(&info == &opcode_table()[i]);
    CHECK(info.op == op);
    CHECK(std::string(opcode_name(op)) == info.name);
    CHECK(parse_opcode(info.name) == op);
    CHECK(names.insert(info.name).second);
    CHECK(profiles.insert(info.profile_name).second);
    // NKI names are snake_case, profile names upper case (MATMUL, TENSOR_TENSOR, PSEUDO_CORE_BARRIER), digits
    // allowed after the first letter (max8, MAX8).
    CHECK(std::isalpha(*info.name));
    for (const char* c = info.name; *c; ++c) CHECK((std::islower(*c) || std::isdigit(*c) || *c == '_'));
    for (const char* c = info.profile_name; *c; ++c)
      CHECK((std::isupper(*c) || std::isdigit(*c) || *c == '_'));
    CHECK(std::string(info.description).size() > 10);
  }
  CHECK(names.size() == static_cast<size_t>(kNumOpcodes));
  CHECK_FALSE(parse_opcode("matmul").has_value());
  CHECK(std::string(opcode_name(static_cast<Opcode>(kNumOpcodes))) == "?");
  CHECK(opcode_info(static_cast<Opcode>(kNumOpcodes)).num_slots == 0);
  CHECK(operand_names(static_cast<Opcode>(kNumOpcodes)).empty());
}

TEST_CASE("opcode table: slot 0 is the written dst, slot names unique, accumulate flags on written slots",
          "[isa][opcodes]") {
  for (const OpcodeInfo& info : opcode_table()) {
    INFO(info.name);
    REQUIRE(info.num_slots <= kMaxOperands);
    const auto& names = operand_names(info.op);
    REQUIRE(names.size() == info.num_slots);
    std::set<std::string> seen;
    for (int s = 0; s < info.num_slots; ++s) {
      const OperandSlot& slot = info.slots[s];
      REQUIRE(slot.name != nullptr);
      CHECK(std::string(names[s]) == slot.name);
      CHECK(seen.insert(slot.name).second);
      if (slot.also_read_if != 0) CHECK(slot.role == Role::Write);
    }
    for (int s = info.num_slots; s < kMaxOperands; ++s) CHECK(info.slots[s].name == nullptr);
    if (info.num_slots == 0) continue;  // core_barrier: ordering only
    CHECK(std::string(info.slots[0].name) == "dst");
    CHECK(info.slots[0].role == Role::Write);
    CHECK_FALSE(info.slots[0].optional);
    // Every opcode with operands reads something, except the fills (memset, iota).
    int reads = 0;
    for (int s = 0; s < info.num_slots; ++s) reads += info.slots[s].role == Role::Read;
    CHECK((reads > 0 || info.op == Opcode::Memset || info.op == Opcode::Iota));
  }
}

TEST_CASE("opcode table: engines exist, every opcode runs somewhere, DMAs on any sequencer",
          "[isa][opcodes]") {
  const EngineSet all = (1u << kNumEngines) - 1;
  CHECK(kAnySequencer == all);
  for (const OpcodeInfo& info : opcode_table()) {
    INFO(info.name);
    int generations = 0;
    for (Generation g : kGenerations) {
      const EngineSet e = info.engines[static_cast<int>(g)];
      CHECK((e & ~all) == 0);
      generations += e != 0;
      if (info.dma && e != 0) CHECK(e == kAnySequencer);  // the sequencer only triggers the transfer
    }
    CHECK(generations > 0);
    // An opcode missing on a generation is a feature that generation's config turns off.
    if (generations < 2) CHECK(info.feature != nullptr);
  }
}

TEST_CASE("opcode table: features are hardware config keys, on exactly where the generation has the opcode",
          "[isa][opcodes]") {
  int with_feature = 0;
  for (const OpcodeInfo& info : opcode_table()) {
    if (info.feature == nullptr) continue;
    ++with_feature;
    INFO(info.name);
    for (Generation g : kGenerations) {
      const nlohmann::json f = hw_features(g);
      REQUIRE(f.contains(info.feature));
      CHECK(f[info.feature]["value"].get<bool>() == (info.engines[static_cast<int>(g)] != 0));
    }
  }
  CHECK(with_feature == 2);  // nc_matmul_mx and quantize_mx
}

TEST_CASE("opcode table: facts from the NKI ISA docs", "[isa][opcodes]") {
  const OpcodeInfo& mm = opcode_info(Opcode::NcMatmul);
  CHECK(std::string(mm.profile_name) == "MATMUL");
  CHECK(mm.slots[0].also_read_if == kAccumulate);
  CHECK(opcode_info(Opcode::NcMatmulMx).slots[0].also_read_if == kAccumulate);
  CHECK(opcode_info(Opcode::DmaCopy).slots[0].also_read_if == kDmaAccumulate);
  // The multi-output opcodes.
  CHECK(opcode_info(Opcode::Activation).writes(3));  // reduce_res
  CHECK(opcode_info(Opcode::QuantizeMx).writes(2));  // dst_scale
  // MX opcodes on Trn3 only; activation runs on GpSimd from NeuronCore-v4.
  CHECK_FALSE(opcode_info(Opcode::NcMatmulMx).allowed(Generation::Trn2, Engine::PE));
  CHECK(opcode_info(Opcode::NcMatmulMx).allowed(Generation::Trn3, Engine::PE));
  CHECK_FALSE(opcode_info(Opcode::Activation).allowed(Generation::Trn2, Engine::POOL));
  CHECK(opcode_info(Opcode::Activation).allowed(Generation::Trn3, Engine::POOL));
  CHECK(opcode_info(Opcode::Iota).engines[0] == engine_set({Engine::POOL}));
  int dmas = 0;
  for (const OpcodeInfo& info : opcode_table()) dmas += info.dma;
  CHECK(dmas == 3);  // dma_copy, dma_transpose, sendrecv
  Instruction in;
  in.op = Opcode::SendRecv;
  CHECK(isa::is_dma(in.op));
  in.op = Opcode::CoreBarrier;
  CHECK_FALSE(isa::is_dma(in.op));
}

TEST_CASE("check's engine and generation rule is the table's, for every opcode, engine and generation",
          "[isa][opcodes]") {
  for (const OpcodeInfo& info : opcode_table())
    for (Generation g : kGenerations)
      for (int e = 0; e < kNumEngines; ++e) {
        Instruction in;
        in.op = info.op;
        in.engine = static_cast<Engine>(e);
        const std::string err = check_error(in, g);
        const std::string prefix = fmt::format("{} on {}: ", info.name, engine_name(in.engine));
        INFO(prefix << generation_name(g));
        if (info.engines[static_cast<int>(g)] == 0) {
          CHECK(err.starts_with(prefix + "generation: "));
        } else if (!info.allowed(g, in.engine)) {
          CHECK(err.starts_with(prefix + "engine: " + info.name + " runs on "));
        } else if (info.num_slots == 0) {
          CHECK(err.empty());
        } else {
          CHECK(err == prefix + "operand missing: dst");
        }
      }
  // The engine list in the message is the table's, in Engine order.
  Instruction in;
  in.op = Opcode::Memset;
  in.engine = Engine::PE;
  CHECK(check_error(in, Generation::Trn2) == "memset on PE: engine: memset runs on DVE/ACT/POOL");
}

TEST_CASE("check requires exactly the table's non-optional slots", "[isa][opcodes]") {
  for (const OpcodeInfo& info : opcode_table()) {
    if (info.num_slots == 0) continue;
    const Generation g = info.engines[0] != 0 ? Generation::Trn2 : Generation::Trn3;
    Engine engine = Engine::SP;
    for (int e = 0; e < kNumEngines; ++e)
      if (info.allowed(g, static_cast<Engine>(e))) engine = static_cast<Engine>(e);
    for (int missing = 1; missing < info.num_slots; ++missing) {
      // Every slot but `missing` present, in memories the engine reaches (PE writes PSUM); the operand rules
      // that come after the presence check may still fail.
      Instruction in;
      in.op = info.op;
      in.engine = engine;
      for (int s = 0; s < info.num_slots; ++s)
        if (s != missing)
          in.ops[s] = onchip(s == 0 && engine == Engine::PE ? MemSpace::PSUM : MemSpace::SBUF, 0, 1, 64 * s,
                             DType::F32, {{1, 1}});
      const std::string err = check_error(in, g);
      INFO(info.name << " without " << info.slots[missing].name << ": " << err);
      const bool reported = err.find("operand missing: " + std::string(info.slots[missing].name)) != err.npos;
      CHECK(reported == !info.slots[missing].optional);
    }
  }
}

TEST_CASE(
    "work_of counts every present slot by its role, an accumulating dst as read too, a DMA's "
    "scalar_offset not at all",
    "[isa][opcodes]") {
  const Program p;
  for (const OpcodeInfo& info : opcode_table()) {
    for (const uint32_t flags : {0u, static_cast<uint32_t>(kAccumulate | kDmaAccumulate)}) {
      Instruction in;
      in.op = info.op;
      in.flags = flags;
      uint64_t reads = 0, writes = 0;
      for (int s = 0; s < info.num_slots; ++s) {
        in.ops[s] = sbuf(0, 1, 0, DType::F32, {{1, 1}});  // 4 bytes
        if (s == scalar_offset_slot(in)) continue;        // a descriptor register, not data the DMA moves
        writes += info.slots[s].role == Role::Write;
        reads += info.slots[s].role == Role::Read || (flags & info.slots[s].also_read_if) != 0;
      }
      const Work w = work_of(in, p);
      INFO(info.name << " flags " << flags);
      CHECK(w.bytes_written == 4 * writes);
      CHECK(w.bytes_read == 4 * reads);
    }
  }
  // Explicitly: nc_matmul accumulate reads its PSUM dst; quantize_mx writes data and scales.
  Instruction mm;
  mm.op = Opcode::NcMatmul;
  mm.flags = kAccumulate;
  for (int s = 0; s < 3; ++s) mm.ops[s] = sbuf(0, 1, 0, DType::F32, {{1, 1}});
  CHECK(work_of(mm, p).bytes_read == 12);
  Instruction q;
  q.op = Opcode::QuantizeMx;
  for (int s = 0; s < 3; ++s) q.ops[s] = sbuf(0, 1, 0, DType::F32, {{1, 1}});
  CHECK(work_of(q, p).bytes_written == 8);
}

TEST_CASE("opcode table: attribute keys unique, apart from the fixed keys, in docs/program-format.md",
          "[isa][opcodes]") {
  std::ifstream f(std::string(TRNSIM_SOURCE_DIR) + "/docs/program-format.md");
  REQUIRE(f.good());
  std::map<std::string, std::string> doc_rows;  // opcode name -> its row of the table
  for (std::string line; std::getline(f, line);)
    if (line.rfind("| `", 0) == 0) doc_rows[line.substr(3, line.find('`', 3) - 3)] = line;
  const std::set<std::string> fixed = {"op",    "wait",     "update",  "line",     "file",
                                       "queue", "dge_mode", "mm_wait", "ls_update"};
  for (const OpcodeInfo& info : opcode_table()) {
    INFO(info.name);
    REQUIRE(info.num_attrs <= kMaxAttrs);
    REQUIRE(doc_rows.count(info.name) == 1);
    std::set<std::string> keys;
    for (int a = 0; a < info.num_attrs; ++a) {
      const Attr& attr = info.attrs[a];
      INFO(attr.key);
      CHECK(keys.insert(attr.key).second);
      CHECK(fixed.count(attr.key) == 0);
      CHECK(doc_rows[info.name].find(std::string("`") + attr.key + "`") != std::string::npos);
      // An attribute that may be an operand is that operand slot's key.
      if (attr.kind == AttrKind::NumberOrVector || attr.kind == AttrKind::SlotFlag) {
        REQUIRE(attr.slot >= 0);
        REQUIRE(attr.slot < info.num_slots);
        CHECK(std::string(info.slots[attr.slot].name) == attr.key);
      } else {
        for (int s = 0; s < info.num_slots; ++s) CHECK(std::string(info.slots[s].name) != attr.key);
      }
      if (attr.kind == AttrKind::Choice) CHECK((attr.off != nullptr && attr.on != nullptr && attr.flag != 0));
    }
  }
}

TEST_CASE("pe_rate: the MX x4 and double_row rate factor, and the FLOPs work_of counts with it",
          "[isa][opcodes]") {
  const Program p;
  Instruction mm = make(Opcode::NcMatmul, Engine::PE,
                        {psum(0, 128, 0, DType::F32, {{1, 512}}), sbuf(0, 128, 0, DType::BF16, {{1, 128}}),
                         sbuf(0, 128, 0, DType::BF16, {{1, 512}})});
  CHECK(pe_rate(mm).factor == 1);
  CHECK(pe_rate(mm).free_axis == 1);
  CHECK(work_of(mm, p).flops == 2ull * 128 * 128 * 512);  // 2 K M N
  // double_row: FP8 [K, 2, M] x [K, 2, N], K = 2 x 128 logical rows.
  Instruction dr =
      make(Opcode::NcMatmul, Engine::PE,
           {psum(0, 128, 0, DType::F32, {{1, 512}}), sbuf(0, 128, 0, DType::FP8_E4M3FN, {{128, 2}, {1, 128}}),
            sbuf(0, 128, 0, DType::FP8_E4M3FN, {{512, 2}, {1, 512}})});
  dr.flags = kDoubleRow;
  CHECK(pe_rate(dr).factor == 2);
  CHECK(pe_rate(dr).free_axis == 2);
  CHECK(work_of(dr, p).flops == 2ull * 256 * 128 * 512);
  // nc_matmul_mx: x4 elements, K = 4 x 128 rows.
  Instruction mx;
  mx.op = Opcode::NcMatmulMx;
  mx.ops[1] = sbuf(0, 128, 0, DType::F32, {{1, 128}});
  mx.ops[2] = sbuf(0, 128, 0, DType::F32, {{1, 512}});
  CHECK(pe_rate(mx).factor == 4);
  CHECK(pe_rate(mx).free_axis == 1);
  CHECK(work_of(mx, p).flops == 2ull * 512 * 128 * 512);
  // Not a matmul: factor 0 and no FLOPs, whatever its flags.
  for (const OpcodeInfo& info : opcode_table()) {
    if (info.op == Opcode::NcMatmul || info.op == Opcode::NcMatmulMx) continue;
    Instruction other;
    other.op = info.op;
    other.flags = kDoubleRow;
    INFO(info.name);
    CHECK(pe_rate(other).factor == 0);
  }
  // A transpose by the PE counts no FLOPs.
  mm.flags = kIsTranspose;
  CHECK(work_of(mm, p).flops == 0);
}
