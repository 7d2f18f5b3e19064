"""A small test runner (no pytest needed): ``python3 test_x.py`` runs every ``test_*`` function of the file
in order, prints one line per test and exits 1 if any failed. ctest registers each file (python/CMakeLists.txt)
with PYTHONPATH set to build/python and TRNSIM set to the trnsim executable."""

import os
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "kernels")
DATA = os.path.join(HERE, "data")
sys.path.insert(0, KERNELS)


def trnsim_exe():
    return os.environ.get("TRNSIM", os.path.join(HERE, "..", "..", "build", "trnsim"))


def raises(exc_type, fn, *args, **kwargs):
    """The exception fn raises, which must be an exc_type (AssertionError otherwise)."""
    try:
        fn(*args, **kwargs)
    except exc_type as e:
        return e
    raise AssertionError("%s did not raise %s" % (getattr(fn, "__name__", fn), exc_type.__name__))


def raises_at(exc_type, message, path, marker, fn, *args, **kwargs):
    """raises(), for an error that must name the line of file `path` holding `marker` and hold `message`."""
    e = raises(exc_type, fn, *args, **kwargs)
    where = "%s:%d" % (os.path.basename(path), line_of(path, marker))
    assert where in str(e), (where, str(e))
    assert message in str(e), (message, str(e))
    return e


def line_of(path, marker):
    """The number of the first line of file `path` that holds `marker` (lines calling line_of skipped)."""
    with open(path) as f:
        for i, text in enumerate(f, 1):
            if marker in text and "line_of(" not in text:
                return i
    raise AssertionError("%s: no line holds %r" % (path, marker))


def kernel_source(module):
    """The kernels of python/tests/kernels/<module>.py from its first decorator on, to write into a user's
    kernel file after its own imports."""
    with open(os.path.join(KERNELS, module + ".py")) as f:
        text = f.read()
    return text[text.index("@nki.jit"):]


def tmpdir():
    return tempfile.mkdtemp(prefix="trnsim_pytest_")


def bf16(a):
    """float32 values rounded to bfloat16 (nearest even), as float32: what a bfloat16 output reads back as."""
    import numpy as np

    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).view(np.float32)


def same_f32(got, want):
    """got has want's shape and, as float32, its bytes exactly (the first values of each when not)."""
    import numpy as np

    want = np.asarray(want, np.float32)
    assert got.shape == want.shape and got.tobytes() == want.tobytes(), (got.ravel()[:4], want.ravel()[:4])


def warned(fn, *args):
    """fn(*args) and the messages of the warnings it gave."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = fn(*args)
    return r, [str(w.message) for w in caught]


def main(namespace):
    tests = [(n, f) for n, f in namespace.items() if n.startswith("test_") and callable(f)]
    only = sys.argv[1:]
    failed = 0
    for name, fn in tests:
        if only and name not in only:
            continue
        try:
            fn()
            print("ok      %s" % name)
        except Exception:
            failed += 1
            print("FAILED  %s" % name)
            traceback.print_exc()
    print("%d of %d tests failed" % (failed, len(tests)) if failed else "all %d tests passed" % len(tests))
    sys.stdout.flush()
    sys.exit(1 if failed else 0)
