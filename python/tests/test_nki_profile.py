"""nki.profile (NKI's decorator that profiles a kernel on a device, saving NEFF and NTFF into
working_directory): trnsim runs the kernel and writes its Perfetto trace and stats.json there, with NKI's
argument names and rules (main: NkiUnsupported, tester23h)."""

import json
import os
import tempfile
import warnings

import numpy as np

from runner import line_of, main, raises

import trnsim.nki  # noqa: F401  (the nki module names)

import nki
import nki.language as nl

X = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)


def _add(a, b):
    c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(c, nl.load(a) + nl.load(b))
    return c


def test_profile_writes_the_trace_and_stats_into_working_directory():
    d = os.path.join(tempfile.mkdtemp(), "profiles")  # made if missing
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        k = nki.profile(working_directory=d, save_neff_name="file.neff")(_add)  # MARK-neff
    assert [str(m.message) for m in w] == [
        "nki.profile: save_neff_name='file.neff': no NEFF written: trnsim compiles no NEFF (the kernel is traced "
        "into the simulator's program)"], [str(m.message) for m in w]
    assert w[0].filename == __file__ and w[0].lineno == line_of(__file__, "MARK-neff")
    out = k(X, X)
    assert np.array_equal(out, X + X)
    # NKI's default save_trace_name, profile.ntff, is written as profile.pftrace (trnsim writes Perfetto).
    assert {"profile.pftrace", "stats.json"} <= set(os.listdir(d)), os.listdir(d)
    with open(os.path.join(d, "stats.json")) as f:
        stats = json.load(f)
    r = trnsim.nki.benchmark(nki.jit(_add), X, X)
    assert stats["total_time_ns"] == r.latency_ns and stats["nki_profile"] == {"profile_nth": 1,
                                                                             "trace": "profile.pftrace"}
    with open(os.path.join(d, "profile.pftrace"), "rb") as f:
        assert len(f.read()) > 100
    # stats.json's mode follows the umask as the trace's does (it was mkstemp's 0600: tester23i).
    modes = [os.stat(os.path.join(d, f)).st_mode & 0o777 for f in ("stats.json", "profile.pftrace")]
    assert modes[0] == modes[1], modes
    # NKI's overwrite=False (the default) keeps an earlier profile; overwrite=True replaces it.
    e = raises(FileExistsError, k, X, X)
    assert "stats.json exists: pass overwrite=True" in str(e), e
    again = nki.profile(working_directory=d, overwrite=True, save_trace_name="t.json")(_add)
    assert np.array_equal(again(X, X), X + X) and os.path.exists(os.path.join(d, "t.json"))


def test_profile_arguments_are_checked_as_nki_does():
    e = raises(ValueError, nki.profile, _add)
    assert "working_directory= is required" in str(e), e
    e = raises(ValueError, nki.profile, working_directory="relative/dir")
    assert "must be an absolute path" in str(e), e
    e = raises(ValueError, nki.profile, working_directory="/tmp", profile_nth=0)
    assert "profile_nth=0: expected a count >= 1" in str(e), e
    e = raises(TypeError, nki.profile, working_directory="/tmp", iters=3)
    assert "unknown argument iters" in str(e), e
    # A trace named stats.json would be overwritten by the statistics (tester23i: the trace was lost silently).
    e = raises(ValueError, nki.profile, working_directory="/tmp", save_trace_name="stats.json")
    assert "stats.json is the profile's statistics file" in str(e), e


def _raises(a, b):
    raise RuntimeError("the kernel failed")


def test_a_failed_kernel_leaves_no_working_directory_it_created():
    d = os.path.join(tempfile.mkdtemp(), "profiles")
    raises(Exception, nki.profile(working_directory=d)(_raises), X, X)
    assert not os.path.exists(d)


if __name__ == "__main__":
    main(globals())
