"""NKI semantics of ordinary kernel code that trnsim refused or got wrong (tester23k's open items, issue 23):
each test fails on the build before its fix, with exact bytes against NumPy."""

import os
import warnings

import numpy as np

from runner import line_of, main, raises, same_f32

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl

THIS = os.path.basename(__file__)
# Values of every float32 exponent range tried here, none of them exact in bfloat16.
X = (np.arange(128 * 64, dtype=np.float32).reshape(128, 64) - 4000) * np.float32(1.0009765625 / 7)
TWO = X * np.float32(2)
# Small integers: a matmul of them is exact in float32, whatever the order of its sums.
A = (np.arange(128 * 64, dtype=np.float32).reshape(128, 64) % 7) - 3


def bf16(a):
    """float32 -> bfloat16 (round to nearest even) -> float32."""
    b = a.astype(np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)


def line(marker):
    return line_of(__file__, marker)


# ---- `c[...] = m`, then m again (NKI's assignment copies; trnsim makes m's instruction write c, and gives m
# its values again when the kernel uses it: _lower.materialize)


@nki.jit
def assigned_then_read(x, case="read"):
    out = nl.ndarray((2, 128, 64), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    c = nl.zeros((128, 64), nl.bfloat16 if case == "bf16" else nl.float32)
    m = nl.multiply(t, 2.0)
    if case == "part":
        c[0:64] = m[0:64]  # (a copy: m's instruction is not retargeted)
        c[...] = nl.add(c, 1.0)
    else:
        c[...] = m  # bf16: the instruction writes bfloat16, m keeps its float32 values
    if case == "overwritten":
        c[...] = nl.add(t, 1.0)  # c's next value, retargeted too: m keeps 2x
    elif case == "written":
        m[0:64, :] = 0.0  # rows 64-127 of m keep 2x
    nl.store(out[0], value=nl.copy(c, dtype=nl.float32) if case == "bf16" else c)
    nl.store(out[1], value=m)
    return out


@nki.jit
def assigned_twice(x):
    out = nl.ndarray((3, 128, 64), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    c = nl.ndarray((128, 64), nl.float32)
    d = nl.ndarray((128, 64), nl.float32)
    m = nl.multiply(t, 2.0)
    c[...] = m
    d[...] = m
    c[...] = nl.add(c, 1.0)
    nl.store(out[0], value=c)
    nl.store(out[1], value=d)
    nl.store(out[2], value=m)
    return out


@nki.jit
def assigned_masked_memset(x):
    out = nl.ndarray((2, 128, 64), nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    c = nl.zeros((128, 64), nl.float32)
    m = nisa.memset((128, 64), 3.0, nl.float32, mask=(i_p >= 64))  # (its rows 64-127: a part of its tile)
    c[...] = m
    c[...] = nl.add(c, 1.0)
    nl.store(out[0], value=c)
    nl.store(out[1, 64:128], value=m)
    nl.store(out[1, 0:64], value=c[0:64])
    return out


@nki.jit
def assigned_in_loops(x):
    out = nl.ndarray((2, 128, 64), nl.float32, buffer=nl.shared_hbm)
    c = nl.ndarray((128, 64), nl.float32)
    for i in nl.affine_range(2):
        m = nl.multiply(nl.load(x[i * 64:(i + 1) * 64, :]), 2.0)
        c[i * 64:(i + 1) * 64, :] = m
        nl.store(out[0, i * 64:(i + 1) * 64, :], value=nl.add(m, 1.0))
    acc = nl.zeros((64, 64), nl.float32)
    for i in nl.sequential_range(2):
        m = nl.multiply(c[i * 64:(i + 1) * 64, :], 3.0)
        acc[...] = m
        acc[...] = nl.add(acc, m)
        nl.store(out[1, i * 64:(i + 1) * 64, :], value=acc)
    return out


@nki.jit
def assigned_load(x):
    out = nl.ndarray((2, 128, 64), nl.float32, buffer=nl.shared_hbm)
    buf = nl.ndarray((128, 64), nl.float32)
    t = nl.load(x)
    buf[...] = t
    buf[...] = nl.multiply(buf, 3.0)
    nl.store(out[0], value=buf)
    nl.store(out[1], value=t)
    return out


@nki.jit
def assigned_matmul(a, case):
    out = nl.ndarray((2, 64, 64), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    ps = nl.ndarray((64, 64), nl.float32, buffer=nl.psum)
    if case == "mm":
        m = nisa.nc_matmul(t, t)
        ps[...] = m
        ps[...] = nisa.nc_matmul(t, nl.multiply(t, 2.0))
    elif case == "zeros":
        m = nl.zeros((64, 64), nl.float32, buffer=nl.psum)
        ps[...] = m
        m += nisa.nc_matmul(t, t)
    else:
        ps[...] = 0.0
        m = nisa.nc_matmul(t, t)  # MARK-mm
        ps += m
    nl.store(out[0], value=nl.copy(ps))
    nl.store(out[1], value=nl.copy(m))  # MARK-read-sum
    return out


def test_a_result_assigned_into_a_tile_keeps_its_values():
    # Was an NkiError ("it has no tile of its own after that") at the read of m.
    out = tnki.simulate_kernel(assigned_then_read, X)
    same_f32(out[0], TWO)
    same_f32(out[1], TWO)
    # c written again after the assignment: m still holds 2x (NKI copied it into c).
    out = tnki.simulate_kernel(assigned_then_read, X, "overwritten")
    same_f32(out[0], X + np.float32(1))
    same_f32(out[1], TWO)
    out = tnki.simulate_kernel(assigned_twice, X)
    same_f32(out[0], TWO + np.float32(1))
    same_f32(out[1], TWO)
    same_f32(out[2], TWO)
    # A masked memset's result is rows 64-127 of its tile: they go to c's rows 64-127, and m keeps 3.
    out = tnki.simulate_kernel(assigned_masked_memset, X)
    same_f32(out[0], np.concatenate([np.ones((64, 64), np.float32), np.full((64, 64), 4.0, np.float32)]))
    same_f32(out[1], np.concatenate([np.ones((64, 64), np.float32), np.full((64, 64), 3.0, np.float32)]))


def test_a_result_assigned_in_loops_keeps_its_values():
    out = tnki.simulate_kernel(assigned_in_loops, X)
    same_f32(out[0], TWO + np.float32(1))
    # acc = 3 * (2x) then acc + m = 2 * (3 * 2x): both steps exact in float32 (powers of two and one rounding).
    six = TWO * np.float32(3)
    same_f32(out[1], six + six)
    # Part of m assigned (a copy: m's instruction is not retargeted), then c written: m untouched.
    out = tnki.simulate_kernel(assigned_then_read, X, "part")
    same_f32(out[0], np.concatenate([TWO[:64], np.zeros((64, 64), np.float32)]) + np.float32(1))
    same_f32(out[1], TWO)


def test_an_assigned_result_keeps_its_dtype_and_a_load_its_tile():
    # c is bfloat16: m's float32 values come from m's own instruction, not from c's rounded copy.
    out = tnki.simulate_kernel(assigned_then_read, X, "bf16")
    same_f32(out[0], bf16(TWO))
    same_f32(out[1], TWO)
    out = tnki.simulate_kernel(assigned_load, X)
    same_f32(out[0], X * np.float32(3))
    same_f32(out[1], X)


def test_writing_an_assigned_result_keeps_the_rest_of_it():
    # Silently wrong before: the write gave m a tile of its own from that write on, and rows 64-127 of m were
    # never written (out[1] read whatever the buffer held).
    out = tnki.simulate_kernel(assigned_then_read, X, "written")
    same_f32(out[0], TWO)
    same_f32(out[1], np.concatenate([np.zeros((64, 64), np.float32), TWO[64:]]))


def test_an_assigned_matmul_result_keeps_its_values():
    mm = A.T @ A  # exact (small integers)
    out = tnki.simulate_kernel(assigned_matmul, A, "mm")
    same_f32(out[0], mm * np.float32(2))
    same_f32(out[1], mm)
    out = tnki.simulate_kernel(assigned_matmul, A, "zeros")
    same_f32(out[0], np.zeros_like(mm))
    same_f32(out[1], mm)
    # `acc += m` adds the matmul's product into acc's accumulation: no tile ever holds it alone.
    e = raises(tnki.NkiError, tnki.simulate_kernel, assigned_matmul, A, "iadd")
    assert str(e).startswith(f"{THIS}:{line('MARK-read-sum')}: nl.copy: "), e
    assert (f"psum tile m [64, 64] float32, the result of nc_matmul at line {line('MARK-mm')}, which `+=` "
            "accumulated straight into psum tile ps [64, 64] float32") in str(e), e


@nki.jit
def assigned_matmul_accumulated(a, case):
    out = nl.ndarray((2, 64, 64), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    c = nl.ndarray((64, 64), nl.float32, buffer=nl.sbuf if case == "sbuf" else nl.psum)
    acc = nl.zeros((64, 64), nl.float32, buffer=nl.psum)  # MARK-acc-zeros
    m = nl.matmul(t, t, transpose_x=True)
    c[...] = m
    if case == "m":
        m += nl.matmul(t, t, transpose_x=True)  # m's own accumulation group, as without the assignment
        acc = m
    else:
        acc += m  # MARK-acc-m: the product accumulated into acc (psum); m's tile added (sbuf: m has its own)
        acc += nl.matmul(t, nl.multiply(t, 2.0), transpose_x=True)  # MARK-acc-mm
    nl.store(out[0], value=c)
    nl.store(out[1], value=acc)
    return out


def test_an_assigned_matmul_result_accumulates_as_without_the_assignment():
    # `c[...] = m; m += nl.matmul(...)` warned of accumulating onto "tensor_copy at <the assignment>", the copy
    # trnsim made into m; `c[...] = m; acc += m` was "nl.add: ... data1 and data2 cannot both be in PSUM"
    # (tester23l #5). m keeps its matmul's PSUM group; acc gets the product from the PE array again.
    # With c in SBUF the matmul keeps its own tile (the copy into c is the assignment's), and `acc += m` adds
    # that tile (acc + m, as NumPy's `+=`): the matmul accumulating after it adds onto what that add wrote,
    # which the trn2 warning names (as for a kernel that writes the add itself).
    mm = A.T @ A  # exact (small integers)
    for case, want in (("m", mm * np.float32(2)), ("psum", mm * np.float32(3)), ("sbuf", mm * np.float32(3))):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = tnki.simulate_kernel(assigned_matmul_accumulated, A, case)
        got = [str(x.message) for x in w]
        if case == "sbuf":
            assert got == [f"{THIS}:{line('MARK-acc-mm')}: the matmul adds to psum tile acc [64, 64] float32 "
                           f"allocated at {THIS}:{line('MARK-acc-zeros')}, which tensor_tensor at "
                           f"{THIS}:{line('MARK-acc-m')} wrote: NKI's nc_matmul docs call accumulating onto a "
                           "value a non-matmul instruction wrote undefined behaviour on NeuronCore-v2 and -v3 "
                           "(trn2; supported from NeuronCore-v4, trn3); trnsim adds to it. Start the group with a "
                           "matmul (accumulate=False) and add the value after"], got
        else:
            assert not got, (case, got)
        same_f32(out[0], mm)
        same_f32(out[1], want)


@nki.jit
def assigned_matmul_then_accumulated_into(a, b, case):
    out = nl.ndarray((2, 128, 128), nl.float32, buffer=nl.shared_hbm)
    x, y = nl.load(a), nl.load(b)
    c = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
    m = nl.matmul(x, y, transpose_x=True)
    c[...] = m
    if case == "c":
        c += nl.matmul(y, x, transpose_x=True)  # c's group, opened by m's matmul, continues
        nl.store(out[0], value=c)
        nl.store(out[1], value=m)  # m used again: its own tile gets the product
        return out
    acc = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
    acc[...] = nl.matmul(y, x, transpose_x=True)
    nl.store(out[1], value=m)  # m used: its own tile
    acc += m  # adds m's tile
    nl.store(out[0], value=acc)
    return out


@nki.jit
def two_products(a, b):
    out = nl.ndarray((2, 128, 128), nl.float32, buffer=nl.shared_hbm)
    x, y = nl.load(a), nl.load(b)
    nl.store(out[0], value=nl.matmul(x, y, transpose_x=True))
    nl.store(out[1], value=nl.matmul(y, x, transpose_x=True))
    return out


def test_an_assigned_matmul_result_used_again_keeps_the_accumulation_groups_matmul_started():
    # `c[...] = m; c += nl.matmul(...)`, m used after: m's matmul wrote m's tile and a tensor_copy copied it
    # into c, so the second matmul accumulated onto what a copy wrote (undefined on NeuronCore-v2/-v3,
    # nki.isa.nc_matmul), silently. Now c keeps the group m's matmul opened and the PE computes m's tile again:
    # three matmuls (c's, m's again, the accumulating one), no Vector instruction, and on Scalar only the two
    # stores' PSUM -> SBUF copies (nl.store's lowering) and their two DMA triggers (before: two matmuls and a
    # fifth Scalar instruction, the copy).
    rng = np.random.default_rng(5)
    a = rng.standard_normal((128, 128)).astype(np.float32)
    b = rng.standard_normal((128, 128)).astype(np.float32)
    p = tnki.simulate_kernel(two_products, a, b)  # the simulated products a.T @ b, b.T @ a
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = tnki.benchmark(assigned_matmul_then_accumulated_into, a, b, "c")
    assert not w, [str(x.message) for x in w]
    s = r.stats["summary"]
    assert (s["tensor_engine_instruction_count"], s["vector_engine_instruction_count"],
            s["scalar_engine_instruction_count"]) == (3, 0, 4), s
    assert r.outputs[0][1].tobytes() == p[0].tobytes()
    # c = the PE's accumulation of both products (exact here: the group as without the assignment).
    whole = tnki.simulate_kernel(accumulated_products, a, b)
    assert r.outputs[0][0].tobytes() == whole.tobytes()


@nki.jit
def accumulated_products(a, b):
    out = nl.ndarray((128, 128), nl.float32, buffer=nl.shared_hbm)
    x, y = nl.load(a), nl.load(b)
    c = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
    c[...] = nl.matmul(x, y, transpose_x=True)
    c += nl.matmul(y, x, transpose_x=True)
    nl.store(out, value=c)
    return out


def test_acc_plus_equals_an_assigned_matmul_result_with_its_own_tile_adds_it():
    # `c[...] = m; nl.store(.., m); acc += m` was "nl.add: its tensor_tensor ...: data1 and data2 cannot both be
    # in PSUM": m's tile goes to SBUF (tensor_copy) and is added, acc + m bit for bit as NumPy's `+=` (the PE
    # accumulating the product again, the way while m's product is in c only, rounds otherwise: up to 4e-5 here).
    rng = np.random.default_rng(5)
    a = rng.standard_normal((128, 128)).astype(np.float32)
    b = rng.standard_normal((128, 128)).astype(np.float32)
    p = tnki.simulate_kernel(two_products, a, b)
    out = tnki.simulate_kernel(assigned_matmul_then_accumulated_into, a, b, "acc")
    assert out[1].tobytes() == p[0].tobytes()
    assert out[0].tobytes() == (p[1] + p[0]).tobytes()


# ---- nl.matmul with a mask that cuts one operand's contraction dim


@nki.jit
def matmul_mask_cuts_one_k(a, b):
    out = nl.ndarray((64, 32), nl.float32, buffer=nl.shared_hbm)
    x, y = nl.load(a), nl.load(b)
    i_m, i_k = nl.arange(64)[:, None], nl.arange(128)[None, :]
    i_kp, i_n = nl.arange(128)[:, None], nl.arange(32)[None, :]
    ps = nl.matmul(x[i_m, i_k], y[i_kp, i_n], mask=(i_k < 100))  # MARK-mm-mask
    nl.store(out, nl.copy(ps))
    return out


@nki.jit
def matmul_mask_cuts_both_k(a, b):
    out = nl.ndarray((64, 32), nl.float32, buffer=nl.shared_hbm)
    x, y = nl.load(a), nl.load(b)
    i_m, i_k = nl.arange(64)[:, None], nl.arange(128)[None, :]
    i_kp, i_n = nl.arange(128)[:, None], nl.arange(32)[None, :]
    ps = nl.matmul(x[i_m, i_k], y[i_kp, i_n], mask=(i_k < 100) & (i_kp < 100))
    nl.store(out, nl.copy(ps))
    return out


def test_a_matmul_mask_cutting_one_operands_k_is_named():
    # The message said only "contraction dims differ: x.T is [100, 64], y is [128, 32]".
    a = A.reshape(64, 128)
    b = A.reshape(-1)[:128 * 32].reshape(128, 32)
    e = raises(tnki.NkiError, tnki.simulate_kernel, matmul_mask_cuts_one_k, a, b)
    assert str(e) == (f"{THIS}:{line('MARK-mm-mask')}: nl.matmul: contraction dims differ: x.T is [100, 64], y is "
                      "[128, 32]: mask=(i_k < 100) cuts x's contraction dim K to 100 but not y's (128): it bounds "
                      "the index variable of x's K only; bound the one of y's K in the mask too (`& (i < 100)`)"), e
    # As the message says: both K variables bounded (exact: small integers).
    same_f32(tnki.simulate_kernel(matmul_mask_cuts_both_k, a, b), a[:, :100] @ b[:100])


# ---- an integer beside index expressions: one more index array (NumPy's shapes)


@nki.jit
def integer_index_shapes(x, x3):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t, t3 = nl.load(x), nl.load(x3)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    i0, i1, i2 = nl.arange(128)[:, None, None], nl.arange(2)[None, :, None], nl.arange(4)[None, None, :]
    shapes = [t[i_p, 0].shape, t[0, i_f].shape, x[i_p, 3].shape, x[5, i_f].shape, t[i_p, i_f].shape,
              t[i_p, 0:1].shape, t[i_p, :].shape, t[i0, i2].shape, x[i0, i2].shape, t3[i0, 0, i2].shape,
              t3[i0, i1, 0].shape, t3[i0, i1, i2].shape]
    integer_index_shapes.seen = shapes
    nl.store(out[:, 0:1], t[i_p, 3])
    nl.store(out[:, 1:64], t[:, 1:64])
    return out


@nki.jit
def masked_sum_into_a_column(x):
    out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    i_p = nl.arange(128)[:, None]
    b = nl.zeros((128, 4), nl.float32)
    b[i_p, 0] = nl.sum(t, axis=1, mask=(i_p < 64))  # a [64] result of a [128] index space into [128, 1]
    b[i_p, 1] = nl.max(t, axis=1)
    b[i_p, 2] = nisa.tensor_reduce(np.add, t, axis=1, mask=(i_p >= 64))
    nl.store(out, b)
    return out


@nki.jit
def column_operands(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    i_p = nl.arange(128)[:, None]
    mx = nl.max(t, axis=1, keepdims=True)
    r = nisa.tensor_scalar(data=t, op0=np.subtract, operand0=mx[i_p, 0:1])
    nl.store(out, nisa.tensor_scalar(data=r, op0=np.multiply, operand0=t[i_p, 0]))
    return out


@nki.jit
def masked_column_operand(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    r = nisa.tensor_scalar(t, np.multiply, t[i_p, 0], mask=(i_p < 100))
    nl.store(out[i_p, i_f], r, mask=(i_p < 100))
    nl.store(out[i_p, i_f], t, mask=(i_p >= 100))
    return out


def test_an_integer_beside_index_expressions_keeps_numpys_shape():
    # t[i_p, 0] was [128] (and t[0, i_f] [64]) where NumPy gives [128, 1] ([1, 64]): an integer is one more
    # index array, broadcast with the expressions (NKI's err_1d_arange_not_supported example, `tmp[i, 0]`);
    # likewise the axis no expression of a 3-D index varies along is a dim of size 1 (it was dropped). A
    # slice is an axis of its own: t[i_p, 0:1] stays [128, 1], t[i_p, :] [128, 64].
    x3 = np.arange(128 * 16, dtype=np.float32).reshape(128, 2, 8)
    got = tnki.simulate_kernel(integer_index_shapes, X, x3)
    assert integer_index_shapes.seen == [(128, 1), (1, 64), (128, 1), (1, 64), (128, 64), (128, 1), (128, 64),
                                         (128, 1, 4), (128, 1, 4), (128, 1, 4), (128, 2, 1),
                                         (128, 2, 4)], integer_index_shapes.seen
    want = X.copy()
    want[:, 0] = X[:, 3]
    same_f32(got, want)


def test_a_masked_reduction_assigned_into_a_column():
    # With t[i_p, 0] as [128, 1], the reduction's [64] result (rows 0-63 of its [128] index space) goes to rows
    # 0-63 of the [128, 1] region (the regression that reverted a43f653: "cannot assign a [64] tile to a
    # [128, 1] region"). Sums of these values are exact in float32 (multiples of 1/8 below 2^20).
    x = (np.arange(128 * 64, dtype=np.float32).reshape(128, 64) - 4000) / 8
    want = np.zeros((128, 4), np.float32)
    want[:64, 0] = x[:64].sum(axis=1)
    want[:, 1] = x.max(axis=1)
    want[64:, 2] = x[64:].sum(axis=1)
    same_f32(tnki.simulate_kernel(masked_sum_into_a_column, x), want)


def test_columns_as_per_partition_operands():
    x = (np.arange(128 * 64, dtype=np.float32).reshape(128, 64) - 4000) / 8
    # (x - max) * x[:, 0]: each step one float32 rounding, as NumPy's.
    same_f32(tnki.simulate_kernel(column_operands, x), (x - x.max(axis=1, keepdims=True)) * x[:, 0:1])


def test_a_mask_cuts_a_column_operand_too():
    x = (np.arange(128 * 64, dtype=np.float32).reshape(128, 64) - 4000) / 8
    # The mask cuts the [P, 1] operand's partitions too (it was refused: "operand [128, 64] does not match the
    # masked operand [128]").
    want = x * x[:, 0:1]
    want[100:] = x[100:]
    same_f32(tnki.simulate_kernel(masked_column_operand, x), want)


# ---- the reduction axes of nisa.tensor_reduce: the last contiguous free dims


@nki.jit
def reduce_middle_axis(x, use_nl):
    out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    r = nl.sum(t, axis=1) if use_nl else nisa.tensor_reduce(np.add, t, axis=1)  # MARK-reduce-mid
    nl.store(out, r)
    return out


@nki.jit
def reduce_last_axes(x):
    out = nl.ndarray((128, 2), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out[:, 0], nl.sum(t, axis=(1, 2)))
    nl.store(out[:, 1], nisa.tensor_reduce(np.add, nl.max(t, axis=2), axis=1))
    return out


def test_tensor_reduce_axes_are_the_last_free_dims():
    # nisa.tensor_reduce's axis=1 of a [128, 4, 8] tile was reduced (through a permuted view) where NKI's page
    # asks for the last contiguous free dims ending at the final one. nl.sum reduces any free axes (NKI's
    # average-pool tutorial sums axes [2, 4] of a 5-D tile): its lowering gives the instruction a permuted view.
    x3 = np.arange(128 * 32, dtype=np.float32).reshape(128, 4, 8)
    e = raises(tnki.NkiError, tnki.simulate_kernel, reduce_middle_axis, x3, False)
    assert str(e).startswith(f"{THIS}:{line('MARK-reduce-mid')}: tensor_reduce: axis [1] of data [128, 4, 8]: the "
                             "reduction axes must be the last contiguous free dims of the tile, ending at its final "
                             "dim (nki.isa.tensor_reduce): e.g. axis=2 here; "), e
    # Sums of these integers are exact in float32.
    same_f32(tnki.simulate_kernel(reduce_middle_axis, x3, True), x3.sum(axis=1))
    want = np.stack([x3.sum(axis=(1, 2)), x3.max(axis=2).sum(axis=1)], axis=1)
    same_f32(tnki.simulate_kernel(reduce_last_axes, x3), want)


# ---- indexing a masked call's result: every index addresses the call's whole index space, `:` too


@nki.jit
def held_result_indexed(x, case):
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    t = nl.load(x)
    e = nl.add(t, 1.0, mask=(i_f >= 16) & (i_f < 48))  # MARK-held-mask
    out = nl.ndarray((128, {"colon": 64, "expr": 64, "int": 1}.get(case, 32)), nl.float32, buffer=nl.shared_hbm)
    if case == "colon":
        nl.store(out, value=e[i_p, :])  # MARK-held-colon
    elif case == "whole":
        nl.store(out, value=e[:, :])
    elif case == "int":
        nl.store(out[:, 0:1], value=e[i_p, 60])  # MARK-held-int
    else:
        nl.store(out, value=nl.copy(e[i_p, i_f]))  # MARK-held-expr
    return out


@nki.jit
def masked_load_sliced(x):
    out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    t = nl.load(x[i_p, i_f], mask=(i_p < 100))
    s = t[:, 0:8]
    masked_load_sliced.shape = s.shape
    nl.store(out[i_p, nl.arange(8)[None, :]], value=s, mask=(i_p < 100))
    nl.store(out[100:128, :], value=0.0)
    return out


@nki.jit
def tighter_mask_from_a_lower_bound(x):
    out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    t = nl.load(x)
    nl.store(out, t)
    v = nl.add(t, 1.0, mask=(i_p >= 64))
    nl.store(out[i_p, i_f], v, mask=(i_p >= 96))
    return out


@nki.jit
def shifted_read_under_a_mask(x):
    out = nl.ndarray((64, 64), nl.float32, buffer=nl.shared_hbm)
    i_p, i_f, i_q = nl.arange(128)[:, None], nl.arange(64)[None, :], nl.arange(64)[:, None]
    e = nl.multiply(nl.load(x), 3.0, mask=(i_p >= 64))
    o = nl.full((64, 64), 7.0, nl.float32)
    o[i_q, i_f] = nl.copy(e[i_q + 32, i_f], mask=(i_q >= 32))
    nl.store(out, o)
    return out


def test_every_index_of_a_masked_result_addresses_the_whole_index_space():
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    # `e[i_p, :]` was the held part (columns 16-47, silently), where `e[i_p, 0:64]` and `e[i_p, i_f]` ask for
    # all 64: `:` is the whole dim now, as every other index. The held part does not cover it: that was the
    # looser-mask error; e's tile has the whole index space's shape, as NKI's (tester23ac F3), so the columns
    # outside 16-47 read what no instruction wrote (NaN here), with the simulator's warning at the line.
    def undefined_read(case, shape):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = tnki.simulate_kernel(held_result_indexed, x, case)
        said = [str(w.message) for w in caught]
        assert len(said) == 1 and said[0].startswith(
            f"{THIS}:{line('MARK-held-' + case)}: ") and (
            f"reads sbuf 'e' {shape} float32 allocated at {THIS}:{line('MARK-held-mask')} where no instruction "
            "wrote before") in said[0], said
        return got

    for case in ("colon", "expr"):
        got = undefined_read(case, "[128, 64]")
        assert got[:, 16:48].tobytes() == (x[:, 16:48] + np.float32(1)).tobytes(), case
        assert np.isnan(got[:, :16]).all() and np.isnan(got[:, 48:]).all(), case
    got = undefined_read("int", "[128, 1]")
    assert np.isnan(got).all(), got[0]
    # All of it (`e[:, :]`, `e[...]`) is e itself: the index space, held where the mask was true.
    same_f32(tnki.simulate_kernel(held_result_indexed, x, "whole"), x[:, 16:48] + np.float32(1))
    # A masked load's tile has the whole index space's shape: `t[:, 0:8]` is its 128 rows (it was the 100
    # loaded ones), the rows past the load's mask undefined as in NKI; a masked store keeps the loaded rows.
    want = np.zeros((128, 8), np.float32)
    want[:100] = x[:100, 0:8]
    same_f32(tnki.simulate_kernel(masked_load_sliced, x), want)
    assert masked_load_sliced.shape == (128, 8), masked_load_sliced.shape


def test_a_tighter_mask_takes_its_part_of_a_result_held_from_a_lower_bound():
    # Rows 96-127 of a result holding rows 64-127: refused on main ("slice 32:64 of dim 0 of a masked result
    # that holds only [64, 128)": the package's own cut, already in the held part's rows, was shifted again).
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    want = x.copy()
    want[96:] += np.float32(1)
    same_f32(tnki.simulate_kernel(tighter_mask_from_a_lower_bound, x), want)
    # The same double shift put a read of rows 64-95 at partition -32 (tester23k's case: a TypeError from the
    # bindings' View.pattern on main).
    want = np.full((64, 64), 7.0, np.float32)
    want[32:] = x[64:96] * np.float32(3)
    same_f32(tnki.simulate_kernel(shifted_read_under_a_mask, x), want)


# ---- the index shapes of NKI's documented nl.arange / nl.mgrid examples (nki.language.mgrid's page, the API
# errors page's err_1d_arange_not_supported, the tensor indexing overview's basic indexing)


@nki.jit
def documented_indices(x, case):
    if case in ("mgrid", "grid"):
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        if case == "mgrid":
            i_p, i_f = nl.mgrid[0:128, 0:512]
            nl.store(out[i_p, i_f], nl.load(x[i_p, i_f]))
        else:
            grid = nl.mgrid[0:128, 0:512]
            nl.store(out[grid.p, grid.x], nl.load(x[grid.p, grid.x]))
        return out
    out = nl.ndarray((64, 1), nl.float32, buffer=nl.shared_hbm)
    tmp = nl.load(x[0:128, 0:1])
    if case == "1d":
        c = nl.multiply(tmp[nl.arange(64), 0], 2.0)  # MARK-1d-arange
    elif case == "axis":
        c = nl.multiply(tmp[nl.arange(64)[:, None], 0], 2.0)
        assert tuple(c.shape) == (64, 1), c.shape
    else:
        c = nl.multiply(tmp[0:64, 0], 2.0)
    h = nl.ndarray((2, 128, 1024), dtype=nl.float32, buffer=nl.hbm)
    shapes = (h[1].shape, h[1, :, :].shape, h[1, :, 0:512].shape, h[:, 1, 0:2].shape)
    assert shapes == ((128, 1024), (128, 1024), (128, 512), (2, 2)), shapes
    nl.store(out, c)
    return out


def test_documented_arange_and_mgrid_examples_have_nkis_shapes():
    # (nl.multiply for the page's nl.exp: exact.) The 1-D nl.arange on an SBUF tile ran as a [64] index (NKI's docs: an error, err_1d_arange_not_supported);
    # both of its documented workarounds and the mgrid page's two forms run, with NKI's shapes.
    x = (np.arange(128 * 512, dtype=np.float32).reshape(128, 512) % 11) - 5
    for case in ("mgrid", "grid"):
        same_f32(tnki.simulate_kernel(documented_indices, x, case), x)
    for case in ("axis", "slice"):
        same_f32(tnki.simulate_kernel(documented_indices, x, case), x[0:64, 0:1] * np.float32(2))
    e = raises(tnki.NkiError, tnki.simulate_kernel, documented_indices, x, "1d")
    assert str(e) == (f"{THIS}:{line('MARK-1d-arange')}: dim 0 of sbuf tile tmp [128, 1] float32 is indexed with a "
                      "1-D nl.arange of 64 values: an on-chip tile's index needs at least 2 dims (NKI's "
                      "err_1d_arange_not_supported); give the arange its axis (nl.arange(n)[:, None]) or use a "
                      "slice"), e


@nki.jit
def named_grid_axes(x, case):
    # nki-samples' vision kernels name a grid's axes p, x, y, z (axes 0-3).
    if case == "3d":
        g = nl.mgrid[0:128, 0:4, 0:8]
        t = nl.load(x[g.p, g.x])
    elif case == "4d":
        g = nl.mgrid[0:128, 0:2, 0:4, 0:8]
        t = nl.load(x[g.p, g.x, g.y, g.z])
    else:
        t = nl.load(x[nl.mgrid[0:128, 0:8].y])  # MARK-no-y
    out = nl.ndarray(t.shape, nl.float32, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out


def test_a_grids_named_axes_are_p_x_y_z_in_axis_order():
    # tester23o F6: grid.x was the last axis (a [128, 0:4, 0:8] grid's x loaded 8 columns, silently) and .y, .z
    # raised "AttributeError: '_Grid' object has no attribute 'y'" with no kernel line.
    x = np.arange(128 * 16, dtype=np.float32).reshape(128, 16)
    same_f32(tnki.simulate_kernel(named_grid_axes, x, "3d"), x[:, 0:4])
    x4 = np.arange(128 * 2 * 4 * 8, dtype=np.float32).reshape(128, 2, 4, 8)
    same_f32(tnki.simulate_kernel(named_grid_axes, x4, "4d"), x4)
    e = raises(tnki.NkiError, tnki.simulate_kernel, named_grid_axes, x, "none")
    assert str(e) == (f"{THIS}:{line('MARK-no-y')}: nl.mgrid: grid.y is axis 2, but this grid has 2 axes (p, x)"), e


@nki.jit
def swapped_grid_axes(x, where):
    # x [128, 4, 8] -> [128, 8, 4]: the grid's axes place the result's dims, wherever the index names them.
    o = nl.ndarray((128, 8, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    g = nl.mgrid[0:128, 0:8, 0:4]
    if where == "load":
        nl.store(o, nl.load(x[g.p, g.y, g.x]))
    elif where == "tile":
        t = nl.load(x)
        nl.store(o, nl.copy(t[g.p, g.y, g.x]))
    else:
        P, A, B = nl.mgrid[0:128, 0:4, 0:8]  # the unpacked form, on the store's side
        nl.store(o[P, B, A], nl.load(x))
    return o


def test_grid_axes_named_out_of_order_permute_the_tensor():
    # tester23p F7: x[g.p, g.y, g.x] read x in memory order (x.reshape(128, 8, 4)) where NumPy's dense grid,
    # and the same index of nl.aranges, give x.transpose(0, 2, 1).
    x = np.arange(128 * 4 * 8, dtype=np.float32).reshape(128, 4, 8)
    for where in ("load", "tile", "store"):
        same_f32(tnki.simulate_kernel(swapped_grid_axes, x, where), x.transpose(0, 2, 1))


@nki.jit
def slice_between_expressions(x, where):
    # x [128, 4, 8] read with a slice between two index expressions: each index position is that dim.
    o = nl.ndarray((128, 4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_a = nl.arange(128)[:, None], nl.arange(8)[None, :]
    g = nl.mgrid[0:128, 0:8]
    if where == "load":
        t = nl.load(x[i_p, 0:4, i_a])
    elif where == "grid-load":
        t = nl.load(x[g.p, 0:4, g.x])
    elif where == "tile":
        t = nl.copy(nl.load(x)[i_p, 0:4, i_a])
    else:
        t = nl.copy(nl.load(x)[g.p, 0:4, g.x])
    assert tuple(t.shape) == (128, 4, 8), t.shape
    nl.store(o, t)
    return o


def test_a_slice_between_index_expressions_keeps_its_place():
    # tester23t F1: x[i_p, 0:4, i_a] followed NumPy's rule (index arrays a slice separates go first): a [128, 8, 4]
    # tile holding x.transpose(0, 2, 1), which a store into [128, 4, 8] wrote scrambled.
    x = np.arange(128 * 4 * 8, dtype=np.float32).reshape(128, 4, 8)
    for where in ("load", "grid-load", "tile", "grid-tile"):
        same_f32(tnki.simulate_kernel(slice_between_expressions, x, where), x)
    # Its addenda: a part of dim 1 read from a tile ([128, 2, 8], not [128, 8, 2]) and written through the same
    # index of the output (o[:, 1:3, :] was x's rows scrambled).
    for where in ("read", "write"):
        same_f32(tnki.simulate_kernel(slice_part_between_expressions, x, where), x[:, 1:3, :])


@nki.jit
def slice_part_between_expressions(x, where):
    o = nl.ndarray((128, 2, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_a = nl.arange(128)[:, None], nl.arange(8)[None, :]
    if where == "read":
        t = nl.copy(nl.load(x)[i_p, 1:3, i_a])
        assert tuple(t.shape) == (128, 2, 8), t.shape
        nl.store(o, t)
    else:
        w = nl.ndarray((128, 4, 8), dtype=nl.float32, buffer=nl.hbm)
        nl.store(w[i_p, 1:3, i_a], nl.load(x[:, 1:3, :]))
        nl.store(o, nl.load(w[:, 1:3, :]))
    return o


if __name__ == "__main__":
    main(globals())
