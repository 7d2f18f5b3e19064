"""A view the kernel made of a masked call's result (`.ap`, a slice of a slice, a slice of a reshape), given as a
current-style call's dst=, names the elements the view names, never the whole tile (tester23ah F9); its bitcast
(.view(dtype)) has the whole tile's shape (F10); a dst= call from an operand holding part reads it whole (F4); exact bytes
against NumPy and exact messages; each test fails on the tree before its fix."""

import os
import warnings

import numpy as np

from runner import line_of, main, raises_at, same_f32, warned

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl

THIS = os.path.basename(__file__)
X = np.arange(128 * 64, dtype=np.float32).reshape(128, 64) / np.float32(1024)
Y = (np.arange(128 * 24, dtype=np.float32).reshape(128, 24) + 1) / np.float32(-512)


@nki.jit
def pad_through_a_view(x, y, case, src):
    i_p, i_f = nl.mgrid[0:128, 0:64]
    if src == "load":
        e = nl.load(x[i_p, i_f], mask=(i_f < 40))  # holds columns 0-39 of [128, 64]
    else:
        e = nl.multiply(nl.load(x), 2.0, mask=(i_f < 40))
    views = {"ap": lambda: e.ap(pattern=[[64, 128], [1, 24]], offset=40),
             "slice_of_slice": lambda: e[:, 32:64][:, 8:32],
             "reshape": lambda: e.reshape((128, 2, 32))[:, 1, 8:32]}
    v = views[case[0]]()
    if case[1] == "memset":
        nisa.memset(dst=v, value=0.0)
    elif case[1] == "tensor_copy":
        nisa.tensor_copy(dst=v, src=nl.load(y))
    elif case[1] == "dma_copy":
        nisa.dma_copy(dst=v, src=y)
    else:
        nisa.activation(dst=v, op=nl.copy, data=nl.load(y))
    out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, e)  # (whole now: the pad reached past the part the masked call held)
    return out


def test_a_view_of_a_masked_result_as_dst_writes_the_view():
    # tester23ah F9: the view was taken as e's whole [128, 64] tile, so memset zeroed columns 0-39 too, and
    # tensor_copy / dma_copy / activation were "dst [128, 64] and src [128, 24] must have the same partitions".
    for src, scale in (("load", 1), ("mul", 2)):
        for view in ("ap", "slice_of_slice", "reshape"):
            for call in ("memset", "tensor_copy", "dma_copy", "activation"):
                want = X * np.float32(scale)
                want[:, 40:] = 0.0 if call == "memset" else Y
                same_f32(tnki.simulate_kernel(pad_through_a_view, X, Y, (view, call), src), want)


@nki.jit
def memset_inside(x, case):
    i_p, i_f = nl.mgrid[0:128, 0:64]
    e = nl.load(x[i_p, i_f], mask=(i_f < 40))
    if case == "ap":
        nisa.memset(dst=e.ap(pattern=[[64, 128], [1, 8]], offset=0), value=0.0)
    else:
        nisa.memset(dst=e[:, 0:32][:, 0:8], value=0.0)
    out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    nl.store(out[i_p, i_f], e, mask=(i_f < 40))
    return out


def test_a_view_inside_the_held_part_as_dst_keeps_the_rest():
    # tester23ah F9 (a regression from integ18): columns 8-39 were zeroed too.
    for case in ("ap", "slice_of_slice"):
        got = tnki.simulate_kernel(memset_inside, X, case)
        want = X.copy()
        want[:, :8] = 0.0
        same_f32(got[:, :40], want[:, :40])


@nki.jit
def pad_through_a_bitcast(x, dtype):
    i_p, i_f = nl.mgrid[0:128, 0:64]
    e = nl.load(x[i_p, i_f], mask=(i_f < 40))  # holds columns 0-39 of [128, 64]
    v = e.view(dtype)
    assert v.shape == (128, 64 * 4 // np.dtype(dtype).itemsize), v.shape
    n = v.shape[1] // 64
    nisa.memset(dst=v[:, 40 * n:64 * n], value=0)
    out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, e)
    return out


def test_a_bitcast_of_a_masked_result_has_the_whole_shape():
    # tester23ah F10: e.view(nl.int32) was [128, 40], the held part's shape, so the pad through it was "slice
    # 40:64 is out of bounds for dim 1 of size 40 (tensor [128, 40])".
    for dtype in (nl.int32, nl.int16):
        want = X.copy()
        want[:, 40:] = 0.0
        same_f32(tnki.simulate_kernel(pad_through_a_bitcast, X, dtype), want)


