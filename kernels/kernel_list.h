// The library's kernels, one line each: TRNSIM_KERNEL(name) registers the package its folder defines as
// `std::unique_ptr<KernelDef> name_kernel()` (kernels/api/package.h). Included by kernels/registry_all.cpp.
TRNSIM_KERNEL(matmul_bf16)
TRNSIM_KERNEL(matmul_mxfp8)
TRNSIM_KERNEL(matmul_mxfp8_backward)
TRNSIM_KERNEL(nki_tutorial_matmul)
TRNSIM_KERNEL(matmul_lhsT_blocked)
TRNSIM_KERNEL(matmul_lhs_dma_transpose)
TRNSIM_KERNEL(cs149_vector_add)
TRNSIM_KERNEL(transpose_2d)
TRNSIM_KERNEL(cross_entropy_fwd)
TRNSIM_KERNEL(cross_entropy_bwd)
TRNSIM_KERNEL(blockwise_mm_fwd_mxfp8)
TRNSIM_KERNEL(blockwise_mm_bwd_mxfp8)
