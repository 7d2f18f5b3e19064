// The record trnsim keeps of a set of files it writes into a folder: a run's output folder's manifest
// (DIR/.trnsim-files, kept), and the journal of a set being replaced in any other folder
// (DIR/.trnsim-journal, or this user's DIR/.trnsim-journal.UID where that one is another user's; removed once
// the set is in place). JSON, read with the JSON reader's checks
// (sim/io/json_document.h):
//
//   {"trnsim_files": 2, "state": "complete",
//    "files": [{"path": "inputs/x.npy", "bytes": 1024, "inode": "1234", "sha256": "<64 hex digits>"}]}
//   {"trnsim_files": 2, "state": "writing",
//    "files": [{"path": "inputs/x.npy", "bytes": 1024, "sha256": "<64 hex digits>",
//               "temporary": "inputs/.x.npy.tmp.77.0", "backup": "inputs/.x.npy.old.77.1"}],
//    "previous": [{"path": ..., "bytes": ..., "inode": ..., "sha256": ...}], "written_by": "run"}
//   {"trnsim_files": 2, "state": "complete", "files": [...], "previous": [...]}
//   {"trnsim_files": 2, "state": "writing", "files": [...], "set": "77.1733363200123456789.0",
//    "others": [{"folder": "/home/u/b", "record": ".trnsim-journal",
//                "files": [{"path": "s.npy", "bytes": 96, "sha256": ..., "temporary": ..., "backup": ...}]}]}
//
// "files" is the set. In state "complete": the files the last run wrote, each identified by its size, inode
// and SHA-256 (a file is that run's output only while all three match: a file moved, copied or extracted
// there under the same name is not); inode numbers are decimal strings (some file systems use all 64 bits).
// In state "writing": the set being switched in, written before any of its files exists: each file's size and
// SHA-256, the temporary that will hold it and, when a file is there already, the backup (a hard link to
// it) that keeps the old one until the switch is done. "previous" (manifests only) is the set the switch
// replaces; "written_by" (optional) names the command writing it (a word or two of a-z, '-' and spaces). In
// state "complete", "previous" (when there) lists the earlier set's files the new set does not
// write again and that were still there when the set was switched in: the run removes them next and then
// drops the list, so a record that still has one marks a run killed before it had removed them (`trnsim
// stats` names those still there, and the next run into the folder removes them). A record left in state
// "writing" marks a switch that was killed: the files may be a mix of the old and the new set (a file is the
// new set's when its size and SHA-256 are the recorded ones). A set written into several folders (`trnsim
// quantize --data A/d.npy --scales B/s.npy`) has a record in each, and each names the whole set: "others"
// lists every other folder (absolute and normalised), the name of its record there and its files (as in
// "files"); "set" is the same identifier in all of them. The set is judged and rolled back as one from
// whichever record is found first (sim/io/output_files.h). Every path is relative to the folder holding the
// record: no "..", ".", empty or absolute components; a temporary and a backup lie in their file's folder and
// are named as trnsim names them (.NAME.tmp.PID.N, .NAME.old.PID.N). A manifest of an older trnsim (one
// relative path per line, no identities) reads as version 1: its files are never recognised as a run's
// output, so nothing is removed on its word.
// "trnsim_files" is the layout: a record is written with the lowest layout that holds it, so that older
// trnsims read what they can: 2, or 3 when it holds "written_by" (a trnsim that reads layout 2 only refuses
// such a record, nothing removed on its word: "written_by: unknown key" before written_by existed,
// "trnsim_files: expected 2 (the record's layout), found 3" after). Layout 2 records that hold
// "written_by" (written before layout 3 existed) read as layout 3. A key a layout does not define is an
// error, never skipped: a record steers removals, and a key this trnsim does not know may change what they
// are. The layout is read first: a layout above kRecordLayout is a newer trnsim's (NewerRecordError),
// whatever keys it holds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/error.h"

