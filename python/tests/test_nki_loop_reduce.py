"""nl.loop_reduce: `acc[...] = nl.loop_reduce(x, op, loop_indices=[i])` is one nisa.tensor_tensor(acc, acc, x, op)
per iteration (the NKI page's stated equivalent), checked byte for byte against NumPy doing those steps in
float32 (and bfloat16 where the tile is); its misuses are NkiErrors naming the call and the line."""

import os

import numpy as np

from runner import KERNELS, line_of, main, raises

import trnsim.nki as tnki
from trnsim.nki import language as nl

import nki_loop_reduce as K

SRC = os.path.join(KERNELS, "nki_loop_reduce.py")
RNG = np.random.default_rng(23)
X = RNG.standard_normal((4, 128, 64)).astype(np.float32)


def bf16(a):
    """float32 -> bfloat16 (round to nearest even; no NaN here), as float32."""
    b = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return (((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)


def same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape)
    assert got.tobytes() == want.tobytes(), np.argwhere(got != want)[:5]


def steps(op, init=0.0, rnd=lambda a: a):
    acc = np.full((128, 64), init, np.float32)
    for i in range(X.shape[0]):
        acc = rnd(op(acc, X[i]).astype(np.float32))
    return acc


def test_add_and_subtract_accumulate_in_loop_order():
    # float32 tensor_tensor on Vector: ((0 + x0) + x1) + ...; subtract: the destination is data1 (the page's
    # equivalent code `tensor_tensor(data1=b, data2=a)`): ((0 - x0) - x1) - ...
    same(tnki.simulate_kernel(K.reduce_slices, X, op=np.add), steps(np.add))
    same(tnki.simulate_kernel(K.reduce_slices, X, op=np.subtract), steps(np.subtract))


def test_rebinding_form_of_the_page():
    # `b = nl.loop_reduce(x, op, ...)` reduces into the tile b holds (data1=b, as the page's equivalent code) and
    # gives it back: ((0 - x0) - x1) - ..., one tensor_tensor per iteration as the assignment form.
    same(tnki.simulate_kernel(K.rebound, X, op=np.subtract), steps(np.subtract))
    same(tnki.simulate_kernel(K.rebound, X, op=np.maximum), steps(np.maximum))
    # tester23p F1: the annotated and chained forms left a pending result that a later call named LoopReduce.
    same(tnki.simulate_kernel(K.rebound, X, op=np.subtract, form="annotated"), steps(np.subtract))
    same(tnki.simulate_kernel(K.rebound, X, op=np.subtract, form="chained"), steps(np.subtract))


def test_bfloat16_destination_and_dtype():
    # A bfloat16 accumulator rounds each step's float32 result; dtype=bfloat16 into a float32 one does too
    # (the op's result is bfloat16, then copied into the float32 tile exactly).
    same(tnki.simulate_kernel(K.reduce_slices, X, op=np.maximum, acc_dtype=nl.bfloat16, init=-100.0),
         steps(np.maximum, -100.0, bf16))
    same(tnki.simulate_kernel(K.reduce_slices, X, op=np.add, dtype=nl.bfloat16), steps(np.add, 0.0, bf16))


def test_contributed_matmul_pattern():
    # PSUM accumulation per K block, summed across blocks into SBUF: small integers, so every sum is exact.
    a = RNG.integers(-3, 4, (512, 128)).astype(np.float32)
    b = RNG.integers(-3, 4, (512, 512)).astype(np.float32)
    same(tnki.simulate_kernel(K.blocked_matmul, a, b), (a.T.astype(np.float64) @ b).astype(np.float32))


def test_mask_limits_the_reduction():
    want = np.full((128, 64), 5.0, np.float32)
    for i in range(X.shape[0]):
        want[:64] = want[:64] + X[i][:64]
    same(tnki.simulate_kernel(K.masked, X), want)
    # A mask that selects nothing: no tensor_tensor (it was the empty-mask NkiError); acc keeps 5.0. The
    # instructions: acc's memset, the 4 loads and the store (rows=64: those and 4 tensor_tensor).
    r = tnki.benchmark(K.masked, X, rows=0)
    same(r.outputs[0], np.full((128, 64), 5.0, np.float32))
    assert r.stats["nki"]["allocation"][0]["instructions"] == 1 + 4 + 1, r.stats["nki"]["allocation"][0]
    r = tnki.benchmark(K.masked, X)
    assert r.stats["nki"]["allocation"][0]["instructions"] == 1 + 4 + 4 + 1, r.stats["nki"]["allocation"][0]


def test_into_a_block_of_a_tensor_with_block_dims():
    # tester23s F2: `acc[g] = nl.loop_reduce(...)` into a block of a directly allocated tensor was refused as
    # an unassigned result (acc is a tensor of blocks, not a tile); the same bytes in every placement:
    # ((0 + x[g, 0]) + x[g, 1]) + ... in float32.
    x = RNG.standard_normal((2, 4, 128, 64)).astype(np.float32)
    want = np.zeros((2, 128, 64), np.float32)
    for j in range(4):
        want = want + x[:, j]
    for buffer in ("direct", "sbuf", "psum"):
        same(tnki.simulate_kernel(K.into_blocks, x, buffer=buffer), want)
    same(tnki.simulate_kernel(K.into_blocks, x, t_first=True), want)


def test_no_loop_carried_warning():
    # The reduction across an affine_range loop is what the call declares: no loop-carried warning.
    import warnings

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tnki.simulate_kernel(K.reduce_slices, X, op=np.subtract)
    assert not [str(m.message) for m in w], [str(m.message) for m in w]


def test_errors_name_the_call_and_line():
    need = ("its result must be assigned into the tile that accumulates (the destination is also the op's "
            "input): `acc[...] = nl.loop_reduce(x, op, loop_indices=[i])`, acc set before the loop")
    for what, text in (
            ("unassigned", "nl.loop_reduce: " + need),
            ("used", "nl.loop_reduce: " + need),
            # tester23p F1: a result passed on, or assigned into a list, was named at the next call as LoopReduce
            ("stored", "nl.loop_reduce: " + need),
            ("listed", "nl.loop_reduce: " + need),
            ("unbound", "nl.loop_reduce: `r = nl.loop_reduce(...)` reduces into the tile `r` holds when the call "
                     "runs, but `r` holds no value: set it to the accumulating tile before the loop (the page: "
                     "`r = nl.zeros(...)`), or assign into a tile: `acc[...] = nl.loop_reduce(x, op, "
                     "loop_indices=[i])`"),
            ("hbm", "nl.loop_reduce: its destination hbm tensor [128, 64] float32 is in HBM; the reduction runs "
                    "on an engine: accumulate into an SBUF tile and store that"),
            ("op", "nl.loop_reduce: 'exp' is not an ALU operator (nl.add, nl.multiply, nl.maximum, ...)"),
            ("indices", "nl.loop_reduce: loop_indices holds 'k'; it takes loop indices (of nl.affine_range and "
                        "the other ranges) or integers"),
            ("shape", "nl.loop_reduce: x [128, 64] and its destination [128, 32] differ in shape"),
            ("x", "nl.loop_reduce: x must be an SBUF or PSUM tile, got NkiTensor(x, shape=[128, 64], "
                  "dtype=float32, hbm)")):
        e = raises(tnki.NkiError, tnki.simulate_kernel, K.bad, X, what=what)
        want = f"nki_loop_reduce.py:{line_of(SRC, 'MARK-' + what)}: {text}"
        assert str(e) == want, (str(e), want)


if __name__ == "__main__":
    main(globals())
