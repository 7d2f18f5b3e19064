"""DMAs around masked tiles and PSUM (issue 23, tester23aj F3, tester23ai F6 / F11): nl.store of PSUM rows from a
partition no engine instruction may start at, a masked result copied whole through an indirect DMA, and a
masked result as the row indices of a gather. Each test fails on the build before its fix, with exact bytes
against NumPy and exact messages."""

import os

import numpy as np

from runner import line_of, main, raises, same_f32, warned

import trnsim.nki as tnki
from trnsim.nki import NkiError

import nki
import nki.isa as nisa
import nki.language as nl

THIS = os.path.basename(__file__)
# integer values: every FP32 sum of products is exact, whatever the order
XT = (np.arange(128 * 64) % 7).astype(np.float32).reshape(128, 64)
YT = (np.arange(128 * 100) % 5).astype(np.float32).reshape(128, 100)


def line(marker):
    return line_of(__file__, marker)


# ---- tester23aj F3: nl.store of PSUM rows starting at partition 8


@nki.jit
def store_psum_rows(x, y, case):
    i_m, i_f = nl.arange(64)[:, None], nl.arange(100)[None, :]
    out = nl.ndarray((64, 100), nl.float32, buffer=nl.shared_hbm)
    nl.store(out[0:8, :], nl.full((8, 100), -1.0, nl.float32))
    if case == "dma":  # rows 8-63 of a PSUM tile written by a DMA: rows 0-7 never written
        acc = nl.ndarray((64, 100), nl.float32, buffer=nl.psum)
        nisa.dma_copy(dst=acc[8:64], src=y[8:64, :])
        nl.store(out[8:64], acc[8:64])  # MARK-store-dma
        return out
    acc = nl.matmul(nl.load(x), nl.load(y), transpose_x=True)  # [64, 100] in PSUM
    if case == "slice":
        nl.store(out[8:64], acc[8:64])  # MARK-store-slice
    else:
        nl.store(out[i_m, i_f], acc[i_m, i_f], mask=(i_m >= 8))  # MARK-store-mask
    return out


def test_a_store_of_psum_rows_from_partition_8_copies_from_a_legal_start():
    # Both were "nl.store: its tensor_copy on ACT (made by trnsim's lowering of nl.store, ...): partition start:
    # src spans 56 partitions from 8 (33-64 must start at 0 or 64)": the store's own PSUM-to-SBUF copy broke the
    # rule. The copy now starts at partition 0 and the DMA stores rows 8-63 of it.
    want = np.concatenate([np.full((8, 100), -1.0, np.float32), (XT.T @ YT)[8:]])
    for case in ("slice", "mask"):
        got, ws = warned(tnki.simulate_kernel, store_psum_rows, XT, YT, case)
        same_f32(got, want)
        assert not ws, ws  # (rows 0-7 of acc hold the matmul's product: nothing undefined is read)
    # rows 0-7 of the PSUM tile no instruction wrote: the copy reads them (not stored), and its warning says so
    got, ws = warned(tnki.simulate_kernel, store_psum_rows, XT, YT, "dma")
    same_f32(got, np.concatenate([np.full((8, 100), -1.0, np.float32), YT[8:64]]))
    assert ws == [
        f"{THIS}:{line('MARK-store-dma')}: nl.store: its tensor_copy (made by trnsim's lowering of nl.store) reads "
        f"psum 'acc' [64, 100] float32 allocated at {THIS}:{line('MARK-store-dma') - 2} where no instruction wrote "
        "before (partition 0, byte 0 of the read is the first such): its values are undefined (a tile starts "
        "uninitialised, as numpy.empty's contents; trnsim's memory starts as NaN); partitions 0-7, before the "
        "stored 8-63, are read because the copy to SBUF starts at partition 0, the nearest start an engine "
        "instruction may have for these rows: not stored"], ws


# ---- tester23ai F6: a masked result copied whole into a DMA side with a run-time offset

X16 = np.arange(16 * 8, dtype=np.int32).reshape(16, 8)
OFF = np.array([[4]], dtype=np.int32)
PERM = np.array([3, 1, 0, 7, 5, 2, 6, 4, 9, 8, 11, 10, 13, 12, 15, 14], np.int32).reshape(16, 1)


