// The missing folders on the way to an output (--out a/b/c, --trace new/sub/t.json): made outermost first,
// never through a dangling symlink, and removed again when left empty.
#pragma once

#include <string>
#include <vector>

#include "sim/base/interrupt.h"

namespace trnsim::io {

// InputError "<what>: <level> is a symlink to <target>, which does not exist (a dangling link): trnsim does
// not create folders through links; create the target folder or remove the link" when `dir` or a level on
// its way that does not exist is such a link (mkdir would say only "File exists").
void check_no_dangling_link(const std::string& dir, const std::string& what);

// The levels of a folder that one command made (make): each is removed again, if it is empty, by
// remove_empty() (and the destructor) and when a signal ends the process.
class MadeFolders {
 public:
  MadeFolders() = default;
  ~MadeFolders();
  MadeFolders(const MadeFolders&) = delete;
  MadeFolders& operator=(const MadeFolders&) = delete;

  // Makes each missing level of `dir`, outermost first; a level another process makes at the same time is
  // that one's. InputError "<what>: cannot create the directory (<reason>)" (the levels made so far removed),
  // or check_no_dangling_link's.
  void make(const std::string& dir, const std::string& what);
  // Removes the levels made here that are empty, innermost first; later calls do nothing.
  void remove_empty();
  // The folders stay whatever happens next (a signal still removes one that is empty).
  void keep() { made_.clear(); }
  // The levels made here are another's now (a run that locked the folder between our mkdir and our lock):
  // never removed by this object, nor by a signal.
  void disown();
  const std::vector<std::string>& made() const { return made_; }

 private:
  std::vector<std::string> made_;
  std::vector<interrupt::CleanupPath> on_signal_;
};

}  // namespace trnsim::io
