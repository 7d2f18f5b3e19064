"""A fresh tester's pass on issue 23 (the NKI front end's entry points): outputs in the kernel's dtype,
benchmark's two forms and its trace path, `trnsim list FILE` of a broken workload and of .npy inputs, float16
.npy inputs, --set of an input the workload lacks, a reference that ends the process or lacks a parameter, an
output the kernel leaves partly unwritten, a thread still running when the kernel returns, and the trace's
host-memory budget. Each case writes its kernel into a fresh folder."""

import json
import os
import subprocess
import sys
import warnings

import numpy as np

from runner import kernel_source, main, raises, tmpdir, trnsim_exe

import trnsim
import trnsim.nki as tnki

KERNELS = """import threading
import time
import numpy as np
import nki
import nki.language as nl


KEPT = []


@nki.jit
def keeps_a_tile(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = KEPT[0] if KEPT else nl.load(x)
    KEPT.append(t)
    nl.store(y, value=t)  # MARK-kept-tile
    return y


""" + kernel_source("nki_copy") + """

@nki.jit
def thirds(x):
    # Three parts of 256 // 3 = 85 rows (as a launch grid of 3 would split them): row 255 is never written.
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)  # MARK-thirds-out
    per = x.shape[0] // 3
    for p in range(3):
        nl.store(y[p * per:(p + 1) * per, :], nl.load(x[p * per:(p + 1) * per, :]))
    return y


@nki.jit
def halves(x):
    # Every row, but only the first half of the columns.
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(y[:, 0:32], nl.load(x[:, 0:32]))
    return y


@nki.jit
def spin(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    for i in nl.sequential_range(10 ** 9):
        t = nl.add(t, 1.0)  # MARK-spin
    nl.store(y, t)
    return y


@nki.jit
def leaves_a_thread(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(y, nl.load(x))
    go = threading.Event()
    worker = threading.Thread(target=go.wait, args=(5,), name="late-stores", daemon=True)
    worker.start()
    LEFT.append((worker, go))
    return y  # MARK-thread-return


LEFT = []


@nki.jit
def leaves_a_recorder(x):
    # The thread makes an nki call once `go` is set: while the next kernel is traced.
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(y, nl.load(x))
    go = threading.Event()

    def late():
        go.wait(5)
        try:
            nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)  # MARK-late-call
        except Exception as e:
            CAUGHT.append(e)

    worker = threading.Thread(target=late, name="late-recorder", daemon=True)
    worker.start()
    LEFT.append((worker, go))
    return y


@nki.jit
def lets_it_run(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    worker, go = LEFT[-1]
    go.set()
    worker.join()
    nl.store(y, nl.load(x))
    return y


CAUGHT = []


def ref_copy(x):
    return x


def ref_scaled_no_scale(x):
    return x * 2.0


def ref_exit(x):
    import sys
    sys.exit(2)  # MARK-ref-exit
"""


def folder(files=None):
    d = tmpdir()
    with open(os.path.join(d, "k.py"), "w") as f:
        f.write(KERNELS)
    for name, text in (files or {}).items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    return d


def line(d, marker, name="k.py"):
    with open(os.path.join(d, name)) as f:
        for i, text in enumerate(f, 1):
            if marker in text:
                return i
    raise AssertionError(marker)


def kernels(d):
    sys.path.insert(0, d)
    try:
        import importlib
        import k
        return importlib.reload(k)
    finally:
        sys.path.remove(d)


def workload(d, function, name="w.json", inputs=None, shape=(128, 64), **over):
    w = {"name": "user", "hardware": "trn2", "lnc": 1, "kernel": {"nki": "k.py", "function": function},
         "inputs": inputs or {"x": {"generator": "normal", "seed": 1, "shape": list(shape), "dtype": "float32"}}}
    w.update(over)
    path = os.path.join(d, name)
    with open(path, "w") as f:
        json.dump(w, f)
    return path