@nki.jit
def dst_from_a_part(x, y, case, call):
    i_p, i_f = nl.mgrid[0:128, 0:64]
    u = nl.load(y[i_p, i_f], mask=(i_f < 30))  # holds columns 0-29 of [128, 64]
    if case == "fresh":
        t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=5.0)
    elif case == "whole":
        t = nl.load(x)
    else:
        t = nl.load(x[i_p, i_f], mask=(i_f < 40))
    if call == "activation":
        nisa.activation(dst=t, op=nl.copy, data=u)  # MARK-act
    elif call == "tensor_copy":
        nisa.tensor_copy(dst=t, src=u)  # MARK-copy
    else:
        nisa.dma_copy(dst=t, src=u)  # MARK-dma
    out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out


def test_a_dst_call_from_an_operand_holding_part_writes_all_of_dst():
    # tester23ah F4: a fresh or whole-loaded dst kept its columns 30-63 (5.0, x) silently, a masked result's
    # dst was written whole (NaN + warning), and dma_copy was the looser-mask error: now all three read u whole,
    # its unwritten columns with the simulator's warning, as the device's one instruction does.
    y2 = Y.repeat(3, axis=1)[:, :64].copy()
    for case in ("fresh", "whole", "masked"):
        for call, mark in (("activation", "MARK-act"), ("tensor_copy", "MARK-copy"), ("dma_copy", "MARK-dma")):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                got = tnki.simulate_kernel(dst_from_a_part, X, y2, case, call)
            same_f32(got[:, :30], y2[:, :30])
            assert np.isnan(got[:, 30:]).all(), (case, call, got[0, 30:34])
            msgs = [str(w.message) for w in caught]
            at = f"{THIS}:{line_of(__file__, mark)}: "
            assert len(msgs) == 1 and msgs[0].startswith(at) and "where no instruction wrote before" in msgs[0], msgs


@nki.jit
def narrow_dst_from_a_part(y, call):
    i_p, i_f = nl.mgrid[0:128, 0:64]
    u = nl.load(y[i_p, i_f], mask=(i_f < 30))  # u.shape (128, 64), holding columns 0-29
    t = nl.ndarray((128, 30), nl.float32, buffer=nl.sbuf)
    if call == "tensor_copy":
        nisa.tensor_copy(dst=t, src=u)  # MARK-narrow-copy
    else:
        nisa.activation(dst=t, op=nl.exp, data=u)  # MARK-narrow-act
    out = nl.ndarray((128, 30), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out


def test_a_dst_narrower_than_an_operand_holding_that_much_is_the_shape_error():
    # tester23ai F3: dst [128, 30] and u [128, 64] holding 30 columns copied them silently; the kernel's u is
    # [128, 64], so this is the shape error a whole u gets (NKI's compiler refuses it too).
    y2 = Y.repeat(3, axis=1)[:, :64].copy()
    from trnsim.nki import NkiError
    raises_at(NkiError, "tensor_copy: dst [128, 30] and src [128, 64] must have the same partitions and elements "
              "per partition", __file__, "MARK-narrow-copy", tnki.simulate_kernel, narrow_dst_from_a_part, y2,
              "tensor_copy")
    raises_at(NkiError, "activation: dst [128, 30] and data [128, 64] must have the same partitions and elements "
              "per partition", __file__, "MARK-narrow-act", tnki.simulate_kernel, narrow_dst_from_a_part, y2,
              "activation")


@nki.jit
def row_sum_of_a_part_as_a_vector(x, call):
    i_p, i_f = nl.mgrid[0:128, 0:64]
    xs = nl.load(x)
    s = nl.sum(nl.load(x[i_p, i_f], mask=(i_p < 100)), axis=1, keepdims=True)  # [128, 1] holding rows 0-99
    t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    if call == "tensor_scalar":
        nisa.tensor_scalar(dst=t, data=xs, op0=nl.add, operand0=s)  # MARK-vec-ts
    else:
        nisa.activation(dst=t, op=nl.copy, data=xs, bias=s)  # MARK-vec-act
    out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out


def test_a_vector_operand_holding_part_of_its_rows_is_read_whole():
    # tester23ai F4: s.shape is (128, 1), rows 100-127 written by no instruction; the dst= call reads it whole
    # (those rows NaN, with the warning), as it reads a data= operand holding part. It was "operand0 [100, 1]
    # must be a scalar or a [128, 1] vector".
    want = X + X.sum(axis=1, keepdims=True, dtype=np.float32)
    for call, mark in (("tensor_scalar", "MARK-vec-ts"), ("activation", "MARK-vec-act")):
        got, msgs = warned(tnki.simulate_kernel, row_sum_of_a_part_as_a_vector, X, call)
        same_f32(got[:100], want[:100])
        assert np.isnan(got[100:]).all(), got[100, :4]
        at = f"{THIS}:{line_of(__file__, mark)}: "
        assert len(msgs) == 1 and msgs[0].startswith(at) and "where no instruction wrote before" in msgs[0], msgs


if __name__ == "__main__":
    main(globals())
