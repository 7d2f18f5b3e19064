"""What a kernel gives back (a tester's pass on issue 23): a tensor the kernel returns twice comes back
twice, as NKI's simulator gives back what the kernel returns, and fills write exact values."""

import numpy as np

from runner import main

import trnsim.nki as tnki

import nki_results as K

X = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)


def test_a_tensor_returned_twice_comes_back_twice():
    # `return o1, o2, o1, o1.reshape(...)` gave back two arrays: an output returned again was dropped.
    # nki.simulate runs the kernel over NumPy arrays, so it gives back the kernel's tuple as it is: the same
    # array object wherever the kernel returned the same tensor (trnsim does the same).
    r = tnki.simulate_kernel(K.returned_twice, X)
    assert isinstance(r, tuple) and len(r) == 4, type(r)
    assert r[0] is r[2]
    assert r[0].tobytes() == X.tobytes() and r[1].tobytes() == (X + 1).tobytes()
    assert r[3].shape == (64, 128) and r[3].tobytes() == X.tobytes()
    b = tnki.benchmark(K.returned_twice, X)
    assert len(b.outputs) == 4 and b.outputs[0] is b.outputs[2], len(b.outputs)



def test_integer_fills_are_exact():
    # nl.full / nisa.memset / nl.store(value=<int>) went through float32: 16777217 became 16777216 (the
    # hardware's memset writes a compile-time constant of any dtype exactly: nki.isa.memset).
    out, wide = tnki.simulate_kernel(K.integer_fills, X)
    assert out.dtype == np.int32 and wide.dtype == np.uint32
    want = np.empty((128, 6), np.int32)
    want[:, 0:2], want[:, 2:4], want[:, 4:6] = 16777217, -2147483647, 16777219
    assert out.tobytes() == want.tobytes(), out[0]
    assert (wide == 4294967041).all(), wide[0]


if __name__ == "__main__":
    main(globals())
