"""nisa.tensor_scalar_reduce (NKI library: attention_cte's scaled row max, rmsnorm_quant's and mlp_cte's absolute
max; NkiUnsupported before): dst = data op0 operand0 and reduce_res [P, 1] = reduce_op over each partition's
results as dst holds them (the page's formula: reduce_res = reduce_op(dst)). Outputs are compared byte for byte with NumPy written here from NKI's page (sequential FP32
folds: np.cumsum / np.cumprod along the row, whose last column is the left-to-right fold)."""

import numpy as np

from runner import main, raises_at

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl

RNG = np.random.default_rng(2331)
X = RNG.standard_normal((128, 96)).astype(np.float32)
V = RNG.standard_normal((128, 1)).astype(np.float32)
f32 = np.float32


def bf16(a):
    """float32 values rounded to bfloat16 (nearest even), as float32."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).view(np.float32)


@nki.jit
def k_current(x, v, op0, vector, reduce_op, negate, reverse0):
    out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    red = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    d = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(d, data=t, op0=op0, operand0=nl.load(v) if vector else 0.125, reduce_op=reduce_op,
                              reduce_res=r, reverse0=reverse0, reduce_res_negate=negate)
    nl.store(out, d)
    nl.store(red, r)
    return out, red


def test_the_results_and_their_reduction():
    cases = [  # (op0, vector, reduce_op, negate, reverse0, FP32 results, fold)
        (nl.multiply, False, nl.maximum, False, False, X * f32(0.125), lambda y: y.max(axis=1)),
        (nl.multiply, True, nl.maximum, False, False, X * V, lambda y: y.max(axis=1)),
        (nl.add, True, nl.add, False, False, X + V, lambda y: np.cumsum(y, axis=1, dtype=f32)[:, -1]),
        (nl.subtract, True, nl.add, True, True, V - X, lambda y: -np.cumsum(y, axis=1, dtype=f32)[:, -1]),
        (nl.add, False, nl.minimum, False, False, X + f32(0.125), lambda y: y.min(axis=1)),
        (nl.multiply, False, nl.multiply, False, False, X * f32(0.125),
         lambda y: np.cumprod(y, axis=1, dtype=f32)[:, -1]),
    ]
    for op0, vector, reduce_op, negate, reverse0, y, fold in cases:
        out, red = tnki.simulate_kernel(k_current, X, V, op0=op0, vector=vector, reduce_op=reduce_op, negate=negate,
                                        reverse0=reverse0)
        y = y.astype(f32)
        assert out.tobytes() == bf16(y).tobytes(), (op0, reduce_op)
        # reduce_res folds dst's bfloat16 values (in FP32), as the page's formula reduces dst; it folded the FP32
        # results before they were rounded (the add and multiply folds differ in their last bits).
        assert red.tobytes() == fold(bf16(y)).astype(f32).reshape(128, 1).tobytes(), (op0, reduce_op)


def test_the_earlier_style_returns_dst():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        red = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
        r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        d = nisa.tensor_scalar_reduce(data=nl.load(x), op0=nl.multiply, operand0=-2.0, reduce_op=nl.maximum,
                                      reduce_res=r)
        nl.store(out, d)
        nl.store(red, r)
        return out, red

    out, red = tnki.simulate_kernel(k, X)
    assert out.tobytes() == (X * f32(-2)).tobytes()
    assert red.tobytes() == (X * f32(-2)).max(axis=1, keepdims=True).tobytes()


def test_errors_name_the_call_and_the_line():
    @nki.jit
    def k_bad(x, width, reduce_op, cmd):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        r = nl.ndarray((x.shape[0], width), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(dst=t, data=t, op0=nl.add, operand0=1.0, reduce_op=reduce_op,  # MARK-bad
                                  reduce_res=r, reduce_cmd=cmd)
        nl.store(out, t)
        return out

    def fails(exc, message, width=1, reduce_op=nl.add, cmd=nisa.reduce_cmd.reset_reduce):
        raises_at(exc, message, __file__, "MARK-bad", tnki.simulate_kernel, k_bad, X, width=width,
                  reduce_op=reduce_op, cmd=cmd)

    fails(tnki.NkiUnsupported, "nki.isa.tensor_scalar_reduce(reduce_cmd=reduce_cmd.reduce, reduce_init=None) is not "
          "modelled by trnsim: the Vector engine's accumulator registers across instructions",
          cmd=nisa.reduce_cmd.reduce)
    fails(tnki.NkiError, "tensor_scalar_reduce: reduce_res [128, 2] must be [128, 1] (one element per partition "
          "of data)", width=2)
    fails(Exception, "tensor_scalar_reduce on DVE: op: reduce_op divide must be add, subtract, multiply, maximum or "
          "minimum", reduce_op=nl.divide)


def test_time_is_n_plus_two_fixed_overheads():
    r = tnki.benchmark(k_current, X, V, op0=nl.multiply, vector=False, reduce_op=nl.maximum, negate=False,
                       reverse0=False)
    ns = {o["opcode"]: o["total_ns"] for o in r.stats["opcodes"] if o["engine"] == "DVE"}
    # configs/hw/trn2.json: DVE fixed_overhead_cycles 100 at 0.96 GHz, N = 96 per partition:
    # (100 + 96 + 100) / 0.96 = 308.3333 ns, whole picoseconds rounded up: 308.334 ns.
    assert ns["tensor_scalar_reduce"] == 308.334, ns


if __name__ == "__main__":
    main(globals())
