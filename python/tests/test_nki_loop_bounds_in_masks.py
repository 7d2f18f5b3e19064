"""Masks holding a bound on loop indices alone, and calls whose mask selects nothing (docs/nki.md "Masks").

tester23aa F9: `mask=(i_f < 48) & (i * 128 < S) & (i * 128 + i_p < S)` (nki-samples' allocated_fused_rms_norm_qkv)
was "masks combine with & only": the loop-only comparison is a Python bool while tracing. True bounds nothing;
False leaves the call nothing to do (no instruction), whichever side of & it is on.
tester23aa F7: the carry `init[:, :] = nl.copy(result[:, F - 1], mask=j + 1 < n)` of a tail tile (a cumsum's
last iteration, nki-samples' cumsum.py) was refused when the index was made, although its call's mask selects
nothing; with a mask that keeps the call, it reads the scan's undefined column with the simulator's warning
(tester23ac F3)."""

import warnings

import numpy as np

from runner import line_of, main, raises_at

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl

S = 300
X = (np.random.default_rng(23).integers(-8, 9, (S, 64))).astype(np.float32)


@nki.jit
def loop_bound_anded(x, bool_first):
    o = nl.ndarray((S, 48), nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:64]
    for i in nl.affine_range(3):
        t = nl.load(x[i * 128 + i_p, i_f], mask=(i * 128 + i_p < S))
        # rows of tiles 0 and 1 only (i * 128 < 256): tile 2's store selects nothing; the loop-only bound (a
        # Python bool while tracing) ANDed after the index bound, or first (bool & Mask)
        mask = ((i * 128 < 256) & (i_f < 48) if bool_first else (i_f < 48) & (i * 128 < 256)) & (i * 128 + i_p < S)
        nl.store(o[i * 128 + i_p, i_f], value=nl.multiply(t, 2.0), mask=mask)
    return o


def test_a_loop_only_bound_anded_with_a_mask_keeps_or_skips_the_call():
    for bool_first in (False, True):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = tnki.benchmark(loop_bound_anded, X, bool_first)
        y = r.outputs[0]
        assert y[:256].tobytes() == (X[:256, :48] * np.float32(2)).tobytes(), bool_first
        # Tile 2's store made no instruction: its rows keep what HBM held (NaN in trnsim), as the warning says.
        assert np.isnan(y[256:]).all(), bool_first
        assert any("no instruction writes rows 256-299" in str(m.message) for m in w), [str(m.message) for m in w]
        # Stores: 256 rows of 48 columns, nothing of tile 2.
        assert r.stats["hbm_bytes_written"] == 256 * 48 * 4, r.stats["hbm_bytes_written"]


@nki.jit
def mask_and_int(x):
    o = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:64]
    t = nl.load(x[i_p, i_f])
    nl.store(o[i_p, i_f], value=t, mask=(i_f < 48) & 1)  # MARK-int
    return o


def test_a_mask_anded_with_a_non_bool_names_the_operand():
    raises_at(tnki.NkiError, "masks combine with & only: the other operand of & is int 1, not a comparison of an "
              "index expression with an integer", __file__, "MARK-int", tnki.simulate_kernel, mask_and_int, X[:128])


@nki.jit
def unbounded_store(x):
    o = nl.ndarray((1, 200, 64), nl.float32, buffer=nl.shared_hbm)  # MARK-unnamed
    i_p, i_f = nl.mgrid[0:128, 0:64]
    for i in nl.affine_range(2):
        t = nl.load(x[i * 128 + i_p, i_f], mask=(i * 128 + i_p < 200))
        nl.store(o[0, i * 128 + i_p, i_f], value=t)  # MARK-no-bound
    return o


def test_an_index_outside_a_tensor_without_a_name_names_its_variable():
    # (tester23aa F9's aside: an output without name= was "(tensor None [1, 128, 512])")
    raises_at(tnki.NkiError, "index expression on dim 1 covers [128, 255], outside [0, 200) (hbm tensor [1, 200, 64] "
              "float32 allocated at test_nki_loop_bounds_in_masks.py:%d): a mask= on this call" % line_of(
                  __file__, "MARK-unnamed"), __file__, "MARK-no-bound", tnki.simulate_kernel, unbounded_store, X[:200])


N, F, W = 128, 300, 256


def _cumsum(x, last):
    y = nl.ndarray((N, F), nl.float32, buffer=nl.shared_hbm)
    pi, fi = nl.mgrid[0:128, 0:W]
    n = 2
    init = nl.zeros((128, 1), dtype=nl.float32)
    ones = nl.ones((128, W), dtype=nl.float32)
    for j in nl.sequential_range(n):
        mask = (j * W + fi < F)
        data = nl.load(x[pi, j * W + fi], mask=mask)
        result = nisa.tensor_tensor_scan(data0=ones, data1=data, initial=init, op0=np.multiply, op1=np.add,
                                         mask=mask)
        nl.store(y[pi, j * W + fi], result, mask=mask)
        if last:
            init[:, :] = nl.copy(result[:, W - 1], mask=j + 1 <= n)  # MARK-carry-kept
        else:
            init[:, :] = nl.copy(result[:, W - 1], mask=j + 1 < n)  # carry; nothing to carry after the last tile
    return y


@nki.jit
def cumsum_carry(x):
    return _cumsum(x, False)


@nki.jit
def cumsum_carry_kept(x):
    return _cumsum(x, True)


XC = np.random.default_rng(7).integers(-9, 10, (N, F)).astype(np.float32)


def test_a_call_masked_to_nothing_takes_an_index_past_the_held_part():
    # Small integers: every partial sum is exact in float32, so the scan matches NumPy's cumsum bit for bit.
    y = tnki.simulate_kernel(cumsum_carry, XC)
    assert y.tobytes() == np.cumsum(XC, axis=1, dtype=np.float32).tobytes()


def test_a_call_whose_mask_keeps_it_reads_past_the_held_part_with_a_warning():
    # The last tile's scan result holds columns 0-43 of its [128, 256] index space; its tile has that whole
    # shape, as NKI's masked call's tile does, so the kept carry reads its column 255, which no instruction wrote,
    # with the simulator's warning at that line (tester23ac F3: it was the looser-mask error, and nki-samples'
    # cumsum of 300 rows stopped there). The carry is never used: y is exact.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = tnki.simulate_kernel(cumsum_carry_kept, XC)
    assert y.tobytes() == np.cumsum(XC, axis=1, dtype=np.float32).tobytes()
    said = [str(w.message) for w in caught]
    assert said == [
        "test_nki_loop_bounds_in_masks.py:%d: tensor_copy reads sbuf 'result[1]' [128, 1] float32 allocated at "
        "test_nki_loop_bounds_in_masks.py:%d where no instruction wrote before (partition 0, byte 0 of the read is "
        "the first such): its values are undefined (a tile starts "
        "uninitialised, as numpy.empty's contents; trnsim's memory starts as NaN)" % (
            line_of(__file__, "MARK-carry-kept"), line_of(__file__, "result = nisa.tensor_tensor_scan("))], said


if __name__ == "__main__":
    main(globals())
