"""nisa.nc_n_gather (the NKI library's rotational top-k; NkiUnsupported before): dst[p, j] = data[p, indices[p, j]]
over data's free elements flattened, on the GpSimd engine, bytes copied. Compared byte for byte with NumPy's
take_along_axis."""

import numpy as np

from runner import main, raises_at

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl

RNG = np.random.default_rng(2344)
X = RNG.standard_normal((128, 8, 64)).astype(np.float32)
IDX = RNG.integers(0, 512, (128, 48), dtype=np.int64).astype(np.uint32)


@nki.jit
def gather(x, idx):
    out = nl.ndarray(idx.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    d = nl.ndarray(idx.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.nc_n_gather(d, nl.load(x), nl.load(idx))
    nl.store(out, d)
    return out


def test_gathers_within_each_partition():
    got = tnki.simulate_kernel(gather, X, IDX)
    assert got.tobytes() == np.take_along_axis(X.reshape(128, -1), IDX.astype(np.int64), axis=1).tobytes()


@nki.jit
def k_bad(x, idx, buffer=nl.sbuf):
    out = nl.ndarray(idx.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    d = nl.ndarray(idx.shape, dtype=nl.float32, buffer=buffer)
    nisa.nc_n_gather(dst=d, data=nl.load(x), indices=nl.load(idx))  # MARK-bad
    nl.store(out, d)
    return out


def test_errors_name_the_call_and_the_line():
    raises_at(tnki.NkiError, "nc_n_gather: indices must be nl.uint32, got int32", __file__, "MARK-bad",
              tnki.simulate_kernel, k_bad, X, IDX.astype(np.int32))
    bad = IDX.copy()
    bad[3, 7] = 512
    raises_at(Exception, "nc_n_gather on POOL: index: indices[3, 7] = 512 is outside data's 512 elements per "
              "partition", __file__, "MARK-bad", tnki.simulate_kernel, k_bad, X, bad)


def test_a_psum_dst_is_refused_naming_it():
    raises_at(tnki.NkiError, "nc_n_gather: dst is in PSUM; nc_n_gather runs on the GpSimd engine, which cannot "
              "access PSUM (nki.isa.nc_n_gather): dst must be in SBUF", __file__, "MARK-bad",
              tnki.simulate_kernel, k_bad, X, IDX, nl.psum)


def test_time_is_the_gpsimd_rule_over_the_gathered_elements():
    r = tnki.benchmark(gather, X, IDX)
    ns = {o["opcode"]: o["total_ns"] for o in r.stats["opcodes"] if o["engine"] == "POOL"}
    # No published cost: configs/hw/trn2.json's POOL fixed_overhead_cycles 150 + 48 gathered elements per
    # partition at 1.2 GHz: 198 / 1.2 = 165 ns.
    assert ns["nc_n_gather"] == 165.0, ns


if __name__ == "__main__":
    main(globals())
