// How many physical NeuronCores one logical NeuronCore (LNC) may group on each generation: the one rule that
// the workload path ("lnc", a C++ kernel's core parameter) and the Python entry points (lnc=, kernel[2],
// NEURON_LOGICAL_NC_CONFIG) all ask. Trn1: 1 (Neuron compiler error NCC_EARG001, compiler/error-codes/
// EARG001: "On trn1, only lnc=1 is supported"; the Logical NeuronCore configuration page describes LNC as a
// Trainium2 feature). Trn2, Trn3: 2 (NKI's "Using Logical NeuronCores (LNC) with NKI": an LNC degree of 1 or
// 2; neuronx-cc defaults to 2 on Trn2 and later, compiler/error-codes/EVRF066).
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>

#include "sim/config/hw_config.h"
#include "sim/isa/names.h"

namespace trnsim::config {

inline int max_lnc(isa::Generation g) {
  return g == isa::Generation::Trn1 ? 1 : 2;
}

// Why `lnc` physical cores cannot run as one logical NeuronCore on `hw`, or nullopt when they can.
inline std::optional<std::string> lnc_refusal(const HwConfig& hw, int lnc) {
  const int most = max_lnc(hw.generation);
  if (lnc <= most) return std::nullopt;
  const char* gen = isa::generation_name(hw.generation);
  return fmt::format(
      "LNC {} on {}: a {} logical NeuronCore is {} physical core{} (LNC2 pairs are Trainium2 and later; "
      "Neuron's compiler refuses lnc={} on {}: NCC_EARG001)",
      lnc, hw.name, gen, most, most == 1 ? "" : "s", lnc, gen);
}

}  // namespace trnsim::config
