"""Messages a fresh tester found unclear (issue 23, tester23e finding 7): each names the user's file:line and
the argument at fault, never trnsim's own files or internal tile names."""

import gc
import os
import sys

import numpy as np

from runner import line_of as _line_of, main, raises, tmpdir

import trnsim
import trnsim.nki as tnki
import nki
import nki.isa as nisa
import nki.language as nl
from nki_copy import copy

THIS = os.path.basename(__file__)


def line_of(marker):
    return _line_of(__file__, marker)


@nki.jit
def store_zero(x):
    y = nl.ndarray((200, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(y, value=0)  # MARK-store-zero
    return y


@nki.jit
def load_129(x):
    y = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(y, nl.load(x[0:129, 0:64]))  # MARK-load-129
    return y


def plain_copy(x):  # MARK-plain-def
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)  # MARK-plain-ndarray
    nl.store(y, nl.load(x))
    return y


@nki.jit
def matmul_moving_mask(a, b):
    y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    ta, tb = nl.load(a), nl.load(b)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    j_p, j_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    r = nisa.nc_matmul(ta[i_p, i_f], tb[j_p, j_f], mask=(j_p < 64))  # MARK-mm-mask
    nl.store(y[0:64, 0:64], nl.copy(r))
    return y


X200 = np.ones((200, 64), dtype=np.float32)
X = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)


def test_store_of_a_number_over_128_rows():
    # Was "result: partition dim 200 exceeds ...": an internal tile's name, not the call or its argument.
    e = raises(tnki.NkiError, tnki.simulate_kernel, store_zero, X200)
    msg = str(e)
    assert msg.startswith(f"{THIS}:{line_of('MARK-store-zero')}: nl.store(value=0): dst "), msg
    assert "has 200 rows" in msg and "dst[0:128], dst[128:200]" in msg and "result:" not in msg, msg


def test_a_new_tile_over_128_partitions_names_its_call():
    e = raises(tnki.NkiError, tnki.simulate_kernel, load_129, X200)
    assert str(e).startswith(f"{THIS}:{line_of('MARK-load-129')}: the result of nl.load: partition dim 129 "), e


def test_a_launch_grid_of_zero_is_refused_at_its_line():
    # Was "_runner.py:431: launch grid [0] gives no program to core 0 of 1", raised inside the run.
    e = raises(tnki.NkiError, lambda: tnki.simulate_kernel(copy[0], X))  # MARK-grid-0
    assert str(e).startswith(f"{THIS}:{line_of('MARK-grid-0')}: kernel[0]: launch grid dim 0 is 0: "), e
    e = raises(tnki.NkiError, lambda: copy[2, -1])  # MARK-grid-neg
    assert str(e).startswith(f"{THIS}:{line_of('MARK-grid-neg')}: kernel[(2, -1)]: launch grid dim 1 is -1"), e
    assert copy[nl.nc(2)].launch_grid == (2,)


def test_a_function_without_nki_jit():
    # Was "nl.ndarray is only valid inside a kernel being traced (an @nki.jit function run by trnsim: ...
    # simulate_kernel ...)", although the user did call simulate_kernel.
    e = raises(tnki.NkiError, tnki.simulate_kernel, plain_copy, X)
    msg = str(e)
    assert msg.startswith(f"{THIS}:{line_of('MARK-plain-ndarray')}: nl.ndarray: plain_copy "
                          f"({THIS}:{line_of('MARK-plain-def')}) is not an @nki.jit kernel"), msg
    assert "put @nki.jit above `def plain_copy`" in msg, msg
    # nki.simulate wraps a plain function itself, as NKI's documents; so do nki.baremetal and nki.benchmark as
    # decorators ("you may call the NKI kernel function directly", nki.baremetal; tester23h: they said "not an
    # @nki.jit kernel").
    assert np.array_equal(tnki.simulate(plain_copy)(X), X)
    for deco in (nki.baremetal, nki.baremetal(), nki.benchmark(warmup=1, iters=2)):
        assert np.array_equal(np.asarray(deco(plain_copy)(X)), X)



def plain_add(a, b):  # MARK-plain-add-def
    return (a + b) * 2.0  # MARK-plain-op


def plain_reference(x):  # MARK-plain-ref-def
    y = x.astype(np.float32)  # MARK-plain-attr
    return np.exp(y - y.max(axis=-1, keepdims=True))


def plain_type_error(a):
    raise TypeError("the builder kernel's own")


def test_a_function_without_nki_jit_using_an_operator():
    # tester23m F8: a plain function (a workload's reference given as its kernel, or @nki.jit forgotten) whose
    # first use of its inputs is an operator failed with "TypeError: unsupported operand type(s) for +:
    # 'trnsim._core.View' and 'trnsim._core.View'" (the CLI: '_trnsim_core_embedded.View'): now the message an
    # nl call there gives, with the operator's error in it, at the line of the operator.
    e = raises(tnki.NkiError, tnki.simulate_kernel, plain_add, X, X)
    assert str(e) == (
        f"{THIS}:{line_of('MARK-plain-op')}: plain_add ({THIS}:{line_of('MARK-plain-add-def')}) is not an @nki.jit "
        "kernel: trnsim traces nki.language / nki.isa calls only in a function decorated with @nki.jit (a plain "
        "function runs on trnsim._core's builder, whose inputs are View objects: TypeError: unsupported operand "
        "type(s) for +: 'trnsim._core.View' and 'trnsim._core.View'); put @nki.jit above `def plain_add`, or pass "
        "it through nki.simulate(...), which wraps it"), str(e)
    # tester23q F1: an attribute of an input (`x.astype`, the first line of most NumPy references, e.g.
    # examples/nki/softmax.py's softmax_ref) raised AttributeError, which gave the raw internal type name.
    e = raises(tnki.NkiError, tnki.simulate_kernel, plain_reference, X)
    assert str(e) == (
        f"{THIS}:{line_of('MARK-plain-attr')}: plain_reference ({THIS}:{line_of('MARK-plain-ref-def')}) is not an "
        "@nki.jit kernel: trnsim traces nki.language / nki.isa calls only in a function decorated with @nki.jit (a "
        "plain function runs on trnsim._core's builder, whose inputs are View objects: AttributeError: "
        "'trnsim._core.View' object has no attribute 'astype'); put @nki.jit above `def plain_reference`, or pass "
        "it through nki.simulate(...), which wraps it"), str(e)
    # A TypeError that is not about the builder's views is the builder kernel's own: as it is.
    e = raises(TypeError, tnki.simulate_kernel, plain_type_error, X)
    assert type(e) is TypeError and str(e) == "the builder kernel's own", repr(e)


