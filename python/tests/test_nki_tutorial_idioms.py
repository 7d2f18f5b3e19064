"""Idioms of NKI's public tutorials that trnsim refused (tester23m, issue 23): each test fails on main, with
exact bytes against NumPy or the exact message."""

import warnings

import numpy as np

from runner import line_of, main, raises, same_f32

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl


SHAPES = []  # .shape of each masked nl.load's tile as the kernel below sees it


@nki.jit
def rotate_half_tail(x, s):
    # nki-samples' rotary tutorial on a tail tile: its output tile sized from the masked load's .shape.
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:d]
    for t in nl.affine_range((n + 127) // 128):
        m = t * 128 + i_p < n
        xt = nl.load(x[t * 128 + i_p, i_f], mask=m)
        st = nl.load(s[t * 128 + i_p, i_f], mask=m)
        SHAPES.append(xt.shape)
        o = nl.ndarray((nl.par_dim(xt.shape[0]), xt.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        o[:, :] = xt * st
        o[:, : d // 2] = o[:, : d // 2] + (-1 * xt[:, d // 2:] * st[:, : d // 2])
        nl.store(out[t * 128 + i_p, i_f], o[:, :], mask=m)
    return out


def test_a_masked_load_has_the_shape_of_its_index():
    # F7: a masked nl.load's tile said .shape (72, 64) in the tail iteration (the masked-in rows) while its
    # indices address the index's 128 rows, so the rotary tutorial's tile sized from it met `xt[:, 32:]`
    # ([128, 32]) in an nl.add: "operands [72, 32] and [128, 32] do not broadcast". In NKI the tile has the
    # index's shape (NKI API Masking: the mask selects the elements the instruction touches).
    rs = np.random.RandomState(13)
    x = rs.randint(-3, 4, (200, 64)).astype(np.float32)
    s = rs.randint(-3, 4, (200, 64)).astype(np.float32)
    want = x * s
    want[:, :32] += -1 * x[:, 32:] * s[:, :32]  # small integers: exact in float32
    del SHAPES[:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (rows 72-127 of the tail tile are read undefined, as in NKI)
        got = tnki.simulate_kernel(rotate_half_tail, x, s)
    assert SHAPES == [(128, 64)] * 2, SHAPES  # (the full tile, then the tail tile)
    same_f32(got, want)


@nki.jit
def psum_blocks_filled(lhsT, rhs, init):
    # The tutorials' zeroed accumulator with a block dim (nki-samples' tiled matmul), one PSUM tile per block.
    out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
    if init == "zeros":
        res = nl.zeros((2, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
    else:
        res = nl.full((2, nl.par_dim(128), 512), 5.0, dtype=nl.float32, buffer=nl.psum)
    for kk in nl.affine_range(2):
        a = nl.load(lhsT[kk * 128:(kk + 1) * 128, :])
        for n in nl.affine_range(2):
            res[n] += nl.matmul(a, nl.load(rhs[kk * 128:(kk + 1) * 128, n * 512:(n + 1) * 512]), transpose_x=True)
    for n in nl.affine_range(2):
        nl.store(out[:, n * 512:(n + 1) * 512], res[n])
    if init == "whole":
        nl.matmul(res, a)  # MARK-whole
    return out


def test_a_psum_tensor_with_block_dims_is_filled_block_by_block():
    # F9: nl.zeros((2, nl.par_dim(128), 512), buffer=nl.psum) was refused, naming an internal attribute
    # ("nki.language.NkiTensor.st of a PSUM tensor with block dims"); nl.ndarray of it ran. nki.language.zeros
    # fills any tensor nl.ndarray makes: here a memset per block (the zeroing one the first matmul replaces).
    rs = np.random.RandomState(14)
    lhsT = rs.randint(-3, 4, (256, 128)).astype(np.float32)
    rhs = rs.randint(-3, 4, (256, 1024)).astype(np.float32)
    prod = lhsT.T @ rhs  # integer sums: exact in float32
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        same_f32(tnki.simulate_kernel(psum_blocks_filled, lhsT, rhs, "zeros"), prod)
    assert not w, [str(m.message) for m in w]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (trn2: a matmul adding to a memset's value, NKI's undefined behaviour)
        same_f32(tnki.simulate_kernel(psum_blocks_filled, lhsT, rhs, "five"), prod + 5)
    # The whole tensor where a tile is needed: the error names the kernel's call, not an internal attribute.
    e = raises(tnki.NkiUnsupported, tnki.simulate_kernel, psum_blocks_filled, lhsT, rhs, "whole")
    assert str(e) == ("test_nki_tutorial_idioms.py:%d: nl.matmul: the whole of a PSUM tensor with block dims "
                      "[2, 128, 512] is not modelled by trnsim: each block is a tile of its own; index one (t[i]) "
                      "first" % line_of(__file__, "MARK-whole")), str(e)


@nki.jit
def blocks_like(x, call):
    # *_like of tensors with block dims, and whole block tensors given to nl math (nki23c's notes).
    out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((2, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
    s = nl.ndarray((2, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.sbuf)
    for n in nl.affine_range(2):
        s[n] = nl.load(x[:, n * 512:(n + 1) * 512])
    if call == "like":
        z, one = nl.zeros_like(acc), nl.ones_like(s)
        for n in nl.affine_range(2):
            z[n] += nl.add(s[n], one[n])
            nl.store(out[:, n * 512:(n + 1) * 512], z[n])
    elif call == "add":
        nl.add(acc, 1.0)  # MARK-block-add
    elif call == "exp":
        nl.exp(acc)  # MARK-block-exp
    elif call == "activation":
        nisa.activation(dst=s[0], op=nl.exp, data=acc)  # MARK-block-activation
    return out


def test_tensors_with_block_dims_in_like_calls_and_math():
    # nl.zeros_like of a PSUM tensor with block dims made one [2, 128, 512] tile (over the PSUM bank) and
    # nl.ones_like of an SBUF one a [2, 65536] tile: each now has the block dims and partition dim of its model.
    # The whole block tensor given to nl.add was "at least one operand must be a tensor", to nl.exp an error
    # naming nki.isa.activation: each names the kernel's call now, in nl.matmul's words (nisa.activation too).
    x = np.arange(128 * 1024, dtype=np.float32).reshape(128, 1024)
    same_f32(tnki.simulate_kernel(blocks_like, x, "like"), x + 1)
    for call, name in (("add", "nl.add"), ("exp", "nl.exp"), ("activation", "nisa.activation")):
        e = raises(tnki.NkiUnsupported, tnki.simulate_kernel, blocks_like, x, call)
        assert str(e) == ("test_nki_tutorial_idioms.py:%d: %s: the whole of a PSUM tensor with block dims "
                          "[2, 128, 512] is not modelled by trnsim: each block is a tile of its own; index one "
                          "(t[i]) first" % (line_of(__file__, "MARK-block-" + call), name)), str(e)


PROGRAMS = []  # (program_id(0), program_id(1)) of each program as it is traced


@nki.jit
def spmd_add(a, b):
    # The SPMD tensor-addition tutorial's kernel: one [128, 512] tile per program of a 2-D grid.
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i, j = nl.program_id(0), nl.program_id(1)
    PROGRAMS.append((i, j))
    rows, cols = slice(i * 128, (i + 1) * 128), slice(j * 512, (j + 1) * 512)
    nl.store(out[rows, cols], nl.add(nl.load(a[rows, cols]), nl.load(b[rows, cols])))
    return out


def test_a_grid_of_two_programs_along_dim_1_runs_on_one_core():
    # F6: kernel[1, 2] (the tutorial's grid for a [128, 1024] input) was "launch grid [1, 2] gives no program to
    # core 1 of 2": a grid of 2 programs took two cores, but programs go to cores by grid dim 0 (docs/nki.md),
    # whose one index is core 0's. Both programs now run on one core, as kernel[1, 4]'s do; kernel[2, 1] keeps
    # one program per core of the LNC2 pair.
    a = np.arange(128 * 1024, dtype=np.float32).reshape(128, 1024)
    b = np.ones((128, 1024), np.float32)
    del PROGRAMS[:]
    same_f32(tnki.simulate_kernel(spmd_add[1, 2], a, b), a + b)
    assert PROGRAMS == [(0, 0), (0, 1)], PROGRAMS
    assert spmd_add[1, 2].grid is None and spmd_add[1, 4].grid is None  # (the run's lnc: 1 by default)
    assert spmd_add[2, 1].grid == 2 and spmd_add[2].grid == 2 and spmd_add[1, 1].grid == 1
    a2 = np.arange(256 * 512, dtype=np.float32).reshape(256, 512)
    del PROGRAMS[:]
    same_f32(tnki.simulate_kernel(spmd_add[2, 1], a2, a2), a2 + a2)
    assert PROGRAMS == [(0, 0), (1, 0)], PROGRAMS  # (core 0's program, then core 1's)


@nki.jit
def vision_idioms(x, dt):
    # nki-samples' vision kernels: `data.reshape(shape=(...))` and a fill of `nl.finfo(dtype).min`.
    flat = x.reshape(shape=(128, 2, 32))
    out = nl.ndarray((128, 2, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.load(flat))
    low = nl.ndarray((128, 4), dtype=dt, buffer=nl.shared_hbm)
    nl.store(low, nl.full((128, 4), nl.finfo(dt).min, dtype=dt, buffer=nl.sbuf))
    return out, low


def test_reshape_by_keyword_and_finfo_of_nki_dtypes():
    # tester23o F7: `x.reshape(shape=...)` was "TypeError: NkiTensor.reshape() got an unexpected keyword argument
    # 'shape'" and nl.finfo NkiUnsupported. Each finfo(dt).min is the lowest finite value of dt (the outputs come
    # back as float32): -(2 - 2^-23) * 2^127, -(2 - 2^-7) * 2^127, -448 (E4M3FN S.1111.110), -57344 (E5M2).
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    for dt, lowest in ((nl.float32, -(2 - 2.0**-23) * 2.0**127), (nl.bfloat16, -(2 - 2.0**-7) * 2.0**127),
                       (nl.float8_e4m3fn, -448.0), (nl.float8_e5m2, -57344.0)):
        flat, low = tnki.simulate_kernel(vision_idioms, x, dt)
        same_f32(flat, x.reshape(128, 2, 32))
        same_f32(low, np.full((128, 4), lowest))
    f = nl.finfo(nl.bfloat16)
    assert (f.eps, f.tiny, f.bits, f.resolution) == (2.0**-7, 2.0**-126, 16, 0.01), f
    e = raises(tnki.NkiError, nl.finfo, nl.int32)
    assert str(e).endswith("nl.finfo: nl.int32 is not a float dtype with known limits (nl.finfo takes float32, "
                           "float16, bfloat16 and the float8 formats)"), str(e)


if __name__ == "__main__":
    main(globals())
