"""nisa.nonzero_with_count (GpSimd) and nisa.nc_stream_shuffle (Vector), which the NKI library's
find_nonzero_indices uses (NkiUnsupported before). Each is compared byte for byte with a NumPy twin written from
its NKI page: nonzero_with_count's page's behaviour sketch (positions + index_offset, padding, the count; only
partitions 0, 16, ..., 112, the others unmodified) and nc_stream_shuffle's (each 32-partition quadrant takes
dst[i] = src[shuffle_mask[i]], 255 leaves dst[i])."""

import numpy as np

from runner import main, raises_at

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl

RNG = np.random.default_rng(2315)
SENTINEL = 7


def nonzero_twin(x, index_offset, padding_val, before):
    """The page's behaviour for each partition 0, 16, ..., 112 of x [P, T]; the other rows keep `before`."""
    out = before.copy()
    for p in range(0, x.shape[0], 16):
        nz = [i + index_offset for i in range(x.shape[1]) if x[p, i] != 0]
        out[p] = np.array(nz + [padding_val] * (x.shape[1] - len(nz)) + [len(nz)], np.int64).astype(np.int32)
    return out


def shuffle_twin(src, mask, before):
    out = before.copy()
    for q in range(0, before.shape[0], 32):
        for i in range(32):
            if mask[i] != 255:
                out[q + i] = src[q + mask[i]]
    return out


@nki.jit
def nonzero(x, index_offset=0, padding_val=-1):
    out = nl.ndarray((x.shape[0], x.shape[1] + 1), dtype=nl.int32, buffer=nl.shared_hbm)
    d = nl.ndarray(out.shape, dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=d, value=SENTINEL)
    nisa.nonzero_with_count(dst=d, src=nl.load(x), index_offset=index_offset, padding_val=padding_val)  # MARK-nz
    nl.store(out, d)
    return out


def sparse(dtype, shape=(128, 90)):
    x = (RNG.random(shape) < 0.3) * RNG.integers(1, 5, shape)
    x = x.astype(dtype)
    if dtype == np.float32:
        x[16, 3] = -0.0  # zero
        x[16, 4] = np.nan  # not zero
        x[32, :] = 0.0  # nothing found: all padding, count 0
        x[48, :] = 1.5  # all found: no padding
    return x


def test_nonzero_with_count_matches_the_pages_behaviour():
    before = np.full((128, 91), SENTINEL, np.int32)
    for dtype in (np.float32, np.int32):
        x = sparse(dtype)
        got = tnki.simulate_kernel(nonzero, x)
        assert got.tobytes() == nonzero_twin(x, 0, -1, before).tobytes(), (dtype, got[0])
    # The page's example: [0, 1, 1, 0, 0, 1, 0, 0], index_offset 16 -> [17, 18, 21, -1 x 5, 3].
    x = np.zeros((128, 8), np.float32)
    x[:, [1, 2, 5]] = 1.0
    got = tnki.simulate_kernel(nonzero, x, index_offset=16)
    assert list(got[0]) == [17, 18, 21, -1, -1, -1, -1, -1, 3] and list(got[1]) == [SENTINEL] * 9, got[:2]


def test_nonzero_with_count_immediates_are_exact_int32():
    # int32 immediates, not FP32: 2^24 + 1 and 2^31 - 5 past FP32's 24 bits, and INT32_MIN as the padding.
    x = sparse(np.int32)
    before = np.full((128, 91), SENTINEL, np.int32)
    for off, pad in ((2 ** 24 + 1, -2 ** 31), (2 ** 31 - 100, 2 ** 31 - 5)):
        got = tnki.simulate_kernel(nonzero, x, index_offset=off, padding_val=pad)
        assert got.tobytes() == nonzero_twin(x, off, pad, before).tobytes(), (off, pad, got[0, :4])


@nki.jit
def shuffle(x, mask, in_place=False):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    s = nl.load(x)
    d = s if in_place else nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    if not in_place:
        nisa.memset(dst=d, value=SENTINEL)
    nisa.nc_stream_shuffle(dst=d, src=s, shuffle_mask=mask)  # MARK-sh
    nl.store(out, d)
    return out


def test_nc_stream_shuffle_moves_partitions_within_each_quadrant():
    mask = [int(v) for v in RNG.permutation(32)]
    mask[3] = mask[9] = 255
    mask[10] = mask[11]  # one source twice
    for dtype in (np.float32, np.int32):
        x = (RNG.standard_normal((128, 92)) * 100).astype(dtype)
        got = tnki.simulate_kernel(shuffle, x, mask)
        assert got.tobytes() == shuffle_twin(x, mask, np.full_like(x, SENTINEL)).tobytes(), dtype
    # find_nonzero_indices' in-place use: partition 16 of each quadrant to its partition 0, the rest kept.
    x = RNG.integers(-9, 9, (128, 92)).astype(np.int32)
    keep16 = [16] + [255] * 31
    got = tnki.simulate_kernel(shuffle, x, keep16, in_place=True)
    assert got.tobytes() == shuffle_twin(x, keep16, x).tobytes()
    # A 32-partition tile: one quadrant.
    x = RNG.standard_normal((32, 92)).astype(np.float32)
    got = tnki.simulate_kernel(shuffle, x, mask)
    assert got.tobytes() == shuffle_twin(x, mask, np.full_like(x, SENTINEL)).tobytes()


