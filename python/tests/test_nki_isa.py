"""Every nki.isa call trnsim supports (both calling styles) and the nl.* lowerings, against the same
instructions written directly on the C++ builder (trnsim._core.nki): the outputs must be the same bytes.
Each case is an NKI Python kernel and its builder twin over the same inputs."""

import numpy as np

from runner import main, raises

import trnsim
import trnsim.nki as tnki
from trnsim import _core
from trnsim._core import DType, Engine, AluOp, ActFunc

import nki
import nki.isa as nisa
import nki.language as nl

HW = {}


def hw(name="trn2"):
    if name not in HW:
        HW[name] = trnsim.load_hw(name)
    return HW[name]


def cpp_run(fn, inputs, gen="trn2", num_programs=1):
    """Builds fn on the C++ builder, runs it with `inputs` {name: array}, returns {output: values} (float32
    values for float dtypes, as the Python entry points return them)."""
    g = _core.Generation.Trn3 if gen == "trn3" else _core.Generation.Trn2
    b = _core.build_program(fn, limits=_core.default_limits(g), num_programs=num_programs)
    s = _core.Session(b.program, hw(gen))
    for n, a in inputs.items():
        s.set_input(n, a)
    s.run()
    return {n: s.read(n) for n in b.outputs}


def py_run(kernel, arrays, gen="trn2", **params):
    r = tnki.benchmark(kernel, *arrays, hardware=gen, **params)
    return r


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.tobytes() == b.tobytes(), np.abs(a.astype(np.float64) - b.astype(np.float64)).max()


RNG = np.random.default_rng(7)
X = RNG.standard_normal((128, 512)).astype(np.float32)
Y = RNG.standard_normal((128, 512)).astype(np.float32)
V = RNG.standard_normal((128, 1)).astype(np.float32) + 3.0


def f32_out(k, name, shape):
    return k.output(name, DType.F32, list(shape))


# ---- tensor_tensor / tensor_scalar / activation / tensor_reduce / tensor_copy, current style


@nki.jit
def k_vector_ops(x, y, v):
    o1 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm, name="o1")
    o2 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm, name="o2")
    o3 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm, name="o3")
    o4 = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm, name="o4")
    o5 = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm, name="o5")
    tx = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    ty = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    tv = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=tx, src=x)
    nisa.dma_copy(dst=ty, src=y)
    nisa.dma_copy(dst=tv, src=v)
    a = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=a, data1=tx, data2=ty, op=nl.multiply)
    b = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=b, data=a, op0=nl.subtract, operand0=tv, reverse0=True, op1=nl.maximum,
                       operand1=-0.5, engine=nisa.scalar_engine)
    c = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=c, op=nl.exp, data=b, bias=tv, scale=0.25, reduce_op=nl.add, reduce_res=s)
    m = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=m, op=nl.maximum, data=c, axis=(1,), negate=True)
    d = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=d, src=c, engine=nisa.vector_engine)
    nisa.dma_copy(dst=o1, src=a)
    nisa.dma_copy(dst=o2, src=b)
    nisa.dma_copy(dst=o3, src=d)
    nisa.dma_copy(dst=o4, src=s)
    nisa.dma_copy(dst=o5, src=m)
    return o1, o2, o3, o4, o5


