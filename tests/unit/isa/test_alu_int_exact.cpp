// alu_int_exact, GpSimd's native int32/uint32 arithmetic (nki.isa.tensor_tensor, NKI 2.33: exact for every
// 32-bit value), against the values worked out by hand from the dtypes' values; the int32/uint32 store keeps
// the low 32 bits of the result.
#include <catch2/catch.hpp>

#include <cstdint>

#include "sim/isa/alu.h"

using namespace trnsim::isa;

namespace {

uint32_t low32(int64_t v) {
  return static_cast<uint32_t>(static_cast<uint64_t>(v));
}

}  // namespace

TEST_CASE("alu_int_exact works on the values of uint32 and int32 elements", "[isa]") {
  const int64_t big = 0xFFFFFFF7;  // a uint32 above 2^31 (-9 as int32)
  CHECK(alu_int_exact(AluOp::Max, big, 7) == big);
  CHECK(alu_int_exact(AluOp::Min, big, 7) == 7);
  CHECK(alu_int_exact(AluOp::IsGt, big, 7) == 1);
  CHECK(alu_int_exact(AluOp::IsLt, big, 7) == 0);
  CHECK(alu_int_exact(AluOp::Divide, big, 7) == 613566755);  // 4294967287 / 7, truncated
  CHECK(alu_int_exact(AluOp::Divide, -9, 7) == -1);          // int32: toward zero
  CHECK(alu_int_exact(AluOp::Divide, 5, 0) == 0);
  CHECK(low32(alu_int_exact(AluOp::Add, big, 10)) == 1u);         // wraps
  CHECK(low32(alu_int_exact(AluOp::Multiply, big, big)) == 81u);  // (2^32 - 9)^2 mod 2^32
  CHECK(low32(alu_int_exact(AluOp::Pow, 7, 11)) == 1977326743u);  // exact, not rounded through FP32
  CHECK(low32(alu_int_exact(AluOp::Pow, 3, 40)) == 689956897u);   // 3^40 mod 2^32
  CHECK(alu_int_exact(AluOp::Pow, -1, -3) == -1);
  CHECK(alu_int_exact(AluOp::Pow, 2, -1) == 0);
  CHECK(alu_int_exact(AluOp::BitwiseAnd, big, 0xFF) == 0xF7);
  CHECK(alu_int_exact(AluOp::ShiftRight, big, 28) == 0xF);  // logical on the 32-bit pattern
}
