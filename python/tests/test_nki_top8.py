"""nisa.max8, nisa.nc_find_index8 and nisa.nc_match_replace8, the Vector engine's top-8 instructions of the NKI
library's router and top-k kernels (NkiUnsupported before). Each output is compared byte for byte with a NumPy
computation written here from NKI's API pages (values compared as FP32; nc_find_index8 pairs a repeated val
with the next occurrence, nc_match_replace8 takes the vals from the last; all ones where nothing is left)."""

import numpy as np

from runner import main, raises_at

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl

RNG = np.random.default_rng(823)
LOGITS = RNG.standard_normal((128, 64)).astype(np.float32)
NONE = 0xFFFFFFFF


def ref_max8(x):
    """The 8 largest of each row, descending (NKI's page)."""
    return -np.sort(-x.astype(np.float32), axis=1)[:, :8]


def ref_pair(data, vals, from_last):
    """Each val with a distinct position of its row holding it: first unused occurrence, vals in order or from
    the last; NONE where none is left."""
    out = np.full(vals.shape, NONE, dtype=np.uint32)
    for p in range(data.shape[0]):
        used = set()
        for i in (range(7, -1, -1) if from_last else range(8)):
            hits = [j for j in np.nonzero(data[p] == vals[p, i])[0] if j not in used]
            if hits:
                out[p, i] = hits[0]
                used.add(hits[0])
    return out


