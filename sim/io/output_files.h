// Writing a run's output files, with one policy for every output (.npy outputs, stats.json, dumped inputs,
// `trnsim quantize`, the trace):
//   - The regular files of one call (a set) are replaced all or nothing, also when the process is killed
//     (SIGKILL, the OOM killer) or the machine stops:
//       1. each folder written into is locked (io::DirLock: a second trnsim waits);
//       2. every file is written to a temporary next to its destination; a destination that exists gets a
//          backup (a hard link to it);
//       3. a record of the set (sim/io/manifest.h, state "writing": each file's temporary, backup, size,
//          inode and SHA-256) is written and synced: the run folder's manifest, or a journal
//          DIR/.trnsim-journal (this user's DIR/.trnsim-journal.UID where that one is another user's) in any
//          other folder; a set written into several folders has a record in each, and each names every file
//          of the set, in every folder ("others");
//       4. the temporaries are filled and synced (fsync), then renamed into place one after another, with
//          signals held back meanwhile, each destination checked again before each rename (a file edited,
//          replaced or put there meanwhile is kept, and the set rolled back: changed_meanwhile); the folders
//          are synced;
//       5. the backups are removed, the record says "complete" (a journal is removed); a run folder's record
//          still names the earlier set's files the new set does not write again ("previous") until they are
//          removed, then is written once more without them. A run folder's record that cannot be completed
//          (a full disk) leaves every file in place and the record in state "writing" (the next run keeps
//          the set): InputError "<DIR>/.trnsim-files: cannot write: <reason>: every file of the run is in
//          place, but the folder's record of them could not be completed ...".
//     A failure at any step (a full disk, a file limit, a rename refused: an immutable or bind-mounted
//     file) puts back the files already renamed from their backups and removes what it created: no
//     destination is changed. A handled signal (Ctrl-C, SIGTERM, SIGHUP, SIGXCPU, ...: sim/base/interrupt.h)
//     before the first rename removes what the set created and puts the folder's earlier record back (a
//     hard link to it, DIR/.trnsim-files.old, is kept until then); during the renames it waits until the
//     set is in place. A SIGKILL between 3 and 5 leaves the record in state "writing": `trnsim stats`
//     says so, and the next trnsim (of the same user, for a journal) that writes into the folder first rolls
//     the set back (every file whose
//     inode is the new one returns to its backup; a set whose every file was switched is kept) and removes
//     the leftovers. A set in several folders is judged and rolled back as one, in all its folders (their
//     locks taken meanwhile), from whichever of its records is found first: never kept in one folder and
//     rolled back in another. Files in another folder are changed only where that folder holds a record of
//     the same set (a record alone never makes trnsim change files elsewhere).
//   - No output is written through a symlink (nothing the user had is overwritten, and a file reached through
//     a link is outside every record): an output whose own name is a symlink, or, in a run folder, any
//     folder below it on the way (OUT/inputs -> ~/data), is refused before anything is written
//     (check_no_links). The run folder itself may be a symlink.
//   - A character device, FIFO or socket (/dev/null, /dev/stdout), or a symlink to one, is written through in
//     place, before any rename, so a failing device (/dev/full) leaves every regular destination untouched.
//     It is never replaced by a regular file.
//   - A directory in the way is an error; nothing the run did not create is ever removed, and nothing is
//     removed through a symlinked folder.
// Errors: InputError "<path>: cannot write: <reason>".
// For the crash tests (tests/cli/crash.sh): the environment variable TRNSIM_TEST_KILL_AT_WRITE_STEP=N makes
// the process kill itself (SIGKILL) at the N-th step of a set's writes above (1, 2, ...: each temporary and
// backup made, the record, each file filled, each rename, the folder synced, the record completed, each
// earlier file removed); unset, nothing happens. TRNSIM_TEST_KILL_AT_WRITE_STEP=rN acts inside the N-th
// write of a record (a run folder's manifest, a journal, .trnsim-written) of the process instead, once its
// temporary is written and before its rename: a SIGKILL there leaves the record's temporary
// (DIR/..trnsim-files.tmp.PID.N), which the next trnsim writing into the folder removes
// (remove_killed_temporaries). TRNSIM_TEST_KILL_SIGNAL=INT (TERM, HUP, any signal a run
// handles) sends that signal there instead (a Ctrl-C: before the renames the set is left for the next run to
// roll back, during them it waits); STOP sends SIGSTOP (the test moves the folder meanwhile, then sends
// SIGCONT). A bad value of the step or the signal is refused (InputError) by the first write of a set, and by
// a run when it opens its --out (tools/trnsim/out_dir.h).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/base/host_bytes.h"
#include "sim/base/interrupt.h"
#include "sim/io/dir_lock.h"
#include "sim/io/manifest.h"

