"""nc_matmul arguments public kernels pass that select a modelled mode: tile_position (0, 0) with tile_size
(128, 128) is the whole PE array, no tiling (nki-library's router_topk passes it with its column tiling off);
perf_mode='double_row_gen3' is the FP8 double-row mode's earlier name (NKI's own neuronxcc nc_matmul example runs
it on trn2 with [K, 2, F] operands, the einsum over K and both rows: double_row's mechanism). Each gives the bytes
and the simulated time of the modelled call. A real tile or an unknown perf_mode is an error naming it."""

import numpy as np

from runner import line_of, main, raises

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl

RNG = np.random.default_rng(7)
A = RNG.standard_normal((128, 128)).astype(np.float32)
B = RNG.standard_normal((128, 256)).astype(np.float32)


def matmul_kernel(**mm):
    @nki.jit
    def k(a, b):
        o = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm, name="o")
        acc = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=nl.load(a), moving=nl.load(b), **mm)  # MARK-tile
        nl.store(o, value=nl.copy(acc))
        return o

    return k


def test_whole_array_tile_is_the_plain_matmul():
    plain = tnki.benchmark(matmul_kernel(), A, B)
    whole = tnki.benchmark(matmul_kernel(tile_position=(0, 0), tile_size=(128, 128)), A, B)
    assert np.array_equal(whole.outputs[0], plain.outputs[0])
    assert whole.latency_ns == plain.latency_ns, (whole.latency_ns, plain.latency_ns)


def test_a_real_tile_is_not_modelled():
    e = raises(tnki.NkiUnsupported, tnki.simulate_kernel,
               matmul_kernel(tile_position=(0, 64), tile_size=(128, 64)), A, B)
    assert "nki.isa.nc_matmul(tile_position=..., tile_size=...) is not modelled by trnsim: PE row/column " \
           "tiling" in str(e), str(e)
    assert "test_nki_matmul_spellings.py:%d" % line_of(__file__, "MARK-tile") in str(e), str(e)


@nki.jit
def k_double_row(a, b, mode):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    ta = nl.ndarray((128, 2, 128), dtype=nl.float8_e4m3, buffer=nl.sbuf)
    tb = nl.ndarray((128, 2, 512), dtype=nl.float8_e4m3, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    nisa.dma_copy(dst=tb, src=b)
    res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=res, stationary=ta, moving=tb, perf_mode=mode)
    nl.store(out, res)
    return out


def test_double_row_gen3_is_double_row():
    # Integers -4..4 are exact in float8_e4m3 and their sums of 256 products in float32.
    a = RNG.integers(-4, 5, (128, 2, 128)).astype(np.float32)
    b = RNG.integers(-4, 5, (128, 2, 512)).astype(np.float32)
    want = np.einsum("krm,krn->mn", a, b)
    gen3 = tnki.benchmark(k_double_row, a, b, "double_row_gen3")
    named = tnki.benchmark(k_double_row, a, b, nisa.matmul_perf_mode.double_row)
    assert gen3.outputs[0].tobytes() == want.tobytes()
    assert gen3.latency_ns == named.latency_ns, (gen3.latency_ns, named.latency_ns)
    assert gen3.stats["opcodes"] == named.stats["opcodes"]


def test_an_unknown_perf_mode_is_named():
    a = np.zeros((128, 2, 128), dtype=np.float32)
    b = np.zeros((128, 2, 512), dtype=np.float32)
    e = raises(tnki.NkiError, tnki.simulate_kernel, k_double_row, a, b, "quad_row")
    assert "nc_matmul: perf_mode must be an nki.isa.matmul_perf_mode (none, double_row; 'double_row_gen3' is " \
           "double_row's earlier name), got 'quad_row'" in str(e), str(e)


if __name__ == "__main__":
    main(globals())
