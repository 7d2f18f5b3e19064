"""What a kernel gives back (a tester's pass on issue 23): a tensor the kernel returns twice comes back
twice, as NKI's simulator gives back what the kernel returns, and fills write exact values."""

import warnings

import numpy as np

from runner import line_of, main, raises

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl
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


@nki.jit
def psum_fill_then_matmuls(aT, b):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.full((128, 512), 5.0, dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(2):
        acc += nl.matmul(nl.load(aT[k * 128:(k + 1) * 128, :]), nl.load(b[k * 128:(k + 1) * 128, :]),
                         transpose_x=True)
    nl.store(out, nl.copy(acc))
    return out


@nki.jit
def psum_memset_then_nc_matmul(aT, b, value):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.memset(dst=p, value=value)
    nisa.nc_matmul(dst=p, stationary=nl.load(aT[0:128, :]), moving=nl.load(b[0:128, :]))  # accumulate=None
    halves = nl.full((128, 512), 7.0, dtype=nl.float32, buffer=nl.psum)
    for h in nl.affine_range(2):  # a matmul into each half of a fill: each half adds to it
        halves[:, h * 256:(h + 1) * 256] += nl.matmul(nl.load(aT[0:128, :]), nl.load(b[0:128, h * 256:(h + 1) * 256]),
                                                      transpose_x=True)
    nl.store(out, nl.add(nl.copy(p), nl.copy(halves)))
    return out


def test_a_non_zero_psum_fill_is_added_to_by_the_matmuls():
    # nl.full(5.0, buffer=nl.psum) / nisa.memset(value=7) before accumulating matmuls was dropped (the
    # result was the products alone): only a fill of 0 is what the compiler folds into the first matmul.
    # Integer data: every partial sum is exact in float32, so the bytes match numpy's.
    rs = np.random.RandomState(3)
    aT = rs.randint(-3, 4, (256, 128)).astype(np.float32)
    b = rs.randint(-3, 4, (256, 512)).astype(np.float32)
    out = tnki.simulate_kernel(psum_fill_then_matmuls, aT, b)
    assert out.tobytes() == (aT.T @ b + 5).astype(np.float32).tobytes(), (out - aT.T @ b)[0, :4]
    one = aT[:128].T @ b[:128]
    for value in (7.0, 0.0):
        out = tnki.simulate_kernel(psum_memset_then_nc_matmul, aT, b, value)
        assert out.tobytes() == (one + value + (one + 7)).astype(np.float32).tobytes(), (value, out[0, :4])


@nki.jit
def psum_written_then_matmuls(aT, b, bias, writer):
    """PSUM written by a non-matmul instruction (`writer`), then matmuls that accumulate onto it."""
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    if writer == "tensor_copy":
        nisa.tensor_copy(dst=p, src=nl.load(bias))
    elif writer == "activation":
        nisa.activation(dst=p, op=nl.copy, data=nl.load(bias), scale=2.0)
    elif writer == "tensor_scalar":
        nisa.tensor_scalar(dst=p, data=nl.load(bias), op0=nl.multiply, operand0=3.0)
    elif writer == "dma":
        nisa.dma_copy(dst=p, src=bias)
    else:  # `p[...] = nl.exp(t)` style: the activation writes p itself
        p[...] = nl.multiply(nl.load(bias), 1.0)
    if writer == "dma":  # nisa.nc_matmul with accumulate=None, twice
        for kk in nl.affine_range(2):
            st, mv = nl.load(aT[kk * 128:(kk + 1) * 128, :]), nl.load(b[kk * 128:(kk + 1) * 128, :])
            nisa.nc_matmul(dst=p, stationary=st, moving=mv)  # MARK-nc_matmul
    else:
        for kk in nl.affine_range(2):
            st, mv = nl.load(aT[kk * 128:(kk + 1) * 128, :]), nl.load(b[kk * 128:(kk + 1) * 128, :])
            p += nl.matmul(st, mv, transpose_x=True)  # MARK-matmul
    nl.store(out, nl.copy(p))
    # Read, then `+=` a matmul again: `+=` adds to what q holds (q = bias + 2 products), read or not.
    q = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.tensor_copy(dst=q, src=nl.load(bias))
    q += nl.matmul(nl.load(aT[0:128, :]), nl.load(b[0:128, :]), transpose_x=True)
    again = nl.copy(q)
    q += nl.matmul(nl.load(aT[0:128, :]), nl.load(b[0:128, :]), transpose_x=True)
    out2 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out2, nl.add(again, nl.copy(q)))
    return out, out2


