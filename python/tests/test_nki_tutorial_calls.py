"""NKI calls of the published tutorials and nki-library kernels that were NkiUnsupported before (tester23h):
nisa.scalar_tensor_tensor, nisa.bn_stats / bn_aggr, nisa.affine_select, the nl activation functions sin, cos,
arctan, erf, erf_dx, softplus, mish, gelu_dx, floor, ceil, trunc, and the dtype nl.float8_e4m3. Each output is
compared byte for byte with a NumPy computation written here from NKI's definitions, not from trnsim's code."""

import math

import numpy as np

from runner import line_of, main, raises

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl

RNG = np.random.default_rng(2323)
X = RNG.standard_normal((128, 64)).astype(np.float32)
Y = RNG.standard_normal((128, 64)).astype(np.float32)
V = RNG.standard_normal((128, 1)).astype(np.float32)


# ---- scalar_tensor_tensor: (data op0 operand0) op1 operand1


@nki.jit
def k_stt(x, y, v, op0, op1, reverse0, reverse1, vector):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    tx, ty = nl.load(x), nl.load(y)
    s = nl.load(v) if vector else 0.75
    r = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(dst=r, data=tx, op0=op0, operand0=s, op1=op1, operand1=ty, reverse0=reverse0,
                              reverse1=reverse1)
    nl.store(out, r)
    return out


@nki.jit
def k_stt_old(x, y, v):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    r = nisa.scalar_tensor_tensor(data=nl.load(x), op0=nl.subtract, operand0=nl.load(v), op1=nl.multiply,
                                  operand1=nl.load(y))
    nl.store(out, r)
    return out


def test_scalar_tensor_tensor_applies_op0_with_the_scalar_then_op1_with_the_tile():
    f32 = np.float32
    cases = [
        (nl.subtract, nl.multiply, False, False, True, (X - V) * Y),
        (nl.subtract, nl.multiply, True, False, True, (V - X) * Y),
        (nl.add, nl.divide, False, True, True, Y / (X + V)),
        (nl.multiply, nl.maximum, False, False, False, np.maximum(X * f32(0.75), Y)),
    ]
    for op0, op1, r0, r1, vector, want in cases:
        out = tnki.simulate_kernel(k_stt, X, Y, V, op0=op0, op1=op1, reverse0=r0, reverse1=r1, vector=vector)
        assert out.tobytes() == want.astype(f32).tobytes(), (op0, op1, r0, r1)
    # The earlier calling style (returns a new tile).
    assert tnki.simulate_kernel(k_stt_old, X, Y, V).tobytes() == ((X - V) * Y).tobytes()


def test_scalar_tensor_tensor_refuses_bitvec_operators():
    e = raises(Exception, tnki.simulate_kernel, k_stt, X, Y, V, op0=nl.bitwise_and, op1=nl.add, reverse0=False,
               reverse1=False, vector=True)
    assert "arithmetic" in str(e) and "bitwise_and" in str(e), e


def test_scalar_tensor_tensor_is_timed_as_tensor_tensor():
    # Same tiles, same engine: scalar_tensor_tensor's cost formula is tensor_tensor's (docs/timing.md).
    @nki.jit
    def k_tt(x, y):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        r = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=r, data1=nl.load(x), data2=nl.load(y), op=nl.multiply)
        nl.store(out, r)
        return out

    a = tnki.benchmark(k_tt, X, Y)
    b = tnki.benchmark(k_stt, X, Y, V, op0=nl.multiply, op1=nl.multiply, reverse0=False, reverse1=False,
                       vector=False)
    assert a.latency_ns == b.latency_ns, (a.latency_ns, b.latency_ns)


# ---- activation functions: FP64 math rounded once to FP32 (the reference trnsim documents)


@nki.jit
def k_unary(x, fn):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, fn(nl.load(x)))
    return out


def _erf(a):
    return np.vectorize(math.erf, otypes=[np.float64])(a)


def test_softplus_and_mish_do_not_overflow_for_large_inputs():
    # log(1 + e^x) is x where e^x overflows FP64 (x >= 710): it was inf (tester23i); and 0 for large -x.
    x = np.zeros((128, 64), np.float32)
    x[0, :4] = [710.0, 1000.0, 1e30, -1000.0]
    sp = tnki.simulate_kernel(k_unary, x, fn=nl.softplus)
    assert sp[0, :4].tolist() == [710.0, 1000.0, np.float32(1e30), 0.0]
    mish = tnki.simulate_kernel(k_unary, x, fn=nl.mish)
    assert mish[0, :3].tolist() == [710.0, 1000.0, np.float32(1e30)]


