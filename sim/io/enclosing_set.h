// A run folder inside another run's recorded set: a chain's stage folder OUT/<stage> (its files are named in
// the chain's record OUT/.trnsim-files, beside OUT/chain_stats.json), or a run's OUT/inputs (--dump-inputs).
// A single run into such a folder would replace part of that set while the record, chain_stats.json and the
// other stages still describe the earlier run: `trnsim run` refuses it unless told (--replace-stage), and
// `trnsim stats` says when it happened (docs/workloads.md "Chains").
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace trnsim::io {

struct EnclosingSet {
  std::string folder;                 // the folder whose record names files inside the run folder
  std::string inside;                 // the run folder relative to `folder` ("attn")
  bool chain = false;                 // the record holds a chain_stats.json (a chain's set)
  std::vector<std::string> named;     // the record's files inside the run folder, relative to `folder`
  std::vector<std::string> replaced;  // of those, the ones that are no longer the files the record names
};

// The nearest folder up to four levels above `dir` whose complete record (sim/io/manifest.h) names files
// inside `dir`; nullopt if none. The levels are the folders that really hold `dir` (each parent opened as
// "..", its entry found by device and inode; through the file system's own mount when `dir` or a level is
// the root of a bind mount of a folder inside it), not the path's text: a symlink to OUT/<stage> or a bind
// mount of it is OUT/<stage>; `folder` and `inside` are the real names. Levels of `dir` that do not exist
// yet lead `inside` (OUT/<stage>/new). A file counts as replaced when it is missing, not a regular file, or
// its inode or size differ from the record's (or, for a file of at most 16 MiB, its SHA-256). Never changes
// anything; a record that cannot be read counts as none.
std::optional<EnclosingSet> enclosing_set(const std::string& dir);

// The message of a run refused because its --out lies inside `s` (`flag`: the option that allows it).
std::string enclosing_set_refusal(const std::string& out_dir, const EnclosingSet& s, const std::string& flag);

// For `trnsim stats`: "" unless `dir` is inside a set whose files inside it were replaced since (then a
// note saying so).
std::string replaced_stage_note(const std::string& dir);

// The files of the set recorded in `folder` (a chain's OUT) that are no longer the ones recorded, relative
// to it (empty without a complete record).
std::vector<std::string> replaced_files_of_set(const std::string& folder);

}  // namespace trnsim::io
