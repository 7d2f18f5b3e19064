"""Broadcasting along the partition dim (tester23h): a [1, F] row against a [P, F] tile in nl arithmetic,
`t.broadcast_to((P, F))` and `nl.broadcast_to`, as NKI's RMSNorm and LayerNorm tutorials write them. On chip the
row is repeated by the Tensor engine (NKI's fused Mamba tutorial: "a partition-dimension broadcast ... using a
separate instruction on TensorE"): a ones-row nc_matmul per 512 columns, copied to SBUF; an HBM row by one
DMA reading it once per partition. main refused all of these."""

import math

import numpy as np

from runner import line_of, main, raises

import trnsim
import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl

F = 1000  # two matmuls: 512 + 488 columns
A = np.random.RandomState(0).randn(256, F).astype(np.float32)
G = np.random.RandomState(1).randn(F).astype(np.float32)
B = np.random.RandomState(2).randn(F).astype(np.float32)


@nki.jit
def broadcasts(a, g):
    rows = nl.ndarray((128, F), dtype=a.dtype, buffer=nl.shared_hbm)
    prod = nl.ndarray((128, F), dtype=a.dtype, buffer=nl.shared_hbm)
    summ = nl.ndarray((128, F), dtype=a.dtype, buffer=nl.shared_hbm)
    from_hbm = nl.ndarray((128, F), dtype=a.dtype, buffer=nl.shared_hbm)
    row = nl.load(g.reshape((1, F)))
    nl.store(rows, nl.broadcast_to(row, shape=(128, F)))
    t = nl.load(a[0:128, :])
    nl.store(prod, nl.multiply(t, row))  # [P, F] * [1, F]
    nl.store(summ, row + t)  # [1, F] + [P, F]
    nl.store(from_hbm, nl.broadcast_to(g.reshape((1, F)), shape=(128, F)))
    return rows, prod, summ, from_hbm


def test_a_row_broadcasts_along_the_partitions_exactly():
    r = tnki.benchmark(broadcasts, A, G)
    rows, prod, summ, from_hbm = r.outputs
    want = np.broadcast_to(G, (128, F))
    assert np.array_equal(rows, want) and np.array_equal(from_hbm, want)
    # one FP32 multiply / add per element, as NumPy's
    assert np.array_equal(prod, A[:128] * G) and np.array_equal(summ, G + A[:128])
    ops = {(o["opcode"], o["engine"]): o["count"] for o in r.stats["opcodes"]}
    # Each on-chip broadcast: one ones-row memset, a matmul per 512 columns (2) and their copies out of PSUM
    # (2); three of them (broadcast_to, multiply, add). The HBM row: one DMA more than the loads.
    assert ops[("nc_matmul", "PE")] == 6 and ops[("memset", "POOL")] == 3, ops
    assert sum(n for (op, _), n in ops.items() if op == "tensor_copy") == 6, ops


def _bf16(x):
    return (x.view(np.uint32) >> 16).astype(np.uint16)  # raw bits, truncated: every value exact in BF16


@nki.jit
def broadcast_bf16(g):
    out = nl.ndarray((128, 64), dtype=g.dtype, buffer=nl.shared_hbm)
    row = nl.load(g)
    nl.store(out, row.broadcast_to((128, 64)))
    return out


def test_a_bf16_row_keeps_its_bits():
    g = _bf16(np.linspace(-3, 3, 64, dtype=np.float32)).reshape(1, 64)
    out = tnki.simulate_kernel(broadcast_bf16, tnki.typed(g, "bfloat16"))
    want = (g.astype(np.uint32) << 16).view(np.float32)  # simulate_kernel gives BF16 back as float32
    assert np.array_equal(out, np.broadcast_to(want, (128, 64))), out[:2, :4]


@nki.jit
def broadcast_rows_of_a_tile(a):
    from_5 = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    from_psum = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)  # [8, 64]
    nl.store(from_5, t[5:6, :].broadcast_to((128, 64)))
    p = nl.ndarray((8, 64), dtype=nl.float32, buffer=nl.psum)
    nisa.tensor_copy(dst=p, src=t)
    nl.store(from_psum, nl.broadcast_to(p[0:1, :], shape=(128, 64)))
    return from_5, from_psum