def test_activation_functions_match_numpy_in_float64_rounded_to_float32():
    x = (3 * X).astype(np.float32)
    d = x.astype(np.float64)
    sp = np.maximum(d, 0) + np.log1p(np.exp(-np.abs(d)))
    want = {
        "sin": np.sin(d), "cos": np.cos(d), "arctan": np.arctan(d), "erf": _erf(d),
        "erf_dx": 2 / np.sqrt(np.pi) * np.exp(-d * d), "softplus": sp, "mish": d * np.tanh(sp),
        "gelu_dx": 0.5 * (1 + _erf(d / np.sqrt(2))) + d * np.exp(-0.5 * d * d) / np.sqrt(2 * np.pi),
        "floor": np.floor(d), "ceil": np.ceil(d), "trunc": np.trunc(d),
    }
    for name, ref in want.items():
        out = tnki.simulate_kernel(k_unary, x, fn=getattr(nl, name))
        got, ref32 = out.view(np.uint32), ref.astype(np.float32).view(np.uint32)
        assert (got == ref32).all(), (name, int((got != ref32).sum()))


def test_gelu_keeps_its_precision_for_large_negative_inputs():
    # tester23p F4: 1 + erf (1 + tanh) formed in float32 cancelled for x < -3: gelu(-5) was 4 % off, -0.0 from
    # x = -5.6. NKI's definitions, x Phi(x) and 0.5 x (1 + tanh u), written without the cancellation in float64
    # and rounded once to float32.
    x = (3 * X).astype(np.float32)
    x[0, :6] = [-4.0, -5.0, -5.6, -6.0, -8.0, -12.0]
    d = x.astype(np.float64)
    erfc = np.vectorize(math.erfc, otypes=[np.float64])
    u = np.sqrt(2 / np.pi) * (d + 0.044715 * d * d * d)
    for fn, ref in ((nl.gelu, 0.5 * d * erfc(-d / np.sqrt(2))), (nl.gelu_apprx_tanh, d / (1 + np.exp(-2 * u)))):
        got, want = tnki.simulate_kernel(k_unary, x, fn=fn), ref.astype(np.float32)
        assert got.tobytes() == want.tobytes(), (fn, got[0, :6], want[0, :6], int((got != want).sum()))
    assert tnki.simulate_kernel(k_unary, x, fn=nl.gelu)[0, 2] == np.float32(-6.0018536e-08), "gelu(-5.6)"


def test_activation_functions_are_activation_ops_too():
    # op=nl.sin in nisa.activation, with scale and bias: sin(2x + 0.5).
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        r = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=r, op=nl.sin, data=nl.load(x), scale=2.0, bias=None)
        nl.store(out, r)
        return out

    out = tnki.simulate_kernel(k, X)
    assert out.tobytes() == np.sin((X * np.float32(2)).astype(np.float64)).astype(np.float32).tobytes()


# ---- bn_stats / bn_aggr


def _seq_sum(cols):
    """Left-to-right FP32 sum of a list of [P] float32 columns (NumPy's own sum is pairwise)."""
    s = np.zeros_like(cols[0]) if cols else None
    for c in cols:
        s = (s + c).astype(np.float32)
    return s


def _bn_stats_ref(x):
    f32 = np.float32
    out = []
    for half in (0, 1):
        cols = [x[:, j] for j in range(half, x.shape[1], 2)]
        n = f32(len(cols))
        mean = (_seq_sum(cols) / n).astype(f32)
        m2 = _seq_sum([((c - mean) * (c - mean)).astype(f32) for c in cols])
        out += [np.full(x.shape[0], n, f32), mean, m2]
    return np.stack(out, axis=1)


def _bn_aggr_ref(stats):
    f32 = np.float32
    k = stats.shape[1] // 3
    counts = [stats[:, 3 * t] for t in range(k)]
    means = [stats[:, 3 * t + 1] for t in range(k)]
    m2s = [stats[:, 3 * t + 2] for t in range(k)]
    n = _seq_sum(counts)
    mu = (_seq_sum([(c * m).astype(f32) for c, m in zip(counts, means)]) / n).astype(f32)
    m2 = _seq_sum([(s + (c * ((m - mu) * (m - mu)).astype(f32)).astype(f32)).astype(f32)
                   for c, m, s in zip(counts, means, m2s)])
    return np.stack([mu, (m2 / n).astype(f32)], axis=1)