def test_baremetal_kernel_runs_everywhere_and_warns_of_ntff():
    # What nki.baremetal / nki.simulate return is a kernel simulate_kernel and benchmark accept (it was a plain
    # `run(*args)`: "TypeError: run: *args parameters are not supported"); NKI's save_trace_name='x.ntff' and
    # save_neff_name were dropped without a word: now a RuntimeWarning at the decorator's line, as benchmark
    # gives, and a .pftrace name writes the trace.
    import tempfile
    import warnings

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        k = nki.baremetal(save_trace_name="profile.ntff", save_neff_name="file.neff")(plain_copy)  # MARK-bm
    msgs = [f"{os.path.basename(x.filename)}:{x.lineno}: {x.message}" for x in w]
    assert msgs == [f"{THIS}:{line_of('MARK-bm')}: nki.baremetal: save_trace_name='profile.ntff': no trace "
                    "written there: trnsim writes a Perfetto trace (.pftrace) or Chrome JSON (.json), not the "
                    "Neuron profiler's NTFF; name a .pftrace file",
                    f"{THIS}:{line_of('MARK-bm')}: nki.baremetal: save_neff_name='file.neff': no NEFF written: "
                    "trnsim compiles no NEFF (the kernel is traced into the simulator's program)"], msgs
    for kernel in (k, tnki.simulate(plain_copy), nki.baremetal(plain_copy)):
        assert tnki.simulate_kernel(kernel, X).tobytes() == X.tobytes()
        assert tnki.benchmark(kernel, X).outputs[0].tobytes() == X.tobytes()
        assert kernel(X).tobytes() == X.tobytes()
    # nki.execute (NKI 2.33: run a kernel or a plain function, returning what it returns) was NkiUnsupported.
    assert nki.execute(plain_copy, X).tobytes() == X.tobytes()
    assert nki.execute(copy, x=X).tobytes() == X.tobytes()
    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "t.pftrace")
        assert nki.baremetal(save_trace_name=trace)(plain_copy)(X).tobytes() == X.tobytes()
        assert os.path.getsize(trace) > 0