@nki.jit
def shuffle_earlier_style(x, mask):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=d, value=SENTINEL)
    nisa.nc_stream_shuffle(nl.load(x), d, mask, dtype=x.dtype)  # earlier: (src, dst, shuffle_mask, *, dtype, mask)
    nl.store(out, d)
    return out


def test_nc_stream_shuffle_earlier_calling_style():
    mask = list(range(31, -1, -1))
    x = RNG.standard_normal((64, 92)).astype(np.float32)
    got = tnki.simulate_kernel(shuffle_earlier_style, x, mask)
    assert got.tobytes() == shuffle_twin(x, mask, np.full_like(x, SENTINEL)).tobytes()


def test_times_are_the_engines_one_input_rules():
    # No published cost for either: ours, the engine's one-input rule (configs/hw/trn2.json).
    # nonzero_with_count on POOL: fixed_overhead_cycles 150 + 90 src elements per partition = 240 cycles at
    # 1.2 GHz = 200 ns. nc_stream_shuffle on DVE: fixed 100 + 92 elements = 192 cycles at 0.96 GHz = 200 ns.
    r = tnki.benchmark(nonzero, sparse(np.float32))
    ns = {o["opcode"]: o["total_ns"] for o in r.stats["opcodes"] if o["engine"] == "POOL"}
    assert ns["nonzero_with_count"] == 200.0, ns
    r = tnki.benchmark(shuffle, np.zeros((128, 92), np.float32), list(range(32)))
    ns = {o["opcode"]: o["total_ns"] for o in r.stats["opcodes"] if o["engine"] == "DVE"}
    assert ns["nc_stream_shuffle"] == 200.0, ns


@nki.jit
def nonzero_into(x, out_dtype, width):
    out = nl.ndarray((x.shape[0], width), dtype=out_dtype, buffer=nl.shared_hbm)
    d = nl.ndarray(out.shape, dtype=out_dtype, buffer=nl.sbuf)
    nisa.nonzero_with_count(dst=d, src=nl.load(x))  # MARK-into
    nl.store(out, d)
    return out


def test_nonzero_with_count_errors_name_the_line():
    x = sparse(np.float32, (128, 16))
    raises_at(tnki.NkiError, "nonzero_with_count: dst must be nl.int32, got float32", __file__, "MARK-into",
              tnki.simulate_kernel, nonzero_into, x, nl.float32, 17)
    raises_at(tnki.NkiError, "nonzero_with_count: dst [128, 16] must have src's 128 partitions and one more "
              "element per partition than src [128, 16] (17: the count)", __file__, "MARK-into",
              tnki.simulate_kernel, nonzero_into, x, nl.int32, 16)
    raises_at(tnki.NkiError, "nonzero_with_count: src must be nl.float32 or nl.int32, got int16", __file__,
              "MARK-into", tnki.simulate_kernel, nonzero_into, np.zeros((128, 16), np.int16), nl.int32, 17)
    raises_at(tnki.NkiError, "nonzero_with_count: index_offset 2147483648 is outside int32", __file__, "MARK-nz",
              tnki.simulate_kernel, nonzero, x, index_offset=2 ** 31)
    raises_at(tnki.NkiError, "nonzero_with_count: padding_val must be an int32 number, got 0.5", __file__,
              "MARK-nz", tnki.simulate_kernel, nonzero, x, padding_val=0.5)
    raises_at(tnki.NkiError, "nonzero_with_count: NeuronCore-v3 and newer only (Trn2, Trn3); this target is trn1",
              __file__, "MARK-nz", tnki.simulate_kernel, nonzero, x, hardware="trn1")


def test_nc_stream_shuffle_errors_name_the_line():
    x = np.zeros((128, 8), np.float32)
    raises_at(tnki.NkiError, "nc_stream_shuffle: shuffle_mask has 31 entries, expected 32 (one per partition of a "
              "quadrant)", __file__, "MARK-sh", tnki.simulate_kernel, shuffle, x, list(range(31)))
    raises_at(tnki.NkiError, "nc_stream_shuffle: shuffle_mask[5] is 32: expected a source partition 0-31 of the "
              "quadrant, or 255 (the output partition is not modified)", __file__, "MARK-sh", tnki.simulate_kernel,
              shuffle, x, [0] * 5 + [32] + [0] * 26)


if __name__ == "__main__":
    main(globals())