@nki.jit
def k_bn(x):
    # NKI's LayerNorm tutorial pattern: bn_stats on each 512-element chunk into one stats tile, then bn_aggr.
    P, F = x.shape
    chunks = (F + 511) // 512
    stats_out = nl.ndarray((P, 6 * chunks), dtype=nl.float32, buffer=nl.shared_hbm)
    mv_out = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    tx = nl.load(x)
    stats = nl.ndarray((P, 6 * chunks), dtype=nl.float32, buffer=nl.sbuf)
    for c in nl.affine_range(chunks):
        nisa.bn_stats(dst=stats[:, 6 * c:6 * c + 6], data=tx[:, 512 * c:512 * c + 512])
    mv = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_aggr(dst=mv, data=stats)
    nl.store(stats_out, stats)
    nl.store(mv_out, mv)
    return stats_out, mv_out


def test_bn_stats_and_bn_aggr_give_the_documented_layout_and_values():
    x = (RNG.standard_normal((128, 1024)) * 3 + 1).astype(np.float32)
    stats, mv = tnki.simulate_kernel(k_bn, x)
    want = np.concatenate([_bn_stats_ref(x[:, :512]), _bn_stats_ref(x[:, 512:])], axis=1)
    assert stats.tobytes() == want.tobytes()
    assert mv.tobytes() == _bn_aggr_ref(want).tobytes()
    # And they are the mean and the population variance (NumPy in FP64), to FP32 accuracy.
    assert np.allclose(mv[:, 0], x.astype(np.float64).mean(axis=1), rtol=1e-5, atol=1e-6)
    assert np.allclose(mv[:, 1], x.astype(np.float64).var(axis=1), rtol=1e-4)


def test_bn_stats_odd_width_and_the_earlier_calling_style():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.bn_aggr(nisa.bn_stats(nl.load(x))))
        return out

    x = RNG.standard_normal((128, 33)).astype(np.float32)
    assert tnki.simulate_kernel(k, x).tobytes() == _bn_aggr_ref(_bn_stats_ref(x)).tobytes()


def test_bn_stats_refuses_more_than_512_elements():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.bn_stats(nl.load(x)))
        return out

    e = raises(Exception, tnki.simulate_kernel, k, np.zeros((128, 600), np.float32))
    assert "512" in str(e) and "bn_stats" in str(e) and "test_nki_tutorial_calls.py" in str(e), e


def test_a_layernorm_in_the_tutorials_form():
    # NKI's LayerNorm tutorial's statistics: bn_stats / bn_aggr, rstd = rsqrt(var + eps) on Scalar, then
    # (x - mean) * rstd in one tensor_scalar with the two [P, 1] vectors.
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        tx = nl.load(x)
        mv = nisa.bn_aggr(nisa.bn_stats(tx))
        rstd = nl.rsqrt(nisa.tensor_scalar(mv[:, 1:2], nl.add, 1e-5))
        y = nisa.tensor_scalar(tx, nl.subtract, mv[:, 0:1], op1=nl.multiply, operand1=rstd)
        nl.store(out, y)
        return out

    x = (RNG.standard_normal((128, 500)) * 2 - 1).astype(np.float32)
    mv = _bn_aggr_ref(_bn_stats_ref(x))
    rstd = np.float32(1) / np.sqrt((mv[:, 1:2] + np.float32(1e-5)).astype(np.float32))
    want = ((x - mv[:, 0:1]) * rstd).astype(np.float32)
    assert tnki.simulate_kernel(k, x).tobytes() == want.tobytes()


# ---- affine_select


@nki.jit
def k_causal(x):
    # The attention tutorials' causal mask: keep score[q, k] where q - k >= 0, else a large negative value.
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    r = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.affine_select(dst=r, pattern=[[-1, x.shape[1]]], offset=0, channel_multiplier=1, on_true_tile=nl.load(x),
                       on_false_value=-9984.0, cmp_op=nl.greater_equal)
    nl.store(out, r)
    return out


def test_affine_select_applies_a_causal_mask():
    x = RNG.standard_normal((128, 128)).astype(np.float32)
    q, k = np.mgrid[0:128, 0:128]
    want = np.where(q - k >= 0, x, np.float32(-9984.0)).astype(np.float32)
    assert tnki.simulate_kernel(k_causal, x).tobytes() == want.tobytes()


