// The check result type as sim/run names it: the type itself is sim/tensor/check_result.h, shared with the
// kernels layer (kernels/api/checks.h), which does not depend on sim/run.
#pragma once

#include "sim/tensor/check_result.h"

namespace trnsim::run {

using tensor::CheckMetric;
using tensor::CheckResult;
using tensor::kCheckBitExact;
using tensor::kCheckScalar;
using tensor::kCheckTolerance;

}  // namespace trnsim::run
