"""nisa.tensor_tensor_scan (NKI library: the linear scan and cumsum kernels, nki-samples' Mamba; NkiUnsupported
before): per partition r = initial, then r = (data0[i] op0 r) op1 data1[i] and dst[i] = r, in FP32 on the
Vector engine. Outputs are compared byte for byte with a NumPy loop written from NKI's page."""

import numpy as np

from runner import bf16, main, raises_at

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl

RNG = np.random.default_rng(2342)
A = RNG.uniform(0.5, 1.0, (128, 96)).astype(np.float32)
B = RNG.standard_normal((128, 96)).astype(np.float32)
INIT = RNG.standard_normal((128, 1)).astype(np.float32)
f32 = np.float32


def scan(d0, d1, init, op0, op1, reverse0=False, reverse1=False):
    """NKI's recurrence, one FP32 step at a time (NumPy's float32 ufuncs round each step)."""
    r = np.broadcast_to(np.asarray(init, dtype=f32).reshape(-1), (d0.shape[0],)).astype(f32)
    out = np.empty_like(d0, dtype=f32)
    for i in range(d0.shape[1]):
        r = op0(r, d0[:, i]) if reverse0 else op0(d0[:, i], r)
        r = op1(d1[:, i], r) if reverse1 else op1(r, d1[:, i])
        out[:, i] = r
    return out


@nki.jit
def k_current(a, b, init, vector, op0, op1, reverse0, reverse1):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    d = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor_scan(d, nl.load(a), nl.load(b), nl.load(init) if vector else 0.25, op0, op1, reverse0,
                            reverse1)
    nl.store(out, d)
    return out


def test_the_recurrence():
    cases = [  # (vector initial, op0, op1, reverse0, reverse1): Mamba's a * r + b, a cumulative sum, ...
        (True, nl.multiply, nl.add, False, False),
        (False, nl.multiply, nl.add, False, False),
        (True, nl.add, nl.add, False, False),
        (True, nl.subtract, nl.multiply, True, False),
        (False, nl.maximum, nl.subtract, False, True),
    ]
    ufunc = {nl.multiply: np.multiply, nl.add: np.add, nl.subtract: np.subtract, nl.maximum: np.maximum}
    for vector, op0, op1, r0, r1 in cases:
        got = tnki.simulate_kernel(k_current, A, B, INIT, vector=vector, op0=op0, op1=op1, reverse0=r0, reverse1=r1)
        want = scan(A, B, INIT if vector else 0.25, ufunc[op0], ufunc[op1], r0, r1)
        assert got.tobytes() == want.tobytes(), (op0, op1, r0, r1)


def test_the_earlier_style_in_a_sequential_loop():
    # As NKI's page example: column chunks, each starting from the previous chunk's last column.
    @nki.jit
    def k(a, b):
        out = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
        init = nl.zeros((128, 1), dtype=nl.float32)
        for c in nl.sequential_range(a.shape[1] // 32):
            res = nisa.tensor_tensor_scan(nl.load(a[:, c * 32:c * 32 + 32]), nl.load(b[:, c * 32:c * 32 + 32]),
                                          initial=init, op0=nl.multiply, op1=nl.add, dtype=nl.bfloat16)
            nl.store(out[:, c * 32:c * 32 + 32], res)
            init = res[:, 31:32]
        return out

    got = tnki.simulate_kernel(k, A, B)
    # Each chunk starts from the BF16-stored last value of the one before.
    want = np.empty_like(A)
    init = np.zeros(128, dtype=f32)
    for c in range(3):
        part = scan(A[:, c * 32:c * 32 + 32], B[:, c * 32:c * 32 + 32], init, np.multiply, np.add)
        want[:, c * 32:c * 32 + 32] = bf16(part)
        init = want[:, c * 32 + 31].copy()
    assert got.astype(f32).tobytes() == want.tobytes()


@nki.jit
def k_bad(a, op1, width):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    d = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor_scan(dst=d, data0=t, data1=t[:, 0:width], initial=0.0, op0=nl.add, op1=op1)  # MARK-bad
    nl.store(out, d)
    return out


def test_errors_name_the_call_and_the_line():
    raises_at(tnki.NkiError, "tensor_tensor_scan: op0 nl.add and op1 nl.bitwise_and must be binary arithmetic "
              "operators", __file__, "MARK-bad", tnki.simulate_kernel, k_bad, A.view(np.int32), nl.bitwise_and, 96)
    raises_at(tnki.NkiError, "tensor_tensor_scan: data0 [128, 96] and data1 [128, 64] must have the same "
              "partitions and elements per partition", __file__, "MARK-bad", tnki.simulate_kernel, k_bad, A, nl.add,
              64)


def test_time_is_two_n_plus_the_fixed_overhead():
    r = tnki.benchmark(k_current, A, B, INIT, vector=True, op0=nl.multiply, op1=nl.add, reverse0=False,
                       reverse1=False)
    ns = {o["opcode"]: o["total_ns"] for o in r.stats["opcodes"] if o["engine"] == "DVE"}
    # NKI's "max(MIN_II, 2N)"; configs/hw/trn2.json: DVE fixed_overhead_cycles 100 at 0.96 GHz, N = 96:
    # (100 + 2 * 96) / 0.96 = 304.1667 ns, whole picoseconds rounded up: 304.167 ns.
    assert ns["tensor_tensor_scan"] == 304.167, ns


if __name__ == "__main__":
    main(globals())