def test_a_psum_value_written_by_any_instruction_is_added_to_by_the_matmuls():
    # nki.isa.nc_matmul, accumulate=None: "first write overwrites, subsequent writes accumulate". A PSUM tile a
    # tensor_copy, activation, tensor_scalar or DMA wrote and then `+=` nl.matmul / nisa.nc_matmul started a new group
    # and dropped the written values (only a memset was kept). Integer data: every sum is exact in float32.
    rs = np.random.RandomState(7)
    aT = rs.randint(-3, 4, (256, 128)).astype(np.float32)
    b = rs.randint(-3, 4, (256, 512)).astype(np.float32)
    bias = rs.randint(-3, 4, (128, 512)).astype(np.float32)
    prod, one = aT.T @ b, aT[:128].T @ b[:128]
    want2 = ((bias + one) + ((bias + one) + one)).astype(np.float32)
    for writer, init in (("tensor_copy", bias), ("activation", 2 * bias), ("tensor_scalar", 3 * bias), ("dma", bias),
                         ("assign", bias)):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out, out2 = tnki.simulate_kernel(psum_written_then_matmuls, aT, b, bias, writer)
        assert out.tobytes() == (prod + init).astype(np.float32).tobytes(), (writer, (out - prod)[0, :4])
        assert out2.tobytes() == want2.tobytes(), (writer, (out2 - want2)[0, :4])
        # NKI's docs: undefined behaviour on NeuronCore-v2/-v3 hardware (trn2 here): warned once per line.
        msgs = [str(m.message) for m in w if "undefined behaviour on NeuronCore-v2" in str(m.message)]
        mark = "MARK-nc_matmul" if writer == "dma" else "MARK-matmul"
        at = "test_nki_results.py:%d" % line_of(__file__, mark)
        assert any(m.startswith(at + ": the matmul adds to psum tile p [128, 512] float32") for m in msgs), msgs
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out, _ = tnki.simulate_kernel(psum_written_then_matmuls, aT, b, bias, "tensor_copy", hardware="trn3")
    assert out.tobytes() == (prod + bias).astype(np.float32).tobytes()
    assert not [m for m in w if "undefined behaviour" in str(m.message)], [str(m.message) for m in w]


@nki.jit
def zeros_then_accumulate_true(aT, b):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    for kk in nl.affine_range(2):
        st, mv = nl.load(aT[kk * 128:(kk + 1) * 128, :]), nl.load(b[kk * 128:(kk + 1) * 128, :])
        nisa.nc_matmul(dst=p, stationary=st, moving=mv, accumulate=True)  # MARK-zeros-acc
    nl.store(out, nl.copy(p))
    return out


def test_accumulate_true_onto_zeros_is_warned_on_trn2():
    # nl.zeros in PSUM then nc_matmul(accumulate=True): the memset stays (the flag is the user's) and the sum is
    # right, but NKI's nc_matmul docs call a matmul accumulating onto a memset's value undefined behaviour on
    # NeuronCore-v2/-v3 (with accumulate=None the compiler folds the zeroing into the first matmul: no warning).
    rs = np.random.RandomState(8)
    aT = rs.randint(-3, 4, (256, 128)).astype(np.float32)
    b = rs.randint(-3, 4, (256, 512)).astype(np.float32)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = tnki.simulate_kernel(zeros_then_accumulate_true, aT, b)
    assert out.tobytes() == (aT.T @ b).astype(np.float32).tobytes()
    at = "test_nki_results.py:%d" % line_of(__file__, "MARK-zeros-acc")
    msgs = [str(m.message) for m in w]
    assert any(m.startswith(at + ": the matmul adds to psum tile p [128, 512] float32") and "which memset at " in m
               for m in msgs), msgs


@nki.jit
def iadd_after_a_read(aT, b):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    out2 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    a0, b0 = nl.load(aT), nl.load(b)
    acc += nl.matmul(a0, b0, transpose_x=True)
    part = nl.copy(acc)  # a read of the open group
    acc += nl.matmul(a0, b0, transpose_x=True)  # adds: acc holds 2 aT.T @ b
    nl.store(out, nl.add(part, nl.copy(acc)))
    p = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=a0, moving=b0)
    nl.store(out2, nl.copy(p))  # a read ends the group for accumulate=None:
    nisa.nc_matmul(dst=p, stationary=a0, moving=b0)  # this matmul starts a new one
    nl.store(out2, nl.add(nl.load(out2), nl.copy(p)))
    return out, out2


