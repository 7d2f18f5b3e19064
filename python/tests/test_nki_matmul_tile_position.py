"""nc_matmul arguments public kernels pass that select the plain matmul: tile_position (0, 0) with tile_size
(128, 128) is the whole PE array, no tiling (nki-library's router_topk passes it with its column tiling off); it
gives the bytes and the simulated time of the call without it. A real tile is still NkiUnsupported.
(perf_mode='double_row_gen3': test_nki_isa_numpy.py, beside double_row's test.)"""

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
    assert "test_nki_matmul_tile_position.py:%d" % line_of(__file__, "MARK-tile") in str(e), str(e)


if __name__ == "__main__":
    main(globals())