namespace trnsim::io {

struct OutputFile {
  std::string path;
  std::vector<uint8_t> bytes;
  HostBytes tail = {};  // written after `bytes` (e.g. a tensor's data after its .npy header, uncopied)
  // The file lies in a folder trnsim keeps for itself and has checked as its own (a sweep's folder: its plan
  // and rows, which no one edits; not its results and report, which users annotate): replaced by name, not
  // recorded in DIR/.trnsim-written. Otherwise a file at `path` is replaced only as
  // sim/io/replace_check.h allows.
  bool own = false;
};

// A run's output folder (`trnsim run --out DIR`): the set written into it is recorded in its manifest
// (DIR/.trnsim-files, state "complete" once written), and the files of the set `previous` lists that this
// set does not write again are removed, each only when its size, inode and SHA-256 still match the record
// (a file moved, copied or extracted there under the same name stays) and never through a symlink, nor one
// of `keep` (what the run read, e.g. an earlier --dump-inputs).
struct RunFolder {
  std::string dir;
  Manifest previous;  // the manifest when the run started (open_run_folder), empty if none
  std::vector<std::string> keep;
};

// Writes `files` as one set (above). With `folder`, the set is the folder's new record and the earlier
// run's files it does not write again are removed: returns their paths. A file already at a destination is
// replaced only as sim/io/replace_check.h allows (recorded and unchanged, or --overwrite), checked before
// anything is written: InputError naming it and --overwrite otherwise. The files written outside a run
// folder's set (`folder`'s) are added to their folder's DIR/.trnsim-written (sim/io/manifest.h), unless
// `own`. `before_renames`, when given, is called once every temporary is filled and synced, before the first
// rename, with each regular file's path (as given), size, SHA-256 and inode (its temporary's, which the
// rename keeps): a caller that records the files elsewhere (rerecord_in_set) names them before they can be in
// place. What it throws stops the set, nothing changed.
using BeforeRenames = std::function<void(const std::vector<ManifestEntry>&)>;
std::vector<std::string> write_files_atomic(const std::vector<OutputFile>& files,
                                            const RunFolder* folder = nullptr,
                                            const BeforeRenames& before_renames = {});

// At the start of a run into `dir` (an existing folder whose lock this process holds): reads its manifest
// (InputError if something else than a regular file is there: a symlink, directory, FIFO or device), rolls
// back a switch a killed run left in state "writing" (above) and returns the folder's record of the files
// there, with notes for the user ("the earlier run into DIR was killed while replacing its files: ...").
// A manifest that cannot be parsed is noted and treated as none (nothing is removed on its word).
struct RunFolderState {
  Manifest manifest;
  std::vector<std::string> notes;
};
RunFolderState open_run_folder(const std::string& dir);

// What `trnsim stats` makes of the folder holding a stats.json: kComplete without a record or with one in
// state "complete"; for a record left in state "writing" (a killed run), whether every file of the set (in
// this folder and in every other folder the record names) is still the earlier set's, already the new
// set's, or a mix. Never changes anything. `detail` gets a description.
enum class FolderSetState { kComplete, kOldSet, kNewSet, kMixed };
FolderSetState inspect_run_folder(const std::string& dir, std::string* detail = nullptr);
// The files of the earlier set still in `dir` that its record says the last run was to remove (paths
// relative to `dir`): a run killed after its set was in place, before it had removed them (its record in
// state "complete" with a "previous" list, or in state "writing" with every new file in place). The next
// run into the folder removes them. Never changes anything.
std::vector<std::string> earlier_files_left(const std::string& dir);
// The same for the set holding `file` (a stats.json): its folder's record, or the record of a folder up to
// four levels above that names it (a chain's OUT/<stage>/stats.json is in the set recorded in
// OUT/.trnsim-files): then the enclosing set's files left in `file`'s folder, by their paths there, and
// `set_dir` (if given) gets the folder whose record it is.
std::vector<std::string> earlier_files_left_of(const std::string& file, std::string* set_dir = nullptr);
// The run folder's record (DIR/.trnsim-files) that names `file`: its folder's, or one up to four levels
// above (a chain's OUT/<stage>/stats.json), "" when none does. Never changes anything.
std::string record_naming(const std::string& file);
// After `written` was written outside a run by write_files_atomic (`trnsim stats --html` over a run's
// OUT/report.html): the record of the set holding its path (its folder's, or one up to four levels above
// naming it, as earlier_files_left_of finds it), when complete and this user's, names the bytes written
// (their size and SHA-256; the inode of the file now at the path), so the folder's record still describes
// the files trnsim wrote and the next run replaces or removes it as the run's own. An edit made to the file
// since (while the rename was under way, or after) is not taken for trnsim's: the next run refuses to
// replace it. Under that folder's lock; nothing when no record names it, unless `drawn_from` (the stats.json
// the report was drawn from) lies in the same folder and the record names it (also a chain's record above
// it: OUT/<stage>/stats.json): then the report joins the set (an entry is added), so the next run into the
// folder replaces or removes it with the set's other files.
// The phases: kComing, from write_files_atomic's before_renames (`coming_inode`: the temporary's inode),
// before the file can be at its path: the record names the coming file, and keeps the file there now (when
// it is one the record names: an earlier report) as "previous", so a kill at any point of the write leaves
// a record naming whichever of the two is at the path: the next run into the folder removes it with the
// earlier set (before, a kill after the rename left the new report beside later runs' stats.json, the
// record naming the earlier report's inode). kWritten once the file is in place; kFailed when the write
// failed (the record names the earlier file again, or no longer names the report).
enum class RecordPhase { kComing, kWritten, kFailed };
void rerecord_in_set(const OutputFile& written, const std::string& drawn_from = "",
                     RecordPhase phase = RecordPhase::kWritten, uint64_t coming_inode = 0);
// The SHA-256 of the bytes `f` writes (its bytes, then its tail), as records name them.
std::string sha256_of(const OutputFile& f);
// inspect_run_folder for the set holding `file`, found as earlier_files_left_of finds it.
FolderSetState inspect_set_of(const std::string& file, std::string* detail = nullptr);

// The trnsim command this process runs, as the records of the sets it writes name it ("run", "quantize",
// "stats --html"; "" until set): the next trnsim that finds such a set killed names it in its note.
void set_writer_command(const std::string& command);
std::string writer_command();

// A fresh temporary's name next to `path` (".NAME.tmp.PID.N", hidden, unique within this process; NAME cut
// short to keep it within 255 bytes).
std::string temp_path_for(const std::string& path);

// Where a write to `path` lands: its folder, open, and its name there. In a folder this process holds locked
// (a run's --out: sim/io/dir_lock.h) the folder is reached through the lock's handle, so a folder moved or
// renamed during the run still gets its files and nothing at its old path is touched; no level below the
// locked folder is followed through a symlink, and the last component may be a symlink only to a device,
// FIFO or socket. Elsewhere the path's symlinks are resolved (resolved_path) and refused as check_no_links
// says. InputError "<what> '<path>': cannot write: <reason>" (a missing folder, a symlink on the way, a
// directory at the path).
struct Destination {
  Fd dir;
  std::string name;      // the file's name in `dir`
  bool special = false;  // a device, FIFO or socket (through a last symlink too): written through in place
  bool held = false;     // `dir` was reached through a locked folder's handle
};
// `base`: as check_no_links's.
Destination destination_of(const std::string& path, const std::string& what = "output",
                           const std::string& base = "");

// A new temporary beside `name` in the folder open as `dir_fd`, open for writing: created exclusively (the
// next name is tried while one exists), locked (hold_temporary) until it is closed, with `name`'s permissions
// when it exists, and in `on_signal` (removed if a signal ends the process; `dir_fd` must stay open
// meanwhile) from before it exists. Named ".NAME.tmp.PID.N", or "<prefix>PID.N" with a `prefix`
// (kTraceTempPrefix). `shown` names the destination in messages: InputError "<shown>: cannot write:
// <reason>". Close it only once it is renamed or removed: its lock is what tells a live writer's from a
// killed one's.
struct TempFile {
  std::FILE* file;
  std::string name;  // in `dir_fd`
};
TempFile create_temp_in(int dir_fd, const std::string& name, const std::string& shown,
                        std::vector<interrupt::CleanupPath>& on_signal, const std::string& prefix = "");

// A trace's temporary (sim/trace/output_file.h): ".trnsim-trace.PID.N", a name of trnsim's own (never an
// output's: check_not_a_record), so that the next trnsim in the folder can tell a killed run's unfinished
// trace from a file of the user's (remove_killed_temporaries).
inline constexpr const char* kTraceTempPrefix = ".trnsim-trace.";

// Whether `head` (a file's first bytes, up to 64) is how trnsim's trace writers start a file: the Chrome
// JSON writer's '{"displayTimeUnit":"ns","traceEvents":[', or a Perfetto TracePacket (field 1, a length,
// then its timestamp or sequence id field: sim/trace/perfetto_writer.cpp).
bool is_trace_head(std::string_view head);

// Takes an exclusive flock on the temporary or probe just created as `fd`, held until it is closed: a
// cleanup (remove_killed_temporaries) removes only such a file whose lock it can take, so a live writer's is
// never removed, also one in another PID namespace (a container sharing the folder), whose PID is no process
// here. False when the file was removed between its creation and the lock (a cleanup took it for a killed
// writer's): create another. On a file system without flock, true (the cleanup then judges by PID alone).
bool hold_temporary(int fd);

// Removes from the folder open as `dir_fd`, which this process holds locked, what a killed trnsim left there
// outside every record: its records' temporaries (".<record>.tmp.PID.N" of .trnsim-files, .trnsim-journal,
// .trnsim-written and this user's .trnsim-written.UID), its probes (".trnsim-probe.PID.N") and its traces'
// temporaries (".trnsim-trace.PID.N", a SIGKILL while the trace was written or waited for the folder's
// lock). Each only when it has exactly such a name, is a regular file of this user's, no process holds its
// flock (its writer holds it while it lives: hold_temporary) and its PID is no live process, or is this
// process's (a container's runs share a PID) while none of its own record writes is under way (a trace's:
// only when its flock could be taken), and holds what trnsim puts there (looks_like_trnsims_leftover: a
// record, removed silently; a trace, removed with a note naming the killed pid; or nothing, removed with a
// note, as an empty file could be a user's); any other file at such a name is a user's: left, with a note
// (once per path).
// Called by open_run_folder, by write_files_atomic for each folder it locks, and by a trace's close for its
// folder.
void remove_killed_temporaries(int dir_fd);

// What trnsim leaves at one of its temporaries' names.
enum class Leftover {
  kProbe,   // nothing: a probe, a record killed before its first byte
  kRecord,  // that, or a record (a JSON object whose first key is "files": .trnsim-files, .trnsim-journal,
            // .trnsim-written)
  kTrace,   // nothing, or the start of a trace (is_trace_head)
};
// Whether the file `name` in the folder `dir_fd` holds what trnsim leaves at a name of that kind. Never
// through a symlink.
bool looks_like_trnsims_leftover(int dir_fd, const std::string& name, Leftover kind);

// True for a character or block device, FIFO or socket at `path` (after symlinks): written through in place.
bool is_special_file(const std::string& path);

// Whether the file `path` lies in `folder` (the folder's path, "" for "."): its parent folder is `folder` by
// device and inode, also under another name of it (a symlink to it, F/../F, a bind mount). False when either
// cannot be reached.
bool lies_in_folder(const std::string& path, const std::string& folder);

// Where a write to `path` lands: the final target of a symlink chain (a dangling one too), made absolute and
// normalised (the path itself when it does not exist). InputError for a symlink loop.
std::string resolved_path(const std::string& path);

// One output or input of a run, for distinct_files.
struct NamedPath {
  std::string path;
  std::string what;  // e.g. "--trace", "output 'y'", "input 'x' (inputs.x.npy)"
  bool is_input = false;
};
// InputError if two of `paths` land on the same file (after symlinks; hard links of existing files too; the
// same name in one folder reached under two names, a bind mount, compared by the folders' device and inode,
// also before the file exists) and one of them is an output: "<what A> and <what B> are the same file
// (<path>)", "(<path A> and <path B>: one folder under two names, ...)", or "(<path A> and <path B>: hard
// links to one file)". Character devices may be
// shared (two outputs to /dev/null). Also InputError when an output's name is one of trnsim's records
// (.trnsim-files, .trnsim-journal, .trnsim-written[.UID]: check_not_a_record).
void check_distinct_files(const std::vector<NamedPath>& paths);

// InputError "<what> '<path>': cannot write: .trnsim-files is the name of trnsim's record ..." when `path`'s
// file name is a record's (sim/io/manifest.h): an output there would replace the record or be replaced by it;
// "... is a name trnsim gives its own temporary files ..." for "..trnsim-*" and ".trnsim-probe.*" (removed
// as a killed writer's leftovers).
void check_not_a_record(const std::string& path, const std::string& what);

// InputError "<what> '<path>': cannot write: it is one of the files a run wrote into DIR ..." when `path`
// (after symlinks) is named by the manifest of its folder or of a folder above it: a file written
// outside a run (`trnsim stats --html`) never replaces a member of a run's recorded set, except, with
// `report_of` (the stats.json a report is drawn from), the set's HTML report (a .html member, e.g. OUT/
// report.html of `trnsim run --report`) when `report_of` is a member of the same set: the run's own report
// drawn again (then replaced only as sim/io/replace_check.h allows; rerecord_in_set updates the record).
void check_not_recorded(const std::string& path, const std::string& what, const std::string& report_of = "");

// InputError "<what> '<path>': cannot write: <link> is a symlink (to <target>): trnsim does not write through
// links ..." when `path`'s last component is a symlink, or, when `path` lies below the folder `base` (a run's
// --out, itself allowed to be a symlink), any component below `base`. A last component that is a symlink to
// a character device, FIFO or socket (OUT/stats.json -> /dev/null) is allowed: written through in place.
// Runs call it before they simulate, quantize before it computes; write_files_atomic and the trace writer
// check again.
void check_no_links(const std::string& path, const std::string& what, const std::string& base = "");
// The same for each output of `paths` (inputs are skipped), `out_dir` as `base`.
void check_no_links(const std::vector<NamedPath>& paths, const std::string& out_dir);

// InputError "<what> '<path>': cannot write: it is a directory" when an output's path names a directory
// (after symlinks): for a run that wants it reported before it simulates, not after. Inputs are skipped.
void check_not_directories(const std::vector<NamedPath>& paths);

namespace testing {
// Called after every step of a set's writes with its number (as TRNSIM_TEST_KILL_AT_WRITE_STEP counts them),
// for unit tests that act between two steps; nullptr: none.
void set_write_step_hook(std::function<void(long step)> hook);
// TRNSIM_TEST_KILL_AT_WRITE_STEP's step, 0 when unset. InputError when it is set to anything but a whole
// number from 1 (`abc`, `-1`, `0`): a command that writes refuses to, rather than ignore it.
long kill_at_write_step();
// N for TRNSIM_TEST_KILL_AT_WRITE_STEP=rN (the record write to stop in), 0 otherwise; InputError as above.
long kill_in_record_write();
// TRNSIM_TEST_KILL_SIGNAL's signal: SIGKILL when unset; KILL, STOP or a signal a run handles
// (interrupt::handled_signals: INT, TERM, HUP, ...), with or without SIG. InputError naming the variable
// otherwise (a number, FOO); kill_at_write_step checks it too.
int kill_signal();
}  // namespace testing

}  // namespace trnsim::io