def scaled_by_programs(x):
    """x * num_programs, each program storing its share of x's 256 rows: tells a launch grid of 2 from 1."""
    n, pid = nl.num_programs(0), nl.program_id(0)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(2 // n):
        r = (pid * (2 // n) + t) * 128
        nl.store(out[r:r + 128, :], nl.multiply(nl.load(x[r:r + 128, :]), n))
    return out


def test_baremetal_simulate_benchmark_and_profile_take_a_launch_grid():
    # tester23aa F1: nki-samples' harnesses launch `baremetal(kernel)[bs, heads](...)` and
    # `bench = benchmark(warmup=5, iters=10)(kernel); bench[bs, heads](...)`, then read bench.benchmark_result:
    # "TypeError: 'function' object is not subscriptable" ('_Benchmarked' for benchmark).
    import tempfile

    x = np.arange(256 * 64, dtype=np.float32).reshape(256, 64)
    for grid in (1, 2):
        want = (x * grid).tobytes()
        assert nki.baremetal(scaled_by_programs)[grid](x).tobytes() == want
        assert nki.simulate(scaled_by_programs)[grid](x).tobytes() == want
        assert tnki.simulate_kernel(nki.baremetal(scaled_by_programs)[grid], x).tobytes() == want
        bench = nki.benchmark(warmup=5, iters=10)(scaled_by_programs)
        assert bench[grid](x).tobytes() == want
        assert bench.benchmark_result.nc_latency.get_latency_percentile(50) > 0
        with tempfile.TemporaryDirectory() as d:
            assert nki.profile(working_directory=d)(scaled_by_programs)[grid](x).tobytes() == want


@nki.jit
def reduce_with(x, op):
    t = nl.load(x)
    out = nl.ndarray((128, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nisa.tensor_reduce(op=op, data=t, axis=1))  # MARK-reduce-op
    return out


def test_tensor_reduce_refuses_what_is_not_a_reduction():
    # NKI's math operator table marks comparisons, shifts and power as no legal reduction op; trnsim reduced
    # with them (nl.equal "reduced" a row to 0 or 1 silently). nl.divide and nl.abs_max are no Y in that table
    # either (tester23j #8: divide ran). The legal ones still run.
    for op in (nl.equal, nl.greater, nl.left_shift, nl.power, nl.divide, nl.abs_max):
        e = raises(tnki.NkiError, tnki.simulate_kernel, reduce_with, X, op)
        assert str(e).startswith(f"{THIS}:{line_of('MARK-reduce-op')}: tensor_reduce: nl.{op.alu} is not a "
                                 "reduction operator (NKI's math operator table: add, subtract, multiply, maximum, "
                                 "minimum, and the bitwise and logical and/or/xor reduce)"), str(e)
    assert tnki.simulate_kernel(reduce_with, X, nl.maximum).tobytes() == X.max(axis=1, keepdims=True).tobytes()


@nki.jit
def alu_unary(x, op):
    t = nl.load(x)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nisa.tensor_scalar(data=t, op0=op, operand0=0.0, engine=nisa.gpsimd_engine))  # MARK-alu-unary
    return out


def test_alu_unary_operators_say_what_computes_them():
    # NKI's engine-selection notes run tensor_scalar(op0=nl.rsqrt, operand0=0.0) on GpSimd; the simulator's
    # ALU has no rsqrt or reciprocal (nl.abs is modelled: test_nki_alu_abs). It said "'rsqrt' is not an ALU
    # operator (nl.add, ...)", an NkiError, as if the kernel were wrong.
    for op, use in ((nl.rsqrt, "nisa.activation(op=nl.rsqrt) on the Scalar engine"),
                    (nl.reciprocal, "nisa.reciprocal (Vector engine) or nisa.activation(op=nl.reciprocal)")):
        e = raises(tnki.NkiUnsupported, tnki.simulate_kernel, alu_unary, X, op)
        assert str(e) == (f"{THIS}:{line_of('MARK-alu-unary')}: nl.{op.act} as an ALU operator of "
                          f"nki.isa.tensor_scalar is not modelled by trnsim: the simulator's ALU has no {op.act}; "
                          f"use {use} (docs/nki.md lists the supported calls)"), str(e)


@nki.jit
def power_of(x, engine, in_psum):
    s = nl.load(x)
    t = s
    if in_psum:
        t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=t, src=s)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    u = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=u, data1=t, data2=s, op=nl.power, engine=engine)  # MARK-power
    nl.store(out, u)
    return out


def test_tensor_tensor_power_runs_on_gpsimd():
    # nki.isa.tensor_tensor: nl.power "runs on the GpSimd engine", so its tiles cannot be in PSUM; trnsim ran
    # it on Vector (and read PSUM there).
    x = (np.arange(128 * 64, dtype=np.float32).reshape(128, 64) % 7 + 1) / 4
    r = tnki.benchmark(power_of, x, nisa.engine.unknown, False)
    # The ALU's power: FP64 pow rounded once to FP32 (sim/isa/alu.cpp).
    assert r.outputs[0].tobytes() == np.power(x.astype(np.float64), x).astype(np.float32).tobytes()
    engines = r.stats["engines"]["core0"]
    assert (engines["POOL"]["instructions"], engines["DVE"]["instructions"]) == (1, 0), engines
    where = f"{THIS}:{line_of('MARK-power')}: tensor_tensor: nl.power runs on the GpSimd engine"
    e = raises(tnki.NkiError, tnki.simulate_kernel, power_of, x, nisa.vector_engine, False)
    assert str(e) == f"{where} (nki.isa.tensor_tensor), not DVE", str(e)
    e = raises(tnki.NkiError, tnki.simulate_kernel, power_of, x, nisa.engine.unknown, True)
    assert str(e) == (f"{THIS}:{line_of('MARK-power')}: tensor_tensor: data1 is in PSUM; nl.power runs on the GpSimd "
                      "engine, which cannot access PSUM (nki.isa.tensor_tensor): copy the tile to SBUF first (nl.copy / "
                      "nisa.tensor_copy)"), str(e)


@nki.jit
def iota_into(x, pattern, shape, buffer):
    d = nl.ndarray((128,) + shape, dtype=nl.float32 if buffer is nl.psum else nl.int32, buffer=buffer)
    nisa.iota(dst=d, pattern=pattern, offset=3, channel_multiplier=1000)  # MARK-iota
    out = nl.ndarray((128,) + shape, dtype=d.dtype, buffer=nl.shared_hbm)
    nl.store(out, d)
    return out


def test_iota_pattern_walks_dst_elements():
    # nki.isa.iota: the [step, num] pattern walks dst's free elements in order, dst of any free shape holding
    # num_w * ... * num_x per partition; dst must be in SBUF (GpSimd). trnsim refused a 2-D pattern on a 1-D
    # dst, ignored each num (a [[1, 64]] pattern filled a 32-wide dst), and a PSUM dst said "iota on DVE:
    # engine: iota runs on POOL" though the kernel chose no engine.
    p = np.arange(128)[:, None, None]
    w, v = np.arange(4)[None, :, None], np.arange(8)[None, None, :]
    want = (3 + 1000 * p + 1 * w + 100 * v).reshape(128, 32).astype(np.int32)
    got = tnki.simulate_kernel(iota_into, X, [[1, 4], [100, 8]], (32,), nl.sbuf)
    assert got.tobytes() == want.tobytes()
    where = f"{THIS}:{line_of('MARK-iota')}: iota: "
    e = raises(tnki.NkiError, tnki.simulate_kernel, iota_into, X, [[1, 64]], (32,), nl.sbuf)
    assert str(e) == where + "pattern [[1, 64]] makes 64 values per partition but dst [128, 32] holds 32", str(e)
    e = raises(tnki.NkiError, tnki.simulate_kernel, iota_into, X, [[1, 32]], (32,), nl.psum)
    assert str(e) == where + ("dst is in PSUM; iota runs on the GpSimd engine, which cannot access PSUM "
                              "(nki.isa.iota): dst must be in SBUF"), str(e)


def test_typed_array_of_the_wrong_kind_says_its_prefix_once():
    # Was "copy: input 'x': dtype float32 does not fit copy: input 'x' (expected an integer dtype ...)".
    e = raises(Exception, tnki.simulate_kernel, copy, tnki.typed(X, "int8"))
    msg = str(e)
    assert msg.startswith("copy: input 'x': dtype float32 does not fit int8 [128, 64] (expected an integer"), msg
    assert msg.count("input 'x'") == 1, msg


def test_a_mask_on_the_moving_operand_names_it():
    # Was "stationary has 128 partitions (the contraction dim) but moving has 64": the mask cut moving.
    e = raises(tnki.NkiError, tnki.simulate_kernel, matmul_moving_mask, X, X)
    msg = str(e)
    assert msg.startswith(f"{THIS}:{line_of('MARK-mm-mask')}: nc_matmul: the mask cuts moving's partitions "
                          "(the contraction dim) to 64 but leaves stationary's at 128"), msg
    # The fix it suggests names the kernel's variable (it said `& (j < 64)`).
    assert msg.endswith("bound i_p, which indexes stationary's partitions, too (`& (i_p < 64)`), or index both "
                        "operands' partitions with the same variable"), msg



def _matmul_update(way):
    @nki.jit
    def k(a, b):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.psum)
        for i in (nl.sequential_range if way == "subtract" else nl.affine_range)(2):
            x, y = nl.load(a[i * 128:(i + 1) * 128, :]), nl.load(b[i * 128:(i + 1) * 128, :])
            if way == "-=":
                acc -= nl.matmul(x, y, transpose_x=True)  # MARK-isub
            elif way == "*=":
                acc *= nl.matmul(x, y, transpose_x=True)  # MARK-imul
            elif way == "negate":
                acc += nl.matmul(nl.negative(x), y, transpose_x=True)
            else:
                acc[...] = nl.subtract(acc, nl.copy(nl.matmul(x, y, transpose_x=True)))
        nl.store(out, acc)
        return out
    return k


