// The MXFP8 matmul pipeline (aws-neuron/nki-library experimental/matmul_mxfp8: generic_matmul_mxfp8_api and
// matmul_mxfp8_blocks):
// Y[M, N] = L^T R for operands L [K, M] and R [K, N] from any source (operand.h), BF16 ones quantized on chip
// (quantize_mx, trn3 scale rule) after the x4 interleave of K, multiplied with nc_matmul_mx, accumulated in
// PSUM over the K tiles of a K block and in an SBUF accumulator over K blocks, each finished row tile handed
// to an epilogue (epilogue.h).
//
//   Plan p = plan_matmul(spec, limits);               // on the host, before build_program (num_programs)
//   build_program([&](Kernel& k) {
//     MatmulSpec s = spec;
//     s.lhs.data = k.input("x", DType::BF16, {M, K});  // bind the operand views on this core
//     s.rhs.data = k.input("w", DType::BF16, {N, K});
//     StoreRows out(k.output("y", DType::BF16, {M, N}));
//     emit_matmul(k, s, p, out);
//   }, options);
//
// Schedule per core: blocks (m, n, k) in 'mnk' block order. The quantized LHS block (m, k) and RHS block (k,
// n) each live in one of two SBUF slots; the block of the next step is loaded and quantized before the
// current step's matmuls are emitted, so its DMAs and quantize_mx overlap the PE (the builder's region
// tracking orders a slot's reuse after the matmuls that read it). A block already in a slot is reused (so
// with one K block the LHS is quantized once per M block). Inside a block, tiles run 'mnk' or 'nmk' with K
// innermost accumulating in PSUM (rotating tiles of whole banks, as wide as tile_n: 8 tiles of one bank up to
// tile_n 512, fewer and wider beyond; shared with the PE loader and epilogue transposes); PSUM
// is drained into the output tile (one K block: cast on ACT/DVE alternately) or an FP32 accumulator (first
// K block: copy; later ones: tensor_tensor add on DVE). Deviation from nkilib: PSUM is always FP32 (nkilib
// uses BF16 PSUM when TILES_IN_BLOCK_K == 1 and the output is BF16; the result differs only by the extra
// rounding that avoids).
//
// A paired stationary (MatmulSpec::lhs2) runs a second accumulation group on every moving tile and hands
// both results to the epilogue.
//
// Cores: with Cores::Lnc and LNC2, core c computes its half of the sharded dim; without LNC2 core 1 emits
// nothing. Cores::CallingCore: the calling core computes all of Y.
//
// Errors: InputError "<spec.kernel>: ..." for operand views that do not match the spec (shape, dtype,
// space), besides the planner's.
#pragma once

#include "kernels/api/kernel.h"
#include "kernels/lib/mxfp8/epilogue.h"
#include "kernels/lib/mxfp8/operand.h"
#include "kernels/lib/mxfp8/plan.h"

namespace trnsim::kernels::mxfp8 {

// Emits the matmul on the calling core; spec.lhs/rhs carry the operand views (plan.h for the rest).
void emit_matmul(Kernel& k, const MatmulSpec& spec, const Plan& plan, Epilogue& epilogue);

}  // namespace trnsim::kernels::mxfp8
