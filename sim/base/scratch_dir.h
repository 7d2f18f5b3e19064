// Where HostBytes makes its scratch files (sim/base/host_bytes.h), by a folder's handle: a run's --out, held
// locked, is written through its handle (sim/io/dir_lock.h), and so are its scratch files.
#pragma once

namespace trnsim {

// The scratch folder, open as `dir_fd` (opened again: the caller keeps its own, and a lock held on it is
// not shared): scratch files are created through that handle (openat with O_TMPFILE), in the folder
// wherever it is now (a run's --out moved during the run); -1 turns scratch mappings off. The same as
// set_scratch_dir(path) otherwise.
void set_scratch_dir(int dir_fd);

}  // namespace trnsim