def test_subtracting_a_matmul_from_psum_says_what_nki_allows():
    # `acc -= nl.matmul(...)` was "tensor_tensor: data1 and data2 cannot both be in PSUM": the lowering's rule,
    # not the user's line's. A matmul only adds into PSUM; the message says so and gives two ways that work
    # (both checked below, with exact values).
    a = (np.arange(256 * 128) % 7).astype(np.float32).reshape(256, 128)
    b = (np.arange(256 * 64) % 5).astype(np.float32).reshape(256, 64)
    e = raises(tnki.NkiError, tnki.simulate_kernel, _matmul_update("-="), a, b)
    assert str(e) == (f"{THIS}:{line_of('MARK-isub')}: `-=` of a matmul result into psum tile acc [128, 64] "
                      "float32: a matmul can only add to PSUM (NKI accumulates with `acc += nl.matmul(...)`, "
                      "nki.isa.nc_matmul's accumulate); negate an operand and accumulate: `acc += "
                      "nl.matmul(nl.negative(x), y)`, or take the product to SBUF first: `acc[...] = "
                      "nl.subtract(acc, nl.copy(nl.matmul(x, y)))` (a loop-carried value: nl.sequential_range)"), e
    e = raises(tnki.NkiError, tnki.simulate_kernel, _matmul_update("*="), a, b)
    assert str(e).startswith(f"{THIS}:{line_of('MARK-imul')}: `*=` of a matmul result into psum tile acc "), e
    want = -(a.T @ b)  # small integers: exact in FP32
    for way in ("negate", "subtract"):
        out = tnki.simulate_kernel(_matmul_update(way), a, b)
        assert np.array_equal(out, want), (way, out[:2, :4], want[:2, :4])


@nki.jit
def lowered_errors(x, case):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    if case == "sum":
        nl.store(out[0:1, :], nl.sum(t, axis=0))  # MARK-low-sum
    elif case == "mean":
        nl.store(out[0:1, :], nl.mean(t, axis=0))  # MARK-low-mean
    elif case == "add":
        a = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=a, src=t)
        nl.store(out, nl.add(a, a))  # MARK-low-add
    elif case == "store":
        nl.store(out[0:64, :], t)  # MARK-low-store
    else:
        w = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=w, value=1.0)
        nl.store(out, nl.matmul(w, t))  # MARK-low-matmul
    return out


def test_errors_of_lowered_instructions_name_the_nl_call_first():
    # tester23j #7: these named the instruction trnsim's lowering made (tensor_reduce, tensor_tensor, dma_copy)
    # and nl.matmul with K > 128 blamed its transpose's [256, 128] result.
    made = "(made by trnsim's lowering of {0}, not a call of the kernel): "
    for case, call, inst, rule in (
            ("sum", "nl.sum", "tensor_reduce", "axis [0] must name free dims of data [128, 64] (the partition dim "
             "is 0)"),
            ("mean", "nl.mean", "tensor_reduce", "axis [0] must name free dims of data [128, 64]"),
            ("add", "nl.add", "tensor_tensor", "data1 and data2 cannot both be in PSUM")):
        e = raises(tnki.NkiError, tnki.simulate_kernel, lowered_errors, X, case)
        want = f"{THIS}:{line_of('MARK-low-' + case)}: {call}: its {inst} " + made.format(call) + rule
        assert str(e).startswith(want), str(e)
    e = raises(tnki.NkiError, tnki.simulate_kernel, lowered_errors, X, "store")  # nl.store's own shape check
    assert str(e).startswith(f"{THIS}:{line_of('MARK-low-store')}: nl.store: cannot copy a [128, 64] tile to a "
                             "[64, 64] region"), str(e)
    e = raises(tnki.NkiError, tnki.simulate_kernel, lowered_errors, X, "matmul")
    assert str(e).startswith(f"{THIS}:{line_of('MARK-low-matmul')}: nl.matmul: x is [M, K] = [128, 256]: the "
                             "contraction dim K = 256 > 128"), str(e)


@nki.jit
def compare_tile(x, case):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    if case == "gt":
        r = t > 0  # MARK-cmp-gt
    elif case == "eq":
        r = nl.add(t, t == 0.0)  # MARK-cmp-eq
    elif case == "ne":
        r = nl.multiply(t, t != t)  # MARK-cmp-ne
    else:
        r = 0 >= t  # MARK-cmp-ge
    nl.store(out, r)
    return out


def test_a_comparison_of_a_tile_names_the_call_to_use():
    # tester23j #8: `t > 0` raised a bare TypeError with no kernel line; tester23k #3: `t == 0.0` and `t != t`
    # gave a Python bool (identity) that nl.add / nl.multiply took as 0 / 1 without a word.
    for case, marker, fn in (("gt", "MARK-cmp-gt", "greater"), ("ge", "MARK-cmp-ge", "less_equal"),
                             ("eq", "MARK-cmp-eq", "equal"), ("ne", "MARK-cmp-ne", "not_equal")):
        e = raises(tnki.NkiUnsupported, tnki.simulate_kernel, compare_tile, X, case)
        assert str(e).startswith(f"{THIS}:{line_of(marker)}: a comparison (<, <=, >, >=, ==, !=) of a tile is not "
                                 "modelled "
                                 f"by trnsim"), str(e)
        assert f"call nl.{fn}(a, b)" in str(e), str(e)


@nki.jit
def hwdge_transpose(x):
    out = nl.ndarray((64, 128), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((64, 128), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t, src=x, dge_mode=nisa.dge_mode.hwdge)  # MARK-hwdge
    nl.store(out, t)
    return out


def test_dma_transpose_dtypes_and_hwdge_rules_are_nkis():
    # tester23j #8: the docs said 2-byte dtypes, but a float32 transpose ran. NKI's 2-byte rule (with
    # src.shape[0] == 16 and src.shape[-1] % 128 == 0) is for dge_mode=hwdge; other transposes move 2- and
    # 4-byte dtypes bit-accurately (Trainium2 arch guide).
    e = raises(tnki.NkiError, tnki.simulate_kernel, hwdge_transpose, X)
    assert str(e).startswith(f"{THIS}:{line_of('MARK-hwdge')}: dma_transpose: dge_mode=hwdge needs src.shape[0] "
                             "== 16 and src.shape[-1] a multiple of 128 (nki.isa.dma_transpose), got src [128, 64]"), e
    f32 = tnki.simulate_kernel(nl_transpose_load, X)
    assert f32.tobytes() == X.T.copy().tobytes()


@nki.jit
def nl_transpose_load(x):
    out = nl.ndarray((64, 128), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load_transpose2d(x))
    return out


@nki.jit
def store_transposed(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.transpose(nl.load(x)))  # MARK-store-T
    return out


@nki.jit
def dma_copy_transposed(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=nl.copy(nl.transpose(nl.load(x))))  # MARK-dma-T
    return out


@nki.jit
def hbm_to_hbm_reshaped(x):
    out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)  # two HBM views: one run of elements to another
    return out