@nki.jit
def indirect_dst(x, off, idx, case):
    out = nl.ndarray((32, 8), dtype=nl.int32, buffer=nl.shared_hbm)
    init = nl.ndarray((32, 8), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=init, value=-1)
    nisa.dma_copy(dst=out, src=init)
    i_p, i_f = nl.arange(16)[:, None], nl.arange(8)[None, :]
    t = nl.load(x[i_p, i_f], mask=(i_f < 4))  # MARK-indirect-load (columns 0-3 of [16, 8])
    s = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=off)
    it = nl.load(idx)
    if case == "scalar":
        # MARK-indirect-scalar (the next line)
        nisa.dma_copy(dst=out.ap(pattern=[[8, 16], [1, 8]], offset=0, scalar_offset=s, indirect_dim=0), src=t,
                      oob_mode=nisa.oob_mode.skip)
    elif case == "vector":
        # MARK-indirect-vector (the next line)
        nisa.dma_copy(dst=out.ap(pattern=[[8, 16], [1, 8]], offset=0, vector_offset=it, indirect_dim=0),
                      src=t)
    elif case == "store":
        nl.store(out[it, i_f], t)  # MARK-indirect-store
    else:  # the part t holds, both sides cut to it
        nisa.dma_copy(dst=out.ap(pattern=[[8, 16], [1, 4]], offset=0, scalar_offset=s, indirect_dim=0),
                      src=t[:, 0:4], oob_mode=nisa.oob_mode.skip)
    return out


def test_a_masked_result_into_an_indirect_dma_side_is_the_looser_mask_error():
    # Each was "dma_copy: src [16, 4] has 64 elements, dst [16, 8] has 128" (scalar_offset) or a RuleError
    # "dma_copy on POOL: shape: dst is [16, 8] but src is [16, 4]" (vector_offset, nl.store's scatter): the held
    # part's shape, which the kernel never sees (t.shape is (16, 8)). Now the error the other copies give.
    held = (f"the copy reads [0, 8) of dim 1, but operand [16, 4] of sbuf tile t [16, 8] int32 allocated at "
            f"{THIS}:{line('MARK-indirect-load')} holds only [0, 4) of it, the part mask=(i_f < 4) at "
            f"{THIS}:{line('MARK-indirect-load')} selected: index t (t[i_p, i_f]: its undefined rest is read with "
            "a warning), or copy only the part it holds (both sides cut to it)")
    for case, call in (("scalar", "nki.isa.dma_copy"), ("vector", "nki.isa.dma_copy"), ("store", "nl.store")):
        e = raises(NkiError, tnki.simulate_kernel, indirect_dst, X16, OFF, PERM, case)
        at = line('MARK-indirect-' + case) + (case != "store")
        assert str(e) == f"{THIS}:{at}: {call}: {held}", (case, str(e))
    want = np.full((32, 8), -1, np.int32)
    want[4:20, 0:4] = X16[:, 0:4]
    got = tnki.simulate_kernel(indirect_dst, X16, OFF, PERM, "part")
    assert got.dtype == np.int32 and got.tobytes() == want.tobytes(), got


# ---- tester23ai F11: a masked result as a gather's row indices

X256 = np.arange(256 * 64, dtype=np.float32).reshape(256, 64)
IDX = ((np.arange(128) * 37) % 256).astype(np.int32).reshape(128, 1)


@nki.jit
def gather_by_held_rows(x, idx, case):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.full((128, 64), -1.0, nl.float32))
    i_p, i_f, i_1 = nl.arange(128)[:, None], nl.arange(64)[None, :], nl.arange(1)[None, :]
    it = nl.load(idx[i_p, i_1], mask=(i_p >= 8) & (i_p < 40))  # MARK-gather-indices (rows 8-39 of [128, 1])
    if case == "load":
        nl.store(out, nl.load(x[it, i_f]))  # MARK-gather-load
    elif case == "dma":
        g = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        ap = x.ap([[64, 128], [1, 64]], offset=0, vector_offset=it, indirect_dim=0)
        nisa.dma_copy(dst=g, src=ap)  # MARK-gather-dma
        nl.store(out, g)
    elif case == "wider":
        g = nl.load(x[it, i_f], mask=(i_p < 40))  # MARK-gather-wider
    elif case == "held":
        g = nl.load(x[it, i_f], mask=(i_p >= 8) & (i_p < 40))
        nl.store(out[i_p, i_f], g, mask=(i_p >= 8) & (i_p < 40))
    else:  # rows 10-29 of those it holds
        g = nl.load(x[it, i_f], mask=(i_p >= 10) & (i_p < 30))
        nl.store(out[i_p, i_f], g, mask=(i_p >= 10) & (i_p < 30))
    return out


