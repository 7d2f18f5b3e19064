// The Vector engine's top-8 instructions on one partition's values, as FP32 (NKI's router and top-k kernels):
// nki.isa.max8 (the 8 largest values) and the pairing of 8 values with their positions that
// nki.isa.nc_find_index8 and nki.isa.nc_match_replace8 share. Plain functions on rows; semantics.cpp applies
// them to operands.
#pragma once

#include <array>
#include <cstdint>

namespace trnsim::isa::top8 {

inline constexpr int kWidth = 8;  // values per partition in and out
// Elements per partition max8 and nc_find_index8 read (NKI's API pages: "between 8 and 16,384 inclusive";
// nc_match_replace8's page gives the upper bound only).
inline constexpr uint64_t kMinElements = 8;
inline constexpr uint64_t kMaxElements = 16384;
// An index where a value has no position: all ones (nc_find_index8's sentinel since Neuron 2.32; stored into
// a uint16 dst it wraps to 0xFFFF).
inline constexpr uint32_t kNotFound = 0xFFFFFFFFu;

// The kWidth largest of x[0, n) in descending order (n >= kWidth). Equal values keep their order in x (so -0
// and +0 come out as they stand); NaN ranks below every number (NumPy's sort order, reversed).
std::array<float, kWidth> largest(const float* x, uint64_t n);

// Pairs each of vals[0, kWidth) with a distinct position of x[0, n) holding an equal value (FP32 ==, so NaN
// matches nothing and -0 matches +0): taking vals in order (or from the last when `from_last`), each gets the
// first position equal to it that no earlier-taken value got; kNotFound where none is left. nc_find_index8
// takes vals in order, nc_match_replace8 from the last (its page's duplicate rule).
std::array<uint32_t, kWidth> pair_positions(const float* x, uint64_t n, const float* vals, bool from_last);

}  // namespace trnsim::isa::top8