@nki.jit
def same_count_other_shape(x, how):
    # x [128, 4, 8]; the value keeps the elements per partition (32) but not the shape.
    t = nl.load(x)
    if how == "free-swapped":
        out = nl.ndarray((128, 8, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, t)  # MARK-store-swapped
    elif how == "flattened":
        out = nl.ndarray((128, 32), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)  # MARK-dma-flat
    elif how == "assign":
        out = nl.ndarray((128, 4, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        s = nl.ndarray((128, 8, 4), dtype=x.dtype, buffer=nl.sbuf)
        s[...] = t  # MARK-assign-swapped
        nl.store(out, t)
    else:  # a unit dim more: the same elements in the same order
        out = nl.ndarray((128, 1, 4, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, t)
    return out


@nki.jit
def dot_t(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x).T)  # MARK-dot-T
    return out


@nki.jit
def row_by_integer(a, form, r=3):
    o = nl.ndarray((a.shape[1],), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    if form == "multiply":
        nl.store(o, nl.multiply(t[r, :], 2.0))  # MARK-row-int-mul
    elif form == "exp":
        nl.store(o, nl.exp(t[r, :]))  # MARK-row-int-exp
    else:
        nl.store(o, t[r, :])
    return o


def test_an_integer_partition_index_row_is_a_tile_of_one_partition():
    # tester23ac F1: nl.multiply(t[3, :], 2.0) was refused by the lowering's own rule, "dst [64] and data [64] must
    # have the same partitions ... ([64, 1] vs [1, 64])", naming a dst the kernel never made; then an NkiError
    # saying to write t[3:4, :]. t[3, :] is now that [1, 64] tile: an engine call takes it where the engines'
    # partition-start rule allows (a partition start of 0, 32, 64 or 96 for up to 32 partitions), and says that
    # rule elsewhere; storing it into the 1-D region works as before.
    a = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    assert tnki.simulate_kernel(row_by_integer, a, "store").tobytes() == a[3].tobytes()
    assert tnki.simulate_kernel(row_by_integer, a, "multiply", 32).tobytes() == (a[32] * np.float32(2)).tobytes()
    for form, call, engine, op in (("multiply", "nl.multiply", "DVE", "tensor_scalar"),
                                   ("exp", "nl.exp", "ACT", "activation")):
        e = raises(trnsim.RuleError, tnki.simulate_kernel, row_by_integer, a, form)
        assert str(e) == (f"{THIS}:{line_of('MARK-row-int-' + form[:3])}: {call}: its {op} on {engine} (made by "
                          f"trnsim's lowering of {call}, not a call of the kernel): partition start: data spans 1 "
                          "partitions from 3 (up to 32 must start at 0, 32, 64 or 96)"), e


@nki.jit
def row_into_1d_region(a, as_row=False):
    o = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    if as_row:
        nl.store(o[1:2, :], t[2:3, :])
    else:
        nl.store(o[1], t[2:3, :])  # MARK-row-1d
    return o


def test_store_and_dma_copy_check_the_shape_not_only_the_element_count():
    # tester23l #1: a [64, 128] tile stored into a [128, 64] output ran (out == x.T.reshape(128, 64)), as did
    # nisa.dma_copy of it; `buf[...] = tile` already refused it. NKI's .T does not exist (nki.language.NkiTensor).
    x = np.arange(64 * 128, dtype=np.float32).reshape(64, 128)
    for k, mark, call in ((store_transposed, "MARK-store-T", "nl.store"),
                          (dma_copy_transposed, "MARK-dma-T", "nki.isa.dma_copy")):
        e = raises(tnki.NkiError, tnki.simulate_kernel, k, x)
        assert str(e).startswith(f"{THIS}:{line_of(mark)}: {call}: cannot copy a [128, 64] tile to a [64, 128] "
                                 "region"), e
    assert tnki.simulate_kernel(hbm_to_hbm_reshaped, x).tobytes() == x.tobytes()
    # tester23t F1's second half: the same count per partition in another shape ran too, scrambling the tile.
    x3 = np.arange(128 * 4 * 8, dtype=np.float32).reshape(128, 4, 8)
    for how, mark, what in (("free-swapped", "MARK-store-swapped", "nl.store: cannot copy a [128, 4, 8] tile to a "
                             "[128, 8, 4] region"),
                            ("flattened", "MARK-dma-flat", "nki.isa.dma_copy: cannot copy a [128, 4, 8] tile to a "
                             "[128, 32] region"),
                            ("assign", "MARK-assign-swapped", "cannot assign a [128, 4, 8] tile to a [128, 8, 4] "
                             "region")):
        e = raises(tnki.NkiError, tnki.simulate_kernel, same_count_other_shape, x3, how)
        assert str(e) == (f"{THIS}:{line_of(mark)}: {what} (the same shape needed, but for dims of size 1, with "
                          "as many partitions; nl.transpose / .reshape change the shape)"), e
    assert tnki.simulate_kernel(same_count_other_shape, x3, "unit").tobytes() == x3.tobytes()
    # tester23ac F4: a one-partition row stored into o[i] of a [4, 64] output quoted the size-1 rule it seemed
    # to meet, then said the 1-D region's dim is its rows; the row is now copied to the region in order (the
    # same elements as o[i:i + 1, :], which t[2, :], a [1, 64] tile too, is stored to).
    x4 = np.arange(256, dtype=np.float32).reshape(4, 64)
    for as_row in (False, True):
        ok = tnki.simulate_kernel(row_into_1d_region, x4, as_row)
        assert ok[1].tobytes() == x4[2].tobytes(), as_row
    e = raises(tnki.NkiUnsupported, tnki.simulate_kernel, dot_t, x)
    assert str(e).startswith(f"{THIS}:{line_of('MARK-dot-T')}: nki.language.NkiTensor has no attribute 'T' in NKI "
                             "2.21-2.33, nor in trnsim: transpose with nl.transpose(t)"), e


@nki.jit
def unbounded_view_in_a_loop(x):
    out = nl.ndarray((200, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    for t in nl.affine_range(2):
        v = x[t * 128 + i_p, i_f]  # the tail tile reaches row 255: legal only under a mask
        nl.store(out[t * 128 + i_p, i_f], nl.load(v))  # MARK-unbounded-load
    return out


def test_an_error_in_a_loop_leaves_no_ignored_exception():
    # tester23l #4: besides the expected error, the loop's generator, closed later, raised the view's error
    # again ("Exception ignored in: <generator object _Range._iter>" with trnsim's traceback on stderr).
    seen, hook = [], sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        e = raises(tnki.NkiError, tnki.simulate_kernel, unbounded_view_in_a_loop, np.zeros((200, 64), np.float32))
        del e
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert not seen, [str(u.exc_value)[:200] for u in seen]


@nki.jit
def messages_23l(x, case):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    t = nl.load(x)
    if case == "or":
        y = nl.add(t, 1.0, mask=(i_p < 64) | (i_f < 3))  # MARK-23l-or
    elif case == "triangle":
        y = nl.add(t, 1.0, mask=(i_p + i_f < 64))  # MARK-23l-triangle
    elif case == "assign":
        y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        y[...] = t[0:1, :]  # MARK-23l-assign
    elif case == "np.exp":
        y = np.exp(t)  # MARK-23l-np.exp
    elif case == "np.sum":
        y = np.sum(t, axis=1)  # MARK-23l-np.sum
    elif case == "pos":
        y = +t  # MARK-23l-pos
    elif case == "float":
        y = float(t)  # MARK-23l-float
    elif case == "round":
        y = round(t)  # MARK-23l-round
    elif case == "compare":
        y = t > 0.0  # MARK-23l-compare
    elif case == "np-scalar":
        y = np.float32(2) * t - np.float32(1)  # a NumPy number with a tile operator is that operator
    else:
        y = nl.mod(t, 0.0)  # fmod(x, 0) is NaN everywhere
    nl.store(out, y)
    return out


def test_messages_name_the_call_and_the_kernel_line_23l():
    # tester23l #8: these did not name the nl call (masks), named tensor_copy (the assignment), named NumPy's
    # fromnumeric.py or no line at all (NumPy functions and Python conversions of a tile).
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    cases = {
        "or": "nl.add: mask: masks with | are not modelled",
        "triangle": "nl.add: mask: a mask bound of several nl.arange index variables must hold on a rectangle of them",
        "assign": "cannot assign a [1, 64] tile to a [128, 64] region",
        "np.exp": "np.exp on a tile: NumPy functions compute on host arrays and do not run on NKI tiles; use nl.exp",
        "np.sum": "np.sum on a tile: NumPy functions compute on host arrays and do not run on NKI tiles; use nl.sum",
        "pos": "unary + of a tile is not an NKI tile operator",
        "float": "float() of a tile: the tile has no Python value while the kernel is traced",
        "round": "round() of a tile: the tile has no Python value while the kernel is traced",
        "compare": "a comparison (<, <=, >, >=, ==, !=) of a tile is not modelled by trnsim: trnsim models the "
                   "tile operators +, -, *, /, **, %, abs(), unary -, &, |, ^, <<, >> and @",
    }
    for case, text in cases.items():
        e = raises(tnki.NkiError, tnki.simulate_kernel, messages_23l, x, case)
        assert str(e).startswith(f"{THIS}:{line_of('MARK-23l-' + case)}: {text}"), (case, str(e))
    assert tnki.simulate_kernel(messages_23l, x, "np-scalar").tobytes() == (x * 2 - 1).tobytes()
    import warnings

    with warnings.catch_warnings(record=True) as w:  # the kernel wrote its NaN: no "did the kernel write it?"
        warnings.simplefilter("always")
        y = tnki.simulate_kernel(messages_23l, x, "mod")
    assert np.isnan(y).all() and not [str(m.message) for m in w], [str(m.message) for m in w]


@nki.jit
def outputs_in_a_list(x):
    outs = [nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm) for _ in range(2)]  # MARK-list-outs
    o3 = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)  # MARK-o3
    t = nl.load(x)
    for o in outs + [o3]:
        nl.store(o[0:64, :], t[0:64, :])
    return outs[0], outs[1], o3


def test_outputs_without_name_are_named_alike_in_a_list_or_a_variable():
    # tester23l #8: a list's outputs appeared as 'out' / 'out_1', quoted as if the kernel had named them.
    import warnings

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tnki.simulate_kernel(outputs_in_a_list, X)
    got = [str(m.message).split(": no instruction writes")[0] for m in w]
    lst, o3 = line_of("MARK-list-outs"), line_of("MARK-o3")
    assert got == [f"{THIS}:{lst}: output float32 [128, 64], without name= (saved as out.npy)",
                   f"{THIS}:{lst}: output float32 [128, 64], without name= (saved as out_1.npy)",
                   f"{THIS}:{o3}: output o3 float32 [128, 64], without name= (saved as out_2.npy)"], got


@nki.jit
def returns_on_an_if_line(a, flag=True):
    o = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm, name="o")
    nl.store(o, nl.load(a))
    if flag: return {"a": o}  # MARK-if-return  # noqa: E701
    return o


def test_a_return_after_a_colon_is_the_return_line():
    # tester23n F6: `if flag: return {...}` was reported at the kernel's def line (the line did not start
    # with "return"); the return check names the line of the return statement.
    e = raises(tnki.NkiError, tnki.simulate_kernel, returns_on_an_if_line, np.ones((128, 4), np.float32))
    assert str(e).startswith("test_nki_messages.py:%d: kernel returns_on_an_if_line returns {'a': "
                             % _line_of(__file__, "MARK-if-return")), str(e)


@nki.jit
def matmul_of_psum(a, b, how):
    o = nl.ndarray((128, 128), nl.float32, buffer=nl.shared_hbm)
    ta, tb = nl.load(a), nl.load(b)
    acc = nl.zeros((128, 128), nl.float32, buffer=nl.psum)
    if how in ("user", "dst_user"):
        p = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)  # MARK-pdecl
        nisa.tensor_copy(dst=p, src=ta)
        if how == "user":
            acc += nisa.nc_matmul(tb, p)
        else:
            nisa.nc_matmul(dst=acc, stationary=tb, moving=p)  # MARK-mm-user
    else:
        t = nisa.nc_transpose(ta)  # MARK-mm-transpose
        if how == "copied":
            t = nl.copy(t)
        if how == "dst_transposed":
            nisa.nc_matmul(dst=acc, stationary=t, moving=tb)  # MARK-mm-psum
        else:
            acc += nisa.nc_matmul(t, tb)
    nl.store(o, nl.copy(acc))
    return o


@nki.jit
def transpose_of_psum(a, how):
    o = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    t = nisa.nc_transpose(nl.load(a))  # [128, 64] -> [64, 128] in PSUM
    if how == "dst":
        u = nl.ndarray((128, 64), nl.float32, buffer=nl.psum)
        nisa.nc_transpose(dst=u, data=t)  # MARK-tr-dst
    else:
        u = nisa.nc_transpose(t)
    nl.store(o, u)
    return o


def test_an_earlier_style_matmul_copies_a_psum_operand_to_sbuf():
    # tester23ak F2: nki-samples' fft1d (validated on hardware) passes earlier-style nc_transpose results, in
    # PSUM, straight to earlier-style nc_matmul: the compiler makes that work, so trnsim's lowering copies the
    # operand to SBUF (one tensor_copy on ACT), as nl.matmul does; it was an NkiError asking for the copy.
    a = np.random.default_rng(4).integers(-4, 5, (128, 128)).astype(np.float32)
    b = np.random.default_rng(5).integers(-4, 5, (128, 128)).astype(np.float32)
    r = tnki.benchmark(matmul_of_psum, a, b, "transposed")
    assert r.outputs[0].tobytes() == (a @ b).tobytes()  # a.T.T @ b: exact for these small integers
    copies = [o for o in r.stats["opcodes"] if o["opcode"] == "tensor_copy"]
    assert [(o["engine"], o["count"]) for o in copies] == [("ACT", 2)], copies  # the operand's and nl.copy(acc)
    copied = tnki.benchmark(matmul_of_psum, a, b, "copied")  # the copy written by the kernel: the same time
    assert copied.outputs[0].tobytes() == (a @ b).tobytes() and copied.latency_us == r.latency_us
    assert tnki.simulate_kernel(matmul_of_psum, a, b, "user").tobytes() == (b.T @ a).tobytes()
    # An earlier-style Tensor-engine transpose of a PSUM tile likewise: a.T.T is a, bit for bit.
    x = np.random.default_rng(6).standard_normal((128, 64)).astype(np.float32)
    assert tnki.simulate_kernel(transpose_of_psum, x, "earlier").tobytes() == x.tobytes()


@nki.jit
def nl_calls_of_psum(a, b):
    o = nl.ndarray((128, 128), nl.float32, buffer=nl.shared_hbm)
    ta, tb = nl.load(a), nl.load(b)
    p = nl.matmul(ta, tb, transpose_x=True)  # a.T @ b, in PSUM
    q = nl.matmul(p, tb, transpose_x=True)  # (a.T @ b).T @ b: p copied to SBUF first
    r = nl.transpose(nl.transpose(nl.copy(q)))  # the inner result in PSUM, copied to SBUF for the outer
    nl.store(o, r)
    return o


def test_nl_calls_copy_a_psum_operand_of_the_tensor_engine_to_sbuf():
    # tester23ak F3: nl.matmul / nl.transpose given a PSUM operand copy it to SBUF (tensor_copy), as docs/nki.md's
    # lowerings now say (they named one nc_matmul / nc_transpose only, and the time holds the copies).
    a = np.random.default_rng(7).integers(-2, 3, (128, 128)).astype(np.float32)
    b = np.random.default_rng(8).integers(-2, 3, (128, 128)).astype(np.float32)
    r = tnki.benchmark(nl_calls_of_psum, a, b)
    assert r.outputs[0].tobytes() == ((a.T @ b).T @ b).tobytes()
    ops = {(o["opcode"], o["engine"]): o["count"] for o in r.stats["opcodes"]}
    # p's copy, nl.copy(q), the inner transpose's copy, and nl.store's copy of the outer transpose's PSUM result
    assert ops[("tensor_copy", "ACT")] == 4 and ops[("nc_transpose", "PE")] == 2, ops


def test_a_psum_operand_of_nc_matmul_names_the_tile_and_the_copy_to_write():
    # closing17: nki-samples' flash_attn_bwd passes an earlier-style nc_transpose result (PSUM) to nc_matmul and
    # stopped at "nc_matmul: stationary and moving must be in SBUF", which said neither which operand nor why.
    # The current style (dst=) is one instruction, which reads SBUF: a PSUM operand stays an error there.
    a = np.random.default_rng(4).integers(-4, 5, (128, 128)).astype(np.float32)
    b = np.random.default_rng(5).integers(-4, 5, (128, 128)).astype(np.float32)
    e = raises(tnki.NkiError, tnki.simulate_kernel, matmul_of_psum, a, b, "dst_transposed")
    assert str(e) == (f"{THIS}:{line_of('MARK-mm-psum')}: nc_matmul: stationary is the psum tile t [128, 128] float32 "
                      f"allocated at {THIS}:{line_of('MARK-mm-transpose')}, as nc_transpose on the Tensor engine writes "
                      "its result to PSUM (an earlier-style call with no engine runs there): the Tensor engine reads "
                      "stationary and moving from SBUF (NKI's nc_matmul page); copy it to SBUF first (nl.copy(t), or "
                      "nisa.tensor_copy into an SBUF tile), or transpose a tile of up to 32 x 32 on the Vector "
                      "engine (engine=nisa.vector_engine), which writes SBUF"), e
    e = raises(tnki.NkiError, tnki.simulate_kernel, matmul_of_psum, a, b, "dst_user")
    assert str(e) == (f"{THIS}:{line_of('MARK-mm-user')}: nc_matmul: moving is the psum tile p [128, 128] float32 "
                      f"allocated at {THIS}:{line_of('MARK-pdecl')}: the Tensor engine reads stationary and "
                      "moving from SBUF (NKI's nc_matmul page); copy it to SBUF first (nl.copy(t), or "
                      "nisa.tensor_copy into an SBUF tile)"), e
    # The copy the message names: a.T.T @ b, exact for these small integers.
    assert tnki.simulate_kernel(matmul_of_psum, a, b, "copied").tobytes() == (a @ b).tobytes()
    x = np.ones((128, 64), np.float32)
    e = raises(Exception, tnki.simulate_kernel, transpose_of_psum, x, "dst")
    assert str(e).startswith(f"{THIS}:{line_of('MARK-tr-dst')}: nc_transpose on PE: ") and "PE cannot read PSUM" in str(e), e


@nki.jit
def bad_argument(x, case, ax=1):
    o = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x[0:128, 0:4])
    if case == "mgrid":
        i_p, i_f = nl.mgrid[0:128.5, 0:4]  # MARK-bad-mgrid
        t = nl.load(x[i_p, i_f])
    elif case == "ds":
        t = nl.load(x[nl.ds(0.5, 128), 0:4])  # MARK-bad-ds
    elif case == "iota":
        t = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.iota(dst=t, pattern=[[1.5, 4]], offset=0, channel_multiplier=1)  # MARK-bad-iota
    elif case == "ap":
        t = nl.copy(x.ap([[256, 128], [1, 4]], offset=2.5))  # MARK-bad-ap
    elif case == "num_programs":
        nl.num_programs(1)  # MARK-bad-np
    elif case == "program_id":
        nl.program_id(axis="x")  # MARK-bad-pid
    elif case == "empty":
        nl.ndarray((), dtype=nl.float32, buffer=nl.sbuf)  # MARK-bad-empty
    elif case == "sum":
        t = nl.sum(t, axis="free", keepdims=True)  # MARK-bad-sum
    elif case == "range":
        for i in nl.affine_range(0, 1, 0):  # MARK-bad-range
            pass
    elif case == "np_axis":
        r = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=r, op=nl.add, data=t, axis=ax)
        t = nl.add(nl.sum(t, axis=ax, keepdims=True), r)
    nl.store(o[:, 0:t.shape[1]], t)
    return o


