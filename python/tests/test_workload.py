"""Workloads naming a Python kernel, run by the trnsim CLI (its embedded interpreter) and by
_core.WorkloadRun: outputs, numerics report, validate, --set, --trace, --dump-inputs and every error path."""

import json
import os
import re
import subprocess
import sys

import numpy as np

from runner import DATA, KERNELS, kernel_source, main, raises, tmpdir, trnsim_exe

import trnsim
from trnsim import _core

TINY = os.path.join(KERNELS, "tiny.py")


def line_of(marker, path=TINY):
    with open(path) as f:
        for i, text in enumerate(f, 1):
            if marker in text:
                return i
    raise AssertionError(marker)


def trnsim_cli(*args):
    p = subprocess.run([trnsim_exe()] + [str(a) for a in args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def workload(**over):
    """A workload file in a fresh folder: the copy kernel unless `over` changes it."""
    w = {"name": "py_test", "hardware": "trn2",
         "kernel": {"nki": TINY, "function": "copy_kernel"},
         "inputs": {"x": {"generator": "normal", "seed": 1, "shape": [128, 64], "dtype": "float32"}}}
    w.update(over)
    d = tmpdir()
    path = os.path.join(d, "w.json")
    with open(path, "w") as f:
        json.dump(w, f)
    return path, d


def test_copy_runs_and_writes_outputs():
    d = tmpdir()
    rc, out, err = trnsim_cli("run", os.path.join(DATA, "copy.json"), "--out", d, "--dump-inputs")
    assert rc == 0, err
    x = np.load(os.path.join(d, "inputs", "x.npy"))
    y = np.load(os.path.join(d, "out.npy"))
    assert x.shape == (128, 512) and np.array_equal(x, y)
    stats = json.load(open(os.path.join(d, "stats.json")))
    assert stats["kernel"] == "copy_kernel (../kernels/tiny.py)", stats["kernel"]
    assert stats["numerics"]["out"]["pass"] is True, stats["numerics"]
    # the busiest source lines are the Python kernel's
    lines = {(l["engine"], l["source"]) for l in stats["source_lines"]}
    assert lines == {("SP", "%s:%d" % (TINY, line_of("isa.dma_copy(t, x)"))),
                     ("ACT", "%s:%d" % (TINY, line_of("isa.dma_copy(out, t)")))}, lines


def test_add_lnc2_bf16_reference_and_set():
    d = tmpdir()
    rc, out, err = trnsim_cli("run", os.path.join(DATA, "add.json"), "--out", d, "--set", "params.scale=3")
    assert rc == 0, err
    stats = json.load(open(os.path.join(d, "stats.json")))
    assert stats["cores"] == 2 and stats["params"] == {"scale": 3}, (stats["cores"], stats["params"])
    assert stats["numerics"]["out"]["pass"] is True
    rc, out, err = trnsim_cli("validate", os.path.join(DATA, "add.json"))
    assert rc == 0, err
    # 2 cores x 2 row tiles x (2 loads, add, scale, store)
    assert out.strip().endswith(
        "ok: kernel add_kernel (../kernels/tiny.py) on trn2, 2 cores, 2 inputs, 1 output, 20 instructions"), out


def test_workload_run_from_python_matches_cli():
    d = tmpdir()
    rc, _, err = trnsim_cli("run", os.path.join(DATA, "add.json"), "--out", d)
    assert rc == 0, err
    r = _core.WorkloadRun.from_file(os.path.join(DATA, "add.json"))
    r.run()
    cli = json.load(open(os.path.join(d, "stats.json")))
    assert r.stats()["total_time_ns"] == cli["total_time_ns"]
    assert np.array_equal(r.outputs(raw=True)["out"], np.load(os.path.join(d, "out.npy")))
    assert r.exit_code() == 0


PACKAGED = {
    "pk/__init__.py": "",
    "pk/util/__init__.py": "",
    "pk/util/consts.py": "SCALE = 3.0\n",
    "pk/ops/__init__.py": "",
    "pk/ops/scaled.py": ("import nki\nimport nki.language as nl\n\nfrom ..util.consts import SCALE\n\n\n"
                         "@nki.jit\ndef scaled(x):\n"
                         "    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)\n"
                         "    nl.store(out, nl.multiply(nl.load(x), SCALE))\n    return out\n"),
}


def test_a_kernel_inside_a_package_uses_relative_imports():
    # tester23t F4: nki-library's kernels (`from ..utils.kernel_assert import kernel_assert`) failed with
    # "attempted relative import with no known parent package": the file ran as a top-level module.
    path, d = workload(kernel={"nki": "pk/ops/scaled.py", "function": "scaled"})
    for rel, text in PACKAGED.items():
        os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
        with open(os.path.join(d, rel), "w") as f:
            f.write(text)
    r = _core.WorkloadRun.from_file(path)
    r.run()
    assert r.exit_code() == 0
    x, out = r.input("x", raw=True), r.outputs(raw=True)["out"]
    assert x.dtype == np.float32 and np.array_equal(out, x * np.float32(3.0))  # one rounding, as NumPy's
    assert sorted(os.path.relpath(p, d) for p in trnsim._runner.sources()) == [
        "pk/__init__.py", "pk/ops/scaled.py", "pk/util/__init__.py", "pk/util/consts.py"]  # what the import ran


def test_trace():
    d = tmpdir()
    trace = os.path.join(d, "t.json")
    rc, _, err = trnsim_cli("run", os.path.join(DATA, "copy.json"), "--out", d, "--trace", trace)
    assert rc == 0, err
    events = json.load(open(trace))
    text = json.dumps(events)
    assert "dma_copy" in text and "tiny.py:" in text


def test_failed_check_exits_3():
    path, d = workload(reference={"nki": TINY, "function": "wrong_ref"})
    rc, out, err = trnsim_cli("run", path, "--out", d)
    assert rc == 3, (rc, err)
    assert os.path.exists(os.path.join(d, "out.npy"))
    assert "FAIL" in out, out
    # the same through --set, and a reference file given with --set is relative to the current directory
    d2 = tmpdir()
    rc, out, err = trnsim_cli("run", os.path.join(DATA, "copy.json"), "--out", d2, "--set",
                              "reference.function=wrong_ref")
    assert rc == 3, (rc, err)
    cwd = os.getcwd()
    try:
        os.chdir(KERNELS)
        rc, out, err = trnsim_cli("validate", os.path.join(DATA, "copy.json"), "--set", "reference.nki=tiny.py")
    finally:
        os.chdir(cwd)
    assert rc == 0, err


def test_python_exception_exit_1_with_traceback():
    path, d = workload(kernel={"nki": TINY, "function": "raises_kernel"})
    rc, out, err = trnsim_cli("run", path, "--out", d)
    assert rc == 1, (rc, err)
    assert "kernel: tiny.py:%d: ZeroDivisionError: division by zero" % line_of("return 1 / 0") in err, err
    assert "Traceback (most recent call last):" in err and "helper_that_fails" in err, err
    assert "_runner.py" not in err, err
    assert not os.path.exists(os.path.join(d, "stats.json"))


def test_rule_errors_name_the_python_line():
    path, d = workload(kernel={"nki": TINY, "function": "too_many_partitions"})
    rc, out, err = trnsim_cli("run", path, "--out", d)
    assert rc == 1, (rc, err)
    assert "tiny.py:%d: sbuf tile 't' has 256 partitions" % line_of("k.sbuf([256, 4]") in err, err
    path, d = workload(kernel={"nki": TINY, "function": "psum_too_big"})
    rc, out, err = trnsim_cli("validate", path)
    assert rc == 1, (rc, err)
    assert "tiny.py:%d: " % line_of("big = k.psum") in err, err


def test_bad_files_and_names():
    path, d = workload(reference={"nki": "missing_ref.py", "function": "f"})
    rc, _, err = trnsim_cli("validate", path)
    assert rc == 1 and "w.json: reference.nki: " in err and "missing_ref.py: no such file" in err, err
    path, d = workload(kernel={"nki": TINY, "function": "nope"})
    rc, _, err = trnsim_cli("run", path)
    assert rc == 1 and "w.json: kernel.function: 'nope' is not defined in tiny.py (it defines " in err, err
    path, d = workload(kernel={"nki": TINY, "function": "1x"})
    rc, _, err = trnsim_cli("run", path)
    assert rc == 1 and "kernel.function: '1x' is not a Python name" in err, err
    path, d = workload(inputs={"x": {"generator": "normal", "seed": 1, "shape": [128, 64]}})
    rc, _, err = trnsim_cli("run", path)
    assert rc == 1 and "w.json: inputs.x.dtype: missing" in err, err
    path, d = workload(inputs={"y": {"generator": "normal", "seed": 1, "shape": [128, 64], "dtype": "float32"}})
    rc, _, err = trnsim_cli("run", path)
    assert rc == 1 and "w.json: inputs: 'y' is not a parameter of copy_kernel(x)" in err, err
    path, d = workload(reference={"nki": TINY, "function": "copy_ref"}, kernel="matmul_bf16")
    rc, _, err = trnsim_cli("validate", path)
    assert rc == 1 and "w.json: reference: only a Python kernel" in err, err


GRID_KERNEL = """import nki
import nki.language as nl


""" + kernel_source("nki_copy") + """

copy2 = copy[2]
"""


def test_jit_grid_conflicting_with_lnc():
    # The kernel is launched as copy[2] (one program per core of an LNC2 pair) but the workload asks lnc 1:
    # a clear error naming the file and key, exit 1, no output; with lnc 2 it runs.
    d = tmpdir()
    with open(os.path.join(d, "k.py"), "w") as f:
        f.write(GRID_KERNEL)
    path, _ = workload(lnc=1, kernel={"nki": os.path.join(d, "k.py"), "function": "copy2"})
    out = os.path.join(d, "out")
    rc, _, err = trnsim_cli("run", path, "--out", out)
    assert rc == 1, (rc, err)
    assert "w.json: lnc: 1 conflicts with the kernel's launch grid [2]" in err, err
    assert not os.path.exists(os.path.join(out, "out.npy"))
    path, _ = workload(lnc=2, kernel={"nki": os.path.join(d, "k.py"), "function": "copy2"})
    rc, _, err = trnsim_cli("run", path, "--out", out)
    assert rc == 0, err


def test_broken_pythonhome():
    # PYTHONHOME pointing nowhere: exit 1 naming it (not an internal error from the interpreter's start-up).
    path, _ = workload()
    env = dict(os.environ, PYTHONHOME="/nonexistent")
    for cmd in ("validate", "run"):
        p = subprocess.run([trnsim_exe(), cmd, path, "--out", tmpdir()] if cmd == "run" else
                           [trnsim_exe(), cmd, path], capture_output=True, text=True, env=env)
        assert p.returncode == 1, (cmd, p.returncode, p.stderr)
        assert "PYTHONHOME=/nonexistent" in p.stderr and "internal error" not in p.stderr, p.stderr
        assert "unset PYTHONHOME" in p.stderr, p.stderr


def test_syntax_error_in_kernel_file():
    d = tmpdir()
    bad = os.path.join(d, "bad.py")
    with open(bad, "w") as f:
        f.write("def k(x):\n    return (\n")
    path, _ = workload(kernel={"nki": bad, "function": "k"})
    rc, _, err = trnsim_cli("run", path)
    assert rc == 1 and "w.json: kernel: bad.py:2: SyntaxError" in err, err


def test_a_kernel_package_named_like_an_imported_module_is_refused_clearly():
    # tester23u F1: a package called json gave "No module named 'json.ops'" although json/ops/ existed: Python's
    # own json module answered the relative imports.
    path, d = workload(kernel={"nki": "json/ops/scaled.py", "function": "scaled"})
    for rel, text in PACKAGED.items():
        rel = "json" + rel[2:]
        os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
        with open(os.path.join(d, rel), "w") as f:
            f.write(text)
    rc, _, err = trnsim_cli("run", path, "--out", os.path.join(d, "o"))
    assert rc == 1, (rc, err)
    assert ("json/ops/scaled.py is inside the package 'json' (%s), but Python has already imported another module "
            "of that name (" % os.path.realpath(os.path.join(d, "json"))) in err, err


TWO_FOLDERS = {
    "A/utils.py": "FACTOR = 2.0\n",
    "A/k.py": ("import nki\nimport nki.language as nl\nimport utils\n\n\n@nki.jit\ndef k(x):\n"
               "    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)\n"
               "    nl.store(out, nl.multiply(nl.load(x), utils.FACTOR))\n    return out\n"),
    "B/utils.py": "FACTOR = 3.0\n",
    "B/r.py": "import utils\n\n\ndef ref(x):\n    return x * utils.FACTOR\n",
}


def test_kernel_and_reference_import_the_module_of_their_own_folder():
    # tester23ab F10: B/r.py's `import utils` got A/utils.py (imported first, by the kernel), so a reference
    # of 3x checked a kernel of 2x as PASS; B/utils.py was neither run nor among the hashed sources.
    path, d = workload(kernel={"nki": "A/k.py", "function": "k"}, reference={"nki": "B/r.py", "function": "ref"})
    for rel, text in TWO_FOLDERS.items():
        os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
        with open(os.path.join(d, rel), "w") as f:
            f.write(text)
    r = _core.WorkloadRun.from_file(path)
    r.run()
    x, out = r.input("x"), r.outputs()["out"]
    assert np.array_equal(out, x * np.float32(2.0))
    num = r.stats()["numerics"]["out"]
    assert r.exit_code() == 3 and not num["pass"]
    ref = (x * np.float32(3.0)).astype(np.float64)  # B's FACTOR in the reference
    assert num["max_abs_err"] == float(np.max(np.abs(ref - out))), num
    assert sorted(os.path.relpath(p, d) for p in trnsim._runner.sources()) == [
        "A/k.py", "A/utils.py", "B/r.py", "B/utils.py"]
    # Each file's own module, whichever file a name was imported by first.
    assert sys.modules["utils"].__file__ == os.path.join(d, "A", "utils.py")


def test_an_import_run_later_in_a_function_gets_its_own_folders_module():
    # An `import utils` run inside the kernel or the reference function (at call time, not as the file loads)
    # got the other folder's utils.py: the one imported first (B/r.py's late import of A's, which has no
    # scale(): AttributeError), or the folder put first on sys.path last (A/k.py's kernel scaled by B's 3.0,
    # which its 3x reference then passed).
    late_kernel = TWO_FOLDERS["A/k.py"].replace("import utils\n", "").replace(
        "    out = nl.ndarray", "    import utils\n    out = nl.ndarray")
    late_ref = "def ref(x):\n    import utils\n    return utils.scale(x)\n"
    for kernel_text in (TWO_FOLDERS["A/k.py"], late_kernel):
        path, d = workload(kernel={"nki": "A/k.py", "function": "k"}, reference={"nki": "B/r.py", "function": "ref"})
        files = dict(TWO_FOLDERS, **{"A/k.py": kernel_text, "B/r.py": late_ref,
                                     "B/utils.py": "FACTOR = 3.0\n\n\ndef scale(x):\n    return x * FACTOR\n"})
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            with open(os.path.join(d, rel), "w") as f:
                f.write(text)
        r = _core.WorkloadRun.from_file(path)
        r.run()
        x, out = r.input("x"), r.outputs()["out"]
        assert np.array_equal(out, x * np.float32(2.0)), kernel_text
        num = r.stats()["numerics"]["out"]
        assert r.exit_code() == 3 and not num["pass"], (r.exit_code(), num)
        ref = (x * np.float32(3.0)).astype(np.float64)
        assert num["max_abs_err"] == float(np.max(np.abs(ref - out))), num
        assert sorted(os.path.relpath(p, d) for p in trnsim._runner.sources()) == [
            "A/k.py", "A/utils.py", "B/r.py", "B/utils.py"]
        # The CLI too: the reference's utils.scale exists (was AttributeError), the check fails on the numbers.
        rc, _, err = trnsim_cli("run", path, "--out", os.path.join(d, "o"))
        assert rc == 3 and "AttributeError" not in err, (rc, err)


def test_what_a_kernel_file_prints_as_it_loads_goes_to_stderr():
    # tester23ae F1: a kernel file's top-level print went to stdout before `trnsim list --json`'s document, which
    # json.load then refused ("Expecting value: line 1 column 1").
    path, d = workload(kernel={"nki": "k.py", "function": "k"})
    with open(os.path.join(d, "k.py"), "w") as f:
        f.write(TWO_FOLDERS["A/k.py"].replace("import utils\n", 'print("HELLO FROM IMPORT")\n').replace(
            "utils.FACTOR", "2.0"))
    rc, out, err = trnsim_cli("list", path, "--json")
    assert rc == 0, err
    listed = json.loads(out)
    assert listed["kernel"] == {"nki": "k.py", "function": "k"} and [i["name"] for i in listed["inputs"]] == ["x"]
    assert err == "HELLO FROM IMPORT\n", err
    rc, out, err = trnsim_cli("validate", path)
    assert rc == 0 and "HELLO" not in out and err == "HELLO FROM IMPORT\n", (rc, out, err)


GRID = """import nki
import nki.language as nl


@nki.jit
def blocks(x, o):
    i, j = nl.program_id(0), nl.program_id(1)  # MARK-grid-pid
    t = nl.load(x[i * 64:(i + 1) * 64, j * 32:(j + 1) * 32])
    nl.store(o[i * 64:(i + 1) * 64, j * 32:(j + 1) * 32], nl.multiply(t, 2.0))
    return o


def launch(x, o):  # a plain function launching the grid (nki-samples' SPMD tensor-add's form)
    return blocks[2, 2](x, o)


k22 = blocks[2, 2]


def ref(x, o=None):
    return x * 2.0
"""


def test_a_workload_runs_a_kernel_on_a_launch_grid_by_a_name_that_launches_it():
    # tester23ae F6: a kernel on a [2, 2] grid ran from Python (kernel[2, 2](...)) but a workload naming it gave
    # "nl.program_id(1): the launch grid has 1 dims", which did not say how; docs/nki.md now does, and so does it.
    path, d = workload(kernel={"nki": "g.py", "function": "blocks"},
                       inputs={"x": {"generator": "normal", "seed": 1, "shape": [128, 64], "dtype": "float32"},
                               "o": {"generator": "constant", "value": 0.0, "shape": [128, 64], "dtype": "float32"}})
    with open(os.path.join(d, "g.py"), "w") as f:
        f.write(GRID)
    rc, _, err = trnsim_cli("run", path, "--out", os.path.join(d, "o1"))
    assert rc == 1 and ("g.py:%d: NkiError: nl.program_id(1): the launch grid has 1 dims; a kernel runs on a "
                        "launch grid as kernel[2, 2](...), and a workload runs it so when its kernel.function names "
                        "a module-level kernel[2, 2] (`k22 = kernel[2, 2]`) or a function launching it"
                        % line_of("MARK-grid-pid", os.path.join(d, "g.py"))) in err, err
    for function in ("k22", "launch"):
        w = json.load(open(path))
        w["kernel"]["function"] = function
        w["reference"] = {"nki": "g.py", "function": "ref"}
        with open(path, "w") as f:
            json.dump(w, f)
        r = _core.WorkloadRun.from_file(path)
        r.run()
        assert r.exit_code() == 0, (function, r.exit_code())
        assert np.array_equal(r.outputs()["o"], r.input("x") * np.float32(2.0)), function


CONSTANT_KERNEL = """import os
import nki
import nki.language as nl


@nki.jit
def k(x):
    o = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    c = nl.shared_constant(os.path.join(os.path.dirname(__file__), "c.npy"))
    nl.store(o, nl.add(nl.load(x), nl.load(c)))
    return o
"""


def test_a_shared_constant_file_is_among_the_sources_a_sweep_keys_points_by():
    # tester23ae F7: a sweep kept its points' results after the .npy file nl.shared_constant reads changed.
    import hashlib

    path, d = workload(kernel={"nki": "k.py", "function": "k"})
    with open(os.path.join(d, "k.py"), "w") as f:
        f.write(CONSTANT_KERNEL)
    c = os.path.join(d, "c.npy")
    np.save(c, np.full((128, 64), 2.0, np.float32))
    r = _core.WorkloadRun.from_file(path)
    r.run()
    assert np.array_equal(r.outputs()["out"], r.input("x") + np.float32(2.0))
    sha = hashlib.sha256(open(c, "rb").read()).hexdigest()
    assert trnsim._runner.sources()[c] == sha and r.stats()["nki"]["sources"][c] == sha, r.stats()["nki"]
    sweep = os.path.join(d, "s.json")
    with open(sweep, "w") as f:
        json.dump({"name": "sc", "workload": "w.json", "axes": {"hardware": ["trn2", "trn3"]}}, f)
    kept = []
    for value in (2.0, 2.0, 7.0):
        np.save(c, np.full((128, 64), value, np.float32))
        rc, _, err = trnsim_cli("sweep", sweep, "--out", os.path.join(d, "sw"), "--yes", "--jobs", "1")
        assert rc == 0, err
        kept.append(re.search(r"\d+ kept", [l for l in err.splitlines() if "2/2 points" in l][-1]).group(0))
    assert kept == ["0 kept", "2 kept", "0 kept"], kept


if __name__ == "__main__":
    main(globals())