def test_iadd_adds_to_a_psum_sum_read_in_between():
    # tester23g: `acc += nl.matmul(...)` after `nl.copy(acc)` started a new group and overwrote acc (the store
    # held 2 aT.T @ b, not 3): `+=` is acc = acc + product whatever read acc in between. nisa.nc_matmul with
    # accumulate=None keeps trnsim's rule (a read ends the group: out2 = 2 aT.T @ b, not 3).
    rs = np.random.RandomState(9)
    aT = rs.randint(-3, 4, (128, 128)).astype(np.float32)
    b = rs.randint(-3, 4, (128, 512)).astype(np.float32)
    out, out2 = tnki.simulate_kernel(iadd_after_a_read, aT, b)
    one = aT.T @ b
    assert out.tobytes() == (3 * one).astype(np.float32).tobytes(), (out / np.where(one == 0, 1, one))[0, :4]
    assert out2.tobytes() == (2 * one).astype(np.float32).tobytes(), (out2 / np.where(one == 0, 1, one))[0, :4]


@nki.jit
def reductions(x):
    shapes = []
    outs = []
    t = nl.load(x)
    for r in (nl.sum(t, axis=1), nl.max(t, axis=1, keepdims=True), nl.mean(t, axis=(1,)),
              nl.sum(t.reshape((128, 4, 16)), axis=(1, 2))):
        shapes.append(tuple(r.shape))
        o = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(o, r)
        outs.append(o)
    reductions.shapes = shapes
    return tuple(outs)


def test_reductions_remove_the_reduced_axes():
    # nl.sum(t[128, 64], axis=1) gave [128, 1]: NKI's keepdims defaults to False, "the specified axes
    # removed" (nki.language.sum), so [128]; keepdims=True keeps [128, 1].
    x = np.random.RandomState(5).randint(-8, 9, (128, 64)).astype(np.float32)
    s, m, mean, s3 = tnki.simulate_kernel(reductions, x)
    assert reductions.shapes == [(128,), (128, 1), (128,), (128,)], reductions.shapes
    assert s.shape == (128,) and s.tobytes() == x.sum(1).tobytes()
    assert m.tobytes() == x.max(1, keepdims=True).tobytes()
    assert mean.shape == (128,) and mean.tobytes() == (x.sum(1) * np.float32(1 / 64)).tobytes()
    assert s3.tobytes() == x.sum(1).tobytes()


@nki.jit
def reduced_against_source(a):
    outs = [nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm) for _ in range(4)]
    t = nl.load(a)
    s = nl.sum(t, axis=[1])  # [128]
    sk = nl.sum(t, axis=[1], keepdims=True)  # [128, 1]
    nl.store(outs[0], nl.multiply(t, s))
    nl.store(outs[1], nl.subtract(s, t))
    nl.store(outs[2], nl.subtract(sk, t))
    nl.store(outs[3], t - s)
    return tuple(outs)


def test_a_reduction_result_broadcasts_against_its_source():
    # tester23h: NKI's RMSNorm tutorial (`rms = nl.rsqrt(nl.sum(sq, axis=[1]) / n); nl.multiply(a_tile, rms)`) and a
    # softmax without keepdims were refused ("[128, 512] and [128] differ in rank"): a [P] tile is a per-partition
    # scalar against [P, F]. And nl.subtract(sk [128, 1], t [128, 64]) made a [128, 1] result (the first operand's
    # shape) and was refused by tensor_scalar: the result has the broadcast shape.
    a = np.random.RandomState(10).randint(-3, 4, (128, 64)).astype(np.float32)
    s = a.sum(1, keepdims=True)
    got = tnki.simulate_kernel(reduced_against_source, a)
    for g, want in zip(got, (a * s, s - a, s - a, a - s)):
        assert g.shape == (128, 64) and g.tobytes() == want.astype(np.float32).tobytes()


def _matmuls(seq, last=None):
    """A kernel of matmuls I @ ones into the column ranges `seq` of one PSUM tile (each adds 1.0 where it
    accumulates), the last with accumulate=`last` when given."""

    @nki.jit
    def k(a, b):
        out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
        ta, tb = nl.load(a), nl.load(b)
        p = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.psum)
        for i, (lo, hi) in enumerate(seq):
            kw = {"accumulate": last} if last is not None and i == len(seq) - 1 else {}
            nisa.nc_matmul(dst=p[:, lo:hi], stationary=ta, moving=tb[:, lo:hi], **kw)  # MARK-mm-seq
        s = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=p)
        nisa.dma_copy(dst=out, src=s)
        return out

    return k


