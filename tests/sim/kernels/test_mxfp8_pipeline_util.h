// Helpers of the MXFP8 pipeline tests: specs with operands of a given source and layout, and BF16 matrices in
// the orientations the operands read.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/lib/mxfp8/matmul.h"
#include "tests/sim/kernels/test_matmul_mxfp8_util.h"

namespace trnsim::test {

namespace mx = kernels::mxfp8;
using kernels::all;
using kernels::Kernel;
using kernels::S;
using kernels::View;

inline mx::Operand operand(mx::Source src, mx::Layout layout, const std::string& name,
                           mx::Swizzle swizzle = mx::Swizzle::Dgt) {
  mx::Operand o;
  o.source = src, o.layout = layout, o.swizzle = swizzle, o.name = name, o.param = name;
  return o;
}

// One core, FP32 tiles, the pipeline's defaults otherwise.
inline mx::MatmulSpec pipeline_spec(int64_t M, int64_t K, int64_t N, mx::Operand lhs, mx::Operand rhs,
                                    num::QuantScheme s = num::QuantScheme::WrapX) {
  mx::MatmulSpec spec;
  spec.kernel = "pipeline test";
  spec.scope = "t";
  spec.M = M, spec.K = K, spec.N = N;
  spec.lhs = std::move(lhs), spec.rhs = std::move(rhs);
  spec.out_dtype = isa::DType::F32;
  spec.scheme = s;
  spec.run_with_lnc2 = false;
  return spec;
}

// [rows, cols] -> [cols, rows].
inline std::vector<uint16_t> transposed(const std::vector<uint16_t>& a, int64_t rows, int64_t cols) {
  std::vector<uint16_t> t(a.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = a[r * cols + c];
  return t;
}

// Rows `rows[i]` of a [T, C] matrix (-1 or T = a zero row), as a [rows.size(), C] matrix.
inline std::vector<uint16_t> gathered(const std::vector<uint16_t>& a, int64_t T, int64_t C,
                                      const std::vector<int32_t>& rows) {
  std::vector<uint16_t> g(rows.size() * C, 0);
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i] >= 0 && rows[i] < T)
      std::copy(a.begin() + rows[i] * C, a.begin() + (rows[i] + 1) * C, g.begin() + i * C);
  return g;
}

// Loads an int32 HBM vector [R] into an SBUF row index [128, R/128] (row r at [r % 128, r / 128]).
inline View load_row_index(Kernel& k, const View& hbm) {
  const int64_t R = hbm.size(0);
  View idx = k.sbuf({128, R / 128}, isa::DType::I32, "rows");
  kernels::nki::dma_copy(idx, hbm.reshape({R / 128, 128}).permute({1, 0}));
  return idx;
}

inline bool same(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

}  // namespace trnsim::test
