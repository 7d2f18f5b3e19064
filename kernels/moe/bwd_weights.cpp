#include "kernels/moe/bwd_weights.h"

#include "kernels/lib/mxfp8/layout.h"

namespace trnsim::kernels::moe {

BwdWeights declare_bwd_weights(Kernel& k, const BwdParams& p, int64_t I) {
  using isa::DType;
  BwdWeights w;
  const int64_t E = p.E, H = p.H;
  const DType xdt = mxfp8::x4_dtype(p.fp8);
  if (p.gate_up_weight_scales) {
    w.w_gu = k.input("gate_up_proj_weight", xdt, {E, 2 * I / 4, H});
    w.s_gu = k.input("gate_up_weight_scales", DType::E8M0, *p.gate_up_weight_scales);
  } else {
    w.w_gu = k.input("gate_up_proj_weight", DType::BF16, {E, H, 2, I});
  }
  if (p.down_weight_scales) {
    w.w_down = k.input("down_proj_weight", xdt, {E, H / 4, I});
    w.s_down = k.input("down_weight_scales", DType::E8M0, *p.down_weight_scales);
  } else {
    w.w_down = k.input("down_proj_weight", DType::BF16, {E, I, H});
  }
  return w;
}

}  // namespace trnsim::kernels::moe
