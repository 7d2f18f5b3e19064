#include "kernels/api/dma_mode.h"

#include <fmt/format.h>

#include "sim/base/error.h"
#include "sim/isa/semantics.h"

namespace trnsim::kernels {
namespace {

// The hardware DGE's dma_transpose constraints (NKI DGE reference): src.shape[0] == 16, src.shape[-1] % 128
// == 0, a 2-byte dtype.
bool hwdge_transpose_ok(const View& src) {
  if (src.rank() < 2 || src.shape()[0] != 16 || src.shape().back() % 128 != 0) return false;
  return isa::dtype_size(src.dtype()) == 2;
}

}  // namespace

DmaIssue resolve_dma_issue(isa::Opcode op, const View& dst, const View& src, bool indirect, DgeMode mode,
                           std::optional<Engine> engine, const Loc& loc) {
  const char* name = op == isa::Opcode::DmaTranspose ? "dma_transpose" : "dma_copy";
  const auto fail = [&](const std::string& why) {
    throw RuleError(fmt::format("{}: {}: {}", where(loc), name, why));
  };
  // NeuronCore-v2 (Trn1) has no DGE blocks: hardware DGE is "NeuronCore-v3+" (NKI DGE reference).
  const Kernel* k = Kernel::current();
  const bool no_hwdge = k != nullptr && k->generation() == Generation::Trn1;
  // Unknown resolves to precomputed descriptors: no DGE blocks, or compiled with --disable-dge.
  const bool precomputed = no_hwdge || (k != nullptr && k->disable_dge());
  const bool store = dst.space() == isa::MemSpace::HBM && src.space() != isa::MemSpace::HBM;
  if (mode == DgeMode::Hwdge && no_hwdge)
    fail("dge_mode hwdge needs NeuronCore-v3+ (Trn2, Trn3); Trn1 has none");
  if (mode == DgeMode::Unknown) {
    if (indirect || (engine && *engine == Engine::POOL))
      mode = DgeMode::Swdge;
    else if (precomputed) {
      // Precomputed descriptors on the compiler's static queue sets: stores on GpSimd's, the rest on SP's.
      return {engine.value_or(store ? Engine::POOL : Engine::SP), isa::DgeMode::None};
    } else if (op == isa::Opcode::DmaTranspose && !hwdge_transpose_ok(src))
      mode = DgeMode::None;
    else if (engine && *engine != Engine::SP && *engine != Engine::ACT)
      mode = DgeMode::None;
    else
      mode = DgeMode::Hwdge;
  }
  DmaIssue d;
  switch (mode) {
    case DgeMode::Swdge:
      if (engine && *engine != Engine::POOL)
        fail(fmt::format("dge_mode swdge runs on GpSimd (POOL), not {}", isa::engine_name(*engine)));
      d = {Engine::POOL, isa::DgeMode::Swdge};
      break;
    case DgeMode::Hwdge: {
      if (op == isa::Opcode::DmaTranspose && !hwdge_transpose_ok(src))
        fail("dge_mode hwdge transposes need a 2-byte dtype, 16 source rows and a multiple of 128 columns");
      d = {engine.value_or(store ? Engine::ACT : Engine::SP), isa::DgeMode::Hwdge};
      if (d.engine != Engine::SP && d.engine != Engine::ACT)
        fail(fmt::format("dge_mode hwdge is triggered from SP or ACT, not {}", isa::engine_name(d.engine)));
      break;
    }
    case DgeMode::None:
    case DgeMode::Unknown:
      d = {engine.value_or(Engine::SP), isa::DgeMode::None};
      break;
  }
  return d;
}

}  // namespace trnsim::kernels
