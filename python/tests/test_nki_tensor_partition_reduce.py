"""nisa.tensor_partition_reduce (NkiUnsupported before): dst [1, F...] = data [P, F...] reduced across its partitions
on the GpSimd engine, add and maximum in FP32 (partitions folded in order 0, 1, ...: trnsim's order, NKI gives
none), the bitvec operators on the bit patterns. Bytes are compared with NumPy."""

import numpy as np

from runner import bf16, main, raises_at

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl

RNG = np.random.default_rng(2343)
X = RNG.standard_normal((128, 32, 4)).astype(np.float32)
f32 = np.float32


@nki.jit
def k_current(x, op):
    out = nl.ndarray((1,) + tuple(x.shape[1:]), dtype=x.dtype, buffer=nl.shared_hbm)
    d = nl.ndarray((1,) + tuple(x.shape[1:]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_partition_reduce(d, op, nl.load(x))
    nl.store(out, d)
    return out


def test_add_max_and_bitwise():
    # FP32 add, partition after partition: np.cumsum along axis 0 in float32 is that fold (its last row).
    got = tnki.simulate_kernel(k_current, X, nl.add)
    assert got.tobytes() == np.cumsum(X, axis=0, dtype=f32)[-1:].tobytes()
    assert tnki.simulate_kernel(k_current, X, np.maximum).tobytes() == X.max(axis=0, keepdims=True).tobytes()
    u = RNG.integers(0, 2**31, (128, 16), dtype=np.int64).astype(np.int32)
    for op, fold in ((nl.bitwise_or, np.bitwise_or), (nl.bitwise_and, np.bitwise_and),
                     (nl.bitwise_xor, np.bitwise_xor)):
        got = tnki.simulate_kernel(k_current, u, op)
        assert got.tobytes() == fold.reduce(u, axis=0, keepdims=True).tobytes(), op


def test_the_earlier_style_returns_one_partition():
    @nki.jit
    def k(x):
        out = nl.ndarray((1,) + tuple(x.shape[1:]), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        nl.store(out, nisa.tensor_partition_reduce(np.add, nl.load(x), dtype=nl.bfloat16))
        return out

    got = tnki.simulate_kernel(k, X).astype(f32)
    assert got.tobytes() == bf16(np.cumsum(X, axis=0, dtype=f32)[-1:]).tobytes()


@nki.jit
def k_bad(x, op, parts):
    out = nl.ndarray((parts, 32, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    d = nl.ndarray((parts, 32, 4), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_partition_reduce(dst=d, op=op, data=nl.load(x))  # MARK-bad
    nl.store(out, d)
    return out


def test_errors_name_the_call_and_the_line():
    raises_at(tnki.NkiError, "tensor_partition_reduce: op nl.minimum is not a partition reduction operator (NKI: "
              "add, maximum, bitwise_or, bitwise_and, bitwise_xor)", __file__, "MARK-bad", tnki.simulate_kernel,
              k_bad, X, nl.minimum, 1)
    raises_at(tnki.NkiError, "tensor_partition_reduce: dst [2, 32, 4] must be one partition holding data's 128 "
              "elements per partition (data [128, 32, 4])", __file__, "MARK-bad", tnki.simulate_kernel, k_bad, X,
              nl.add, 2)
    raises_at(tnki.NkiUnsupported, "nki.isa.tensor_partition_reduce(op=nl.mean) is not modelled by trnsim: the mean "
              "across partitions (NKI 2.32-2.33); op=nl.add and a multiply by 1/P compute it", __file__, "MARK-bad",
              tnki.simulate_kernel, k_bad, X, nl.mean, 1)


def test_time_is_the_gpsimd_one_input_rule():
    r = tnki.benchmark(k_current, X, nl.add)
    ns = {o["opcode"]: o["total_ns"] for o in r.stats["opcodes"] if o["engine"] == "POOL"}
    # NKI's page gives no cost: configs/hw/trn2.json's POOL fixed_overhead_cycles 150 + N = 128 elements per
    # partition of data, at 1.2 GHz: 278 / 1.2 = 231.6667 ns, whole picoseconds rounded up: 231.667 ns.
    assert ns["tensor_partition_reduce"] == 231.667, ns


if __name__ == "__main__":
    main(globals())