def cpp_vector_ops(k):
    x = k.input("x", DType.F32, [128, 512])
    y = k.input("y", DType.F32, [128, 512])
    v = k.input("v", DType.F32, [128, 1])
    outs = [f32_out(k, "o%d" % i, s) for i, s in ((1, (128, 512)), (2, (128, 512)), (3, (128, 512)),
                                                   (4, (128, 1)), (5, (128, 1)))]
    tx, ty, tv = k.sbuf([128, 512], DType.F32, "tx"), k.sbuf([128, 512], DType.F32, "ty"), k.sbuf([128, 1], DType.F32, "tv")
    isa = _core.nki
    isa.dma_copy(tx, x)
    isa.dma_copy(ty, y)
    isa.dma_copy(tv, v)
    a = k.sbuf([128, 512], DType.F32, "a")
    isa.tensor_tensor(a, tx, ty, AluOp.Multiply)
    b = k.sbuf([128, 512], DType.F32, "b")
    isa.tensor_scalar(b, a, AluOp.Subtract, tv, reverse0=True, op1=AluOp.Max, operand1=-0.5, engine=Engine.ACT)
    c = k.sbuf([128, 512], DType.F32, "c")
    s = k.sbuf([128, 1], DType.F32, "s")
    isa.activation(c, ActFunc.Exp, b, bias=tv, scale=0.25, reduce_res=s)
    m = k.sbuf([128, 1], DType.F32, "m")
    isa.tensor_reduce(m, AluOp.Max, c, [1], negate=True)
    d = k.sbuf([128, 512], DType.F32, "d")
    isa.tensor_copy(d, c, engine=Engine.DVE)
    for o, t in zip(outs, (a, b, d, s, m)):
        isa.dma_copy(o, t)


def test_vector_ops_current_style():
    r = py_run(k_vector_ops, [X, Y, V])
    ref = cpp_run(cpp_vector_ops, {"x": X, "y": Y, "v": V})
    outs = r.outputs
    for i, o in enumerate(outs, 1):
        same(o, ref["o%d" % i])
    # the engines the kernel named or left to the compiler (Vector for tensor_tensor/reduce, Scalar for activation)
    busy = r.stats["summary"]
    assert busy["vector_engine_active_time_percent"] > 0 and busy["scalar_engine_active_time_percent"] > 0


# ---- the earlier style: results returned, mask, dtype, nl.* lowerings


@nki.jit
def k_earlier(x, y):
    o = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.shared_hbm, name="o")
    i_p, i_f = nl.mgrid[0:128, 0:512]
    tx = nl.load(x[i_p, i_f])
    ty = nl.load(y)
    a = nisa.tensor_tensor(tx, ty, nl.add)
    b = nisa.tensor_scalar(a, np.multiply, 3.0, op1=nl.add, operand1=1.0)
    c = nisa.activation(nl.tanh, b, dtype=nl.bfloat16)
    nl.store(o[i_p, i_f], value=c)
    return o


def cpp_earlier(k):
    x = k.input("x", DType.F32, [128, 512])
    y = k.input("y", DType.F32, [128, 512])
    o = k.output("o", DType.BF16, [128, 512])
    isa = _core.nki
    tx, ty = k.sbuf([128, 512], DType.F32, "tx"), k.sbuf([128, 512], DType.F32, "ty")
    isa.dma_copy(tx, x)
    isa.dma_copy(ty, y)
    a, b = k.sbuf([128, 512], DType.F32, "a"), k.sbuf([128, 512], DType.F32, "b")
    isa.tensor_tensor(a, tx, ty, AluOp.Add)
    isa.tensor_scalar(b, a, AluOp.Multiply, 3.0, op1=AluOp.Add, operand1=1.0)
    c = k.sbuf([128, 512], DType.BF16, "c")
    isa.activation(c, ActFunc.Tanh, b)
    isa.dma_copy(o, c)


def test_earlier_style_returns_tiles():
    r = py_run(k_earlier, [X, Y])
    same(r.outputs[0], cpp_run(cpp_earlier, {"x": X, "y": Y})["o"])


@nki.jit
def k_lowerings(x, y):
    o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm, name="o")
    s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm, name="s")
    tx = nl.load(x)
    ty = nl.load(y)
    e = nl.exp(tx)
    z = nl.add(e, ty)
    z2 = nl.multiply(z, 0.5)
    m = nl.max(z2, axis=1, keepdims=True)  # [128, 1] (keepdims=False removes the axis: [128])
    w = nl.subtract(z2, m)
    nl.store(o, value=w)
    nl.store(s, value=nl.sum(w, axis=1))
    return o, s


