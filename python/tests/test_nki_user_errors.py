"""What a user's own kernel files meet when something is wrong (a tester's pass on issue 23): kernel code that
tries to end the process, inputs too big for HBM, bad shape entries, a function name that is no function, a
symlink loop, a sweep axis inside "kernel", errors said once with only the user's frames, symlinked kernels,
null parameters, and names trnsim does not implement. Each case runs `trnsim run` (or sweep/validate) on a
kernel written into a fresh folder."""

import json
import os
import subprocess
import sys

import numpy as np

from runner import kernel_source, main, raises, tmpdir, trnsim_exe

import trnsim.nki as tnki

HEAD = """import os
import sys
import numpy as np
import nki
import nki.language as nl


""" + kernel_source("nki_copy") + """

@nki.jit
def part(x):  # MARK-part-def
    y = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(y, nl.load(x[0:128, 0:64]))
    return y


@nki.jit
def twice(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(y, nl.load(x))
    return y, y


def ref_pair(x):
    return x, x
"""


def folder(body="", files=None):
    """A folder with k.py (HEAD + body) and any other {name: text}; its path."""
    d = tmpdir()
    with open(os.path.join(d, "k.py"), "w") as f:
        f.write(HEAD + body)
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


def workload(d, function, shape=(128, 64), lnc=1, **over):
    w = {"name": "user", "hardware": "trn2", "lnc": lnc, "kernel": {"nki": "k.py", "function": function},
         "inputs": {"x": {"generator": "normal", "seed": 1, "shape": list(shape), "dtype": "float32"}}}
    w.update(over)
    path = os.path.join(d, "w.json")
    with open(path, "w") as f:
        json.dump(w, f)
    return path