def test_non_integer_bounds_and_axes_are_errors_at_the_line():
    # tester23ae F3, F4, F5: a float nl.mgrid bound ended in pybind11's "Unable to cast Python instance to C++ type"
    # with no line; nl.ds(0.5, 128), an iota step of 1.5 and an .ap offset of 2.5 were truncated silently; the
    # others were trnsim's own IndexError / TypeError / ValueError text; a NumPy integer axis was "not iterable".
    x = np.arange(256 * 256, dtype=np.float32).reshape(256, 256)
    for case, mark, text in (
            ("mgrid", "mgrid", "nl.mgrid: bound 128.5 of axis 0 (0:128.5) is not an integer: a grid's slices have "
             "integer bounds"),
            ("ds", "ds", "nl.ds(0.5, 128): start 0.5 is not an integer: a slice's start and size count elements"),
            ("iota", "iota", "iota: pattern [[1.5, 4]]: 1.5 is not an integer (steps, counts and offsets count "
             "elements)"),
            ("ap", "ap", ".ap: offset 2.5 is not an integer (steps, counts and offsets count elements)"),
            ("num_programs", "np", "nl.num_programs(1): the launch grid has 1 dims; a kernel runs on a launch "
             "grid as kernel[2, 2](...), and a workload runs it so when its kernel.function names a module-level "
             "kernel[2, 2] (`k22 = kernel[2, 2]`) or a function launching it"),
            ("program_id", "pid", "nl.program_id('x'): axis 'x' is not an integer (a dim of the launch grid)"),
            ("empty", "empty", "nl.ndarray: shape () has no partition dim: an on-chip tile's shape starts with its "
             "partition dim, e.g. (1, 1) for one element"),
            ("sum", "sum", "nl.sum: its tensor_reduce (made by trnsim's lowering of nl.sum, not a call of the "
             "kernel): axis 'free' is not an integer or a tuple / list of integers (the free dims of data [128, 4] "
             "to reduce; the partition dim is 0)"),
            ("range", "range", "nl.affine_range(0, 1, 0): step 0: a loop's step must not be zero")):
        e = raises(tnki.NkiError, tnki.simulate_kernel, bad_argument, x, case)
        assert str(e) == f"{THIS}:{line_of('MARK-bad-' + mark)}: {text}", (case, str(e))
    # NumPy integers are integers: the axis of nl.sum and nisa.tensor_reduce (twice the row sums, exact here).
    for ax in (np.int64(1), np.int32(-1)):
        o = tnki.simulate_kernel(bad_argument, x, "np_axis", ax)
        assert o[:, 0].tobytes() == (x[:128, :4].sum(axis=1) * np.float32(2)).tobytes(), ax