def bf16(a):
    """float32 values rounded to bfloat16 (nearest even), as float32."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).view(np.float32)


# ---- the router's top-8: max8, then nc_find_index8 of those values (current style)


@nki.jit
def k_router(x):
    vals = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    idx = nl.ndarray((128, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    top = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.max8(dst=top, src=t)
    pos = nl.ndarray((128, 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.nc_find_index8(dst=pos, data=t, vals=top)
    nisa.dma_copy(dst=vals, src=top)
    nisa.dma_copy(dst=idx, src=pos)
    return vals, idx


def test_max8_and_nc_find_index8_give_the_top_8_and_their_positions():
    vals, idx = tnki.simulate_kernel(k_router, LOGITS)
    want = ref_max8(LOGITS)
    assert vals.tobytes() == want.tobytes()
    assert idx.dtype == np.uint32 and idx.tobytes() == ref_pair(LOGITS, want, False).tobytes()
    # Distinct random values: the positions are NumPy's argsort order, descending.
    assert idx.tobytes() == np.argsort(-LOGITS, axis=1)[:, :8].astype(np.uint32).tobytes()


def test_repeated_values_take_the_next_occurrence_and_absent_values_all_ones():
    # Small integers: every row has repeats, so max8 returns repeated values and nc_find_index8 pairs each
    # with the next occurrence (ascending).
    x = RNG.integers(-3, 4, (128, 64)).astype(np.float32)
    vals, idx = tnki.simulate_kernel(k_router, x)
    assert vals.tobytes() == ref_max8(x).tobytes()
    assert idx.tobytes() == ref_pair(x, ref_max8(x), False).tobytes()
    assert (x[np.arange(128)[:, None], idx] == vals).all()
    assert all(len(set(r)) == 8 for r in idx.tolist())

    @nki.jit
    def k(x, v):
        out = nl.ndarray((128, 8), dtype=nl.uint16, buffer=nl.shared_hbm)
        pos = nisa.nc_find_index8(data=nl.load(x), vals=nl.load(v), dtype=nl.uint16)  # earlier style
        nl.store(out, pos)
        return out

    # vals 100 is in no row, 3 at most a few times: the uint16 sentinel is 0xFFFF.
    v = np.tile(np.array([3, 3, 3, 3, 3, 3, 3, 100], np.float32), (128, 1))
    got = tnki.simulate_kernel(k, x, v)
    want = ref_pair(x, v, False).astype(np.uint16)  # NONE wraps to 0xFFFF
    assert got.dtype == np.uint16 and got.tobytes() == want.tobytes()
    assert (got[:, 7] == 0xFFFF).all()


# ---- the top-k kernels' loop: max8, then nc_match_replace8 in place with -inf and dst_idx


@nki.jit
def k_topk16(x):
    vals = nl.ndarray((128, 16), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    idx = nl.ndarray((128, 16), dtype=nl.uint32, buffer=nl.shared_hbm)
    data = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=data, src=x)  # exact: x holds bfloat16 values
    v = nl.ndarray((128, 16), dtype=nl.bfloat16, buffer=nl.sbuf)
    i = nl.ndarray((128, 16), dtype=nl.uint32, buffer=nl.sbuf)
    for r in nl.static_range(2):
        nisa.max8(dst=v[:, r * 8:r * 8 + 8], src=data)
        nisa.nc_match_replace8(dst=data, data=data, vals=v[:, r * 8:r * 8 + 8], imm=float("-inf"),
                               dst_idx=i[:, r * 8:r * 8 + 8])
    nl.store(vals, v)
    nl.store(idx, i)
    return vals, idx


def test_max8_and_nc_match_replace8_find_the_top_16_in_bfloat16():
    x = bf16(RNG.integers(-20, 21, (128, 96)).astype(np.float32) / 4)  # many repeats
    vals, idx = tnki.simulate_kernel(k_topk16, x)
    data, want_v, want_i = x.copy(), [], []
    for _ in range(2):
        v = ref_max8(data)
        p = ref_pair(data, v, True)
        data[np.arange(128)[:, None], p] = -np.inf
        want_v.append(v)
        want_i.append(p)
    assert vals.tobytes() == np.concatenate(want_v, axis=1).tobytes()
    assert idx.tobytes() == np.concatenate(want_i, axis=1).tobytes()
    # The meaning: 16 distinct positions whose values are the row's 16 largest.
    assert all(len(set(r)) == 16 for r in idx.tolist())
    assert (np.sort(x[np.arange(128)[:, None], idx], axis=1) == np.sort(x, axis=1)[:, -16:]).all()


def test_nc_match_replace8_pairs_repeated_vals_from_the_last():
    # NKI's page: data [1, 2, 3, 4, 8 x 7] and vals [3, 8 x 7] give dst_idx [2, 10, 9, 8, 7, 6, 5, 4]; the
    # earlier style returns the replaced tile (data's dtype), its dst_idx argument a tile of its own.
    @nki.jit
    def k(x, v):
        out = nl.ndarray((1, 11), dtype=nl.float32, buffer=nl.shared_hbm)
        idx = nl.ndarray((1, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
        i = nl.ndarray((1, 8), dtype=nl.uint32, buffer=nl.sbuf)
        r = nisa.nc_match_replace8(data=nl.load(x), vals=nl.load(v), imm=-1.0, dst_idx=i)
        nl.store(out, r)
        nl.store(idx, i)
        return out, idx

    x = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    v = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    out, idx = tnki.simulate_kernel(k, x, v)
    assert idx.tolist() == [[2, 10, 9, 8, 7, 6, 5, 4]]
    assert out.tobytes() == np.array([[1, 2, -1, 4] + [-1] * 7], np.float32).tobytes()


# ---- fix23aw: a masked nc_find_index8 counts from its operand's first element, not the mask's


@nki.jit
def k_masked_index(x, form, idx_dtype):
    out = nl.ndarray((128, 8), dtype=idx_dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:64]
    if form == "tile":  # a whole tile, masked to columns 8-63
        t = nl.load(x)
        m = nisa.max8(src=t, mask=(i_f >= 8))
        pos = nisa.nc_find_index8(data=t, vals=m, mask=(i_f >= 8), dtype=idx_dtype)
    elif form == "held":  # a tile holding columns 8-63, masked to 8-39
        u = nl.load(x[i_p, i_f], mask=(i_f >= 8))
        m = nisa.max8(src=u, mask=(i_f >= 8) & (i_f < 40))
        pos = nisa.nc_find_index8(data=u, vals=m, mask=(i_f >= 8) & (i_f < 40), dtype=idx_dtype)
    elif form == "absent":  # values no element holds: all ones, after the add too
        pos = nisa.nc_find_index8(data=nl.load(x), vals=nl.full((128, 8), 1000.0, nl.float32), mask=(i_f >= 8),
                                  dtype=idx_dtype)
    else:
        a_p, a_b, a_f = nl.mgrid[0:128, 0:4, 0:16]
        t3 = nl.load(x.reshape((128, 4, 16)))
        if form == "outer":  # blocks 1-3 of [128, 4, 16]: positions 16-63
            m = nisa.max8(src=t3, mask=(a_b >= 1))
            pos = nisa.nc_find_index8(data=t3, vals=m, mask=(a_b >= 1), dtype=idx_dtype)
        else:  # columns 2-15 of every block: no run of positions
            m = nisa.max8(src=t3, mask=(a_f >= 2))
            pos = nisa.nc_find_index8(data=t3, vals=m, mask=(a_f >= 2), dtype=idx_dtype)  # MARK-inner
    nl.store(out, pos)
    return out


def test_a_masked_nc_find_index8_counts_from_its_operands_first_element():
    # nc_find_index8(data=t, vals=max8(src=t, mask=(i_f >= 8)), mask=(i_f >= 8)) gave each value's index from
    # column 8 (column 42's value was 34): the instruction indexed the masked part. NKI's page counts indices
    # "starting at 0" in the data tensor, masked or not, and says nothing of the mask's start: trnsim counts from
    # the operand's first element, as the unmasked call and nc_n_gather do (docs/nki.md "What differs").
    x = LOGITS
    want = lambda lo, hi: (np.argsort(-x[:, lo:hi], axis=1, kind="stable")[:, :8] + lo).astype(np.uint32)
    for dtype, np_dtype in ((nl.uint32, np.uint32), (nl.uint16, np.uint16)):
        for form, lo, hi in (("tile", 8, 64), ("held", 8, 40), ("outer", 16, 64)):
            got = tnki.simulate_kernel(k_masked_index, x, form, dtype)
            assert got.dtype == np_dtype and got.tobytes() == want(lo, hi).astype(np_dtype).tobytes(), (form, dtype)
        got = tnki.simulate_kernel(k_masked_index, x, "absent", dtype)
        assert (got == np.iinfo(np_dtype).max).all(), dtype
    raises_at(tnki.NkiUnsupported, "nki.isa.nc_find_index8(mask=...) keeping part of an inner free dim of data "
              "[128, 4, 16] (dims [0, 128), [0, 4), [2, 16)) is not modelled by trnsim: the masked elements are no "
              "run of the operand's positions", __file__, "MARK-inner", tnki.simulate_kernel, k_masked_index, x,
              "inner", nl.uint32)


# ---- errors: the shape and dtype rules of NKI's pages, naming the call and the kernel line


def test_shape_and_dtype_rules():
    @nki.jit
    def k_max8(x):
        out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.max8(src=nl.load(x)))  # MARK-max8
        return out

    raises_at(Exception, "max8 on DVE: shape: src has 4 elements per partition; max8 reads 8 to 16384", __file__,
              "MARK-max8", tnki.simulate_kernel, k_max8, np.zeros((128, 4), np.float32))

    @nki.jit
    def k_index(x, idx_dtype, width, style):
        out = nl.ndarray((128, 8), dtype=idx_dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        pos = nl.ndarray((128, 8), dtype=idx_dtype, buffer=nl.sbuf)
        if style == "find":
            nisa.nc_find_index8(dst=pos, data=t, vals=t[:, 0:width])  # MARK-find
        elif style == "find_old":
            pos = nisa.nc_find_index8(data=t, vals=t[:, 0:width], dtype=idx_dtype)  # MARK-find-old
        else:
            nisa.nc_match_replace8(dst=t, data=t, vals=t[:, 0:width], imm=0.0, dst_idx=pos)  # MARK-replace
        nl.store(out, pos)
        return out

    run = tnki.simulate_kernel
    raises_at(Exception, "nc_find_index8 on DVE: dtype: dst must be uint16 or uint32 (indices), got float32",
              __file__, "MARK-find", run, k_index, LOGITS, idx_dtype=nl.float32, width=8, style="find")
    raises_at(tnki.NkiError, "nc_find_index8: dtype must be nl.uint16 or nl.uint32 (indices), got int32",
              __file__, "MARK-find-old", run, k_index, LOGITS, idx_dtype=nl.int32, width=8, style="find_old")
    raises_at(Exception, "nc_match_replace8 on DVE: shape: vals must be [128, 8] (8 per partition), got [128, 4]",
              __file__, "MARK-replace", run, k_index, LOGITS, idx_dtype=nl.uint32, width=4, style="replace")


# ---- time: NKI's "N engine cycles" plus the DVE fixed overhead


def test_max8_takes_n_cycles_plus_the_fixed_overhead():
    r = tnki.benchmark(k_router, LOGITS)
    ns = {o["opcode"]: o["total_ns"] for o in r.stats["opcodes"] if o["engine"] == "DVE"}
    # configs/hw/trn2.json: DVE fixed_overhead_cycles 100 at 0.96 GHz; src has N = 64 elements per partition:
    # (100 + 64) / 0.96 = 170.8333 ns, whole picoseconds rounded up: 170.834 ns; nc_find_index8 reads the same
    # data, the same time.
    assert ns["max8"] == 170.834, ns
    assert ns["nc_find_index8"] == 170.834, ns


if __name__ == "__main__":
    main(globals())
