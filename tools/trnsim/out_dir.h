// The output folder of a run. It holds exactly the last run's files: the manifest (DIR/.trnsim-files,
// sim/io/manifest.h) records what that run wrote, each file with its size, inode and SHA-256, and the next
// run into the folder removes the files the earlier run wrote that it does not write again, each only while
// it is still the file that run wrote (never a file moved, copied or extracted there under the same name,
// never through a symlinked folder); nothing else in the folder is touched. The whole set is replaced all
// or nothing (sim/io/output_files.h), also when the run is killed.
// One run at a time: the folder is locked (io::DirLock) from the start of the run to its end; a second run
// into it is refused at once. The folder is created and checked for writing before the simulation starts,
// so an unwritable --out is reported at once; a folder this run created is removed again if the run fails
// before writing anything, or is interrupted (sim/base/interrupt.h); so is every missing level above it
// that this run created (--out a/b/c).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/interrupt.h"
#include "sim/io/dir_lock.h"
#include "sim/io/made_folders.h"
#include "sim/io/output_files.h"

namespace trnsim::cli {

class OutDir {
 public:
  // Creates `dir` if missing, locks it, checks a file can be created in it, reads its manifest (rolling
  // back a set a killed run left half replaced; notes on stderr). InputError "--out DIR: ..." otherwise,
  // e.g. when another trnsim run holds the folder.
  explicit OutDir(std::string dir);
  ~OutDir();

  const std::string& path() const { return dir_; }
  // The folder's handle (its lock's), -1 before it is locked.
  int fd() const { return lock_.fd(); }
  // Where the folder is now, for messages: path() while that still names the folder this run holds, else
  // its current absolute path (the run's handle, through /proc/self/fd: moved or renamed during the run),
  // "" when that cannot be known (removed, no /proc).
  std::string where_now() const;
  // `path` (a file in the folder given as `dir`) where the folder is now (`now_at`, from where_now): only
  // its path inside the folder when that is unknown ("").
  static std::string shown(const std::string& path, const std::string& dir, const std::string& now_at);
  // Creates the folder `name` inside if missing, locks it as the folder itself (a run with --out DIR/NAME,
  // e.g. into a chain's stage folder, is refused while this run lasts, and this run is refused while another
  // holds it) and checks a file can be created in it, now rather than after the simulation; removed again
  // if this run created it and leaves it empty. A record of its own there (an earlier single run into it)
  // is read as open_run_folder reads a run folder's: that set's files this run does not write again are
  // removed as the earlier run's (each only while it is the recorded file), and the record with them once
  // commit has this run's set in place. InputError "--out DIR: NAME ..." otherwise.
  void add_subfolder(const std::string& name);
  // Writes `files` (paths inside the folder) as the folder's new set and removes what the earlier run wrote
  // and this one did not (never a file among `read`, this run's inputs); returns the removed paths. Keeps
  // the folder whatever happens next.
  std::vector<std::string> commit(const std::vector<io::OutputFile>& files,
                                  const std::vector<std::string>& read);
  // The run wrote its files some other way (a program run's plain set): keep the folder whatever happens
  // next.
  void keep() {
    levels_.keep();
    created_subs_.clear();
  }

 private:
  std::string dir_;
  // Removes the folders this run created that are empty, innermost first.
  void remove_created();
  io::MadeFolders levels_;  // the missing levels of `dir_` this run made
  io::DirLock lock_;
  io::Fd dir_fd_;                          // the folder, through its lock's handle (for its subfolders)
  std::vector<std::string> created_subs_;  // subfolders this run created, by name in dir_fd_
  std::vector<interrupt::CleanupPath> on_signal_;  // the subfolders this run created
  std::vector<io::DirLock> sub_locks_;             // the subfolders' (add_subfolder)
  io::Manifest previous_;  // the folder's record of the earlier run's files (and its subfolders' records')
  std::vector<std::pair<std::string, uint64_t>> sub_records_;  // subfolders' own records: name, inode
};

// InputError "<what> '<path>': cannot write: it belongs to another user (uid U) and its folder has the sticky
// bit ..." for an output of `paths` (inputs are skipped) that exists as a regular file the rename of its set
// would be refused to replace: its folder has the sticky bit (a shared /tmp-like folder), and neither the
// file nor the folder is this user's, and the process lacks CAP_FOWNER (the kernel's rule for rename and
// unlink there). Runs call it before they simulate, with their record (.trnsim-files) among the paths.
void check_replaceable(const std::vector<io::NamedPath>& paths);

}  // namespace trnsim::cli