def cli(*args, cwd=None):
    p = subprocess.run([trnsim_exe()] + [str(a) for a in args], capture_output=True, text=True, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def run(d, function, *sets, **over):
    out = os.path.join(d, "out")
    rc, _, err = cli("run", workload(d, function, **over), "--out", out, *sum((["--set", s] for s in sets), []))
    return rc, err, out


EXITS = """

@nki.jit
def by_os_exit(x):
    os._exit(0)  # MARK-os-exit


@nki.jit
def by_sys_exit(x):
    sys.exit(3)  # MARK-sys-exit


@nki.jit
def by_exit(x):
    exit()  # MARK-exit


@nki.jit
def by_quit(x):
    quit(0)  # MARK-quit


@nki.jit
def by_system_exit(x):
    raise SystemExit(0)  # MARK-system-exit


def ref_exit(x):
    os._exit(0)  # MARK-ref-exit
"""


def test_kernel_code_cannot_end_the_process():
    # os._exit(0) in a kernel made `trnsim run` exit 0 with nothing written. Each way out is an error naming
    # the call and its line, exit 1, and no output.
    d = folder(EXITS)
    for function, marker, call in (("by_os_exit", "MARK-os-exit", "os._exit(0)"),
                                   ("by_sys_exit", "MARK-sys-exit", "sys.exit(3)"),
                                   ("by_exit", "MARK-exit", "exit()"), ("by_quit", "MARK-quit", "quit(0)"),
                                   ("by_system_exit", "MARK-system-exit", "SystemExit(0)")):
        rc, err, out = run(d, function)
        where = "k.py:%d" % line(d, marker)
        assert rc == 1, (function, rc, err)
        assert where in err and call + " called by the kernel's code" in err, (function, where, err)
        # With the kernel's traceback, raise SystemExit(0) too (it had none).
        assert 'Traceback of the kernel' in err and 'File "%s", line %d' % (
            os.path.join(d, "k.py"), line(d, marker)) in err, (function, err)
        assert not os.path.exists(os.path.join(out, "stats.json")), function
    # In a reference, and at the top of the kernel file.
    rc, err, _ = run(d, "copy", reference={"nki": "k.py", "function": "ref_exit"})
    assert rc == 1 and "k.py:%d" % line(d, "MARK-ref-exit") in err and "os._exit(0)" in err, (rc, err)
    top = folder("\nos._exit(0)  # MARK-top-exit\n")
    rc, err, _ = run(top, "copy")
    assert rc == 1 and "k.py:%d" % line(top, "MARK-top-exit") in err and "os._exit(0)" in err, (rc, err)
    # From Python: the same error, and os._exit is trnsim's no longer once the kernel is done.
    import sys
    sys.path.insert(0, d)
    try:
        import k as kmod
    finally:
        sys.path.remove(d)
    real = os._exit
    e = raises(Exception, tnki.simulate_kernel, kmod.by_os_exit, np.zeros((128, 64), np.float32))
    assert "os._exit(0) called by the kernel's code" in str(e), str(e)
    assert os._exit is real and sys.exit.__module__ == "sys"


def test_input_too_big_for_hbm_names_the_kernel_and_the_configuration():
    # It named trnsim's own _jit.py frame and "the LNC2 pair" under lnc 1.
    d = folder()
    rc, err, _ = run(d, "part", shape=(1048576, 16384))
    assert rc == 1, err
    assert "k.py:%d: hbm tensor 'x' [1048576, 16384] float32" % line(d, "MARK-part-def") in err, err
    assert "the HBM stack of the core (lnc 1) holds 24 GiB (hbm.capacity_GiB)" in err, err
    assert "_jit.py" not in err and "LNC2" not in err, err
    rc, err, _ = run(d, "part", shape=(1048576, 16384), lnc=2)
    assert rc == 1 and "the HBM stack of the LNC2 pair holds 24 GiB" in err, err


def test_bad_shape_elements_are_named():
    d = folder()
    for shape, index, shown in (([128, -64], 1, "-64"), ([6.5, 64], 0, "6.5"), ([128, "a"], 1, '"a"'),
                                ([128, 0], 1, "0")):
        rc, err, _ = run(d, "copy", shape=shape)
        assert rc == 1, err
        assert "inputs.x.shape[%d]: expected a positive integer size, found %s" % (index, shown) in err, err


def test_a_name_that_is_no_function_is_named_at_its_key():
    # "function": "np" (the file imports numpy as np) blamed key `inputs` (kernel) or failed at run time
    # with "'module' object is not callable" (reference).
    d = folder("\nNOT_A_FUNCTION = 3\n")
    rc, err, _ = run(d, "np")
    assert rc == 1 and "kernel.function: 'np' in k.py is a module, not a function" in err, err
    assert "inputs" not in err, err
    rc, err, _ = run(d, "copy", reference={"nki": "k.py", "function": "np"})
    assert rc == 1 and "reference.function: 'np' in k.py is a module, not a function" in err, err
    rc, err, _ = run(d, "NOT_A_FUNCTION")
    assert rc == 1 and "kernel.function: 'NOT_A_FUNCTION' in k.py is a int, not a function" in err, err


def test_kernel_file_symlink_loop():
    d = folder()
    os.symlink("loop2.py", os.path.join(d, "loop1.py"))
    os.symlink("loop1.py", os.path.join(d, "loop2.py"))
    path = workload(d, "copy", kernel={"nki": "loop1.py", "function": "copy"})
    rc, _, err = cli("validate", path)
    assert rc == 1 and "kernel.nki: %s: a symlink loop (ELOOP" % os.path.join(d, "loop1.py") in err, err
    assert "no such file" not in err, err


def test_sweep_axis_inside_kernel_says_why():
    d = folder()
    workload(d, "copy")
    sweep = os.path.join(d, "s.json")
    with open(sweep, "w") as f:
        json.dump({"name": "s", "workload": "w.json",
                   "axes": [{"name": "f", "path": "kernel.nki", "values": ["k.py", "k.py "]}]}, f)
    rc, _, err = cli("sweep", sweep, "--dry-run", "--out", os.path.join(d, "sw"))
    assert rc == 1, err
    assert "axes[0].path: path 'kernel.nki' cannot be set by a sweep: a point's kernel is one value" in err, err
    assert "set 'kernel' itself to whole values" in err and "is a value, not an object" not in err, err


def test_an_error_is_said_once():
    # The kernel returns (y, y): one output; a reference giving two arrays is an error, and its message was
    # printed twice (the head and an empty traceback's last line).
    d = folder()
    rc, err, _ = run(d, "twice", reference={"nki": "k.py", "function": "ref_pair"})
    assert rc == 1, err
    assert err.count("returned 2 arrays for 1 kernel output") == 1, err
    assert "Traceback" not in err, err


HELPER = '''def boom(t):
    raise ValueError("helper says no")  # MARK-helper-raise
'''
BROKEN = '''raise RuntimeError("import-time failure")  # MARK-broken-raise
'''
USES_HELPERS = """

@nki.jit
def calls_helper(x):
    from helper import boom
    boom(x)  # MARK-calls-helper


@nki.jit
def imports_broken(x):
    import broken  # MARK-imports-broken
"""


def test_helper_module_errors_show_only_user_frames():
    d = folder(USES_HELPERS, {"helper.py": HELPER, "broken.py": BROKEN})
    for function, frames in (("calls_helper", [("k.py", "MARK-calls-helper"), ("helper.py", "MARK-helper-raise")]),
                             ("imports_broken", [("k.py", "MARK-imports-broken"), ("broken.py", "MARK-broken-raise")])):
        rc, err, _ = run(d, function)
        assert rc == 1, err
        for name, marker in frames:
            assert 'File "%s", line %d' % (os.path.join(d, name), line(d, marker, name)) in err, (name, err)
        assert err.count('File "') == 2, err  # the user's two frames, none of trnsim's or importlib's
        assert "_runner.py" not in err and "<frozen" not in err and "trnsim/nki" not in err, err


def test_symlinked_kernel_retargeted_to_the_same_bytes_is_the_same_source():
    # A sweep keys a point by the sources its run executed: a kernel file that is a symlink retargeted to
    # another file with the same bytes must give the same sources (it was reported as changed).
    d = folder()
    os.rename(os.path.join(d, "k.py"), os.path.join(d, "a.py"))
    with open(os.path.join(d, "a.py"), "rb") as f:
        data = f.read()
    with open(os.path.join(d, "b.py"), "wb") as f:
        f.write(data)
    os.symlink("a.py", os.path.join(d, "k.py"))
    rc, err, out = run(d, "copy")
    assert rc == 0, err
    first = json.load(open(os.path.join(out, "stats.json")))["nki"]["sources"]
    os.remove(os.path.join(d, "k.py"))
    os.symlink("b.py", os.path.join(d, "k.py"))
    rc, err, out = run(d, "copy")
    assert rc == 0, err
    second = json.load(open(os.path.join(out, "stats.json")))["nki"]["sources"]
    assert first == second and list(first) == [os.path.join(d, "k.py")], (first, second)


def test_null_parameter_means_its_default():
    d = folder()
    ones = {"x": {"generator": "constant", "value": 1.5, "shape": [128, 64], "dtype": "float32"}}
    rc, err, out = run(d, "scaled", "params.scale=null", inputs=ones)
    assert rc == 0, err
    y = np.load(os.path.join(out, "out.npy"))
    assert np.all(y == 3.0), y  # 1.5 times scale's default, 2.0 (None failed in nl.multiply)
    path = workload(d, "scaled")
    rc, outp, err = cli("validate", path, "--set", "params.scale=null")
    assert rc == 0, err


FRONT_END = """

@nki.jit
def to_int8(x):
    y = nl.ndarray(x.shape, dtype=nl.int8, buffer=nl.shared_hbm)
    nl.store(y, nl.load(x))
    return y


@nki.jit
def same_names(x):
    a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="o")  # MARK-dup-a
    b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="o")  # MARK-dup-b
    nl.store(a, nl.load(x))
    nl.store(b, nl.load(x))
    return a, b  # MARK-dup-return


@nki.jit
def takes_n(x, n):  # MARK-takes-n
    return copy(x)


@nki.jit
def takes_kwonly(x, *, n):  # MARK-takes-kwonly
    return copy(x)


@nki.jit
def takes_b(x, b=None):  # MARK-takes-b
    return copy(x)


@nki.jit
def takes_star(*x):  # MARK-takes-star
    return copy(x[0])


def ref_none(x):  # MARK-ref-none
    pass


def ref_dict(x):
    return {"zzz": x}


def ref_str(x):
    return "x"


def ref_two(x, y):  # MARK-ref-two
    return x


def ref_narrow(x):
    return x[:, :10]


@nki.jit
def add_text(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(y, nl.add(nl.load(x), "x"))  # MARK-add-text
    return y


@nki.jit
def add_list(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(y, nl.multiply(nl.load(x), [1, 2]))  # MARK-add-list
    return y


@nki.jit
def add_none(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(y, nl.subtract(None, nl.load(x)))  # MARK-add-none
    return y


@nki.jit
def compiler_frob(x):
    return nki.compiler.frob(x)  # MARK-compiler-frob


@nki.jit
def nki_frob(x):
    return nki.frob(x)  # MARK-nki-frob


@nki.jit
def huge_free_dim(x):
    y = nl.ndarray((128, 2**70), dtype=nl.float32, buffer=nl.sbuf)  # MARK-huge-free-dim
    return x


@nki.jit
def float_shape(x):
    y = nl.ndarray((128, 64.0), dtype=x.dtype, buffer=nl.shared_hbm)  # MARK-float-shape
    nl.store(y, nl.load(x))
    return y


@nki.jit
def float_range(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(1.5):  # MARK-float-range
        nl.store(y, nl.load(x))
    return y


@nki.jit
def float_par_dim(x):
    y = nl.ndarray((nl.par_dim(1.5), 64), dtype=x.dtype, buffer=nl.sbuf)  # MARK-float-par-dim
    return y


@nki.jit
def bool_shape(x):
    y = nl.ndarray((True, 64), dtype=x.dtype, buffer=nl.shared_hbm)  # MARK-bool-shape
    return y
"""


def test_integer_outputs_are_written_as_their_own_numpy_dtype():
    # An nl.int8 output was written as uint8 (-4 read back as 252). Each integer dtype round-trips through
    # .npy input and output with NumPy's dtype of its name, its extreme values included.
    d = folder(FRONT_END)
    for name in ("int8", "uint8", "int16", "uint16", "int32", "uint32"):
        info = np.iinfo(name)
        values = np.resize(np.array([info.min, info.max, 0, 1, -4 if info.min < 0 else 4], dtype=name), (128, 64))
        np.save(os.path.join(d, "x.npy"), values)
        rc, err, out = run(d, "copy", inputs={"x": {"npy": "x.npy", "dtype": name}})
        assert rc == 0, (name, err)
        y = np.load(os.path.join(out, "out.npy"))
        assert y.dtype == np.dtype(name) and np.array_equal(y, values), (name, y.dtype, y[0, :5])
    # A float32 -4.0 stored into an int8 output reads back -4.
    rc, err, out = run(d, "to_int8", inputs={"x": {"generator": "constant", "value": -4.0, "shape": [128, 64],
                                                   "dtype": "float32"}})
    assert rc == 0, err
    y = np.load(os.path.join(out, "out.npy"))
    assert y.dtype == np.int8 and np.all(y == -4), (y.dtype, y[0, :4])
    # Raw-bit formats stay as docs/workloads.md says: bfloat16 as uint16 bits.
    rc, err, out = run(d, "copy", inputs={"x": {"generator": "constant", "value": 1.0, "shape": [128, 64],
                                                "dtype": "bfloat16"}})
    assert rc == 0, err
    y = np.load(os.path.join(out, "out.npy"))
    assert y.dtype == np.uint16 and np.all(y == 0x3F80), (y.dtype, y[0, :4])


def test_two_outputs_with_one_name_are_an_error_at_the_return():
    # They were silently written as o.npy and out_1.npy.
    d = folder(FRONT_END)
    rc, err, out = run(d, "same_names")
    assert rc == 1, err
    assert ("k.py:%d: NkiError: kernel same_names returns two outputs named 'o': a (allocated at k.py:%d) and b "
            "(allocated at k.py:%d)" % (line(d, "MARK-dup-return"), line(d, "MARK-dup-a"), line(d, "MARK-dup-b"))
            in err), err
    assert not os.path.exists(os.path.join(out, "stats.json"))


def test_workload_inputs_and_params_are_bound_to_the_signature_before_the_call():
    # They came out as Python's TypeError from inside the call ("kern() missing 1 required positional
    # argument: 'n'") under "w.json: kernel:".
    d = folder(FRONT_END)
    for function, params, expected in (
            ("takes_n", None, "w.json: inputs.n: missing: takes_n (k.py:%d) takes x, n and the workload gives "
             "input x (a value rather than a tensor goes in params.n)" % line(d, "MARK-takes-n")),
            ("takes_kwonly", None, "w.json: params.n: required by takes_kwonly (k.py:%d), no default"
             % line(d, "MARK-takes-kwonly")),
            ("takes_b", {"x": 3}, "w.json: params.x: 'x' is an input of takes_b (k.py:%d) (inputs.x): a "
             "parameter cannot set it too" % line(d, "MARK-takes-b")),
            ("scaled", {"epsilon": 1}, "w.json: params.epsilon: scaled (k.py:%d) has no parameter 'epsilon' "
             "(its parameters: scale)" % line(d, "def scaled")),
            # tester23ab F6: "w.json: kernel: TypeError: takes_star() got an unexpected keyword argument 'x'".
            ("takes_star", None, "w.json: inputs.x: takes_star (k.py:%d) takes *x: *x parameters are not "
             "supported (each input is a named parameter of the kernel)" % line(d, "MARK-takes-star"))):
        over = {"params": params} if params is not None else {}
        for cmd in ("validate", "run"):
            path = workload(d, function, **over)
            rc, _, err = cli(*([cmd, path] + (["--out", os.path.join(d, "out")] if cmd == "run" else [])))
            assert rc == 1 and expected in err, (function, cmd, expected, err)
            assert "TypeError" not in err, err
    rc, _, err = cli("validate", workload(d, "takes_n", params={"n": 2}))
    assert rc == 0, err
    # An input of another name for a *x kernel: the signature was shown as takes_star(x), without the star or
    # why no input can bind there. `trnsim list` of the workload says it too (exit 1), as validate and run.
    path = workload(d, "takes_star", inputs={"a": {"generator": "normal", "seed": 1, "shape": [128, 64],
                                                    "dtype": "float32"}})
    for cmd in ("list", "validate", "run"):
        rc, out, err = cli(*([cmd, path] + (["--out", os.path.join(d, "out")] if cmd == "run" else [])))
        assert rc == 1 and out == "" and err == (
            "trnsim: error: %s: inputs: 'a' is not a parameter of takes_star(*x): *x parameters are not "
            "supported (each input is a named parameter of the kernel)\n" % path), (cmd, rc, out, err)


def test_reference_mistakes_name_the_reference_and_what_was_expected():
    d = folder(FRONT_END)
    expected = "expected an array for 'out' [128, 64]"
    for function, what in (("ref_none", "returned None"), ("ref_dict", "returned a dict"),
                           ("ref_str", "returned a str"), ("ref_narrow", "returned shape [128, 10]")):
        rc, err, _ = run(d, "copy", reference={"nki": "k.py", "function": function})
        at = "%s (k.py:%d)" % (function, line(d, "def " + function))
        assert rc == 1, (function, err)
        assert "reference.function: %s %s: %s" % (at, what, expected) in err, (function, err)
        assert "float()" not in err and "Traceback" not in err, err
    rc, err, _ = run(d, "copy", reference={"nki": "k.py", "function": "ref_two"})
    assert rc == 1 and ("w.json: reference.function: ref_two (k.py:%d) cannot be called as the reference: it is "
                        "called as ref_two(x)" % line(d, "MARK-ref-two")) in err, err
    assert "missing a required argument: 'y'" in err, err


def test_an_operand_that_is_no_number_is_the_front_ends_error():
    # nl.add(x, "x") leaked "could not convert string to float: 'x'".
    d = folder(FRONT_END)
    for function, marker, call, which, shown in (("add_text", "MARK-add-text", "nl.add", "y", "str 'x'"),
                                                 ("add_list", "MARK-add-list", "nl.multiply", "y", "list [1, 2]"),
                                                 ("add_none", "MARK-add-none", "nl.subtract", "x", "NoneType None")):
        rc, err, _ = run(d, function)
        assert rc == 1, err
        assert ("k.py:%d: NkiError: %s: operand %s must be a number or a tile, got %s"
                % (line(d, marker), call, which, shown)) in err, (function, err)
        assert "float()" not in err and "could not convert" not in err, err


def test_unknown_names_of_nki_and_nki_compiler_are_nki_unsupported():
    # They were AttributeErrors naming trnsim's module 'trnsim.nki.compiler'.
    d = folder(FRONT_END)
    for function, marker, name in (("compiler_frob", "MARK-compiler-frob", "nki.compiler.frob"),
                                   ("nki_frob", "MARK-nki-frob", "nki.frob")):
        rc, err, _ = run(d, function)
        assert rc == 1, err
        assert "k.py:%d: NkiUnsupported: %s is not modelled by trnsim" % (line(d, marker), name) in err, err
        assert "trnsim.nki" not in err, err
    import nki
    import nki.compiler

    assert not hasattr(nki, "frob") and not hasattr(nki.compiler, "frob")
    e = raises(tnki.NkiUnsupported, lambda: nki.compiler.frob)
    assert isinstance(e, AttributeError) and "nki.compiler.frob is not modelled" in str(e), str(e)


def test_a_kernel_file_with_a_null_byte_is_named():
    d = tmpdir()
    with open(os.path.join(d, "k.py"), "wb") as f:
        f.write(HEAD.encode() + b"\nx = 1\0\n")
    rc, err, _ = run(d, "copy")
    assert rc == 1, err
    n = HEAD.count("\n") + 2
    assert "k.py:%d: SyntaxError: %s has a null byte" % (n, os.path.join(d, "k.py")) in err, err


def test_sizes_that_are_not_integers_are_refused():
    # nl.ndarray((128, 64.0)), nl.affine_range(1.5) and nl.par_dim(1.5) were accepted (truncated to 64, 1, 1).
    d = folder(FRONT_END)
    for function, marker, text in (
            ("float_shape", "MARK-float-shape", "nl.ndarray: shape (128, 64.0): size 64.0 is not an integer"),
            ("bool_shape", "MARK-bool-shape", "nl.ndarray: shape (True, 64): size True is not an integer"),
            ("float_par_dim", "MARK-float-par-dim", "nl.par_dim: size 1.5 is not an integer"),
            ("float_range", "MARK-float-range", "nl.affine_range: bounds must be integers known while tracing, "
             "got float 1.5"),
            # A tester: an internal TypeError from the allocator's bindings, with no line.
            ("huge_free_dim", "MARK-huge-free-dim", "nl.ndarray: shape [128, 1180591620717411303424] float32: "
             "6.045e+23 bytes, more than any memory of the device holds")):
        rc, err, _ = run(d, function)
        assert rc == 1, err
        assert "k.py:%d: NkiError: %s" % (line(d, marker), text) in err, (function, err)


UNKNOWN = """

@nki.jit
def attr_unknown(x):
    return nl.some_future_call(x)  # MARK-attr-unknown


@nki.jit
def import_unknown(x):
    from nki.language import some_future_call  # MARK-import-unknown
    return x
"""


def test_unknown_nki_names_are_nki_unsupported():
    d = folder(UNKNOWN)
    for function, marker in (("attr_unknown", "MARK-attr-unknown"), ("import_unknown", "MARK-import-unknown")):
        rc, err, _ = run(d, function)
        assert rc == 1, err
        assert "k.py:%d: NkiUnsupported: nki.language.some_future_call is not modelled by trnsim" % line(
            d, marker) in err, (function, err)
        assert "UnsupportedName" not in err and "cannot import name" not in err, err
    import nki.language as nl

    e = raises(tnki.NkiUnsupported, lambda: nl.some_future_call)
    assert type(e).__name__ == "NkiUnsupported" and isinstance(e, AttributeError), type(e)

    def import_it():
        from nki.language import some_future_call  # noqa: F401
    e = raises(tnki.NkiUnsupported, import_it)
    assert type(e).__name__ == "NkiUnsupported" and isinstance(e, ImportError), type(e)
    assert "nki.language.some_future_call is not modelled" in str(e), str(e)


NO_FILE = """
import numpy as np
import trnsim.nki as nki
import nki.language as nl
@nki.jit
def k(x):
    o = nl.ndarray((256, 64), dtype=nl.float32, buffer=nl.shared_hbm, name="o")
    nl.store(o[0:128, :], nl.load(x))
    return o
r = nki.simulate_kernel(k, np.ones((128, 64), np.float32))
print("ok", r.shape)
"""


def test_a_warning_from_a_kernel_in_no_file_does_not_stop_the_run():
    # tester23p F2: under `python -c`, stdin or the REPL, any warning (here: rows 128-255 of o never written)
    # died with "ImportError: '__main__' is not a built-in module" from warnings' source-line lookup.
    warning = ("RuntimeWarning: %s:7: output 'o' float32 [256, 64]: no instruction writes rows 128-255 of its 256 "
               "(32768 of its 65536 bytes)")
    for args, stdin, name in ((["-c", NO_FILE], None, "<string>"), (["-"], NO_FILE, "<stdin>")):
        p = subprocess.run([sys.executable] + args, input=stdin, capture_output=True, text=True, cwd=tmpdir())
        assert p.returncode == 0 and p.stdout == "ok (256, 64)\n", (args, p.stdout, p.stderr)
        assert "%s:10: " % name + warning % name in p.stderr and "ImportError" not in p.stderr, (args, p.stderr)


COLLECTIVES = """
import nki.collectives as ncc  # MARK-import-collectives


@nki.jit
def uses_collectives(x):
    group = ncc.ReplicaGroup([[0, 1]])  # MARK-replica-group
    return x
"""


def test_nki_collectives_imports_and_its_names_are_nki_unsupported():
    # tester23p F5: `import nki.collectives` (nki-samples' allgather_matmul_ring tutorial) was a raw
    # "ModuleNotFoundError: No module named 'nki.collectives'", which reads like a broken install.
    d = folder(COLLECTIVES)
    rc, err, out = run(d, "copy")  # the file imports; its other kernels run
    assert rc == 0, err
    rc, err, _ = run(d, "uses_collectives")
    assert rc == 1, err
    assert ("w.json: kernel: k.py:%d: NkiUnsupported: nki.collectives.ReplicaGroup is not modelled by trnsim: "
            "collectives between ranks are outside a one-NeuronCore simulator (docs/nki.md lists the supported "
            "calls)\n" % line(d, "MARK-replica-group")) in err, err
    import nki.collectives as ncc

    def import_it():
        from nki.collectives import all_reduce  # noqa: F401
    e = raises(tnki.NkiUnsupported, import_it)
    assert isinstance(e, ImportError) and ": nki.collectives.all_reduce is not modelled by trnsim: collectives " \
        "between ranks are outside" in str(e), str(e)
    assert not hasattr(ncc, "all_gather")


UNINIT = """

@nki.jit
def reads_unwritten(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nl.store(y, t)  # MARK-uninit-store
    return y


@nki.jit
def reads_half_written(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    t[:, 0:32] = nl.load(x[:, 0:32])
    u = nl.exp(t)  # MARK-half-exp
    nl.store(y, u)
    return y


@nki.jit
def written_in_parts(x):
    # Two halves, then the whole (no warning), and a PSUM accumulation group: its first matmul reads nothing.
    y = nl.ndarray((64, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    t[:, 0:32] = nl.load(x[:, 0:32])
    t[:, 32:64] = nl.load(x[:, 32:64])
    acc = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(2):
        acc += nisa.nc_matmul(t[0:64, :], t[0:64, :])
    nl.store(y, nl.copy(acc))
    return y
"""


def test_a_read_of_memory_nothing_wrote_is_a_warning():
    # An nl.ndarray read before anything wrote it gave NaN outputs, exit 0 and no word. NKI's nl.ndarray is
    # numpy.ndarray-like (numpy.empty: contents undefined) and nl.zeros / nl.full exist to initialise, so a
    # read of it is legal but undefined: a warning at the reading line, the run goes on (exit 0).
    d = folder("import nki.isa as nisa\n" + UNINIT)
    rc, err, out = run(d, "reads_unwritten")
    assert rc == 0, err
    where = "k.py:%d" % line(d, "MARK-uninit-store")
    assert "warning: %s: nl.store: its dma_copy (made by trnsim's lowering of nl.store) reads sbuf" % where in err, err
    assert "where no instruction wrote before (partition 0, byte 0 of the read is the first such)" in err, err
    assert where in json.load(open(os.path.join(out, "stats.json")))["notes"][-1], "stats.json notes"
    rc, err, _ = run(d, "reads_half_written")
    assert rc == 0 and ("warning: k.py:%d: nl.exp: its activation (made by trnsim's lowering of nl.exp) reads "
                        "sbuf" % line(d, "MARK-half-exp")) in err, err
    assert "(partition 0, byte 128 of the read is the first such)" in err, err  # column 32 of float32
    rc, err, _ = run(d, "written_in_parts")
    assert rc == 0 and "warning" not in err, err
    # From Python: a RuntimeWarning at the line, and not the guess that the kernel never wrote its output.
    import importlib.util
    import warnings
    spec = importlib.util.spec_from_file_location("k_uninit", os.path.join(d, "k.py"))
    kmod2 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kmod2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = tnki.simulate_kernel(kmod2.reads_unwritten, np.ones((128, 64), np.float32))
    msgs = [str(m.message) for m in w]
    assert np.isnan(y).all()
    lowered = where + ": nl.store: its dma_copy (made by trnsim's lowering of nl.store) reads sbuf"
    assert any(m.startswith(lowered) for m in msgs), msgs
    assert not any("did the kernel write it" in m for m in msgs), msgs


def test_seed_workloads_give_no_warning():
    # The NKI examples, the main workloads, the calibration kernels, the chains and the small MoE workloads
    # read nothing before writing it and carry nothing across affine_range iterations: no warning (timing
    # only; the large MoE and cross-entropy workloads take minutes and were checked by hand).
    import glob
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    files = sorted(glob.glob(os.path.join(root, "examples", "nki", "*.json")) +
                   glob.glob(os.path.join(root, "configs", "workloads", "*.json")) +
                   glob.glob(os.path.join(root, "configs", "workloads", "calibration", "*.json")) +
                   glob.glob(os.path.join(root, "configs", "workloads", "chains", "*.json")) +
                   glob.glob(os.path.join(root, "configs", "workloads", "moe", "small_*.json")) +
                   glob.glob(os.path.join(root, "configs", "workloads", "moe", "dense_*.json")))
    assert len(files) >= 60, files
    for path in files:
        rc, _, err = cli("run", path, "--no-numerics", "--out", os.path.join(tmpdir(), "o"))
        assert rc == 0 and "warning:" not in err, (path, err)


LOOPS = """

@nki.jit
def used_after_loop(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        t = nl.load(x)  # MARK-loop-decl
    nl.store(y, t)  # MARK-after-loop
    return y


@nki.jit
def carried(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(3):
        t = nl.load(x)
        nisa.tensor_tensor(acc, acc, t, op=nl.subtract)  # MARK-carried
    nl.store(y, acc)
    return y


@nki.jit
def not_carried(x):
    # An associative accumulation, a tile declared outside and overwritten whole each iteration, and the
    # same carried loop as sequential_range: none is a loop-carried dependency NKI forbids.
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(3):
        nisa.tensor_tensor(acc, acc, nl.load(x), op=nl.add)
    tmp = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(3):
        tmp[...] = nl.load(x)
        nl.store(y, tmp)
    for i in nl.sequential_range(3):
        nisa.tensor_tensor(acc, acc, nl.load(x), op=nl.subtract)
    nl.store(y, acc)
    return y
"""


def test_affine_range_scope_and_carried_values():
    # A tile used after its affine_range loop ran silently: NKI refuses it
    # (err_local_variable_used_out_of_scope), so it is an error at the line using it. A value carried across
    # affine_range iterations ran silently too: NKI calls it unsafe (the compiler may reorder the
    # iterations), so it is a warning at the reading line.
    d = folder("import nki.isa as nisa\n" + LOOPS)
    rc, err, _ = run(d, "used_after_loop")
    assert rc == 1, err
    assert "k.py:%d: NkiError: sbuf tile t [128, 64] float32 declared at k.py:%d in the body of the " \
        "nl.affine_range loop at k.py:%d, is used after that loop" % (
            line(d, "MARK-after-loop"), line(d, "MARK-loop-decl"), line(d, "MARK-loop-decl") - 1) in err, err
    assert "err_local_variable_used_out_of_scope" in err, err
    rc, err, _ = run(d, "carried")
    assert rc == 0, err
    assert "warning: k.py:%d: tensor_tensor in iteration 1 of the nl.affine_range loop at k.py:%d reads " \
        "sbuf" % (line(d, "MARK-carried"), line(d, "MARK-carried") - 2) in err, err
    assert "which iteration 0 wrote: a loop-carried dependency" in err and "nl.sequential_range" in err, err
    rc, err, _ = run(d, "not_carried")
    assert rc == 0 and "warning" not in err, err


def test_npy_input_dtype_from_its_header():
    # A .npy input had to state "dtype" although the file says it. Now the header gives it when it names one
    # kernel dtype; when it could be several (uint16: values or BF16/FP16 bits), the error says so at the key.
    d = folder()
    np.save(os.path.join(d, "x.npy"), np.full((128, 64), 1.5, np.float32))
    np.save(os.path.join(d, "bits.npy"), np.zeros((128, 64), np.uint16))
    rc, err, out = run(d, "copy", inputs={"x": {"npy": "x.npy"}})
    assert rc == 0, err
    y = np.load(os.path.join(out, "out.npy"))
    assert y.dtype == np.float32 and np.all(y == 1.5), y
    rc, err, _ = run(d, "copy", inputs={"x": {"npy": "bits.npy"}})
    assert rc == 1, err
    assert "inputs.x.dtype: missing, and %s's dtype uint16 does not say which it is: uint16 values, or the raw " \
        "bits of bfloat16 or float16; give \"dtype\"" % os.path.join(d, "bits.npy") in err, err
    rc, err, out = run(d, "copy", inputs={"x": {"npy": "bits.npy", "dtype": "bfloat16"}})
    assert rc == 0, err


def test_an_npy_input_of_another_shape_than_the_workload_says_is_named_before_the_trace():
    # tester23ae F2: with "shape" [64, 256] and a (256, 64) file, the kernel was traced with the workload's shape
    # and its first index past it was the error ("w.json: kernel: k.py:N: ..."), at a kernel line that is right;
    # the file's shape was checked only when the trace got through.
    d = folder()
    np.save(os.path.join(d, "x.npy"), np.zeros((256, 64), np.float32))
    for cmd in ("validate", "run"):
        path = workload(d, "part", inputs={"x": {"npy": "x.npy", "dtype": "float32", "shape": [64, 256]}})
        rc, _, err = cli(*([cmd, path] + (["--out", os.path.join(d, "out")] if cmd == "run" else [])))
        assert rc == 1 and err == (
            "trnsim: error: %s: inputs.x.npy: %s: shape (256, 64) does not match kernel input 'x' float32 "
            "[64, 256]\n" % (path, os.path.join(d, "x.npy"))), (cmd, err)


def test_list_describes_any_workload_file():
    # `trnsim list w.json` said "unknown kernel 'w.json'" for a user's workload (only examples/nki were listed).
    d = folder()
    path = workload(d, "scaled", params={"scale": 3.0})
    rc, out, err = cli("list", path)
    assert rc == 0, err
    assert "kernel scaled in k.py" in out and "input x" in out and "float32" in out and "[128, 64]" in out, out
    assert "scale" in out and "default 2.0" in out and '"scale":3.0' in out, out
    rc, out, err = cli("list", path, "--json")
    assert rc == 0, err
    j = json.loads(out)
    assert j["kernel"] == {"nki": "k.py", "function": "scaled"} and j["workload_params"] == {"scale": 3.0}, j
    assert [p["name"] for p in j["params"]] == ["scale"] and j["inputs"][0]["name"] == "x", j
    # A registered kernel's workload file: the workload, then the kernel's parameters.
    cpp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs", "workloads",
                       "matmul_bf16_2048_trn2_lnc1.json")
    rc, out, err = cli("list", cpp)
    assert rc == 0, err
    assert out.startswith("matmul_bf16_2048_trn2_lnc1 (%s)" % cpp) and "kernel matmul_bf16 (registered" in out
    assert "input x " in out and '"M":2048' in out and "\nmatmul_bf16\n" in out and "tile_n" in out, out
    rc, _, err = cli("list", os.path.join(d, "k.py"))
    assert rc == 1 and "not a workload file" in err, err


