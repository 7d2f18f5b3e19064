// Output sets (sim/io/output_files.h): the manifest's format, all-or-nothing replacement when a rename fails
// midway or the process is killed at any step, recovery by the next run, removal by identity only, and the
// folder lock.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/error.h"
#include "sim/io/content_hash.h"
#include "sim/io/dir_lock.h"
#include "sim/io/manifest.h"
#include "sim/io/output_files.h"
#include "sim/io/replace_check.h"
#include "tests/unit/numerics/allow_overwrite.h"
#include "tests/unit/numerics/temp_dir.h"

using namespace trnsim;
using namespace trnsim::io;
namespace fs = std::filesystem;

namespace {

struct TempDir : trnsim::test_util::TempDir {
  TempDir() : trnsim::test_util::TempDir("trnsim_test_set_") {}
};

void write_raw(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string read_raw(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

OutputFile file(const std::string& path, const std::string& text) {
  return {path, std::vector<uint8_t>(text.begin(), text.end())};
}

// Every name under `dir` (recursively, relative), hidden ones too.
std::vector<std::string> names(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    out.push_back(fs::relative(e.path(), dir).string());
  std::sort(out.begin(), out.end());
  return out;
}

// The leftovers a switch must not leave: temporaries, backups, journals.
bool has_leftovers(const fs::path& dir) {
  for (const std::string& n : names(dir))
    if (n.find(".tmp.") != std::string::npos || n.find(".old.") != std::string::npos ||
        n.find(kJournalName) != std::string::npos)
      return true;
  return false;
}

}  // namespace

TEST_CASE("manifest: written and read back; paths and identities checked", "[output_set]") {
  Manifest m;
  m.complete = false;
  m.files.push_back(
      {"stats.json", 12, 0, std::string(64, 'a'), ".stats.json.tmp.1.0", ".stats.json.old.1.1"});
  m.files.push_back({"inputs/x.npy", 3, 0, std::string(64, 'b'), "inputs/.x.npy.tmp.1.2"});
  m.previous.push_back({"y.npy", 5, 18446744073709551615ull, std::string(64, 'c')});
  const Manifest r = parse_manifest(manifest_text(m), "M");
  REQUIRE(r.files.size() == 2);
  CHECK(!r.complete);
  CHECK(r.files[0].backup == ".stats.json.old.1.1");
  CHECK(r.files[1].backup.empty());
  CHECK(r.previous.at(0).inode == 18446744073709551615ull);  // all 64 bits (overlayfs)
  CHECK(r.previous.at(0).path == "y.npy");
  CHECK(manifest_text(r) == manifest_text(m));

  const auto bad = [](const std::string& files) {
    return "{\"trnsim_files\": 2, \"state\": \"complete\", \"files\": [" + files + "]}";
  };
  const std::string sha = "\"sha256\": \"" + std::string(64, 'a') + "\"";
  CHECK_THROWS_WITH(
      parse_manifest(bad("{\"path\": \"../x\", \"bytes\": 1, \"inode\": \"2\", " + sha + "}"), "M"),
      "M: files[0].path: '../x' is not a path inside the folder (relative, without '..' or '.')");
  CHECK_THROWS_WITH(
      parse_manifest(bad("{\"path\": \"/etc/passwd\", \"bytes\": 1, \"inode\": \"2\", " + sha + "}"), "M"),
      Catch::Contains("is not a path inside the folder"));
  CHECK_THROWS_WITH(
      parse_manifest(bad("{\"path\": \"a\", \"bytes\": 1, \"inode\": \"0\", " + sha + "}"), "M"),
      Catch::StartsWith("M: files[0].inode: expected a nonzero inode number"));
  CHECK_THROWS_WITH(
      parse_manifest(bad("{\"path\": \"a\", \"bytes\": 1, \"inode\": \"2\", \"sha256\": \"x\"}"), "M"),
      Catch::StartsWith("M: files[0].sha256: expected 64 lowercase hex digits"));
  const std::string one = "{\"path\": \"a\", \"bytes\": 1, \"inode\": \"2\", " + sha + "}";
  CHECK_THROWS_WITH(parse_manifest(bad(one + ", " + one), "M"), "M: files[1].path: 'a' is listed twice");
  // A temporary elsewhere than beside its file is refused (a record must not steer removals).
  const std::string w =
      "{\"trnsim_files\": 2, \"state\": \"writing\", \"files\": [{\"path\": \"a\", \"bytes\": 1, " + sha +
      ", \"temporary\": \"sub/.a.tmp\"}]}";
  CHECK_THROWS_WITH(parse_manifest(w, "M"),
                    Catch::Contains("is not a name trnsim gives a temporary beside 'a'"));
  // A damaged record naming a hidden file of the user's as a temporary or backup is refused: the rollback
  // would remove that file, or rename it over the output.
  const auto writing = [&](const std::string& side) {
    return "{\"trnsim_files\": 2, \"state\": \"writing\", \"files\": [{\"path\": \"a\", \"bytes\": 1, " +
           sha + ", " + side + "}]}";
  };
  CHECK_THROWS_WITH(
      parse_manifest(writing("\"temporary\": \".bashrc\""), "M"),
      "M: files[0]: '.bashrc' is not a name trnsim gives a temporary beside 'a' (.NAME.tmp.PID.N)");
  CHECK_THROWS_WITH(
      parse_manifest(writing("\"temporary\": \".a.tmp.1.0\", \"backup\": \".a.keep\""), "M"),
      "M: files[0]: '.a.keep' is not a name trnsim gives a backup beside 'a' (.NAME.old.PID.N)");
  CHECK_THROWS_WITH(parse_manifest(writing("\"temporary\": \".b.tmp.1.0\""), "M"),
                    Catch::Contains("'.b.tmp.1.0' is not a name trnsim gives a temporary"));
  CHECK_THROWS_WITH(parse_manifest(writing("\"temporary\": \".a.old.1.0\""), "M"),
                    Catch::Contains("is not a name trnsim gives a temporary"));
  CHECK(parse_manifest(writing("\"temporary\": \".a.tmp.77.0\", \"backup\": \".a.old.77.1\""), "M")
            .files[0]
            .backup == ".a.old.77.1");
  // An older trnsim's manifest: paths only, never identified.
  const Manifest v1 = parse_manifest("stats.json\ninputs/x.npy\n", "M");
  CHECK(v1.version == 1);
  REQUIRE(v1.files.size() == 2);
  CHECK(!v1.files[1].identified());
  CHECK_THROWS_WITH(parse_manifest("../up\n", "M"), "M: '../up' is not a path inside the folder");
}

TEST_CASE("record layouts: each trnsim reads the older ones and names a newer one", "[output_set]") {
  const std::string sha = std::string(64, 'a');
  // A killed set's record by hand: layout, then the keys after "files" (written_by, others).
  const auto writing = [&](const std::string& layout, const std::string& more) {
    return "{\"trnsim_files\": " + layout + ", \"state\": \"writing\", \"files\": [{\"path\": \"a\", " +
           "\"bytes\": 1, \"sha256\": \"" + sha + "\", \"temporary\": \".a.tmp.7.0\"}]" + more + "}";
  };
  // Layout 2 with written_by (the trnsims between written_by and layout 3 wrote it so), and layout 3.
  for (const char* layout : {"2", "3"}) {
    const Manifest m = parse_manifest(writing(layout, ", \"written_by\": \"stats --html\""), "M");
    CHECK(m.version == std::stoi(layout));
    CHECK(m.written_by == "stats --html");
  }
  CHECK(parse_manifest(writing("2", ""), "M").written_by.empty());
  // Written with the lowest layout that holds it: 3 only with written_by, so that a trnsim reading layout 2
  // only still reads every other record.
  Manifest w = parse_manifest(writing("2", ""), "M");
  CHECK(manifest_text(w).rfind("{\n \"files\": [", 0) == 0);  // a record temporary is known by its first key
  const std::string two = manifest_text(w);
  CHECK(two.substr(two.find("\"trnsim_files\"")) == "\"trnsim_files\": 2\n}\n");
  w.written_by = "run";
  const std::string three = manifest_text(w);
  CHECK(three.substr(three.find("\"trnsim_files\"")) ==
        "\"trnsim_files\": 3,\n \"written_by\": \"run\"\n}\n");
  CHECK(parse_manifest(manifest_text(w), "M").written_by == "run");
  Manifest done;
  done.files.push_back({"a", 1, 2, sha});
  done.written_by = "run";  // not kept in state "complete"
  CHECK(manifest_text(done) ==
        "{\n \"files\": [\n  {\n   \"bytes\": 1,\n   \"inode\": \"2\",\n   \"path\": \"a\",\n" +
            std::string("   \"sha256\": \"") + sha +
            "\"\n  }\n ],\n \"state\": \"complete\",\n \"trnsim_files\": 2\n}\n");
  // A newer trnsim's record: named so, before any key this trnsim does not know, and never acted on.
  CHECK_THROWS_MATCHES(
      parse_manifest(writing("4", ", \"written_by\": \"run\", \"fsync_mode\": \"full\""), "D/.trnsim-files"),
      NewerRecordError,
      Catch::Message(
          "D/.trnsim-files: written by a newer trnsim (record layout 4; this trnsim reads layouts 1 "
          "to 3): it is kept as it is; write into this folder with that trnsim, which settles its "
          "set, or remove the record (the files it names then stay as they are)"));
  CHECK_THROWS_WITH(parse_manifest(writing("1", ""), "M"),
                    "M: trnsim_files: expected 2 or 3 (the record's layout), found 1");
  CHECK_THROWS_WITH(parse_manifest(writing("\"3\"", ""), "M"),
                    "M: trnsim_files: expected 2 or 3 (the record's layout), found \"3\"");
  CHECK_THROWS_WITH(parse_manifest(writing("3", ", \"fsync_mode\": \"full\""), "M"),
                    "M: fsync_mode: unknown key");
}

TEST_CASE("a set in several folders is written whole and leaves nothing else", "[output_set]") {
  TempDir t;
  fs::create_directory(t.dir / "sub");
  write_raw(t / "a", "old a");
  // "a" is not one trnsim wrote: replaced here on purpose (--overwrite).
  const test_util::AllowOverwrite overwrite;
  write_files_atomic({file(t / "a", "new a"), file(t / "b", "new b"), file(t / "sub/c", "new c")});
  CHECK(read_raw(t / "a") == "new a");
  CHECK(read_raw(t / "sub/c") == "new c");
  // Each folder's record of what trnsim wrote there stays (sim/io/manifest.h).
  CHECK(names(t.dir) ==
        std::vector<std::string>{".trnsim-written", "a", "b", "sub", "sub/.trnsim-written", "sub/c"});
}

TEST_CASE("a rename that fails midway puts every file back", "[output_set]") {
  TempDir t;
  write_raw(t / "a", "old a");
  write_raw(t / "b", "old b");
  write_raw(t / "c", "old c");
  const test_util::AllowOverwrite overwrite;  // the files are not ones trnsim wrote
  // After a is in place, b becomes a directory: its rename fails (EISDIR).
  bool acted = false;
  testing::set_write_step_hook([&](long) {
    if (!acted && read_raw(t / "a") == "new a") {
      acted = true;
      fs::remove(t / "b");
      fs::create_directory(t / "b");
    }
  });
  CHECK_THROWS_WITH(
      write_files_atomic({file(t / "a", "new a"), file(t / "b", "new b"), file(t / "c", "new c")}),
      t / "b" + ": cannot write: Is a directory");
  testing::set_write_step_hook(nullptr);
  CHECK(acted);
  CHECK(read_raw(t / "a") == "old a");
  CHECK(read_raw(t / "c") == "old c");
  CHECK(names(t.dir) == std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("a run folder killed at any step is whole again after the next run opens it", "[output_set]") {
  TempDir t;
  const std::string dir = t / "out";
  const auto set = [&](const std::string& v) {
    return std::vector<OutputFile>{file(dir + "/stats.json", "stats " + v), file(dir + "/x.npy", "x " + v),
                                   file(dir + "/inputs/y.npy", "y " + v)};
  };
  const auto which = [&]() -> std::string {
    const std::string s = read_raw(dir + "/stats.json"), x = read_raw(dir + "/x.npy"),
                      y = read_raw(dir + "/inputs/y.npy");
    if (s == "stats A" && x == "x A" && y == "y A") return "A";
    if (s == "stats B" && x == "x B" && y == "y B") return "B";
    return "mixed";
  };
  int killed = 0;
  for (long n = 1; n < 100; ++n) {
    fs::remove_all(dir);
    fs::create_directories(dir + "/inputs");
    {
      const RunFolder first{dir, open_run_folder(dir).manifest, {}};
      write_files_atomic(set("A"), &first);
    }
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      testing::set_write_step_hook([n](long step) {
        if (step == n) ::raise(SIGKILL);
      });
      const RunFolder second{dir, open_run_folder(dir).manifest, {}};
      write_files_atomic(set("B"), &second);
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFEXITED(status)) {  // fewer steps than n: all were tried
      CHECK(WEXITSTATUS(status) == 0);
      CHECK(which() == "B");
      break;
    }
    ++killed;
    INFO("killed at step " << n);
    REQUIRE(WIFSIGNALED(status));
    const std::string state = which();
    const FolderSetState seen = inspect_run_folder(dir);
    if (state == "mixed")
      CHECK(seen == FolderSetState::kMixed);
    else
      CHECK(seen != FolderSetState::kMixed);
    const RunFolderState s = open_run_folder(dir);  // what the next run does first
    CHECK(which() != "mixed");
    CHECK_FALSE(has_leftovers(dir));
    CHECK(inspect_run_folder(dir) == FolderSetState::kComplete);
    CHECK(s.manifest.complete);
    if (state == "mixed") CHECK_FALSE(s.notes.empty());
  }
  CHECK(killed >= 8);
}

TEST_CASE("an earlier run's file is removed only while it is still that file", "[output_set]") {
  TempDir t;
  const std::string dir = t / "out";
  fs::create_directories(dir + "/inputs");
  {
    const RunFolder f{dir, open_run_folder(dir).manifest, {}};
    write_files_atomic({file(dir + "/stats.json", "s1"), file(dir + "/kept_by_user", "mine now"),
                        file(dir + "/changed", "ours"), file(dir + "/gone", "ours too"),
                        file(dir + "/inputs/through_link", "ours, moved")},
                       &f);
  }
  // The user: replaces a file by their own (same bytes, another inode), changes one in place, moves the
  // inputs folder away and links it back.
  write_raw(t / "elsewhere", "mine now");
  fs::rename(t / "elsewhere", dir + "/kept_by_user");
  {
    std::fstream f(dir + "/changed", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f << "OURS";
  }
  fs::rename(dir + "/inputs", t / "data");
  fs::create_directory_symlink(t / "data", dir + "/inputs");
  const RunFolder f{dir, open_run_folder(dir).manifest, {}};
  const std::vector<std::string> removed = write_files_atomic({file(dir + "/stats.json", "s2")}, &f);
  CHECK(removed == std::vector<std::string>{dir + "/gone"});
  CHECK(read_raw(dir + "/kept_by_user") == "mine now");
  CHECK(read_raw(dir + "/changed") == "OURS");
  CHECK(read_raw(t / "data/through_link") == "ours, moved");
}

TEST_CASE("a folder's lock: shared within a process, busy for another", "[output_set]") {
  TempDir t;
  // Another process: util-linux's flock(1), which exits 1 at once when the folder is locked (-n -E 1).
  const std::string other = "flock -n -E 1 '" + t.dir.string() + "' true";
  DirLock a, b;
  REQUIRE(a.try_lock(t.dir.string()) == DirLock::Result::kLocked);
  CHECK(b.try_lock(t.dir.string()) == DirLock::Result::kLocked);  // this process holds it already
  CHECK(WEXITSTATUS(std::system(other.c_str())) == 1);
  a.unlock();
  CHECK(WEXITSTATUS(std::system(other.c_str())) == 1);  // b still holds it
  b.unlock();
  CHECK(WEXITSTATUS(std::system(other.c_str())) == 0);
}

TEST_CASE("SHA-256 as sha256sum prints it", "[output_set]") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("a record that cannot be written leaves the run folder's record as it was", "[output_set]") {
  // A set in a run folder and another folder: the run folder's record says "writing", then the other
  // folder's journal cannot be written (here: the folder is gone; a full disk, ENOSPC, does the same). The
  // failure is handled: the run folder's record is "complete" again, nothing says a run was killed.
  TempDir t;
  const std::string dir = t / "out", other = t / "other";
  fs::create_directories(dir);
  fs::create_directories(other);
  {
    const RunFolder first{dir, open_run_folder(dir).manifest, {}};
    write_files_atomic({file(dir + "/stats.json", "stats A")}, &first);
  }
  bool acted = false;
  testing::set_write_step_hook([&](long step) {
    if (step == 1) {
      acted = true;
      fs::remove_all(other);
    }
  });
  const RunFolder second{dir, open_run_folder(dir).manifest, {}};
  CHECK_THROWS_WITH(
      write_files_atomic({file(dir + "/stats.json", "stats B"), file(other + "/report.html", "page")},
                         &second),
      Catch::Contains("cannot write"));
  testing::set_write_step_hook(nullptr);
  CHECK(acted);
  CHECK(read_raw(dir + "/stats.json") == "stats A");
  CHECK_FALSE(has_leftovers(dir));
  CHECK(inspect_run_folder(dir) == FolderSetState::kComplete);
  const RunFolderState s = open_run_folder(dir);
  CHECK(s.manifest.complete);
  CHECK(s.notes.empty());
  REQUIRE(s.manifest.files.size() == 1);
  CHECK(s.manifest.files[0].path == "stats.json");
}

TEST_CASE("a locked run folder moved during the writes gets its files where it is now", "[output_set]") {
  // A run holds its folder's lock from its start (tools/trnsim/out_dir.h). The folder is renamed and its old
  // name made a symlink to another folder while the set is written: every file, the record, the temporaries
  // and the removal of the earlier run's files happen in the moved folder; the other folder is untouched.
  TempDir t;
  const std::string dir = t / "out", moved = t / "moved", other = t / "other";
  fs::create_directories(dir + "/inputs");
  fs::create_directories(other + "/inputs");
  write_raw(other + "/host.json", "victim");
  write_raw(other + "/old.npy", "victim's old.npy");
  DirLock lock;
  REQUIRE(lock.try_lock(dir) == DirLock::Result::kLocked);
  {
    const RunFolder first{dir, open_run_folder(dir).manifest, {}};
    write_files_atomic({file(dir + "/stats.json", "stats A"), file(dir + "/host.json", "host A"),
                        file(dir + "/old.npy", "old A")},
                       &first);
  }
  const RunFolder second{dir, open_run_folder(dir).manifest, {}};
  bool acted = false;
  testing::set_write_step_hook([&](long step) {
    if (step == 1) {
      acted = true;
      fs::rename(dir, moved);
      fs::create_directory_symlink(other, dir);
    }
  });
  const std::vector<std::string> removed =
      write_files_atomic({file(dir + "/stats.json", "stats B"), file(dir + "/host.json", "host B"),
                          file(dir + "/inputs/x.npy", "x B")},
                         &second);
  testing::set_write_step_hook(nullptr);
  REQUIRE(acted);
  CHECK(removed == std::vector<std::string>{dir + "/old.npy"});
  CHECK(read_raw(moved + "/stats.json") == "stats B");
  CHECK(read_raw(moved + "/host.json") == "host B");
  CHECK(read_raw(moved + "/inputs/x.npy") == "x B");
  CHECK_FALSE(fs::exists(moved + "/old.npy"));
  CHECK_FALSE(has_leftovers(moved));
  CHECK(inspect_run_folder(moved) == FolderSetState::kComplete);
  CHECK(names(other) == std::vector<std::string>{"host.json", "inputs", "old.npy"});
  CHECK(read_raw(other + "/host.json") == "victim");
  CHECK(read_raw(other + "/old.npy") == "victim's old.npy");
}

TEST_CASE("a journal that is not JSON is reported and kept", "[output_set]") {
  // trnsim's journals were always JSON: a plain word there is someone else's file, never read as a record
  // and removed.
  TempDir t;
  write_raw(t / kJournalName, "hello\n");
  CHECK_THROWS_WITH(write_files_atomic({file(t / "x.npy", "x")}),
                    Catch::Contains(".trnsim-journal: not JSON, so not a journal trnsim wrote") &&
                        Catch::Contains("it is kept as it is: look at it, then remove or rename it"));
  CHECK(read_raw(t / kJournalName) == "hello\n");
  CHECK_FALSE(fs::exists(t / "x.npy"));
}

TEST_CASE("a file is replaced only when a record lists it unchanged, or with --overwrite", "[output_set]") {
  TempDir t;
  const std::string dir = t / "out";
  fs::create_directories(dir);
  // The user's own file: refused, named, nothing written.
  write_raw(dir + "/stats.json", "mine");
  const RunFolder first{dir, open_run_folder(dir).manifest, {}};
  CHECK_THROWS_WITH(
      write_files_atomic({file(dir + "/x.npy", "x A"), file(dir + "/stats.json", "stats A")}, &first),
      "output '" + dir +
          "/stats.json': cannot write: a file is there that trnsim will not replace: no trnsim "
          "record lists it (trnsim replaces only the files it wrote there itself, unchanged); "
          "pass --overwrite (trnsim.nki.benchmark: overwrite=True) to replace it, or choose another path");
  CHECK(read_raw(dir + "/stats.json") == "mine");
  CHECK_FALSE(fs::exists(dir + "/x.npy"));
  CHECK_FALSE(fs::exists(dir + "/.trnsim-files"));
  {
    const test_util::AllowOverwrite overwrite;
    write_files_atomic({file(dir + "/x.npy", "x A"), file(dir + "/stats.json", "stats A")}, &first);
  }
  // A rerun: the record lists both, unchanged.
  const RunFolder second{dir, open_run_folder(dir).manifest, {}};
  write_files_atomic({file(dir + "/x.npy", "x B"), file(dir + "/stats.json", "stats B")}, &second);
  CHECK(read_raw(dir + "/x.npy") == "x B");
  // Edited since: the same size with other bytes, or another size.
  write_raw(dir + "/x.npy", "x C");
  {
    const Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    CHECK(replace_refusal_at(d.get(), "x.npy", dir + "/x.npy") ==
          "it changed since the run that wrote it (" + dir + "/.trnsim-files lists it with another SHA-256)");
  }
  const RunFolder third{dir, open_run_folder(dir).manifest, {}};
  CHECK_THROWS_WITH(write_files_atomic({file(dir + "/x.npy", "x D")}, &third),
                    Catch::Contains("it changed since the run that wrote it (" + dir +
                                    "/.trnsim-files lists it with another SHA-256)") &&
                        Catch::Contains("pass --overwrite"));
  write_raw(dir + "/x.npy", "x CC");
  CHECK_THROWS_WITH(check_may_replace(dir + "/x.npy", "output"),
                    Catch::Contains("lists it with 3 bytes, it has 4 now"));
  CHECK(read_raw(dir + "/x.npy") == "x CC");
  // A copy with new inodes, the same bytes, is still the run's.
  write_raw(t / "stats.copy", "stats B");
  fs::rename(t / "stats.copy", dir + "/stats.json");
  CHECK_NOTHROW(check_may_replace(dir + "/stats.json", "output"));
  // Outside a run folder: DIR/.trnsim-written records what was written, and lets a second write replace it.
  const std::string q = t / "q";
  fs::create_directories(q);
  write_files_atomic({file(q + "/d.npy", "d 1"), file(q + "/s.npy", "s 1")});
  write_files_atomic({file(q + "/d.npy", "d 22")});
  const Fd qd(::open(q.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  const std::optional<Manifest> w = read_manifest_at(qd.get(), kWrittenName, q + "/" + kWrittenName);
  REQUIRE(w);
  REQUIRE(w->files.size() == 2);
  CHECK(w->files[0].path == "s.npy");
  CHECK(w->files[1].path == "d.npy");
  CHECK(w->files[1].bytes == 4);
  CHECK(w->files[1].sha256 == sha256_hex("d 22"));
  // An older trnsim's manifest (paths only) is taken at its word.
  const std::string v1 = t / "v1";
  fs::create_directories(v1);
  write_raw(v1 + "/stats.json", "anything");
  write_raw(v1 + "/.trnsim-files", "stats.json\n");
  CHECK_NOTHROW(check_may_replace(v1 + "/stats.json", "output"));
}