def cpp_lowerings(k):
    x = k.input("x", DType.F32, [128, 512])
    y = k.input("y", DType.F32, [128, 512])
    o = k.output("o", DType.F32, [128, 512])
    so = k.output("s", DType.F32, [128, 1])
    isa = _core.nki
    tx, ty = k.sbuf([128, 512], DType.F32, "tx"), k.sbuf([128, 512], DType.F32, "ty")
    isa.dma_copy(tx, x)
    isa.dma_copy(ty, y)
    e, z, z2, w = (k.sbuf([128, 512], DType.F32, n) for n in "e z z2 w".split())
    m, s = k.sbuf([128, 1], DType.F32, "m"), k.sbuf([128, 1], DType.F32, "s")
    isa.activation(e, ActFunc.Exp, tx)
    isa.tensor_tensor(z, e, ty, AluOp.Add)
    isa.tensor_scalar(z2, z, AluOp.Multiply, 0.5)
    isa.tensor_reduce(m, AluOp.Max, z2, [1])
    isa.tensor_scalar(w, z2, AluOp.Subtract, m)
    isa.dma_copy(o, w)
    isa.tensor_reduce(s, AluOp.Add, w, [1])
    isa.dma_copy(so, s)


def test_language_lowerings():
    r = py_run(k_lowerings, [X, Y])
    ref = cpp_run(cpp_lowerings, {"x": X, "y": Y})
    same(r.outputs[0], ref["o"])
    same(r.outputs[1], ref["s"])


# ---- matmul, transposes, memset, iota


A = RNG.standard_normal((128, 128)).astype(np.float32)
B = RNG.standard_normal((256, 512)).astype(np.float32)


@nki.jit
def k_matmul(a, b):
    o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm, name="o")
    t = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm, name="t")
    ta = nl.load(a)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(2):
        tb = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=tb, src=b[k * 128:(k + 1) * 128, :])
        nisa.nc_matmul(dst=acc, stationary=ta, moving=tb)
    nl.store(o, value=nl.copy(acc))
    tp = nisa.nc_transpose(ta)  # earlier style: PSUM result on the Tensor engine
    nl.store(t, value=tp)
    return o, t


def cpp_matmul(k):
    a = k.input("a", DType.F32, [128, 128])
    b = k.input("b", DType.F32, [256, 512])
    o = k.output("o", DType.F32, [128, 512])
    t = k.output("t", DType.F32, [128, 128])
    isa = _core.nki
    ta = k.sbuf([128, 128], DType.F32, "ta")
    isa.dma_copy(ta, a)
    acc = k.psum([128, 512], DType.F32, "acc")
    for kk in range(2):
        tb = k.sbuf([128, 512], DType.F32, "tb%d" % kk)
        isa.dma_copy(tb, b[kk * 128:(kk + 1) * 128])
        isa.nc_matmul(acc, ta, tb, accumulate=kk > 0)
    c = k.sbuf([128, 512], DType.F32, "c")
    isa.tensor_copy(c, acc, engine=Engine.ACT)
    isa.dma_copy(o, c)
    tp = k.psum([128, 128], DType.F32, "tp")
    isa.nc_transpose(tp, ta)
    tc = k.sbuf([128, 128], DType.F32, "tc")
    isa.tensor_copy(tc, tp, engine=Engine.ACT)
    isa.dma_copy(t, tc)


def test_matmul_accumulation_group_and_transpose():
    r = py_run(k_matmul, [A, B])
    ref = cpp_run(cpp_matmul, {"a": A, "b": B})
    same(r.outputs[0], ref["o"])
    same(r.outputs[1], ref["t"])
    assert np.allclose(r.outputs[1], A.T)