def test_a_gather_by_a_masked_results_rows():
    # Unmasked, the gather reads an index from each of the tile's 128 partitions, 96 of which no instruction
    # wrote: an error at the gather's line (it was "nl.store: cannot copy a [32, 64] tile to a [128, 64] region"
    # at the next line, the gather having moved the 32 held rows; the dma_copy "vector_offset has 32 rows but the
    # other side has 128").
    loc = f"{THIS}:{line('MARK-gather-indices')}"
    why = (f"its row indices [32, 1] of sbuf tile it [128, 1] int32 allocated at {loc} hold only rows [8, 40) of "
           f"their 128, the part mask=((i_p >= 8) & (i_p < 40)) at {loc} selected: the indirect DMA reads a row "
           "index from each of the 128 partitions, and those outside [8, 40) no instruction wrote, so the rows it "
           "moves there are undefined: ")
    e = raises(NkiError, tnki.simulate_kernel, gather_by_held_rows, X256, IDX, "load")
    assert str(e) == (f"{THIS}:{line('MARK-gather-load')}: nl.load: {why}mask the load as that call, or give it "
                      "the rows the indices hold (it[8:40] as its row indices)"), str(e)
    e = raises(NkiError, tnki.simulate_kernel, gather_by_held_rows, X256, IDX, "dma")
    assert str(e) == (f"{THIS}:{line('MARK-gather-dma')}: nki.isa.dma_copy: {why}give it the rows the indices "
                      "hold (it[8:40] as its row indices, the other side cut to as many rows)"), str(e)
    # A mask reaching rows the indices do not hold is the looser-mask error (it was "dim 0 of operand [32, 64]
    # of hbm 'x' ... is neither the mask variable's range (128) nor the extent ... selects", as was a mask
    # within them other than the indices' own: "inside" below).
    e = raises(NkiError, tnki.simulate_kernel, gather_by_held_rows, X256, IDX, "wider")
    assert str(e) == (f"{THIS}:{line('MARK-gather-wider')}: nl.load: mask: mask=(i_p < 40) selects [0, 40) of dim "
                      f"0, but operand [32, 1] of sbuf tile it [128, 1] int32 allocated at {loc} holds only [8, 40) "
                      f"of it, the part mask=((i_p >= 8) & (i_p < 40)) at {loc} selected: mask that call as widely, "
                      "or this one as narrowly"), str(e)
    # Masked within them, the gather moves those rows
    for case, (a, b) in (("held", (8, 40)), ("inside", (10, 30))):
        want = np.full((128, 64), -1.0, np.float32)
        want[a:b] = X256[IDX[a:b, 0]]
        same_f32(tnki.simulate_kernel(gather_by_held_rows, X256, IDX, case), want)


# ---- tester23al F1: the index tile as a view of itself, and an index tile no instruction wrote