def test_a_row_of_a_tile_broadcasts():
    # Row 5 of a tile: the Tensor engine reads a 1-partition operand from partition 0, 32, 64 or 96 only, so
    # the row goes to partition 0 of its own tile first (one SBUF-to-SBUF DMA). A PSUM row: copied to SBUF.
    a = np.random.RandomState(3).randn(8, 64).astype(np.float32)
    r = tnki.benchmark(broadcast_rows_of_a_tile, a)
    assert np.array_equal(r.outputs[0], np.broadcast_to(a[5], (128, 64)))
    assert np.array_equal(r.outputs[1], np.broadcast_to(a[0], (128, 64)))


@nki.jit
def rmsnorm(a, g):
    # RMSNorm as NKI's tutorial writes it: the weight loaded once as [1, F] and broadcast with broadcast_to.
    # (Its indices are nl.arange's; rmsnorm_grid below writes them as the tutorial's nl.mgrid.)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ip, iw, iy = nl.arange(128)[:, None], nl.arange(1)[:, None], nl.arange(a.shape[1])[None, :]
    g_row = nl.load(g.reshape((1, g.shape[0]))[iw, iy])
    for i in nl.affine_range(math.ceil(a.shape[0] / 128)):
        x = nl.load(a[i * 128 + ip, iy], mask=(i * 128 + ip < a.shape[0]))
        rms = nl.rsqrt(nl.sum(nl.square(x), axis=[1]) / a.shape[1])
        y = nl.multiply(x, rms)
        g_all = g_row.broadcast_to((128, g.shape[0]))
        y[...] = nl.multiply(y, g_all, mask=(i * 128 + ip < a.shape[0]))
        nl.store(out[i * 128 + ip, iy], value=y, mask=(i * 128 + ip < a.shape[0]))
    return out


@nki.jit
def layernorm(a, eps, gamma, beta):
    # LayerNorm as NKI's tutorial (v1) computes it: gamma and beta broadcast once, outside the loop, and used
    # as [P, F] operands (`y * gam + bet`).
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    gam = nl.load(gamma.reshape((1, gamma.shape[0]))).broadcast_to((128, gamma.shape[0]))
    bet = nl.load(beta.reshape((1, beta.shape[0]))).broadcast_to((128, beta.shape[0]))
    for i in nl.affine_range(a.shape[0] // 128):
        x = nl.load(a[i * 128:(i + 1) * 128, :])
        mean = nl.mean(x, axis=1)
        var = nl.mean(nl.square(x), axis=1) - mean * mean
        y = (x - mean) * nl.rsqrt(var + eps)
        nl.store(out[i * 128:(i + 1) * 128, :], value=y * gam + bet)
    return out


def check_rmsnorm(got, a):
    want = a / np.sqrt(np.mean(a * a, axis=1, keepdims=True)) * G
    assert np.allclose(got, want, rtol=1e-4, atol=1e-5), np.abs(got - want).max()


def check_layernorm(got, a):
    want = (a - a.mean(axis=1, keepdims=True)) / np.sqrt(a.var(axis=1, keepdims=True) + 1e-5) * G + B
    assert np.allclose(got, want, rtol=1e-3, atol=1e-4), np.abs(got - want).max()


def test_the_norm_tutorials_run_without_a_hand_written_broadcast():
    check_rmsnorm(tnki.simulate_kernel(rmsnorm, A[:200], G), A[:200])
    check_layernorm(tnki.simulate_kernel(layernorm, A, 1e-5, G, B), A)


@nki.jit
def grid_views(g, x):
    # One dim per index variable the expressions use, in the order the index names them: gamma's [1, F] view
    # by the grid's axis-2 (0:1) then axis-1 (0:F) expressions, as NKI's LayerNorm tutorial loads it (it was
    # NumPy's dense [128, F, 1] grid, tester23i's finding read the other way); an integer beside them is no dim.
    F = g.shape[0]
    row = nl.ndarray((1, F), dtype=g.dtype, buffer=nl.shared_hbm)
    part = nl.ndarray((128, 4), dtype=x.dtype, buffer=nl.shared_hbm)
    on_chip = nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.shared_hbm)
    _, i_f, i_one = nl.mgrid[0:128, 0:F, 0:1]
    nl.store(row, nl.load(g.reshape((1, F))[i_one, i_f]))
    ix, _, iz = nl.mgrid[0:128, 0:1, 0:4]
    t = nl.load(x)
    nl.store(part, nl.copy(t[ix, 3, iz]))
    _, j_one, j_f = nl.mgrid[0:128, 0:1, 0:4]
    nl.store(on_chip, nl.copy(t[j_one, 5, j_f]))  # the grid's 128 is no dim: row 0 alone
    picked = nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(picked, nl.copy(t[32, 6, j_f]))  # an integer partition: a dim of size 1
    return row, part, on_chip, picked


