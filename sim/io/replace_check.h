// Whether an output may replace the file already at its path. trnsim replaces only files it wrote itself and
// that are still as it wrote them, unless the user says otherwise (`--overwrite`, one option of every command
// that writes): nothing the user had is overwritten. A file at an output's path may be replaced when
//   - a record of the folder holding it lists it and it still has the recorded size and SHA-256: the run
//     folder's manifest (DIR/.trnsim-files, also a folder above naming it as "inputs/x.npy"), the record of
//     the files trnsim wrote into a folder outside a run (DIR/.trnsim-written, or this user's
//     DIR/.trnsim-written.UID, which vouches only for files this user owns: quantize's outputs, a program
//     run's without --out, a trace, an HTML report, tune --write) or a killed set's journal. The inode is not
//     compared: a folder copied with `cp -a` (new inodes, same bytes) is still the run's; a file whose bytes
//     are those trnsim wrote holds nothing of the user's that a rerun would lose. (Removing an earlier run's
//     files, output_files.h, still asks for the inode too: a removed copy is gone.)
//   - an older trnsim's manifest (version 1: paths only) lists it: accepted by its path;
//   (a record another user wrote, or one that cannot be read, lists nothing;)
//   - overwrite_allowed() (the command's --overwrite).
// A device, FIFO or socket is written through in place, never replaced: always allowed here. A path where
// nothing is, a symlink or a directory is left to the other checks (output_files.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/io/manifest.h"
#include "sim/io/output_files.h"

namespace trnsim::io {

// The command's --overwrite (process-wide; off by default).
void set_overwrite_allowed(bool allowed);
bool overwrite_allowed();

// "" when the file `name` in the folder open as `dir_fd` may be replaced (above), else why not, e.g. "no
// trnsim record lists it" or "it changed since the run that wrote it (.trnsim-files lists it with 96 bytes,
// it has 97 now)". `path` is where it lies (its folders above are searched for a run folder's manifest).
std::string replace_refusal_at(int dir_fd, const std::string& name, const std::string& path);

// InputError "<what> '<path>': cannot write: a file is there that trnsim will not replace: <why>; pass
// --overwrite to replace it, or choose another path" unless the file at `path` may be replaced. Commands
// call it for every output before they simulate or compute; write_files_atomic and the trace writer check
// again where they replace a file.
void check_may_replace(const std::string& path, const std::string& what);
// The same for the file `name` in the folder open as `dir_fd` (`path` names it in the message).
void check_may_replace_at(int dir_fd, const std::string& name, const std::string& path,
                          const std::string& what);
// The same for each output of `paths` (inputs are skipped).
void check_may_replace(const std::vector<NamedPath>& paths);

// Adds `files` (written now into the folder open as `dir_fd`, `dir` for messages; paths relative to it) to
// the folder's DIR/.trnsim-written, or to this user's DIR/.trnsim-written.UID when that one is there already
// or DIR/.trnsim-written is another user's (a shared folder: sim/io/manifest.h), dropping entries whose file
// is gone or changed size; under the folder's lock (sim/io/dir_lock.h). A record that cannot be read or
// written is noted on stderr (a later write over those files then asks for --overwrite).
void record_written(int dir_fd, const std::string& dir, const std::vector<ManifestEntry>& files);

}  // namespace trnsim::io