def cli(*args, cwd=None):
    p = subprocess.run([trnsim_exe()] + [str(a) for a in args], capture_output=True, text=True, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def test_simulate_kernel_returns_the_kernels_dtype():
    # Was int64 for every integer dtype and float32 for float16; NKI's simulate_kernel returns the dtype.
    k = kernels(folder())
    for dt in ("int32", "int16", "int8", "uint8", "uint16", "uint32", "float16", "float32"):
        x = ((np.arange(128 * 8) % 97) - (40 if dt[0] in "if" else 0)).reshape(128, 8).astype(dt)
        y = tnki.simulate_kernel(k.copy, tnki.typed(x, dt) if dt in ("uint8", "uint16") else x)  # (or bits)
        assert y.dtype == np.dtype(dt) and np.array_equal(x, y), (dt, y.dtype)
    # bfloat16, which NumPy lacks: float32 values (exact).
    x = np.array([[1.5, -2.25, 3.0, 0.0]] * 128, np.float32)
    y = tnki.simulate_kernel(k.copy, tnki.typed(x, "bfloat16"))
    assert y.dtype == np.float32 and np.array_equal(x, y)


def test_workload_writes_float16_outputs_as_float16_and_reads_float16_npy():
    # A float16 .npy was refused even with "dtype": "float16"; a float16 output was written as uint16 bits.
    d = folder()
    x = (np.arange(128 * 64).reshape(128, 64) / 7).astype(np.float16)
    np.save(os.path.join(d, "x16.npy"), x)
    for entry in ({"npy": "x16.npy", "dtype": "float16"}, "x16.npy"):  # the header says float16 too
        out = os.path.join(d, "out")
        rc, _, err = cli("run", workload(d, "copy", inputs={"x": entry}), "--out", out)
        assert rc == 0, err
        y = np.load(os.path.join(out, "y.npy" if os.path.exists(os.path.join(out, "y.npy")) else "out.npy"))
        assert y.dtype == np.float16 and np.array_equal(x, y), y.dtype
    # A float16 .npy for a float32 input: the message says which dtypes fit.
    rc, _, err = cli("run", workload(d, "copy", inputs={"x": {"npy": "x16.npy", "dtype": "float32"}}),
                     "--out", os.path.join(d, "o2"))
    assert rc == 1 and "dtype float16 does not fit" in err and "expected float32 or float64" in err, err


def test_benchmark_direct_call_takes_nki_options():
    # benchmark(kernel, x, save_trace_name=...) dropped the trace (the decorator form wrote it).
    k = kernels(folder())
    x = np.ones((128, 64), np.float32)
    d = tmpdir()
    t1 = os.path.join(d, "direct.pftrace")
    r = tnki.benchmark(k.copy, x, save_trace_name=t1, warmup=2, iters=5)
    assert os.path.getsize(t1) > 0 and r.trace == t1 and (r.warmup, r.iters) == (2, 5)
    t2 = os.path.join(d, "decorated.pftrace")
    b = tnki.benchmark(warmup=1, iters=3, save_trace_name=t2)(k.copy)
    b(x)
    assert os.path.getsize(t2) > 0 and b.benchmark_result.iters == 3
    # An NTFF name: no file, and a warning saying so (was silent).
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tnki.benchmark(k.copy, x, save_trace_name=os.path.join(d, "p.ntff"))
    assert not os.path.exists(os.path.join(d, "p.ntff"))
    assert any("p.ntff" in str(m.message) and "NTFF" in str(m.message) for m in w), [str(m.message) for m in w]
    e = raises(ValueError, tnki.benchmark, k.copy, x, iters=-1)
    assert "iters=-1" in str(e), str(e)


def test_benchmark_trace_folder_must_exist():
    # trace="/nonexistent/x.pftrace" created /nonexistent.
    k = kernels(folder())
    x = np.ones((128, 64), np.float32)
    missing = os.path.join(tmpdir(), "no", "such")
    e = raises(ValueError, tnki.benchmark, k.copy, x, trace=os.path.join(missing, "x.pftrace"))
    assert "does not exist" in str(e) and missing in str(e), str(e)
    assert not os.path.exists(os.path.dirname(missing))
    e = raises(ValueError, tnki.benchmark, k.copy, x, trace=os.path.join(tmpdir(), "x.txt"))
    assert "unknown extension" in str(e), str(e)


def test_list_of_a_broken_workload_fails_naming_the_file():
    # Exit 0 with the traceback as a note, and a blank description line, before.
    d = folder({"raises.py": "raise RuntimeError('boom at import')\n\ndef f(x):\n    pass\n"})
    w = workload(d, "no_such_function", name="missing.json")
    rc, out, err = cli("list", w)
    assert rc == 1 and "missing.json: kernel.function: 'no_such_function' is not defined in k.py" in err, (rc, err)
    w = os.path.join(d, "raises.json")
    with open(w, "w") as f:
        json.dump({"name": "r", "hardware": "trn2", "kernel": {"nki": "raises.py", "function": "f"},
                   "inputs": {"x": {"generator": "normal", "seed": 1, "shape": [128, 8], "dtype": "float32"}}}, f)
    rc, out, err = cli("list", w)
    assert rc == 1 and "raises.json: kernel: raises.py:1: RuntimeError: boom at import" in err, (rc, err)
    # A good one: no empty description line; .npy inputs with the header's dtype and shape.
    np.save(os.path.join(d, "x.npy"), np.zeros((128, 16), np.float32))
    w = workload(d, "copy", name="npy.json", inputs={"x": "x.npy"})
    rc, out, err = cli("list", w)
    lines = out.splitlines()
    assert rc == 0 and not any(not s.strip() for s in lines), out
    assert "  input x              float32 [128, 16] (x.npy)" in lines, out
    rc, out, _ = cli("list", w, "--json")
    j = json.loads(out)
    assert j["inputs"][0]["npy_dtype"] == "float32" and j["inputs"][0]["shape"] == [128, 16], j["inputs"]


def test_list_shows_a_default_that_is_no_json_value_as_optional():
    # tester23x F7: a dtype, a tuple or an object default was listed as "string required" (the run took it).
    d = folder({"dflt.py": "import nki\nimport nki.language as nl\n\n\n@nki.jit\n"
                           "def k(x, eps, dt=nl.bfloat16, shape=(1, 2), flag=None, fn=nl.copy):\n"
                           "    y = nl.ndarray(x.shape, dtype=dt, buffer=nl.shared_hbm)\n"
                           "    nl.store(y, fn(nl.load(x)))\n    return y\n"})
    w = os.path.join(d, "dflt.json")
    with open(w, "w") as f:
        json.dump({"name": "dflt", "hardware": "trn2", "lnc": 1, "kernel": {"nki": "dflt.py", "function": "k"},
                   "inputs": {"x": {"generator": "normal", "seed": 1, "shape": [128, 8], "dtype": "float32"}},
                   "params": {"eps": 1e-5}}, f)
    rc, out, err = cli("list", w)
    rows = [" ".join(r.split()) for r in out.splitlines()[3:-1]]
    # tester23ae F9: what a workload can give such a parameter: a dtype by its name (the "nl." spelling shown
    # works too: it was "unknown dtype 'nl.float32'"), a function by nothing (a string was a TypeError inside
    # the kernel, "'str' object is not callable"; it is refused at params.fn).
    # tester23ae F10's addendum: a parameter without a default has no known type ("string required" read as
    # if only a string went; nki-samples' LayerNorm takes its epsilon so).
    assert rc == 0 and rows == [
        "eps string required keyword argument of k (no default, so any JSON value)",
        'dt string optional keyword argument of k (default nl.bfloat16; a dtype name sets it, e.g. "bfloat16")',
        "shape string optional keyword argument of k (default [1, 2])",
        "flag string optional keyword argument of k",
        "fn string optional keyword argument of k (default nl.copy; no JSON value gives a function: leave it "
        "out)"], (rc, out, err)
    rc, _, err = cli("run", w, "--out", os.path.join(d, "out"))
    assert rc == 0, err
    for dt in ("float32", "nl.float32"):
        rc, _, err = cli("run", w, "--out", os.path.join(d, "out"), "--overwrite", "--set", "params.dt=" + dt)
        assert rc == 0 and np.load(os.path.join(d, "out", "out.npy")).dtype == np.float32, (dt, err)
    rc, _, err = cli("validate", w, "--set", "params.fn=nl.tanh")
    assert rc == 1 and err == (
        "trnsim: error: %s: params.fn: 'fn' of k (dflt.py:6) takes a function (default nl.copy): no JSON value "
        "gives one (\"nl.tanh\" is a str); leave it out, or null, to keep the default\n" % w), err


def test_set_of_a_missing_input_names_the_inputs():
    d = folder()
    rc, _, err = cli("run", workload(d, "copy"), "--out", os.path.join(d, "o"), "--set", "inputs.y.shape=[1,2]")
    assert rc == 1 and "the workload has no input 'y' (its inputs: x)" in err, err


def test_reference_exit_is_the_references():
    d = folder()
    rc, _, err = cli("run", workload(d, "copy", reference={"nki": "k.py", "function": "ref_exit"}),
                     "--out", os.path.join(d, "o"))
    assert rc == 1 and "k.py:%d" % line(d, "MARK-ref-exit") in err, err
    assert "sys.exit(2) called by the reference's code" in err, err


def test_reference_lacking_a_parameter_is_an_error():
    # It was called without it: a numerics FAIL (exit 3) that said nothing of why.
    d = folder()
    rc, _, err = cli("run", workload(d, "scaled", params={"scale": 3.0},
                                     reference={"nki": "k.py", "function": "ref_scaled_no_scale"}),
                     "--out", os.path.join(d, "o"))
    assert rc == 1 and "reference.function: ref_scaled_no_scale (k.py:" in err, (rc, err)
    assert "does not take the kernel's parameter 'scale'" in err, err
    # From Python too.
    k = kernels(d)
    e = raises(trnsim.InputError, tnki.benchmark, k.scaled, np.ones((128, 64), np.float32), scale=3.0,
               reference=k.ref_scaled_no_scale)
    assert "parameter 'scale'" in str(e), str(e)


def test_partly_unwritten_output_warns():
    d = folder()
    at = "k.py:%d" % line(d, "MARK-thirds-out")
    rc, out, err = cli("run", workload(d, "thirds", shape=(256, 64)), "--out", os.path.join(d, "o"))
    # (named by the kernel's variable: it was declared without name=)
    want = ("%s: output y float32 [256, 64], without name= (saved as out.npy): no instruction writes row 255 of its "
            "256 (256 of its 65536 bytes)" % at)
    assert rc == 0 and want in err, (rc, err)
    k = kernels(d)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tnki.simulate_kernel(k.halves, np.ones((128, 64), np.float32))
    msgs = [str(m.message) for m in w]
    # The columns left, for all rows (main: "elements 32-63, 96-127, 160-191 and 125 more ranges (flat index)").
    assert any("output y float32 [128, 64], without name= (saved as out.npy): no instruction writes rows 0-127, "
               "columns 32-63 (16384 of its 32768 bytes)" in m for m in msgs), msgs
    with warnings.catch_warnings(record=True) as w:  # all written: no warning
        warnings.simplefilter("always")
        tnki.simulate_kernel(k.copy, np.ones((128, 64), np.float32))
    assert not [m for m in w if issubclass(m.category, RuntimeWarning)], [str(m.message) for m in w]


def test_thread_running_after_the_kernel_returns_warns():
    d = folder()
    k = kernels(d)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tnki.simulate_kernel(k.leaves_a_thread, np.ones((128, 64), np.float32))
    for worker, go in k.LEFT:
        go.set()
        worker.join()
    msgs = [str(m.message) for m in w]
    assert any(m.startswith("k.py:%d: daemon thread 'late-stores'" % line(d, "MARK-thread-return"))
               and "join it before returning" in m for m in msgs), msgs


def test_benchmark_trace_over_a_users_file_takes_overwrite():
    # A tester: the refusal told a Python caller to "pass --overwrite", an option benchmark did not have.
    d = folder()
    k = kernels(d)
    x = np.ones((128, 64), np.float32)
    path = os.path.join(d, "mine.pftrace")
    with open(path, "w") as f:
        f.write("mine")
    e = raises(Exception, tnki.benchmark, k.copy, x, trace=path)
    assert "overwrite=True" in str(e) and open(path).read() == "mine", str(e)
    tnki.benchmark(k.copy, x, trace=path, overwrite=True)
    assert os.path.getsize(path) > 4
    # overwrite=True held for that call only.
    other = os.path.join(d, "mine2.pftrace")
    with open(other, "w") as f:
        f.write("mine")
    e = raises(Exception, tnki.benchmark, k.copy, x, trace=other)
    assert "overwrite=True" in str(e) and open(other).read() == "mine", str(e)


def test_a_thread_an_earlier_kernel_left_records_nothing_into_the_next():
    # A tester: the left thread's nl call while the next kernel was traced went into that kernel's program
    # (3 instructions became 23); now the call raises NkiError in the thread, at its line.
    d = folder()
    k = kernels(d)
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tnki.simulate_kernel(k.leaves_a_recorder, x)
    alone = tnki.benchmark(k.copy, x)
    r = tnki.benchmark(k.lets_it_run, x)
    assert np.array_equal(r.outputs[0], x)
    assert len(k.CAUGHT) == 1 and isinstance(k.CAUGHT[0], tnki.NkiError), k.CAUGHT
    msg = str(k.CAUGHT[0])
    assert msg.startswith("k.py:%d: an nki call from thread 'late-recorder'" % line(d, "MARK-late-call")) \
        and "already running when kernel lets_it_run started" in msg, msg
    assert r.stats["instructions"] == alone.stats["instructions"], (r.stats["instructions"],
                                                                    alone.stats["instructions"])


def test_a_tile_kept_from_an_earlier_call_is_an_error_at_the_line():
    # A tester: a tile kept in a global and used by the next call reached the scheduler, which failed with
    # "IndexError: vector::_M_range_check" and no kernel line.
    d = folder()
    k = kernels(d)
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    assert np.array_equal(tnki.simulate_kernel(k.keeps_a_tile, x), x)
    e = raises(tnki.NkiError, tnki.simulate_kernel, k.keeps_a_tile, x)
    assert str(e).startswith("k.py:%d: nl.store: its dma_copy (made by trnsim's lowering of nl.store, not a call "
                             "of the kernel): tensor " % line(d, "MARK-kept-tile")) and \
        "was made by an earlier kernel call" in str(e), str(e)


def test_trace_stops_within_the_host_memory_budget():
    # A runaway loop grew the trace ~240 MB/s until max_instructions or the OOM killer. With 320 MB left
    # (TRNSIM_HOST_MEMORY_BYTES), emitting n ops needs n * 512 B + 256 MiB: 2^16 ops fit, 2^17 do not, so
    # the trace stops at its second check, 131072 ops.
    d = folder()
    k = kernels(d)
    os.environ["TRNSIM_HOST_MEMORY_BYTES"] = "320000000"
    try:
        e = raises(tnki.NkiError, tnki.simulate_kernel, k.spin, np.ones((128, 64), np.float32))
    finally:
        del os.environ["TRNSIM_HOST_MEMORY_BYTES"]
    assert str(e).startswith("k.py:%d: the kernel's trace holds 131072 instructions" % line(d, "MARK-spin")), str(e)
    assert "320 MB left" in str(e) and "max_instructions would stop it at 4000000" in str(e), str(e)


if __name__ == "__main__":
    main(globals())
