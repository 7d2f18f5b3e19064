"""Errors in what an nl call's lowering made name the kernel's nl call first (issue 23, tester23k), and
nl.transpose(dtype=) casts as NKI's page says (it was refused by nc_transpose's same-dtype rule)."""

import os
import warnings

import numpy as np

from runner import line_of as _line_of, main, raises

import trnsim.nki as tnki
import nki
import nki.isa as nisa
import nki.language as nl

THIS = os.path.basename(__file__)
X = (np.arange(128 * 64, dtype=np.float32).reshape(128, 64) / 7).astype(np.float32)


def line_of(marker):
    return _line_of(__file__, marker)


@nki.jit
def exp_mid_tile(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    nl.store(y, nl.exp(nl.load(x), mask=(i_p >= 40)))  # MARK-exp-mask
    return y


@nki.jit
def mean_over_partitions(x):
    y = nl.ndarray((1, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(y, nl.mean(nl.load(x), axis=(0, 1)))  # MARK-mean
    return y


@nki.jit
def transpose_cast(x):
    y = nl.ndarray((64, 128), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    nl.store(y, nl.transpose(nl.load(x), dtype=nl.bfloat16))
    return y


@nki.jit
def small_transpose_cast(x):
    y = nl.ndarray((16, 32), dtype=nl.float16, buffer=nl.shared_hbm)
    nl.store(y, nl.transpose(nl.load(x[0:32, 0:16]), dtype=nl.float16))
    return y


@nki.jit
def store_unwritten(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    z = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)  # MARK-unwritten-tile
    nl.store(y, t)  # MARK-store-unwritten
    nisa.dma_copy(dst=z, src=t)  # MARK-dma-unwritten
    return y, z


def bf16(a):
    """FP32 -> BF16 (round to nearest even), as float32 values."""
    b = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return b.astype(np.uint32).view(np.float32)


def test_a_mask_breaking_the_start_partition_rule_names_the_call():
    # Was "mask: it starts this instruction at partition 40 ...": no call named.
    e = raises(tnki.NkiError, tnki.simulate_kernel, exp_mid_tile, X)
    assert str(e).startswith(f"{THIS}:{line_of('MARK-exp-mask')}: nl.exp: mask: it starts this instruction at "
                             "partition 40 (88 partitions)"), e


def test_a_reduction_over_the_partition_dim_names_the_call():
    # Was "an sbuf tensor needs at least a partition dim" (the result's shape, before any axis check).
    e = raises(tnki.NkiError, tnki.simulate_kernel, mean_over_partitions, X)
    assert str(e) == (f"{THIS}:{line_of('MARK-mean')}: nl.mean: its tensor_reduce (made by trnsim's lowering of "
                      "nl.mean, not a call of the kernel): axis [0, 1] must name free dims of data [128, 64] (the "
                      "partition dim is 0)"), e


def test_transpose_dtype_casts():
    # Was a RuleError "nc_transpose on PE: dtype: transpose keeps the dtype"; NKI's dtype= casts the output.
    y = tnki.simulate_kernel(transpose_cast, X)
    assert y.tobytes() == bf16(X.T).tobytes()
    y = tnki.simulate_kernel(small_transpose_cast, X)  # the Vector engine's 32 x 32 transpose
    assert y.dtype == np.float16 and y.tobytes() == X[0:32, 0:16].T.astype(np.float16).tobytes()



def test_an_unwritten_read_warning_names_the_nl_call():
    # Was "k.py:N: dma_copy reads sbuf 't' ...": the instruction nl.store's lowering made, not the call.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tnki.simulate_kernel(store_unwritten, X)
    got = sorted(str(w.message) for w in caught)
    assert got[0].startswith(f"{THIS}:{line_of('MARK-store-unwritten')}: nl.store: its dma_copy (made by "
                             "trnsim's lowering of nl.store) reads sbuf 't' [128, 64] float32 allocated at "
                             f"{THIS}:{line_of('MARK-unwritten-tile')} where no instruction wrote before"), got
    # The kernel's own nisa.dma_copy is named as it is.
    assert got[1].startswith(f"{THIS}:{line_of('MARK-dma-unwritten')}: dma_copy reads sbuf 't'"), got


@nki.jit
def mask_shape_mismatch(x, call):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    t = nl.load(x)
    w = nl.load(x[0:64, 0:32])
    if call == "nisa":
        r = nisa.tensor_tensor(t[i_p, i_f], w, np.add, mask=(i_p < 64))  # MARK-nisa-mismatch
    else:
        r = nl.add(t[i_p, i_f], w, mask=(i_p < 64))  # MARK-nl-mismatch
    nl.store(y[i_p, i_f], r, mask=(i_p < 64))
    return y


def test_a_mask_error_of_a_nisa_call_names_the_call_as_an_nl_calls_does():
    # The nisa call's said only "mask: operand [64, 32] does not match ..." (tester23l, left open).
    for call, mark in (("nisa", "MARK-nisa-mismatch"), ("nl", "MARK-nl-mismatch")):
        e = raises(tnki.NkiError, tnki.simulate_kernel, mask_shape_mismatch, X, call)
        name = "nisa.tensor_tensor" if call == "nisa" else "nl.add"
        assert str(e) == (f"{THIS}:{line_of(mark)}: {name}: mask: operand [64, 32] does not match the masked "
                          "operand [128, 64] (dim 1)"), e


@nki.jit
def two_calls_one_line(x, case):
    o = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)  # MARK-two-unwritten (never written)
    if case == "act":
        d = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf); nisa.activation(dst=d, op=nl.exp, data=t)  # MARK-two-act
    else:
        m = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf); nisa.max8(dst=m, src=t[:, 0:64])  # MARK-two-max8
        d = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        d[:, 0:8] = nl.copy(m)
    nl.store(o, value=d)
    return o


def test_a_warning_on_a_line_of_two_calls_names_no_other_call():
    # Was "k.py:N: nl.ndarray: its activation (made by trnsim's lowering of nl.ndarray) reads ...": the line's
    # first call, which makes no instruction; the warned instruction is the line's nisa call's own
    for case, name, marker in (("act", "activation", "MARK-two-act"), ("max8", "max8", "MARK-two-max8")):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tnki.simulate_kernel(two_calls_one_line, X, case)
        got = [str(w.message) for w in caught]
        assert len(got) == 1 and got[0].startswith(
            f"{THIS}:{line_of(marker)}: {name} reads sbuf 't' [128, 64] float32 allocated at "
            f"{THIS}:{line_of('MARK-two-unwritten')} where no instruction wrote before"), got


if __name__ == "__main__":
    main(globals())
