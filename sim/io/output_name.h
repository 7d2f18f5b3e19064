// The name of a run's output tensor, which becomes the file OUT/<name>.npy beside trnsim's own files
// (stats.json, host.json, a chain's chain_stats.json): one rule for every kernel (C++, the Python bindings'
// Kernel.output, NKI kernels) and every place a name is joined to a folder, so a name can never reach outside
// the run's folder (`../victim`, `/tmp/x/victim`) nor sit beside trnsim's files under their stems.
#pragma once

#include <string>

namespace trnsim::io {

// The longest name: <name>.npy within a file name's 255 bytes.
inline constexpr size_t kMaxOutputNameBytes = 251;

// "" when `name` is a plain file stem: 1 to kMaxOutputNameBytes letters (ASCII), digits, '_' and '-', not
// starting with '-', and not stats, host or chain_stats (in any case); else why not, a sentence fragment
// ("is written as OUT/<name>.npy, so ...").
std::string output_name_problem(const std::string& name);

// InputError "<where>: output '<name>' is written as OUT/<name>.npy, so ..." unless the name is plain.
void check_output_name(const std::string& where, const std::string& name);

// The name of a run's or chain's default output folder out/<name> (a workload's or pipeline's "name"; a
// chain's stage folder OUT/<name>): "" when usable, else why not, a sentence fragment ("is not usable as a
// directory name (...)"): 1 to 200 bytes of printable characters, no '/', and not starting with '.' (".",
// "..", and the names of trnsim's hidden records and temporaries, .trnsim-files, .trnsim-journal, ...).
std::string folder_name_problem(const std::string& name);

// `dir`/<name>.npy, after check_output_name(where, name).
std::string output_npy_path(const std::string& dir, const std::string& name, const std::string& where);

}  // namespace trnsim::io