def test_unknown_parameter_is_one_message_for_workloads_and_sweeps():
    # The workload's check (Python) and the sweep's (C++) each formatted it: now one C++ function serves both.
    d = folder()
    rc, err, _ = run(d, "scaled", "params.bogus=1")
    assert rc == 1, err
    said = "has no parameter 'bogus' (its parameters: scale)"
    assert "params.bogus: scaled (k.py:%d) %s" % (line(d, "def scaled"), said) in err, err
    workload(d, "scaled")
    sweep = os.path.join(d, "s.json")
    with open(sweep, "w") as f:
        json.dump({"name": "s", "workload": "w.json", "axes": [{"name": "b", "path": "params.bogus",
                                                                 "values": [1, 2]}]}, f)
    rc, _, err = cli("sweep", sweep, "--dry-run", "--out", os.path.join(d, "sw"))
    assert rc == 1 and "kernel 'scaled (k.py)' " + said in err, err
    from trnsim import _core
    assert _core.no_parameter_message("f", "x", ["a", "b"]) == "f has no parameter 'x' (its parameters: a, b)"
    assert _core.no_parameter_message("f", "x", ["a"], "config") == \
        "f has no parameter 'config.x' (the fields of config: a)"


PSUM_ROW = """

@nki.jit
def psum_row(x):
    y = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    ps = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
    ps[...] = nl.copy(t)
    nl.store(y, nl.add(t, ps[5:6, :]))  # MARK-psum-row
    return y
"""


