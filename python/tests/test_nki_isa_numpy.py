"""nki.isa calls with no numerics test until now (tester23f #4: select_reduce, activation_reduce, reciprocal,
nl.load_transpose2d, sendrecv), against NumPy: the outputs must be the same bytes. Each is exact in float32 (a
selection, a copy and a sum of small integers, an IEEE division, a transpose, a copy between the cores)."""

import numpy as np

from runner import main, raises

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl

RNG = np.random.default_rng(23)
X = RNG.standard_normal((128, 64)).astype(np.float32)
INTS = RNG.integers(-8, 9, (128, 64)).astype(np.float32)


@nki.jit
def k_select_reduce(x, y):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    tx, ty = nl.load(x), nl.load(y)
    pred = nl.ndarray((128, 64), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=pred, data1=tx, data2=ty, op=nl.greater)
    sel = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(dst=sel, predicate=pred, on_true=tx, on_false=ty)
    nl.store(out, sel)
    return out


def test_select_reduce_picks_on_true_where_the_predicate_holds():
    out = tnki.simulate_kernel(k_select_reduce, X, INTS)
    assert out.tobytes() == np.where(X > INTS, X, INTS).astype(np.float32).tobytes()


@nki.jit
def k_select_vector(x, pr, fv, shape):
    # on_false a [P, 1] vector (tester23s F1): one value per partition for every element the predicate rejects;
    # dst, on_true and the predicate of `shape` (2-D or 3-D), with the maximum per partition in reduce_res.
    out = nl.ndarray(shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    mx = nl.ndarray((shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
    tx, tp, tf = nl.load(x), nl.load(pr, dtype=nl.uint8), nl.load(fv)
    sel = nl.ndarray(shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    red = nl.ndarray((shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(dst=sel, predicate=tp, on_true=tx, on_false=tf, reduce_res=red)  # MARK-select-vector
    nl.store(out, sel)
    nl.store(mx, red)
    return out, mx


def test_select_reduce_on_false_vector_broadcasts_along_the_free_dims():
    # The page's NumPy form np.where(predicate, on_true, on_false) with on_false [P, 1]; dst bfloat16, so the
    # float32 values are rounded once to bfloat16 (RNE), then the maximum per partition of those.
    from runner import bf16

    for shape in ((128, 64), (64, 4, 16)):
        x = RNG.standard_normal(shape).astype(np.float32)
        pr = (RNG.random(shape) < 0.3).astype(np.float32)
        fv = RNG.standard_normal((shape[0], 1)).astype(np.float32)
        out, mx = tnki.simulate_kernel(k_select_vector, x, pr, fv, shape=shape)
        fv_b = fv.reshape((shape[0],) + (1,) * (len(shape) - 1))
        want = bf16(np.where(pr != 0, x, fv_b))
        assert out.astype(np.float32).tobytes() == want.tobytes(), shape
        assert mx.tobytes() == want.reshape(shape[0], -1).max(axis=1, keepdims=True).tobytes(), shape


def test_select_reduce_on_false_of_another_shape_is_an_error():
    from runner import line_of

    x = RNG.standard_normal((128, 64)).astype(np.float32)
    where = "test_nki_isa_numpy.py:%d" % line_of(__file__, "MARK-select-vector")
    for fshape in ((128, 2), (64, 1), (1, 64)):
        e = raises(tnki.NkiError, tnki.simulate_kernel, k_select_vector, x, x, np.zeros(fshape, np.float32),
                   shape=(128, 64))
        assert str(e) == (f"{where}: nki.isa.select_reduce: on_false is {list(fshape)}; it must be a number or a "
                          "vector of shape [128, 1] (on_true.shape[0], 1): one value per partition, used for every "
                          "element of that partition"), str(e)


@nki.jit
def k_select_reverse(x, pr, fv, pdt):
    # reverse_pred=True (tester23x F2): on_true where the predicate is 0; on_false a tile of on_true's shape or
    # a [P, 1] vector (fv's shape), the predicate of dtype pdt; the maximum per partition in reduce_res.
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    mx = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
    tx, tp, tf = nl.load(x), nl.load(pr, dtype=pdt), nl.load(fv)
    sel = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    red = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(dst=sel, predicate=tp, on_true=tx, on_false=tf, reduce_res=red, reverse_pred=True)
    nl.store(out, sel)
    nl.store(mx, red)
    return out, mx


@nki.jit
def k_select_reverse_number(x, pr, c):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    mx = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
    tx, tp = nl.load(x), nl.load(pr, dtype=nl.uint8)
    sel = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    red = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(dst=sel, predicate=tp, on_true=tx, on_false=c, reduce_res=red, reverse_pred=True)
    nl.store(out, sel)
    nl.store(mx, red)
    return out, mx


def test_select_reduce_reverse_pred_picks_on_true_where_the_predicate_is_zero():
    # The page's ~predicate as a logical not: np.where(predicate == 0, on_true, on_false). A uint8 predicate
    # holding 0, 1 and 255; an int16 one holding 0, 1, -1 and 300 (the page allows 8- and 16-bit integers).
    x = RNG.standard_normal((128, 64)).astype(np.float32)
    ints = RNG.choice(np.array([0, 1, 255], np.float32), (128, 64))
    wide = RNG.choice(np.array([0, 1, -1, 300], np.float32), (128, 64))
    for pr, pdt in ((ints, nl.uint8), (wide, nl.int16)):
        for fv in (RNG.standard_normal((128, 64)).astype(np.float32),
                   RNG.standard_normal((128, 1)).astype(np.float32)):
            out, mx = tnki.simulate_kernel(k_select_reverse, x, pr, fv, pdt)
            want = np.where(pr == 0, x, np.broadcast_to(fv, x.shape)).astype(np.float32)
            assert out.tobytes() == want.tobytes(), (pdt, fv.shape)
            assert mx.tobytes() == want.max(axis=1, keepdims=True).tobytes(), (pdt, fv.shape)
            assert (pr == 0).any() and (pr != 0).any()


def test_select_reduce_reverse_pred_with_a_number_on_false():
    # It was NkiUnsupported ("the inverted select ... needs on_false in memory"): the number is now written to a
    # [P, 1] float32 tile (the page: a scalar on_false is float32) that the swapped select reads.
    x = RNG.standard_normal((128, 64)).astype(np.float32)
    pr = RNG.choice(np.array([0, 1, 255], np.float32), (128, 64))
    pr[5] = 1  # a partition with no on_true element: its maximum is on_false's
    for c in (-3.0, 0.1, float("inf")):
        out, mx = tnki.simulate_kernel(k_select_reverse_number, x, pr, c)
        want = np.where(pr == 0, x, np.float32(c)).astype(np.float32)
        assert out.tobytes() == want.tobytes(), c
        assert mx.tobytes() == want.max(axis=1, keepdims=True).tobytes(), c
        assert mx[5, 0] == np.float32(c), mx[5]


@nki.jit
def k_activation_reduce(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    sums = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    a = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation_reduce(dst=a, op=nl.copy, data=t, reduce_op=nl.add, reduce_res=s, scale=2.0)
    nl.store(out, a)
    nl.store(sums, s)
    return out, sums


def test_activation_reduce_sums_each_partitions_results():
    # copy(2 x) of small integers: every partial sum is exact, so the sums match NumPy's bytes.
    out, sums = tnki.simulate_kernel(k_activation_reduce, INTS)
    assert out.tobytes() == (2 * INTS).tobytes()
    assert sums.tobytes() == (2 * INTS).sum(axis=1, keepdims=True).astype(np.float32).tobytes()


@nki.jit
def k_reciprocal(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    r = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.reciprocal(dst=r, data=nl.load(x))
    nl.store(out, r)
    return out


def test_reciprocal_is_an_ieee_division():
    out = tnki.simulate_kernel(k_reciprocal, X)
    assert out.tobytes() == (np.float32(1) / X).tobytes()


@nki.jit
def k_load_transpose2d(x):
    out = nl.ndarray((64, 128), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load_transpose2d(x))
    return out


def test_load_transpose2d_transposes():
    x = X.astype(np.float16)  # dma_transpose moves 2-byte elements
    out = tnki.simulate_kernel(k_load_transpose2d, x)
    assert out.dtype == np.float16 and out.tobytes() == np.ascontiguousarray(x.T).tobytes()


@nki.jit
def k_sendrecv(x):
    out = nl.ndarray((256, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    mine = nl.load(x[pid * 128:(pid + 1) * 128, :])
    theirs = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=0)
    nl.store(out[pid * 128:(pid + 1) * 128, :], theirs)
    return out


def test_sendrecv_swaps_the_cores_tiles():
    # kernel[2]: each core sends its rows of x to the other; each stores what it received in its own rows.
    x = RNG.standard_normal((256, 64)).astype(np.float32)
    out = tnki.simulate_kernel(k_sendrecv[2], x)
    assert out.tobytes() == np.concatenate([x[128:], x[:128]]).tobytes()



@nki.jit
def k_int_add(x, y, engine):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=d, data1=nl.load(x), data2=nl.load(y), op=nl.add, engine=engine)
    nl.store(out, d)
    return out


def test_int32_tensor_tensor_is_exact_on_gpsimd():
    # nki.isa.tensor_tensor (2.33): when every tile is int32 or uint32 it defaults to GpSimd, "which uses native
    # integer arithmetic. This ensures exact results for all 32-bit integer values"; engine=vector overrides it
    # (FP32 math). trnsim ran it on Vector in FP32: 2^24 + 1 + 2^24 + 1 came out 2^25.
    base = (np.arange(128 * 64, dtype=np.int64).reshape(128, 64) * 4099 + (1 << 24) + 1)
    for dt in (np.int32, np.uint32):
        x, y = base.astype(dt), (base[::-1] * 3).astype(dt)
        r = tnki.benchmark(k_int_add, x, y, nisa.engine.unknown)
        assert r.outputs[0].tobytes() == (x + y).tobytes(), dt
        pool = r.stats["engines"]["core0"]["POOL"]["instructions"]
        assert pool == 1, r.stats["engines"]["core0"]
        # On Vector: each operand rounded to FP32, the sum in FP32 (all sums here < 2^31: no wrap).
        fp32 = (x.astype(np.float32) + y.astype(np.float32)).astype(np.int64).astype(dt)
        assert fp32.tobytes() != (x + y).tobytes()
        got = tnki.simulate_kernel(k_int_add, x, y, nisa.vector_engine)
        assert got.tobytes() == fp32.tobytes(), dt

@nki.jit
def k_int_op(x, y, op):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    r = nisa.tensor_tensor(nl.load(x), nl.load(y), op=op)
    nl.store(out, r)
    return out


def _int_reference(op, a, b):
    """NKI's GpSimd integer arithmetic (nki.isa.tensor_tensor, 2.33: exact for every 32-bit value) on the
    values the dtypes hold: comparisons and max/min of the true values, divide truncating toward zero, power
    the exact integer power; each result wrapped to the 32-bit dtype."""
    x, y = a.astype(np.int64), b.astype(np.int64)
    if op == "divide":
        r = np.sign(x) * np.sign(y) * (np.abs(x) // np.abs(y))
    elif op == "power":
        r = np.power(x, y)  # int64 wraps modulo 2^64: the low 32 bits are exact
    else:
        r = getattr(np, op)(x, y)
    return r.astype(np.int64).astype(a.dtype)


def test_uint32_and_int32_gpsimd_arithmetic_uses_the_dtypes_values():
    # tester23j #2: uint32 values above 2^31 compared and divided as negative int32; int32 power went through
    # FP32 (7^11 = 1977326743 came out 1977326720).
    rng = np.random.default_rng(5)
    raw = rng.integers(0, 1 << 32, (128, 64), dtype=np.uint64).astype(np.uint32)
    small = rng.integers(1, 12, (128, 64)).astype(np.uint32)
    raw[:, :2], small[:, :2] = 0xFFFFFFF7, 7
    for dt in (np.uint32, np.int32):
        a = raw.view(dt) if dt == np.int32 else raw
        for op in ("maximum", "minimum", "greater", "less", "greater_equal", "less_equal", "equal", "divide"):
            b = (small if op == "divide" else raw[::-1]).astype(dt)
            b[:, :2] = 7
            got = tnki.simulate_kernel(k_int_op, a, b, getattr(nl, op))
            assert got.tobytes() == _int_reference(op, a, b).tobytes(), (dt, op)
        base, exp = (small.astype(dt) + 2), small.astype(dt)
        base[:, 0], exp[:, 0] = 7, 11
        got = tnki.simulate_kernel(k_int_op, base, exp, nl.power)
        assert got.tobytes() == _int_reference("power", base, exp).tobytes(), dt
        assert int(got[0, 0]) == 1977326743


@nki.jit
def k_greater_two_forms(x, y):
    out = nl.ndarray((128, 2), dtype=nl.uint32, buffer=nl.shared_hbm)
    s, t = nl.load(x), nl.load(y)
    nl.store(out[:, 0:1], nl.greater(s, t)[:, 0:1])
    nl.store(out[:, 1:2], nl.greater(s, 7)[:, 0:1])
    return out


def test_uint32_greater_agrees_between_the_tile_and_the_number_form():
    a = np.full((128, 64), 0xFFFFFFF7, np.uint32)
    got = tnki.simulate_kernel(k_greater_two_forms, a, np.full((128, 64), 7, np.uint32))
    assert got.tobytes() == np.ones((128, 2), np.uint32).tobytes()


@nki.jit
def k_bitvec(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    s = nl.load(x)
    r = nl.left_shift(nl.bitwise_xor(nl.bitwise_and(s, s), s[:, ::-1]), 2)
    r2 = nl.right_shift(nisa.tensor_tensor(r, s, op=nl.bitwise_and), 3)
    nl.store(out, nl.bitwise_or(r2, s))
    return out


def test_bitvec_calls_on_int32_tiles_run_on_vector():
    # tester23j #3: the int32/uint32 -> GpSimd default sent bitvec operators to GpSimd, where the rule check
    # refuses them (NKI runs bitvec operators on the Vector engine only).
    x = np.arange(128 * 64, dtype=np.int64).reshape(128, 64)
    for dt in (np.int32, np.uint32):
        u = ((x * 2654435761) % (1 << 32)).astype(np.uint32)
        a = u.view(dt)
        want = (((((u & u) ^ u[:, ::-1]) << 2) & u) >> 3) | u
        r = tnki.benchmark(k_bitvec, a)
        assert r.outputs[0].tobytes() == want.astype(np.uint32).view(dt).tobytes(), dt
        assert "POOL" not in r.stats["engines"]["core0"] or \
            r.stats["engines"]["core0"]["POOL"]["instructions"] == 0, r.stats["engines"]["core0"]


@nki.jit
def k_double_row(a, b, style, mode=nisa.matmul_perf_mode.double_row):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    ta = nl.ndarray((128, 2, 128), dtype=nl.float8_e4m3, buffer=nl.sbuf)
    tb = nl.ndarray((128, 2, 512), dtype=nl.float8_e4m3, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    nisa.dma_copy(dst=tb, src=b)
    res = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    if style == "dst":
        nisa.nc_matmul(dst=res, stationary=ta, moving=tb, perf_mode=mode)
    else:
        res[...] += nisa.nc_matmul(ta, tb, perf_mode=mode)
    nl.store(out, res)
    return out


def test_double_row_matmul_sums_both_rows_in_either_style():
    # tester23o F9: the earlier style (nki-samples' double_row_matmul) sized its result [2 * 128, 2 * 512], "partition
    # dim 256 exceeds the 128 partitions of PSUM". Integers -4..4 are exact in float8_e4m3 and their sums of 256
    # products in float32.
    a = RNG.integers(-4, 5, (128, 2, 128)).astype(np.float32)
    b = RNG.integers(-4, 5, (128, 2, 512)).astype(np.float32)
    want = np.einsum("krm,krn->mn", a, b)
    for style in ("dst", "earlier"):
        got = tnki.simulate_kernel(k_double_row, a, b, style)
        assert got.tobytes() == want.tobytes(), (style, got.ravel()[:4], want.ravel()[:4])


def test_double_row_gen3_is_double_row():
    # perf_mode='double_row_gen3', NKI's earlier name of the mode (its neuronxcc nc_matmul example runs it on trn2
    # with [K, 2, F] operands summed over K and both rows): the same bytes and simulated time as double_row.
    a = RNG.integers(-4, 5, (128, 2, 128)).astype(np.float32)
    b = RNG.integers(-4, 5, (128, 2, 512)).astype(np.float32)
    want = np.einsum("krm,krn->mn", a, b)
    for style in ("dst", "earlier"):
        gen3 = tnki.benchmark(k_double_row, a, b, style, "double_row_gen3")
        named = tnki.benchmark(k_double_row, a, b, style)
        assert gen3.outputs[0].tobytes() == want.tobytes(), style
        assert gen3.latency_ns == named.latency_ns, (style, gen3.latency_ns, named.latency_ns)
        assert gen3.stats["opcodes"] == named.stats["opcodes"], style


def test_an_unknown_perf_mode_is_named():
    z = np.zeros((128, 2, 128), dtype=np.float32)
    e = raises(tnki.NkiError, tnki.simulate_kernel, k_double_row, z, np.zeros((128, 2, 512), np.float32), "dst",
               "quad_row")
    assert "nc_matmul: perf_mode must be an nki.isa.matmul_perf_mode (none, double_row; 'double_row_gen3' is " \
           "double_row's earlier name), got 'quad_row'" in str(e), str(e)


@nki.jit
def k_select_dtypes(x, pdt, tdt, rdt):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    tp, tx = nl.load(x, dtype=pdt), nl.load(x, dtype=tdt)
    sel = nl.ndarray(x.shape, dtype=tdt, buffer=nl.sbuf)
    red = nl.ndarray((x.shape[0], 1), dtype=rdt, buffer=nl.sbuf)
    nisa.select_reduce(dst=sel, predicate=tp, on_true=tx, on_false=0.0, reduce_res=red)  # MARK-select-dtypes
    nl.store(out, nl.copy(sel, dtype=nl.float32))
    return out


def test_select_reduce_refuses_the_dtypes_its_page_forbids():
    # tester23y F4: a float predicate, int32 on_true, an integer reduce_res ran silently.
    from runner import line_of

    x = np.ones((128, 8), np.float32)
    where = "test_nki_isa_numpy.py:%d" % line_of(__file__, "MARK-select-dtypes")
    for (pdt, tdt, rdt), why in (
            ((nl.float32, nl.float32, nl.float32), "predicate is float32; its dtype must be int8, uint8, int16 or "
                                                   "uint16"),
            ((nl.uint8, nl.int32, nl.float32), "on_true is int32; any dtype but int32, uint32 and tfloat32"),
            ((nl.uint8, nl.float32, nl.int32), "reduce_res is int32; its dtype must be a float type")):
        e = raises(tnki.NkiError, tnki.simulate_kernel, k_select_dtypes, x, pdt, tdt, rdt)
        assert str(e) == f"{where}: nki.isa.select_reduce: {why} (NKI's select_reduce page)", str(e)
    assert tnki.simulate_kernel(k_select_dtypes, x, nl.int16, nl.bfloat16, nl.float32).tobytes() == x.tobytes()


if __name__ == "__main__":
    main(globals())
