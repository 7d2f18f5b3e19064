// The kernel registry: every kernel the CLI can run, with its parameter schema and its builder.
// Registration is explicit: register_all_kernels() (kernels/api/register_all.cpp) adds the library's kernels
// (static libraries drop self-registering objects, so there is no static-initialisation magic).
//
// Parameters are a JSON object. validate() checks it against the schema and returns it complete (defaults
// filled in); errors are InputError naming the kernel and the parameter ("kernel 'matmul_bf16': parameter
// 'M': expected a positive integer, got -3").
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kernels/api/kernel.h"

namespace trnsim::kernels {

enum class ParamType { Int, Float, Bool, String, Enum, Shape, Object };
// "int", "float", "bool", "string", "enum", "shape", "object" (a JSON object; the kernel checks its fields)
const char* param_type_name(ParamType t);

struct ParamSpec {
  std::string name{};
  ParamType type = ParamType::Int;
  nlohmann::json default_value{};      // null: the parameter is required
  std::vector<std::string> allowed{};  // Enum: the allowed values
  std::optional<double> min{}, max{};  // Int/Float: inclusive bounds; Shape: bounds of every entry
  std::string doc{};
  bool nullable =
      false;  // JSON null (Python None) is a valid value; with a null default the parameter is optional
};

// A required shape dimension: an integer in [1, 2^20] (tensors beyond that do not fit an HBM stack anyway).
inline ParamSpec dim_param(const char* name, const char* doc) {
  return ParamSpec{.name = name, .type = ParamType::Int, .min = 1, .max = 1 << 20, .doc = doc};
}

struct KernelInfo {
  std::string name;
  std::string doc;
  std::vector<ParamSpec> params;
  // Builds the program from validated parameters (complete: every schema entry present).
  std::function<KernelBuild(const nlohmann::json& params, const BuildOptions& options)> build;
};

class Registry {
 public:
  // InputError if the name is empty, already registered, or a default does not satisfy its own spec.
  void add(KernelInfo info);
  const KernelInfo* find(const std::string& name) const;
  const KernelInfo& get(const std::string& name) const;  // InputError listing the known kernels
  const std::vector<KernelInfo>& kernels() const { return kernels_; }

  nlohmann::json validate(const std::string& name, const nlohmann::json& params) const;
  KernelBuild build(const std::string& name, const nlohmann::json& params, const BuildOptions& options) const;

 private:
  std::vector<KernelInfo> kernels_;
};

// The process-wide registry the CLI uses.
Registry& registry();

// Adds every library kernel to registry(); idempotent.
void register_all_kernels();

// Library kernels' registration functions (one per kernel file in kernels/lib).
void register_matmul_bf16(Registry& r);
void register_matmul_mxfp8(Registry& r);
void register_matmul_mxfp8_backward(Registry& r);
// Calibration kernels (kernels/lib/calibration).
void register_nki_tutorial_matmul(Registry& r);
void register_matmul_lhsT_blocked(Registry& r);
void register_matmul_lhs_dma_transpose(Registry& r);
void register_cs149_vector_add(Registry& r);
void register_transpose_2d(Registry& r);

}  // namespace trnsim::kernels
