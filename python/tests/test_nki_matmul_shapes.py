"""nisa.nc_matmul's operand sizes: a stationary tile of more than 128 columns (the PE array's,
nl.tile_size.gemm_stationary_fmax) is refused naming that limit at the kernel line."""

import numpy as np

from runner import line_of, main, raises

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def wide_stationary(a):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=x, value=1.0)
    y = nl.load(a)
    p = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=x, moving=y)  # MARK-wide-stationary
    nl.store(out, p)
    return out


@nki.jit
def full_stationary(a):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=x, value=1.0)
    p = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=x, moving=nl.load(a))
    nl.store(out, p)
    return out


def test_a_stationary_over_128_columns_names_the_limit():
    # tester23ab F11: it said "dst [128, 256] must be [256, 256]", which no PSUM tile can be (128 partitions).
    a = np.arange(128 * 256, dtype=np.float32).reshape(128, 256) % 7
    e = raises(tnki.NkiError, tnki.simulate_kernel, wide_stationary, a)
    assert str(e) == ("test_nki_matmul_shapes.py:%d: nc_matmul: stationary [128, 256] has a free size of 256, over "
                      "the 128 columns of the PE array (nl.tile_size.gemm_stationary_fmax): split it into tiles of "
                      "128 columns" % line_of(__file__, "MARK-wide-stationary")), str(e)
    # 128 columns: x.T @ a, each row of the result the column sums of a.
    got = tnki.simulate_kernel(full_stationary, a)
    assert np.array_equal(got, np.ones((128, 128), np.float32).T @ a)


if __name__ == "__main__":
    main(globals())