def test_accumulate_none_accumulates_where_matmuls_of_open_groups_wrote():
    # nki.isa.nc_matmul's accumulate=None: the first write to an address overwrites, later ones accumulate.
    # A matmul over addresses that matmuls of other regions' open groups wrote overwrote them (tester23m F3:
    # [0:128], [128:256], then [0:256] gave 1.0 for 2.0, silently); one over addresses only some of which were
    # written cannot be one instruction's flag: an error.
    eye, ones = np.eye(128, dtype=np.float32), np.ones((128, 256), np.float32)
    for seq, left, right in ((((0, 128), (128, 256), (0, 256)), 2.0, 2.0), (((0, 256), (0, 128)), 2.0, 1.0),
                             (((0, 256), (0, 128), (0, 256)), 3.0, 2.0), (((0, 128), (0, 128)), 2.0, None)):
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")  # (the last case leaves columns 128-255 unwritten)
            o = tnki.simulate_kernel(_matmuls(seq), eye, ones)
        assert np.all(o[:, :128] == left), (seq, np.unique(o[:, :128]))
        if right is not None:
            assert np.all(o[:, 128:] == right), (seq, np.unique(o[:, 128:]))
    e = raises(tnki.NkiError, tnki.simulate_kernel, _matmuls(((0, 128), (0, 256))), eye, ones)
    assert str(e) == (f"test_nki_results.py:{line_of(__file__, 'MARK-mm-seq')}: nc_matmul: accumulate=None, but "
                      "matmuls of an open accumulation group wrote part of dst [128, 256] of psum tile p [128, 256] "
                      "float32 only: the first write to an address overwrites and later ones accumulate "
                      "(nki.isa.nc_matmul), and one instruction cannot do both; pass accumulate=True or False, or "
                      "split the matmul where that group ends"), e
    # An explicit flag is the kernel's: accumulate=False overwrites.
    o = tnki.simulate_kernel(_matmuls(((0, 128), (0, 256)), last=False), eye, ones)
    assert np.all(o == 1.0)


@nki.jit
def as_fp8_and_bf16(x):
    # x [P, F] float32: its bytes stored as float8_e4m3 [P, 4 F] (as nki-library's rmsnorm_quant stores each
    # row's float32 scale in 4 FP8 bytes) and its values rounded to bfloat16.
    o8 = nl.ndarray((x.shape[0], 4 * x.shape[1]), nl.float8_e4m3, buffer=nl.shared_hbm)
    o16 = nl.ndarray(x.shape, nl.bfloat16, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(o8, t.view(nl.float8_e4m3))
    nl.store(o16, nl.copy(t, dtype=nl.bfloat16))
    return o8, o16


def test_raw_outputs_keep_the_bits():
    # tester23aa F10: an FP8 output comes back as float32 values, and every FP8 NaN code is the one float NaN:
    # bytes 0x7A and 0x7B (two E4M3 NaN codes) could not be told apart. raw_outputs has the bits.
    x = np.frombuffer(bytes([0x7A, 0x00, 0x80, 0x3F, 0x7B, 0x00, 0x80, 0x3F] * 128), np.float32).reshape(128, 2)
    r = tnki.benchmark(as_fp8_and_bf16, x)
    o8, o16 = r.outputs
    assert o8.dtype == np.float32 and np.isnan(o8[:, 0]).all() and np.isnan(o8[:, 4]).all()
    assert o8[0, 1:4].tolist() == [0.0, -0.0, 1.875] and o16.tolist() == [[1.0, 1.0]] * 128, (o8[0], o16[0])
    b8, b16 = r.raw_outputs
    assert b8.dtype == np.uint8 and b8.tobytes() == x.tobytes(), b8[0]
    assert b16.dtype == np.uint16 and b16.tolist() == [[0x3F80, 0x3F80]] * 128, b16[0]
    # Every low byte 0x70-0x7F and 0xF0-0xFF, 4 times: in nl.float8_e4m3 (IEEE-style: exponent 1111 is +-inf with a
    # zero mantissa, NaN otherwise) 0x79-0x7F and 0xF9-0xFF are NaN codes, 14 of every 32 rows, 56 in all.
    words = np.array([0x3F800000 | b for b in list(range(0x70, 0x80)) + list(range(0xF0, 0x100))] * 4, np.uint32)
    x = words.view(np.float32).reshape(128, 1)
    r = tnki.benchmark(as_fp8_and_bf16, x)
    fp8, bf16 = r.raw_outputs
    assert fp8.dtype == np.uint8 and fp8.tobytes() == x.tobytes()
    # bfloat16 is float32's upper half rounded to nearest even: 0x3F80 for every value here (1.0000x).
    assert bf16.dtype == np.uint16 and bf16.tobytes() == np.full((128, 1), 0x3F80, np.uint16).tobytes()
    values = r.outputs[0]
    assert values.dtype == np.float32 and np.isnan(values[:, 0]).sum() == 56  # one float32 NaN for 14 codes
    assert r.outputs[1].tobytes() == np.ones((128, 1), np.float32).tobytes()


if __name__ == "__main__":
    main(globals())