def test_affine_select_pattern_in_another_shape_than_dst():
    # tester23r F1: as nisa.iota's, the pattern's [step, num] dims may walk dst's free elements in another shape
    # holding as many (the page: "similar to nisa.iota"): [[-8, 8], [-1, 8]] over a [128, 64] dst is the causal
    # mask of column 8 * w + x; [[-1, 64]] over a [128, 8, 8] dst the same. It was an NkiError.
    @nki.jit
    def k(x):
        o1 = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((128, 8, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        r = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.affine_select(dst=r, pattern=[[-8, 8], [-1, 8]], channel_multiplier=1, on_true_tile=t,
                           on_false_value=-1.0, cmp_op=nl.greater_equal)
        nl.store(o1, r)
        s = nl.ndarray((128, 8, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.affine_select(dst=s, pattern=[[-1, 64]], channel_multiplier=1, on_true_tile=t.reshape((128, 8, 8)),
                           on_false_value=-1.0, cmp_op=nl.greater_equal)
        nl.store(o2, s)
        return o1, o2

    x = RNG.standard_normal((128, 64)).astype(np.float32)
    q, c = np.mgrid[0:128, 0:64]
    want = np.where(q - c >= 0, x, np.float32(-1.0)).astype(np.float32)
    o1, o2 = tnki.simulate_kernel(k, x)
    assert o1.tobytes() == want.tobytes()
    assert o2.tobytes() == want.tobytes()


def test_affine_select_latest_signature_has_offset_last_with_a_default():
    # NKI's latest affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op=nl.equal,
    # offset=0): the NKI library's cascaded max builds an identity so (no offset); positionally too.
    @nki.jit
    def k(x):
        o1 = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        r = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.affine_select(dst=r, pattern=[[1, x.shape[1]]], channel_multiplier=-1, cmp_op=nl.equal,
                           on_true_tile=t, on_false_value=0.0)
        nl.store(o1, r)
        s = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.affine_select(s, [[-1, x.shape[1]]], 1, t, -9984.0, nl.greater_equal, 2)
        nl.store(o2, s)
        return o1, o2

    x = RNG.standard_normal((128, 128)).astype(np.float32)
    q, c = np.mgrid[0:128, 0:128]
    o1, o2 = tnki.simulate_kernel(k, x)
    assert o1.tobytes() == np.where(c - q == 0, x, np.float32(0)).astype(np.float32).tobytes()
    assert o2.tobytes() == np.where(2 + q - c >= 0, x, np.float32(-9984.0)).astype(np.float32).tobytes()


def test_nki_isa_constants_holds_the_enums():
    # The NKI library imports its enums from nki.isa.constants (`from nki.isa.constants import oob_mode,
    # dge_mode`); NKI's docs write nisa.constants.engine.tensor.
    from nki.isa.constants import dge_mode, matmul_perf_mode, oob_mode

    assert (dge_mode, oob_mode, matmul_perf_mode) == (nisa.dge_mode, nisa.oob_mode, nisa.matmul_perf_mode)
    assert nisa.constants.engine.tensor is nisa.engine.tensor
    import nki.isa.constants as c

    assert c is nisa.constants and c.reduce_cmd is nisa.reduce_cmd


def test_affine_select_earlier_style_takes_a_comparison_of_index_expressions():
    # The fused-attention tutorial's form: pred = (q0 + i_q >= k0 + i_k) over an nl.mgrid, a new tile returned.
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        i_q, i_k = nl.mgrid[0:128, 0:256]
        r = nisa.affine_select(pred=(128 + i_q >= 64 + i_k), on_true_tile=nl.load(x), on_false_value=-9984.0)
        nl.store(out, r)
        return out

    x = RNG.standard_normal((128, 256)).astype(np.float32)
    q, kk = np.mgrid[0:128, 0:256]
    want = np.where(128 + q >= 64 + kk, x, np.float32(-9984.0)).astype(np.float32)
    assert tnki.simulate_kernel(k, x).tobytes() == want.tobytes()


def test_affine_select_earlier_style_takes_a_mask():
    # mask= was NkiUnsupported. The instruction works on the masked-in region (rows < 72, columns >= 8 of the
    # [128, 64] index space), its predicate taken at the region's own indices; assigned into a zeroed tile, the
    # rest stays zero. NumPy reference: the same predicate over the whole index space, cut to the region.
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        i_q, i_k = nl.mgrid[0:128, 0:64]
        t = nl.load(x)
        r = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        r[i_q, i_k] = nisa.affine_select(pred=(i_q - 2 * i_k > -7), on_true_tile=t[i_q, i_k], on_false_value=-1.0,
                                         mask=(i_q < 72) & (i_k >= 8))
        nl.store(out, r)
        return out

    x = RNG.standard_normal((128, 64)).astype(np.float32)
    q, kk = np.mgrid[0:128, 0:64]
    want = np.zeros((128, 64), np.float32)
    sel = np.where(q - 2 * kk > -7, x, np.float32(-1.0)).astype(np.float32)
    want[:72, 8:] = sel[:72, 8:]
    assert tnki.simulate_kernel(k, x).tobytes() == want.tobytes()


def test_scalar_tensor_tensor_reduce_res_says_why_it_is_refused():
    # NKI 2.33's fused reduction: its API reference gives the arguments, not the reduction; the refusal said
    # only "the fused reduction (NKI 2.33)". It says why now, and what to use instead, at the kernel's line.
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        r = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=t, data=t, op0=nl.add, operand0=1.0, op1=nl.multiply, operand1=t,
                                  reduce_op=nl.add, reduce_res=r)  # MARK-stt-reduce
        nl.store(out, t)
        return out

    e = raises(tnki.NkiUnsupported, tnki.simulate_kernel, k, np.ones((128, 8), np.float32))
    assert str(e).startswith(
        "test_nki_tutorial_calls.py:%d: nki.isa.scalar_tensor_tensor(reduce_res=...) is not modelled by trnsim: "
        "NKI 2.33 adds reduce_cmd / reduce_op / reduce_res to this call, but its API reference does not define the "
        "reduction" % (line_of(__file__, "MARK-stt-reduce") - 1)), e
    assert "reduce dst afterwards with nisa.tensor_reduce(" in str(e), e


def test_affine_select_earlier_style_takes_predicates_written_around_a_constant():
    # `i_q - i_k >= 0`, `i_q - 2 * i_k > -7` and `i_q > 5` are affine predicates too (NKI 2.26's affine_select);
    # they were refused as masks (tester23i).
    @nki.jit
    def k(x, form):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        i_q, i_k = nl.mgrid[0:128, 0:64]
        pred = {0: i_q - i_k >= 0, 1: i_q - 2 * i_k > -7, 2: i_q > 5, 3: i_k < 9}[form]
        nl.store(out, nisa.affine_select(pred=pred, on_true_tile=nl.load(x), on_false_value=-1.0))
        return out

    x = RNG.standard_normal((128, 64)).astype(np.float32)
    q, kk = np.mgrid[0:128, 0:64]
    for form, cond in enumerate([q - kk >= 0, q - 2 * kk > -7, q > 5, kk < 9]):
        want = np.where(cond, x, np.float32(-1.0)).astype(np.float32)
        assert tnki.simulate_kernel(k, x, form).tobytes() == want.tobytes(), form


@nki.jit
def _affine_select_of_psum(x, earlier):
    # x copied into PSUM, then selected where partition >= column + 3 (earlier style) or column <= partition.
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
    nisa.tensor_copy(dst=p, src=nl.load(x))
    if earlier:
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(64)[None, :]
        r = nisa.affine_select(pred=(i_p >= i_f + 3), on_true_tile=p[i_p, i_f], on_false_value=-9984.0)
    else:
        r = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.affine_select(dst=r, pattern=[[-1, 64]], offset=0, channel_multiplier=1, on_true_tile=p,
                           on_false_value=0.0)
    nl.store(out, r)
    return out


def test_affine_select_on_a_psum_tile_says_gpsimd_cannot_access_psum():
    # It named an engine rule the user never chose: "affine_select on DVE: engine: affine_select runs on
    # POOL" (tester23i).
    try:
        tnki.simulate_kernel(_affine_select_of_psum, np.ones((128, 64), np.float32), earlier=False)
        raise AssertionError("no error")
    except Exception as e:  # noqa: BLE001
        assert str(e).endswith(": affine_select: on_true_tile is in PSUM; affine_select runs on the GpSimd engine, "
                               "which cannot access PSUM (nki.isa.affine_select): copy the tile to SBUF first "
                               "(nl.copy / nisa.tensor_copy)"), e


def test_earlier_style_affine_select_reads_a_psum_tile_through_a_copy():
    # NKI's Stable Diffusion attention tutorial passes its PSUM scores as on_true_tile (use_causal_mask=True);
    # it was refused ("on_true_tile is in PSUM", tester23j finding 6). The compiler's copy to SBUF first.
    x = RNG.standard_normal((128, 64)).astype(np.float32)
    q, f = np.mgrid[0:128, 0:64]
    want = np.where(q >= f + 3, x, np.float32(-9984.0)).astype(np.float32)
    assert tnki.simulate_kernel(_affine_select_of_psum, x, earlier=True).tobytes() == want.tobytes()


def test_affine_select_on_two_free_dims_with_an_offset_and_nl_equal_by_default():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
        r = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.affine_select(r, [[1, 4], [-2, 16]], 3, 2, nl.load(x), 0.5)
        nl.store(out, r)
        return out

    x = RNG.standard_normal((64, 4, 16)).astype(np.float32)
    p, a, b = np.mgrid[0:64, 0:4, 0:16]
    # simulate_kernel returns a bfloat16 output as its float32 values: x rounded to bfloat16 (RNE) where
    # 3 + 2p + a - 2b == 0, else 0.5.
    u = x.view(np.uint32).astype(np.uint64)
    bf = (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
    want = np.where(3 + 2 * p + a - 2 * b == 0, bf, np.float32(0.5)).astype(np.float32)
    assert tnki.simulate_kernel(k, x).tobytes() == want.tobytes()


# ---- nl.float8_e4m3: the IEEE-style E4M3 (bias 7, Inf S.1111.000, NaN S.1111.mmm, max 240)


def _e4m3_value(code):
    s, e, m = code >> 7, (code >> 3) & 15, code & 7
    if e == 15:
        v = math.inf if m == 0 else math.nan
    elif e == 0:
        v = m / 8 * 2.0 ** -6
    else:
        v = (1 + m / 8) * 2.0 ** (e - 7)
    return -v if s else v


def _e4m3_encode(x):
    """Nearest finite code, ties to the even code; beyond 240 and +-Inf -> +-240; NaN -> 0x7F; sign kept."""
    finite = [(c, _e4m3_value(c)) for c in range(0x78)]  # 0x00..0x77: +0 .. 240
    out = []
    for v in x.astype(np.float64):
        if math.isnan(v):
            out.append(0x7F)
            continue
        s = 0x80 if math.copysign(1, v) < 0 else 0
        a = min(abs(v), 240.0)
        best = min(finite, key=lambda cv: (abs(cv[1] - a), cv[0] & 1))
        out.append(best[0] | s)
    return np.array(out, np.uint8)


@nki.jit
def k_to_e4m3(x):
    out = nl.ndarray(x.shape, dtype=nl.float8_e4m3, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=nl.float8_e4m3, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t, src=nl.load(x))
    nl.store(out, t)
    return out


@nki.jit
def k_from_e4m3(codes):
    out = nl.ndarray(codes.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(codes.view(nl.float8_e4m3))
    r = nl.ndarray(codes.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=t)
    nl.store(out, r)
    return out


def test_float8_e4m3_stores_round_to_nearest_even_and_saturate_at_240():
    grid = np.array([_e4m3_value(c) for c in range(0x78)] + [-_e4m3_value(c) for c in range(0x78)])
    mids = (grid[:-1] + grid[1:]) / 2  # ties between neighbours (positive half)
    special = [240, 244, 247.9, 248, 255, 1e6, np.inf, -np.inf, np.nan, -0.0, 2.0 ** -10, 2.0 ** -11, -2.0 ** -10,
               3 * 2.0 ** -11]
    vals = np.concatenate([grid, mids[:0x77], special, RNG.standard_normal(512) * 50]).astype(np.float32)
    vals = np.resize(vals, (128, (vals.size + 127) // 128))
    # simulate_kernel returns an FP8 output as its float32 values: each decodes one code (+-0 by the sign bit;
    # the only NaN code a store writes is 0x7F).
    got = tnki.simulate_kernel(k_to_e4m3, vals)
    codes = _e4m3_encode(vals.ravel()).reshape(vals.shape)
    want = np.array([_e4m3_value(int(c)) for c in codes.ravel()], np.float32).reshape(vals.shape)
    same = ((got == want) & (np.signbit(got) == np.signbit(want))) | (np.isnan(got) & np.isnan(want))
    bad = np.argwhere(~same)
    assert bad.size == 0, [(float(vals[tuple(i)]), float(got[tuple(i)]), int(codes[tuple(i)])) for i in bad[:5]]
    assert (codes == 0x7F).sum() == np.isnan(vals).sum() and (np.abs(got[~np.isnan(got)]) <= 240).all()


def test_float8_e4m3_loads_decode_every_code_with_inf_and_nan():
    codes = np.arange(256, dtype=np.uint8).reshape(128, 2)
    got = tnki.simulate_kernel(k_from_e4m3, tnki.typed(codes, nl.uint8))
    want = np.array([_e4m3_value(c) for c in range(256)], np.float64).astype(np.float32).reshape(128, 2)
    assert (np.isnan(got) == np.isnan(want)).all()
    ok = ~np.isnan(want)
    assert got[ok].tobytes() == want[ok].tobytes()


def test_float8_e4m3_matmul_operands():
    # nc_matmul with float8_e4m3 stationary and moving tiles: small integers, so every product and FP32 sum is
    # exact and the result is NumPy's integer matmul.
    @nki.jit
    def k(a, b):
        out = nl.ndarray((64, 96), dtype=nl.float32, buffer=nl.shared_hbm)
        ta = nl.ndarray(a.shape, dtype=nl.float8_e4m3, buffer=nl.sbuf)
        tb = nl.ndarray(b.shape, dtype=nl.float8_e4m3, buffer=nl.sbuf)
        nisa.tensor_copy(dst=ta, src=nl.load(a))
        nisa.tensor_copy(dst=tb, src=nl.load(b))
        acc = nl.ndarray((64, 96), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=ta, moving=tb)
        r = nl.ndarray((64, 96), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=r, src=acc)
        nl.store(out, r)
        return out

    a = RNG.integers(-8, 9, (128, 64)).astype(np.float32)
    b = RNG.integers(-8, 9, (128, 96)).astype(np.float32)
    assert tnki.simulate_kernel(k, a, b).tobytes() == (a.T.astype(np.float64) @ b).astype(np.float32).tobytes()



# ---- nl.shared_identity_matrix: an [n, n] identity in SBUF (nki.language.matmul's example uses it)


@nki.jit
def k_identity(x):
    ident = nl.shared_identity_matrix(n=128, dtype=nl.float32)
    ones = nl.full((128, 128), 1.0, dtype=nl.float32, buffer=nl.sbuf)
    prod = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(prod, nl.matmul(ident, ones, transpose_x=True))  # identity.T @ ones = ones
    d = nl.ndarray((32, 32), dtype=nl.bfloat16, buffer=nl.sbuf)
    nl.shared_identity_matrix(32, nl.bfloat16, dst=d)
    outs = [nl.ndarray(s, dtype=t, buffer=nl.shared_hbm) for s, t in (((128, 128), nl.float32),
                                                                        ((64, 64), nl.uint8),
                                                                        ((32, 32), nl.bfloat16))]
    nl.store(outs[0], prod)
    nl.store(outs[1], nl.shared_identity_matrix(64))  # dtype defaults to uint8
    nl.store(outs[2], d)
    return tuple(outs)


def test_shared_identity_matrix():
    # It was NkiUnsupported; nki.language.matmul's documented example starts from it.
    r = tnki.benchmark(k_identity, X)
    prod, u8, bf = r.outputs
    assert prod.tobytes() == np.ones((128, 128), np.float32).tobytes()
    assert u8.dtype == np.uint8 and u8.tobytes() == np.identity(64, dtype=np.uint8).tobytes()
    assert bf.tobytes() == np.identity(32, dtype=np.float32).tobytes()  # bfloat16 comes back as float32 values
    # Each identity: one memset and one affine_select on GpSimd (plus the ones tile's memset).
    assert r.stats["engines"]["core0"]["POOL"]["instructions"] == 3 * 2 + 1, r.stats["engines"]["core0"]["POOL"]


# ---- constructs of NKI's Stable Diffusion attention tutorial (earlier style), each NkiError / RuleError before


def bf16(a):
    """float32 values rounded to bfloat16 (nearest even), as float32."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).view(np.float32)


@nki.jit
def k_sd_attention_calls(x, xt):
    t = nl.load(x)
    outs = [nl.ndarray(s, dtype=nl.float32, buffer=nl.shared_hbm) for s in ((128, 1), (128, 1), (128, 64),
                                                                            (64, 128), (64, 128))]
    # NumPy's reductions as the reduce operator.
    nl.store(outs[0], nisa.tensor_reduce(np.max, data=t, axis=(1,), keepdims=True))
    nl.store(outs[1], nisa.tensor_reduce(np.min, data=t, axis=(1,), keepdims=True))
    # A [P] reduction result broadcast along a new free dim.
    s = nisa.tensor_reduce(np.add, data=t, axis=(1,))
    nl.store(outs[2], nl.copy((1.0 / s).broadcast_to((128, 64))))
    # load_transpose2d with a cast; a Tensor-engine transpose assigned into an SBUF tensor.
    nl.store(outs[3], nl.copy(nl.load_transpose2d(xt, dtype=nl.bfloat16), dtype=nl.float32))
    sb = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.sbuf)
    sb[...] = nisa.nc_transpose(t)
    nl.store(outs[4], sb)
    return tuple(outs)


def test_sd_attention_tutorial_calls():
    # tensor_reduce(np.max) said "'amax' is not an ALU operator"; a [128] tile's broadcast_to((128, 64)) said
    # "must keep the number of dims"; load_transpose2d(dtype=bfloat16) of float32 broke the DMA transpose's
    # dtype rule; `sb[...] = nisa.nc_transpose(t)` made the Tensor engine write SBUF (a RuleError).
    xt = RNG.standard_normal((128, 64)).astype(np.float32)
    r = tnki.benchmark(k_sd_attention_calls, X, xt)
    mx, mn, recip, lt, tr = r.outputs
    assert mx.tobytes() == X.max(axis=1, keepdims=True).tobytes()
    assert mn.tobytes() == X.min(axis=1, keepdims=True).tobytes()
    sums = np.zeros(128, np.float32)
    for j in range(64):  # the Vector engine sums in order, in FP32
        sums = (sums + X[:, j]).astype(np.float32)
    assert recip.tobytes() == np.repeat((np.float32(1) / sums)[:, None], 64, axis=1).tobytes()
    assert lt.tobytes() == bf16(xt.T).tobytes()
    assert tr.tobytes() == X.T.tobytes()
    # tensor_copy on Scalar: the two nl.copy, the load_transpose2d cast after the DMA transpose, and the
    # transpose's PSUM result into sb.
    counts = {(o["opcode"], o["engine"]): o["count"] for o in r.stats["opcodes"]}
    assert (counts[("tensor_copy", "ACT")], counts[("nc_transpose", "PE")], counts[("dma_transpose", "SP")]) == (
        4, 1, 1), counts

@nki.jit
def k_numpy_sum_and_copy(x):
    # nki-samples' contributed pipelined attention names np.sum as tensor_reduce's operator and np.copy as an
    # activation function.
    t = nl.load(x)
    sums = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    neg = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(sums, nisa.tensor_reduce(np.sum, t, axis=(1,), keepdims=True))
    nl.store(neg, nisa.activation(np.copy, t, scale=-1.0))
    return sums, neg


def test_numpy_sum_and_copy_name_add_and_copy():
    # They were "'sum' is not an ALU operator" and "'copy' is not an activation function". The sum: FP32, in
    # order; copy(-1 * x) is exact.
    sums, neg = tnki.simulate_kernel(k_numpy_sum_and_copy, X)
    want = np.zeros(128, np.float32)
    for j in range(64):
        want = (want + X[:, j]).astype(np.float32)
    assert sums.tobytes() == want[:, None].tobytes()
    assert neg.tobytes() == (-X).tobytes()


# ---- nki-samples' beta-2 matmul tutorial forms (tester23m F1, F2)


@nki.jit
def copy_with_another_dtype(x: nki.tensor) -> nki.tensor:  # nki.tensor as the annotation
    assert isinstance(x, nki.tensor)
    out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    p = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum)
    nisa.tensor_copy(dst=p, src=nl.load(x))
    s = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=s, src=p, dtype=out.dtype)  # MARK-copy-dtype: dst's float32 wins
    nisa.dma_copy(dst=out, src=s)  # the cast to bfloat16, once
    return out


def test_tensor_copy_dtype_other_than_dsts_is_ignored_with_a_warning_and_nki_tensor_is_the_class():
    # `nisa.tensor_copy(dst=<float32>, src=psum, dtype=nl.bfloat16)` was "tensor_copy: dtype=nl.bfloat16 differs
    # from dst's float32" (nki-samples' hoist-load matmul tutorial refused); `x: nki.tensor` was NkiUnsupported
    # when the module was imported.
    import warnings

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = tnki.simulate_kernel(copy_with_another_dtype, X)
    assert [str(m.message) for m in w] == [
        f"nisa.tensor_copy: dtype=bfloat16 is ignored: the copy writes dst's float32 (nki.isa.tensor_copy casts to "
        "dst.dtype; its dst= signature has no dtype=)"], [str(m.message) for m in w]
    assert w[0].lineno == line_of(__file__, "MARK-copy-dtype")
    b = X.view(np.uint32).astype(np.uint64)
    want = (((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)  # bfloat16 RNE
    assert got.tobytes() == want.tobytes()


if __name__ == "__main__":
    main(globals())
