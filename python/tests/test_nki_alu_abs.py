"""nl.abs as an ALU operator (NKI's math operator table: Absolute, nki.language.abs, Vector/Scalar; the NKI library's
rmsnorm_quant and mlp_cte pass op0=nl.abs, operand0=0.0 to tensor_scalar_reduce for a row's absmax; it was
NkiUnsupported). |data| in FP32, the operand unread. Bytes are compared with NumPy."""

import numpy as np

from runner import bf16, main, raises_at

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl

RNG = np.random.default_rng(2341)
X = RNG.standard_normal((128, 80)).astype(np.float32)
f32 = np.float32


@nki.jit
def absmax(x):
    # The library's per-row absmax: abs values (a side output) and their maximum into [P, 1].
    out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    red = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    a = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    m = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=a, data=t, op0=nl.abs, operand0=0.0, reduce_op=nl.maximum, reduce_res=m)
    nl.store(out, a)
    nl.store(red, m)
    return out, red


def test_absmax_of_each_row():
    out, red = tnki.simulate_kernel(absmax, X)
    assert out.tobytes() == bf16(np.abs(X)).tobytes()
    # reduce_res folds dst's values (NKI's formula reduces dst): the bfloat16 |x|, their maximum exact in FP32.
    assert red.tobytes() == bf16(np.abs(X)).max(axis=1, keepdims=True).tobytes()


@nki.jit
def abs_ops(x, y):
    o1 = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    o2 = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    o3 = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t, u = nl.load(x), nl.load(y)
    # op0=abs then op1: |x| + 0.5 (operand0 unread); the earlier calling style; tensor_tensor's op: |x|.
    nl.store(o1, nisa.tensor_scalar(t, op0=nl.abs, operand0=123.0, op1=nl.add, operand1=0.5))
    r = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=r, data1=t, data2=u, op=np.abs)
    nl.store(o2, r)
    s = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=s, data=t, op0=nl.abs, operand0=0.0, engine=nisa.scalar_engine)
    nl.store(o3, s)
    return o1, o2, o3


def test_tensor_scalar_and_tensor_tensor():
    y = RNG.standard_normal(X.shape).astype(f32)
    o1, o2, o3 = tnki.simulate_kernel(abs_ops, X, y)
    assert o1.tobytes() == (np.abs(X) + f32(0.5)).tobytes()
    assert o2.tobytes() == np.abs(X).tobytes()
    assert o3.tobytes() == np.abs(X).tobytes()


@nki.jit
def abs_on(x, engine):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    s = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=s, data=t, op0=nl.abs, operand0=0.0, engine=engine)  # MARK-abs-engine
    nl.store(out, s)
    return out


def test_not_on_gpsimd():
    raises_at(tnki.NkiError, "tensor_scalar: nl.abs is an ALU operator of the Vector and Scalar engines (NKI's math "
              "operator table), not of GpSimd: use engine=nisa.vector_engine", __file__, "MARK-abs-engine",
              tnki.simulate_kernel, abs_on, X, nisa.gpsimd_engine)
    assert tnki.simulate_kernel(abs_on, X, nisa.vector_engine).tobytes() == np.abs(X).tobytes()


if __name__ == "__main__":
    main(globals())