def test_an_mgrid_index_has_a_dim_per_variable_it_uses():
    x = np.random.RandomState(4).randn(128, 8, 4).astype(np.float32)
    row, part, on_chip, picked = tnki.simulate_kernel(grid_views, G[:64], x)
    assert row.shape == (1, 64) and row.tobytes() == G[:64].tobytes()
    assert part.shape == (128, 4) and part.tobytes() == x[:, 3, :].tobytes()
    assert on_chip.shape == (1, 4) and on_chip.tobytes() == x[0:1, 5, :].tobytes()
    assert picked.shape == (1, 4) and picked.tobytes() == x[32:33, 6, :].tobytes()


@nki.jit
def rmsnorm_grid(a, g):
    # RMSNorm in the indexing style of NKI's RMSNorm tutorial (our own kernel): one 3-D nl.mgrid whose 0:1
    # axis picks g's one row, the rows' [P, F] tile by the grid's axes 0 and 2, a tail tile under a mask.
    R, F = a.shape
    out = nl.ndarray((R, F), dtype=a.dtype, buffer=nl.shared_hbm)
    r, one, c = nl.mgrid[0:128, 0:1, 0:F]
    w = nl.load(g.reshape((1, F))[one, c]).broadcast_to((128, F))
    for k in nl.affine_range(math.ceil(R / 128)):
        rows = k * 128 + r
        x = nl.load(a[rows, c], mask=(rows < R))
        inv = nl.rsqrt(nl.sum(nl.multiply(x, x), axis=[1]) / F)
        y = nl.multiply(nl.multiply(x, inv), w, mask=(rows < R))
        nl.store(out[rows, c], value=y, mask=(rows < R))
    return out


@nki.jit
def layernorm_grid(a, eps, gamma, beta, stats):
    # LayerNorm in the style of NKI's LayerNorm tutorial (our own kernel): gamma and beta loaded by the grid's
    # (0:1, 0:F) expressions as [1, F] rows; on the tail tile the scaling is unmasked (the tile's rows past
    # the load's mask are NKI's undefined ones; here each call computes the held rows), and with `stats` the
    # mean and variance come from bn_stats over 512-column chunks (a 2-D grid beside the 3-D one) and
    # bn_aggr, whose mean column `mv[r, 0]` is a per-partition tensor_scalar operand.
    R, F = a.shape
    out = nl.ndarray((R, F), dtype=a.dtype, buffer=nl.shared_hbm)
    r, c, one = nl.mgrid[0:128, 0:F, 0:1]
    gam = nl.load(gamma.reshape((1, F))[one, c]).broadcast_to((128, F))
    bet = nl.load(beta.reshape((1, F))[one, c]).broadcast_to((128, F))
    for k in nl.affine_range(math.ceil(R / 128)):
        rows = k * 128 + r
        x = nl.load(a[rows, c], mask=(rows < R))
        if stats:
            n = math.ceil(F / 512)
            cc, s6 = nl.mgrid[0:512, 0:6]
            st = nl.ndarray((128, 6 * n), dtype=nl.float32)
            for j in nl.affine_range(n):
                st[r, j * 6 + s6] = nisa.bn_stats(x[r, j * 512 + cc], mask=(j * 512 + cc < F), dtype=nl.float32)
            mv = nisa.bn_aggr(st[r, nl.arange(6 * n)[None, :]])
            y = nisa.tensor_scalar(data=x, op0=np.subtract, operand0=mv[r, 0], op1=np.multiply,
                                   operand1=nl.rsqrt(mv[r, 1] + eps))
        else:
            mean = nl.mean(x, axis=1)
            y = (x - mean) * nl.rsqrt(nl.mean(nl.square(x), axis=1) - mean * mean + eps)
        nl.store(out[rows, c], value=y * gam + bet, mask=(rows < R))
    return out


def test_norm_kernels_in_the_tutorials_mgrid_style():
    # main: "broadcast_to: [128, 1, 1000] -> [128, 1000] must keep the number of dims"; then the unmasked
    # LayerNorm scaling of the tail tile: "operands [72, 1000] and [128, 1000] do not broadcast" (x - mean
    # held no region: mean, a [P] reduction, was taken for another one), and mv[r, 0] [128] beside x's 72
    # rows: "operand0 [128] must be a scalar or a [72, 1] vector". 200 rows: a 72-row tail tile. Tolerances
    # as check_rmsnorm's and check_layernorm's (rsqrt, FP32 sums in another order).
    check_rmsnorm(tnki.simulate_kernel(rmsnorm_grid, A[:200], G), A[:200])
    for stats in (False, True):
        check_layernorm(tnki.simulate_kernel(layernorm_grid, A[:200], 1e-5, G, B, stats), A[:200])