def test_an_error_in_a_lowerings_instruction_names_the_call_under_trnsim_run():
    # The same message through `trnsim run` (the embedded interpreter's emission) as through simulate_kernel:
    # the kernel's nl.add first, the tensor_copy its partition broadcast makes second; exit 1.
    d = folder(PSUM_ROW)
    rc, err, _ = run(d, "psum_row")
    assert rc == 1, (rc, err)
    assert ("kernel: k.py:%d: nl.add: its tensor_copy on ACT (made by trnsim's lowering of nl.add, not a call of "
            "the kernel): partition start:" % line(d, "MARK-psum-row")) in err, err


ODD_EXCEPTIONS = """

class Unprintable(Exception):
    def __str__(self):
        raise ValueError("str fails")


@nki.jit
def raises_unprintable(x):
    raise Unprintable()  # MARK-unprintable


@nki.jit
def raises_surrogate(x):
    raise ValueError("gr\\u00f6\\u00dfe \\udcff")  # MARK-surrogate


def ref_copy(x):
    return x
"""


def test_an_exception_whose_text_cannot_be_made_is_still_the_kernels_error():
    # tester23o F4: an exception whose str() raises was "trnsim: internal error: ValueError: str fails", one
    # holding a lone surrogate "internal error: Unable to cast Python instance to C++ type" (exit 2, no line).
    # Now exit 1 at the kernel line, the surrogate shown as its escape.
    d = folder(ODD_EXCEPTIONS)
    for function, marker, text in (("raises_unprintable", "MARK-unprintable", "Unprintable: <exception str() failed>"),
                                   ("raises_surrogate", "MARK-surrogate", "ValueError: gr\u00f6\u00dfe \\udcff")):
        rc, err, out = run(d, function)
        assert rc == 1, (function, rc, err)
        assert "w.json: kernel: k.py:%d: %s\n" % (line(d, marker), text) in err, (function, err)
        assert not os.path.exists(os.path.join(out, "stats.json")), function


def test_an_input_that_is_no_parameter_is_named_before_the_reference():
    # tester23o F5: with a reference, an extra input was blamed on it ("reference.function: ref_copy (k.py:N)
    # cannot be called as the reference ... takes 1 positional argument but 2 were given").
    d = folder(ODD_EXCEPTIONS)
    extra = '{"generator": "normal", "seed": 2, "shape": [128, 64], "dtype": "float32"}'
    for over in ({}, {"reference": {"nki": "k.py", "function": "ref_copy"}}):
        rc, err, _ = run(d, "copy", "inputs.c=" + extra, **over)
        assert rc == 1 and "w.json: inputs: 'c' is not a parameter of copy(x)" in err, (over, rc, err)
        assert "reference.function" not in err, err


main(globals())
