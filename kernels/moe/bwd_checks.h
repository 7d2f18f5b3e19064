// The parameter checks of blockwise_mm_bwd_mxfp8 both schedules share (nki-library's entry asserts, the
// Trn3 requirement, the shape and option combinations the kernel cannot run).
//
// Errors: InputError "kernel 'blockwise_mm_bwd_mxfp8': ..." naming the parameter and the reason.
#pragma once

#include <string>

#include "kernels/moe/bwd_params.h"
#include "sim/isa/semantics.h"

namespace trnsim::kernels::moe {

inline constexpr const char* kBwdName = "kernel 'blockwise_mm_bwd_mxfp8'";

[[noreturn]] void bwd_fail(const std::string& msg);

// Every check of the parameters (for `limits`' hardware) that does not depend on the schedule.
void check_bwd(const BwdParams& p, const isa::Limits& limits);

}  // namespace trnsim::kernels::moe
