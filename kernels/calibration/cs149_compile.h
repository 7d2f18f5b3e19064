#pragma once

// How the CS149 Trainium-2 assignment compiled the runs it profiled, shared by the calibration kernels
// measured from it (cs149_vector_add, transpose_2d).
namespace trnsim::kernels::calibration {

// The `disable_dge` parameter's description: its run_benchmark.py passes --disable-dge whenever
// --profile_name is given (xaviergonzalez/asst4-trainium2 @071093b).
inline constexpr const char* kDisableDgeHelp =
    "compiled with the Neuron compiler's --disable-dge, as the Trn2 assignment's run_benchmark.py compiles "
    "its "
    "profiled runs (--profile_name): the DMAs use precomputed descriptors instead of the hardware DGE";

}  // namespace trnsim::kernels::calibration