@nki.jit
def k_fill():
    o = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm, name="o")
    q = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm, name="q")
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.iota(dst=t, pattern=[[1, 64]], offset=5, channel_multiplier=100)
    nisa.dma_copy(dst=o, src=t)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    u = nisa.iota(2 * i_f + 3 * i_p + 1, dtype=nl.float32)
    v = nisa.memset((128, 64), 2.5, nl.float32)
    nl.store(q, value=nl.add(u, v))
    return o, q


def test_iota_and_memset():
    o, q = tnki.simulate_kernel(k_fill)
    p, f = np.mgrid[0:128, 0:64]
    assert np.array_equal(o, (5 + 100 * p + f).astype(np.float32))
    assert np.array_equal(q, (2 * f + 3 * p + 1 + 2.5).astype(np.float32))



def test_trn1_is_neuroncore_v2():
    # On trn1 nisa.get_nc_version() said gen3 and a copy left to the compiler ran on the Scalar engine, which
    # NeuronCore-v2 lacks for tensor_copy ("On NeuronCore v2, tensor_copy is not supported on the Scalar
    # Engine", nki.isa.tensor_copy): every nl.copy / nl.store of a PSUM tile was a RuleError there. Now gen2
    # and the Vector engine; trn2 keeps the Scalar engine.
    seen = {}

    @nki.jit
    def k(a):
        seen["version"] = nisa.get_nc_version()
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.copy(nl.load(a)))
        return out

    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    for hw, version, engine in (("trn1", nisa.nc_version.gen2, "DVE"), ("trn2", nisa.nc_version.gen3, "ACT")):
        r = tnki.benchmark(k, x, hardware=hw)
        assert r.outputs[0].tobytes() == x.tobytes()
        assert seen["version"] is version, (hw, seen)
        copies = [(o["engine"], o["count"]) for o in r.stats["opcodes"] if o["opcode"] == "tensor_copy"]
        assert copies == [(engine, 1)], (hw, copies)


@nki.jit
def dst_positional_operands_by_keyword(a, form):
    """The current style with dst positional and the operands by keyword (nki-library's mlp:
    `nisa.tensor_copy(out_tile, src=psum_tile)`), each written into d and stored."""
    o = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    d = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
    if form == "tensor_copy":
        nisa.tensor_copy(d, src=t)
    elif form == "tensor_tensor":
        nisa.tensor_tensor(d, data1=t, data2=t, op=nl.add)
    elif form == "tensor_scalar":
        nisa.tensor_scalar(d, data=t, op0=nl.multiply, operand0=2.0)
    elif form == "reciprocal":
        nisa.reciprocal(d, data=t)
    elif form == "scalar_tensor_tensor":
        nisa.scalar_tensor_tensor(d, data=t, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=t)
    else:
        p = nl.ndarray((a.shape[1], a.shape[1]), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(p, stationary=t, moving=t)
        nisa.tensor_copy(d, src=p)
    nisa.dma_copy(dst=o, src=d)
    return o


def test_current_style_with_dst_positional_and_operands_by_keyword():
    # tester23ac F5: `nisa.tensor_copy(d, src=t)` was taken for the earlier style (its first positional read as
    # src): "got multiple values for argument 'src'". Small integers: every result below is exact in FP32.
    a = np.arange(128 * 128, dtype=np.float32).reshape(128, 128) % 7 + 1
    wants = {"tensor_copy": a, "tensor_tensor": a + a, "tensor_scalar": a * 2, "reciprocal": None,
             "scalar_tensor_tensor": a * 2 + a,
             "nc_matmul": (a.T.astype(np.float64) @ a).astype(np.float32)}
    for form, want in wants.items():
        got = tnki.simulate_kernel(dst_positional_operands_by_keyword, a, form)
        if want is None:  # the Vector engine's reciprocal of 1..7: within 1 ulp of 1 / a (nki.isa.reciprocal)
            assert np.allclose(got, 1 / a, rtol=2 ** -22, atol=0), form
        else:
            assert got.tobytes() == want.tobytes(), form


main(globals())
