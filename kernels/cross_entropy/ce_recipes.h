// Input recipes of the cross-entropy kernels (kernels/api/package.h make_recipe):
//
//   "lm_logits"      fills logits and target together: approximately N(mean, std^2) logits (an Irwin-Hall sum
//                    of 4 uniforms from a seeded integer hash: fast, identical on every platform)
//                    with the structures public bug reports are about, and targets uniform in the unmasked
//                    vocabulary with a fraction set to ignore_idx (anywhere, so also mid-tile):
//                      masked_columns        the last N vocabulary columns are -inf in every row (a padded
//                                            vocabulary); targets avoid them
//                      masked_prefix         rows r with r % masked_prefix_every == masked_prefix_every / 2
//                                            have their first N columns -inf (flash-attention #1930);
//                                            targets avoid them
//                      all_masked_rows       this many evenly spaced rows entirely -inf (NaN loss)
//                      neg_inf_target_rows   this many rows whose target logit is -inf (+Inf loss)
//                      bf16_max_rows         rows whose target logit is the BF16 maximum 0x7F7F and a few
//                                            other logits +-that value
//                      tie_rows              rows whose maximum 8.0 appears in 3 columns (argmax ties)
//                    Special rows are chosen deterministically and never overlap.
//   "forward_stats"  (backward only) fills row_max and row_sumexp from logits in FP64, rounded to FP32, as
//                    the forward defines them (row_sumexp relative to the shift row_max, or 0 when -inf).
#pragma once

#include <vector>

#include "kernels/api/package.h"
#include "kernels/cross_entropy/ce_params.h"

namespace trnsim::kernels::ce {

std::vector<Recipe<FwdParams>> fwd_recipes();
std::vector<Recipe<BwdParams>> bwd_recipes();

}  // namespace trnsim::kernels::ce