@nki.jit
def broadcast_int(x):
    out = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    row = nl.load(x)
    nl.store(out, nl.broadcast_to(row, shape=(128, 8)))  # MARK-int
    return out


@nki.jit
def where_row(x, r):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, nl.where(nl.greater(t, 0.0), t, nl.load(r)))
    return out


def test_nl_where_broadcasts_a_row_as_nl_arithmetic_does():
    # nl.where(cond, t, row [1, F]) was a select shape error (tester23i).
    x = np.random.RandomState(3).randn(128, 32).astype(np.float32)
    r = (np.arange(32, dtype=np.float32) + 0.5).reshape(1, 32)
    want = np.where(x > 0, x, np.broadcast_to(r, x.shape)).astype(np.float32)
    assert tnki.simulate_kernel(where_row, x, r).tobytes() == want.tobytes()


@nki.jit
def eight_banks_and_a_row(b, bias):
    out = nl.ndarray((128, 8 * 512), dtype=nl.float32, buffer=nl.shared_hbm)
    accs = []
    for n in nl.static_range(8):
        acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        acc[...] = nl.load(b[:, n * 512:(n + 1) * 512])
        accs.append(acc)
    bi = nl.load(bias)
    for n in nl.static_range(8):
        nl.store(out[:, n * 512:(n + 1) * 512], nl.add(accs[n], bi[:, n * 512:(n + 1) * 512]))  # MARK-banks
    return out


def test_a_full_psum_names_the_broadcasts_own_bank():
    # Eight live PSUM banks leave none for the broadcast's matmul: the error named a [128, 512] PSUM tile the
    # user never wrote (tester23i).
    e = raises(Exception, tnki.simulate_kernel, eight_banks_and_a_row, np.ones((128, 4096), np.float32),
               np.ones((1, 4096), np.float32))
    assert "test_nki_partition_broadcast.py:%d" % line_of(__file__, "MARK-banks") in str(e), e
    assert "(the PSUM bank a partition broadcast of a [1, F] row passes through" in str(e), e


@nki.jit
def broadcast_rows(x):
    out = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.broadcast_to(nl.load(x), shape=(128, 8)))  # MARK-rows
    return out


@nki.jit
def broadcast_psum_row_5(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    ps = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
    nisa.tensor_copy(dst=ps, src=t)
    nl.store(out, nl.add(t, ps[5:6, :]))  # MARK-psum-row
    return out


def test_an_error_in_a_lowerings_instruction_names_the_kernels_call():
    # Row 5 of a PSUM tile is copied to SBUF before the Tensor engine broadcasts it, and that copy (a compute
    # engine's) cannot start at partition 5: the error named only "tensor_copy on ACT", a call the kernel never
    # made (tester23i). The kernel's call comes first now, the lowering's instruction second.
    e = raises(trnsim.RuleError, tnki.simulate_kernel, broadcast_psum_row_5, np.ones((128, 64), np.float32))
    assert str(e) == ("test_nki_partition_broadcast.py:%d: nl.add: its tensor_copy on ACT (made by trnsim's "
                      "lowering of nl.add, not a call of the kernel): partition start: src spans 1 partitions from "
                      "5 (up to 32 must start at 0, 32, 64 or 96)" % line_of(__file__, "MARK-psum-row")), e


def test_what_does_not_broadcast_is_an_error_at_the_line():
    e = raises(tnki.NkiError, tnki.simulate_kernel, broadcast_int, np.arange(8, dtype=np.int32).reshape(1, 8))
    assert str(e).startswith("test_nki_partition_broadcast.py:%d: broadcast: a partition broadcast runs on the "
                             "Tensor engine, which multiplies floats, not int32: broadcast the row from HBM "
                             "instead" % line_of(__file__, "MARK-int")), e
    e = raises(tnki.NkiError, tnki.simulate_kernel, broadcast_rows, np.ones((2, 8), np.float32))
    assert str(e).startswith("test_nki_partition_broadcast.py:%d: broadcast_to: [2, 8] -> [128, 8]: dim 0 has "
                             "size 2, not 1" % line_of(__file__, "MARK-rows")), e


if __name__ == "__main__":
    main(globals())