@nki.jit
def scatter_tail_view(w, idx, base, form):
    # w [384, 16] values; idx [300, 1] target rows: the third index tile holds 44 rows, its other 84 partitions
    # hold the first iteration's indices (the same buffer), which the scatter would write again
    n = idx.shape[0]
    for i in nl.affine_range((n + 127) // 128):
        i_p, i_f = nl.arange(128)[:, None], nl.arange(16)[None, :]
        it = nl.load(idx[i * 128 + i_p, nl.arange(1)[None, :]], mask=(i * 128 + i_p < n))  # MARK-tail-indices
        vt = nl.load(w[i * 128 + i_p, i_f])
        if form == 0:
            nl.store(base[it[i_p, 0], i_f], value=vt)  # MARK-tail-0
        elif form == 1:
            nl.store(base[it[:, 0], i_f], value=vt)  # MARK-tail-1
        else:
            nl.store(base[it[0:128, 0:1], i_f], value=vt)  # MARK-tail-2
    return base


@nki.jit
def gather_by_view(x, idx, case):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.full((128, 64), -1.0, nl.float32))
    i_p, i_f, i_1 = nl.arange(128)[:, None], nl.arange(64)[None, :], nl.arange(1)[None, :]
    it = nl.load(idx[i_p, i_1], mask=(i_p >= 8) & (i_p < 40))
    if case == "rows":  # a view of the held rows: exact
        nl.store(out[8:40, :], nl.load(x[it[8:40, 0], i_f]))
    elif case == "masked":  # a view masked to rows it holds: exact
        g = nl.load(x[it[i_p, 0], i_f], mask=(i_p >= 10) & (i_p < 30))
        nl.store(out[i_p, i_f], g, mask=(i_p >= 10) & (i_p < 30))
    elif case == "wider":  # masked past the rows it holds
        g = nl.load(x[it[i_p, 0], i_f], mask=(i_p < 40))  # MARK-view-wider
    else:
        g = nl.ndarray((40, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=g, src=x[it[0:40, 0], 0:64], dge_mode=nisa.dge_mode.swdge)  # MARK-view-dma
        nl.store(out[0:40, :], g)
    return out


@nki.jit
def gather_by_unwritten(x, skip):
    out = nl.ndarray((64, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    it = nl.ndarray((64, 1), dtype=nl.int32, buffer=nl.sbuf)  # MARK-unwritten-indices (never written)
    g = nl.full((64, 64), -1.0, nl.float32)
    oob = nisa.oob_mode.skip if skip else nisa.oob_mode.error
    nisa.dma_copy(dst=g, src=x[it[:, 0], 0:64], dge_mode=nisa.dge_mode.swdge, oob_mode=oob)  # MARK-unwritten-dma
    nl.store(out, value=g)
    return out


def test_the_index_tile_as_a_view():
    # Each spelling of a view of the masked index tile reading partitions past its held rows is the error of the
    # bare tile (it was silent: the third iteration scattered w[300:384] over 84 rows the first had written).
    loc = f"{THIS}:{line('MARK-tail-indices')}"
    w = (np.arange(384 * 16) % 1000).astype(np.float32).reshape(384, 16)
    idx = ((np.arange(300) * 7) % 1000).astype(np.int32).reshape(300, 1)
    for form in range(3):
        base = np.zeros((1000, 16), np.float32)
        e = raises(NkiError, tnki.simulate_kernel, scatter_tail_view, w, idx, base, form)
        assert str(e) == (
            f"{THIS}:{line(f'MARK-tail-{form}')}: nl.store: its row indices, partitions [0, 128) of sbuf tile it "
            f"[128, 1] int32 allocated at {loc}, reach past the rows [0, 44) it holds, the part mask=(i * 128 + "
            f"i_p < n) at {loc} selected: the indirect DMA reads a row index from each of those 128 partitions, "
            "and those outside [0, 44) no instruction wrote (in a loop they may hold an earlier iteration's "
            "indices), so the rows it moves there are undefined: give it the rows the indices hold (it[0:44] as "
            "its row indices, the other side cut to as many rows)"), str(e)
    e = raises(NkiError, tnki.simulate_kernel, gather_by_view, X256, IDX, "dma")
    assert str(e).startswith(f"{THIS}:{line('MARK-view-dma')}: nki.isa.dma_copy: its row indices, partitions "
                             "[0, 40) of sbuf tile it [128, 1] int32 allocated at "), str(e)
    e = raises(NkiError, tnki.simulate_kernel, gather_by_view, X256, IDX, "wider")
    assert str(e).startswith(f"{THIS}:{line('MARK-view-wider')}: nl.load: its row indices, partitions [0, 40) "
                             "of sbuf tile it [128, 1] int32 allocated at "), str(e)
    assert "reach past the rows [8, 40) it holds" in str(e) and str(e).endswith(
        "mask the load as that call, or give it the rows the indices hold (it[8:40] as its row indices)"), str(e)
    # A view within the rows it holds, or masked to them, moves those rows
    for case, (a, b) in (("rows", (8, 40)), ("masked", (10, 30))):
        want = np.full((128, 64), -1.0, np.float32)
        want[a:b] = X256[IDX[a:b, 0]]
        same_f32(tnki.simulate_kernel(gather_by_view, X256, IDX, case), want)


def test_an_index_tile_no_instruction_wrote():
    # The read of the unwritten index tile is warned, also when the gather then stops at the NaN fill's row
    # index -1 (the warning was lost with the run), and with oob_mode=skip, which skips every row
    from trnsim import RuleError

    why = (f"{THIS}:{line('MARK-unwritten-dma')}: dma_copy reads sbuf 'it' [64, 1] int32 allocated at "
           f"{THIS}:{line('MARK-unwritten-indices')} where no instruction wrote before (partition 0, byte 0 of the "
           "read is the first such): its values are undefined (a tile starts uninitialised, as numpy.empty's "
           "contents; trnsim's memory starts as NaN)")
    x = X256[:100]
    got, ws = warned(lambda: raises(RuleError, tnki.simulate_kernel, gather_by_unwritten, x, False))
    assert "vector_offset[0] = -1 is outside rows [0, 100)" in str(got), str(got)
    assert ws == [why], ws
    got, ws = warned(tnki.simulate_kernel, gather_by_unwritten, x, True)
    same_f32(got, np.full((64, 64), -1.0, np.float32))
    assert ws == [why], ws


# ---- tester23al F2: .ap(scalar_offset=..., indirect_dim=1), one element of each row (nki-library cross_entropy)


@nki.jit
def element_by_index(x, target):
    out = nl.ndarray((1, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    s = nl.load(target)
    g = nl.ndarray((1, 1), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g, src=x.ap(pattern=[[64, 1], [1, 1]], offset=0, scalar_offset=s, indirect_dim=1))  # MARK-dim1
    nl.store(out, value=g)
    return out


def test_a_run_time_offset_on_dim_1_picks_an_element():
    # It was NkiUnsupported ".ap(indirect_dim=1) is not modelled"; now the DMA's scalar_offset_stride (one
    # element of dim 1) moves it: x[0, 5] (test_nki_indirect.py has the reads, writes and bounds).
    got = tnki.simulate_kernel(element_by_index, X256, np.array([[5]], np.int32))
    assert got.tobytes() == X256[0:1, 5:6].tobytes(), (got, X256[0, 5])


if __name__ == "__main__":
    main(globals())
