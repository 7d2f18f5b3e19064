#include "kernels/lib/mxfp8/operand.h"

#include <fmt/format.h>

#include "kernels/api/nki.h"
#include "kernels/lib/mxfp8/layout.h"
#include "sim/base/error.h"

namespace trnsim::kernels::mxfp8 {

View expert_slice(const View& stacked, int64_t expert) {
  if (stacked.rank() < 3)
    throw InputError(fmt::format("expert_slice: {} is not a stacked [E, R, ...] tensor", stacked.describe()));
  int64_t cols = 1;
  for (int d = 2; d < stacked.rank(); ++d) cols *= stacked.size(d);
  return stacked.slice(0, expert, expert + 1).reshape({stacked.size(1), cols});
}

View expert_row_index(Kernel& k, const View& expert, int64_t rows_per_expert, int64_t row0, int64_t nrows) {
  if (expert.space() != isa::MemSpace::SBUF || expert.partitions() != 128 || expert.free_elements() != 1)
    throw InputError(fmt::format("expert_row_index: the expert id must be an SBUF [128, 1] column, got {}",
                                 expert.describe()));
  const int64_t groups = cdiv(nrows, 128);
  View base = k.sbuf({128, 1}, isa::DType::F32, "expert_row_base");
  View index = k.sbuf({128, groups}, isa::DType::I32, "expert_row_index");
  nki::tensor_scalar(base, expert, nki::AluOp::Multiply, static_cast<double>(rows_per_expert));
  nki::iota(index, {128}, static_cast<double>(row0), 1.0);
  nki::tensor_scalar(index, index, nki::AluOp::Add, base);
  return index;
}

}  // namespace trnsim::kernels::mxfp8