@nki.jit
def odd_values(x, case):
    o = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    if case == "name":
        o = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name=123)  # MARK-odd-name
    elif case == "operand":
        t = nisa.tensor_scalar(data=t, op0=nl.add, operand0=10**400)  # MARK-odd-operand
    elif case == "memset":
        t = nisa.memset(shape=(128, "a"), value=1.0, dtype=nl.float32)  # MARK-odd-memset
    elif case == "range":
        for i in nl.affine_range(2**70):  # MARK-odd-range
            pass
    nl.store(o, t)
    return o


def test_odd_values_of_names_operands_shapes_and_options_are_named():
    # tester23ae F10, F11: pybind11's "incompatible function arguments" (name=123, benchmark's lnc=2.0 and
    # numerics='yes'), an OverflowError (operand0=10**400, a loop of 2**70) and int()'s "invalid literal" (an
    # earlier-style memset shape) came from trnsim's own code; benchmark's overwrite='no' was taken as True and
    # replaced a file trnsim had not written.
    x = np.ones((128, 64), np.float32)
    for case, mark, text in (
            ("name", "name", "nl.ndarray: name=123: a tensor's name is a string"),
            ("operand", "operand", "tensor_scalar: operand0 1000000000000000000000000000000000000000 is past the "
             "largest float: an immediate is an FP32 number"),
            ("memset", "memset", "nki.isa.memset: shape (128, 'a'): size 'a' is not an integer"),
            ("range", "range", "nl.affine_range(1180591620717411303424): more iterations than a kernel can trace "
             "(each is traced; max_instructions bounds a kernel's instructions)")):
        e = raises(tnki.NkiError, tnki.simulate_kernel, odd_values, x, case)
        assert str(e) == f"{THIS}:{line_of('MARK-odd-' + mark)}: {text}", (case, str(e))
    for kw, text in (({"lnc": 2.0}, "lnc=2.0: trnsim runs 1 core or the LNC2 pair (lnc=2)"),):
        e = raises(ValueError, tnki.simulate_kernel, odd_values, x, "ok", **kw)
        assert str(e) == text, str(e)
    d = tmpdir()
    keep = os.path.join(d, "keep.pftrace")
    with open(keep, "w") as f:
        f.write("MINE")
    for kw, text in (({"numerics": "yes"}, "benchmark: numerics='yes': expected True or False"),
                     ({"overwrite": "no", "trace": keep}, "benchmark: overwrite='no': expected True or False")):
        e = raises(TypeError, tnki.benchmark, odd_values, x, "ok", **kw)
        assert str(e) == text, str(e)
    assert open(keep).read() == "MINE"
    # lnc as a NumPy integer is an integer.
    assert tnki.simulate_kernel(odd_values, x, "ok", lnc=np.int64(1)).tobytes() == x.tobytes()


if __name__ == "__main__":
    main(globals())
