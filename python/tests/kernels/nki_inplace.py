"""Kernels that write into an input HBM tensor and return it (python/tests/test_nki_inplace.py), and their
NumPy references. Written here; the in-place form is nki-library's router_topk's (`out: nt.mutable_tensor`)."""

import nki
import nki.language as nl
import nki.typing as nt


@nki.jit
def add_into(acc: nt.mutable_tensor, x):
    # acc += x, written into the caller's tensor, which the kernel returns
    nl.store(acc, nl.add(nl.load(acc), nl.load(x)))
    return acc


@nki.jit
def copy_into_unannotated(buf, x):
    # buf is a plain parameter (no mutable_tensor): NKI lets a kernel write any input it is given
    o = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="o")
    nl.store(o, nl.multiply(nl.load(x), 2.0))
    nl.store(buf, nl.load(x))
    return o, buf


@nki.jit
def halves_into(acc: nt.mutable_tensor, x):
    # LNC2: each core adds its 64 rows of x into acc
    i = nl.program_id(0)
    rows = nl.ds(i * 64, 64)
    nl.store(acc[rows, :], nl.add(nl.load(acc[rows, :]), nl.load(x[rows, :])))
    return acc


@nki.jit
def returns_unwritten(acc: nt.mutable_tensor, x):
    # router_topk's skip_store_*: a mutable tensor returned without a write is the caller's values
    o = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="o")
    nl.store(o, nl.load(x))
    return acc, o


@nki.jit
def writes_without_returning(buf, x):
    # buf holds 2 * x afterwards, o x + 1; only o is returned (with LNC2, core 1 writes buf: rows 0-127 of x)
    o = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="o")
    if nl.program_id(0) == nl.num_programs(0) - 1:
        nl.store(buf, nl.multiply(nl.load(x), 2.0))
    nl.store(o, nl.add(nl.load(x), 1.0))
    return o


@nki.jit
def adds(a, b):
    # reads both inputs only: they may be one array
    o = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="o")
    nl.store(o, nl.add(nl.load(a), nl.load(b)))
    return o


@nki.jit
def returns_its_input(acc):
    return acc


@nki.jit
def ignores_acc(acc, x):
    o = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="o")
    nl.store(o, nl.load(x))
    return o


def ref_returns_its_input(acc):
    return acc


def ref_writes_without_returning(buf, x):
    return x + 1.0


def ref_add_into(acc, x):
    return acc + x


def ref_copy_into_unannotated(buf, x):
    return x * 2.0, x
