"""An operand access of more than 4 free dims after merging (the access patterns' limit): trnsim does not split
it into several instructions as NKI's compiler does, so it is NkiUnsupported at the kernel's line and call
(tester23n F5: a line-less InputError from the builder, raised inside trnsim's own _entry.py)."""

import numpy as np

from runner import line_of, main, raises

import trnsim.nki as tnki
import nki
import nki.language as nl


@nki.jit
def upsample(src):
    # nki-samples' trilinear interpolation's 2x scatter: six free axes of the index space.
    dst = nl.ndarray((128, 4, 4, 4), dtype=src.dtype, buffer=nl.shared_hbm)
    t = nl.load(src)
    out = nl.ndarray((128, 4, 4, 4), dtype=src.dtype, buffer=nl.sbuf)
    i_p, a, b, c, d, e, f = nl.mgrid[0:128, 0:2, 0:2, 0:2, 0:2, 0:2, 0:2]
    out[i_p, 2 * d + a, 2 * e + b, 2 * f + c] = nl.multiply(t[i_p, d + a, e + b, f + c], 1.0)  # MARK-6
    nl.store(dst, out)
    return dst


@nki.jit
def strided_load(x):
    out = nl.ndarray((128, 2, 2, 2, 2, 2), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x[:, ::2, ::2, ::2, ::2, ::2])  # MARK-5
    nl.store(out, t)
    return out


def test_more_than_four_free_dims_is_unsupported_at_the_line():
    src = np.zeros((128, 3, 3, 3), np.float32)
    e = raises(tnki.NkiUnsupported, tnki.simulate_kernel, upsample, src)
    assert str(e) == ("test_nki_access_limits.py:%d: nl.multiply: sbuf 'out' [128, 2, 2, 2, 2, 2, 2] float32: 6 "
                      "free dims after merging; access patterns have at most 4: an access of more than 4 free dims "
                      "(after merging) is not modelled by trnsim; split it (a loop over one of its axes)"
                      % line_of(__file__, "MARK-6")), str(e)
    e = raises(tnki.NkiUnsupported, tnki.simulate_kernel, strided_load, np.zeros((128, 3, 3, 3, 3, 3), np.float32))
    assert str(e).startswith("test_nki_access_limits.py:%d: nl.load: hbm 'x' [128, 2, 2, 2, 2, 2] float32: 5 free "
                             "dims after merging; access patterns" % line_of(__file__, "MARK-5")), str(e)


if __name__ == "__main__":
    main(globals())