namespace trnsim::io {

inline constexpr const char* kManifestName = ".trnsim-files";
// The newest record layout this trnsim reads and writes (above).
inline constexpr int kRecordLayout = 3;

// A record of a newer trnsim (its layout above kRecordLayout): never rewritten or acted on, so that the
// trnsim that wrote it can still settle its set.
class NewerRecordError : public InputError {
 public:
  using InputError::InputError;
};
inline constexpr const char* kJournalName = ".trnsim-journal";
// A hard link to a run folder's complete manifest while a set replaces it (until the set's first rename): a
// signal puts it back (sim/io/output_files.h). A leftover (SIGKILL) is removed by the next run.
inline constexpr const char* kManifestBackupName = ".trnsim-files.old";
// The files trnsim wrote into a folder outside a run folder's set (quantize's outputs, a program run's
// without
// --out, a trace, an HTML report, tune --write): state "complete", "files" only (path, bytes, inode,
// SHA-256). Kept: it is what lets a later write replace those files without --overwrite
// (sim/io/replace_check.h). Updated under the folder's lock after each set written there; entries whose file
// is gone or changed size are dropped then. Never a reason to remove anything.
inline constexpr const char* kWrittenName = ".trnsim-written";
// The same record of one user's (DIR/.trnsim-written.UID), where DIR/.trnsim-written is another user's (a
// shared folder: /tmp, where the sticky bit keeps a user from replacing another's file): it lists only that
// user's files, and vouches only for files that user owns (sim/io/replace_check.h).
std::string written_name_of(unsigned uid);
// A user's journal (DIR/.trnsim-journal.UID) where DIR/.trnsim-journal is another user's: each user's killed
// set is theirs to settle, and another user's journal (or any file of theirs under that name) neither blocks
// this user's writes nor is read, changed or removed by them.
std::string journal_name_of(unsigned uid);
// The name this user's record `base` (kJournalName or kWrittenName) has in the folder open as `dir_fd`:
// BASE.UID when a file of this user's is there under that name, or when something of another user's is at
// BASE (a shared folder); BASE otherwise. `owner` (if given) gets the owner of what is at the name returned
// (this user's uid when nothing is there): another user's file under this user's per-user name, which a
// sticky folder keeps this user from replacing.
std::string own_record_name(int dir_fd, const char* base, unsigned* owner = nullptr);
// What to tell a user about removing the file `name` in the folder open as `dir_fd`: "remove it", or, when a
// sticky folder keeps them from it (the file is another user's, the folder not theirs), "its owner (uid N) or
// root can remove it (the folder's sticky bit keeps other users from it)".
std::string removal_advice(int dir_fd, const std::string& name);
// Whether `name` is the name of one of trnsim's records (above, a user's .trnsim-written.UID and
// .trnsim-journal.UID included).
bool is_record_name(const std::string& name);
// Whether `name` is a journal's: .trnsim-journal or .trnsim-journal.UID.
bool is_journal_name(const std::string& name);

struct ManifestEntry {
  std::string path = {};
  uint64_t bytes = 0;
  uint64_t inode = 0;       // 0: unknown (state "writing", a version-1 manifest)
  std::string sha256 = {};  // "": unknown (a version-1 manifest)
  // State "writing" only:
  std::string temporary = {};
  std::string backup = {};  // "": nothing was at `path`
  // A file of a folder trnsim keeps for itself (OutputFile::own: a sweep's rows), which no record of the
  // files trnsim wrote lists, also after a killed set is settled ("own": true).
  bool own = false;

  bool identified() const { return inode != 0 && !sha256.empty(); }
};

// The part of a set in another folder (state "writing" only).
struct OtherRecord {
  std::string folder;  // absolute, normalised
  std::string record;  // kManifestName or a journal's name (is_journal_name): the record of the set there
  std::vector<ManifestEntry> files;
};

struct Manifest {
  int version = 2;  // the layout read (1: an older trnsim's list of paths); written: the lowest that holds it
  bool complete = true;
  std::vector<ManifestEntry> files;
  std::vector<ManifestEntry> previous;
  // State "writing" only: the trnsim command writing the set ("run", "stats --html", "quantize"), named in
  // the note of the next trnsim that finds it killed; "" when not known (an earlier trnsim's record).
  std::string written_by = {};
  // State "writing" of a set in several folders only:
  std::string set = {};  // the set's identifier, the same in each folder's record
  std::vector<OtherRecord> others = {};
};

// InputError "<name>: <json path>: <what is wrong>"; NewerRecordError "<name>: written by a newer trnsim
// (record layout N; this trnsim reads layouts 1 to 3): ..." for a layout above kRecordLayout.
Manifest parse_manifest(const std::string& text, const std::string& name);
std::string manifest_text(const Manifest& m);

// The record `name` in the folder open as `dir_fd` (never through a symlink), nullopt when there is none.
// InputError "<shown>: ..." when something else than a regular file is there (a symlink, directory, FIFO or
// device: "<shown>: is a symlink; trnsim keeps its record of the files it wrote there (remove it)", with
// removal_advice's words) or it
// cannot be read or parsed.
// `owner` (if given) gets the file's owner (uid): a record another user wrote is not acted on.
std::optional<Manifest> read_manifest_at(int dir_fd, const std::string& name, const std::string& shown,
                                         unsigned* owner = nullptr);

// Whether `side` is a name trnsim gives a temporary (`kind` ".tmp.") or backup (".old.") of the file `name`
// in its folder: ".NAME<kind>PID.N", NAME cut short to fit 255 bytes. A record in state "writing" names
// nothing else (a damaged one naming a hidden file of the user's is refused: nothing is removed on its word).
bool side_name_of(const std::string& side, const std::string& name, const std::string& kind);

// Whether `rel` is a path a record may hold (see above).
bool valid_record_path(const std::string& rel);

}  // namespace trnsim::io
