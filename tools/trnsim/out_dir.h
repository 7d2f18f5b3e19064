// The output folder of a workload run. It holds exactly that run's files: a manifest
// (DIR/.trnsim-files, one relative path per line) lists what the last run wrote, and the next run into the
// same folder removes the files the earlier run wrote that it does not write again (only regular files listed
// there; nothing else in the folder is touched). The folder is created and checked for writing before the
// simulation starts, so an unwritable --out is reported at once; a folder this run created is removed again
// if the run fails before writing anything, or is interrupted (sim/base/interrupt.h); so is every missing
// level above it that this run created (--out a/b/c).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/interrupt.h"
#include "sim/io/output_files.h"

namespace trnsim::cli {

class OutDir {
 public:
  // Creates `dir` if missing and checks a file can be created in it. InputError "--out DIR: ..." otherwise.
  explicit OutDir(std::string dir);
  ~OutDir();

  const std::string& path() const { return dir_; }
  // Creates the folder `name` inside if missing and checks a file can be created in it, now rather than
  // after the simulation; removed again if this run created it and leaves it empty. InputError
  // "--out DIR: NAME ..." otherwise.
  void add_subfolder(const std::string& name);
  // The manifest of `files` (paths inside the folder), to write with them.
  io::OutputFile manifest(const std::vector<io::OutputFile>& files) const;
  // After a successful write of `files`: removes what the earlier run wrote and this one did not; returns the
  // removed paths. Kept: a file among `read` (this run's inputs, e.g. an earlier --dump-inputs read back)
  // and a file changed after the earlier run wrote its manifest (the user's now, not that run's output).
  std::vector<std::string> remove_stale(const std::vector<io::OutputFile>& files,
                                        const std::vector<std::string>& read);
  // The run wrote its files: keep the folder whatever happens next.
  void keep() { created_.clear(); }

 private:
  std::string dir_;
  // Removes the folders this run created that are empty, innermost first.
  void remove_created();
  // The folders this run created, outermost first: the missing levels of `dir_`, then its subfolders.
  std::vector<std::string> created_;
  std::vector<interrupt::CleanupPath> on_signal_;    // the folders this run created
  std::vector<std::string> previous_;                // the earlier run's manifest, relative paths
  std::filesystem::file_time_type previous_time_{};  // when that manifest was written
};

}  // namespace trnsim::cli
