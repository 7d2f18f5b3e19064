"""Tiles declared in a plain Python loop (tester23ad F1): NKI unrolls a Python `for` while tracing, as it does
nl.static_range, so each pass declares its tiles again and a site whose tiles are dead at the end of a pass
frees its space until the next pass declares it. trnsim sees no loop there (the kernel calls nothing at its
`for`): a site declared more than once outside every nl loop gets one pool instance per run of its tiles
(tiles whose lives overlap, chained), as an affine_range iteration is one scope (docs/nki.md "Allocation").
It was one pool for the whole kernel, so nine PSUM sites each alive for one matmul and one add, repeated by a
Python loop, held nine 2 KiB banks of eight at once (nki-samples' chunked_delta_rule.py, nki-library's
attention_bwd.py). Exact values against NumPy (small integers: every sum exact in float32)."""

import numpy as np

from runner import line_of, main, raises

from trnsim.nki import NkiError

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def nine_psum_sites(a, b, passes: int, kind: str = "python"):
    # acc = passes * 9 * (a.T @ b) (twice that with kind="nested": in each iteration of an nl.affine_range): nine
    # PSUM tiles on nine lines per pass, each read once right after its matmul (one bank in use at a time).
    o = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    x, y = nl.load(a), nl.load(b)
    acc = nl.zeros((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    for _ in (nl.affine_range(2) if kind == "nested" else (0,)):
        _passes(x, y, acc, range(passes) if kind != "static" else nl.static_range(passes))
    nl.store(o, acc)
    return o


def _passes(x, y, acc, loop):
    for _ in loop:
        p0 = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p0, stationary=x, moving=y)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=p0, op=nl.add)
        p1 = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p1, stationary=x, moving=y)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=p1, op=nl.add)
        p2 = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p2, stationary=x, moving=y)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=p2, op=nl.add)
        p3 = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p3, stationary=x, moving=y)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=p3, op=nl.add)
        p4 = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p4, stationary=x, moving=y)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=p4, op=nl.add)
        p5 = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p5, stationary=x, moving=y)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=p5, op=nl.add)
        p6 = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p6, stationary=x, moving=y)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=p6, op=nl.add)
        p7 = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p7, stationary=x, moving=y)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=p7, op=nl.add)
        p8 = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p8, stationary=x, moving=y)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=p8, op=nl.add)


A = np.random.default_rng(1).integers(-2, 3, (128, 128)).astype(np.float32)
B = np.random.default_rng(2).integers(-2, 3, (128, 128)).astype(np.float32)


def test_psum_sites_repeated_by_a_python_loop_take_one_bank_at_a_time():
    # passes >= 2 was "PSUM tile [128, 128] float32 (x 1 alive at once): buffer 1 of 1 (512 B per partition) does
    # not fit: 0 B free in psum", the eight other sites listed as alive all kernel long.
    want = A.T @ B
    for passes in (1, 2, 3):
        r = tnki.benchmark(nine_psum_sites, A, B, passes)
        assert r.outputs[0].tobytes() == (want * np.float32(9 * passes)).tobytes(), passes
        sites = [s for s in r.stats["nki"]["allocation"][0]["sites"] if s["space"] == "psum"]
        assert len(sites) == 9, sites
        scope = "kernel" if passes == 1 else "each run of its tiles (outside every nl loop)"
        assert {(s["scope"], s["scope_iterations"], s["tensors"]) for s in sites} == {(scope, passes, passes)}, sites
        # The same body under nl.static_range: the same values, buffers and time (tester23ad F1 addendum: where
        # the Python loop's kernel fitted, its one pool per site got other buffer counts and another time).
        s = tnki.benchmark(nine_psum_sites, A, B, passes, "static")
        assert s.outputs[0].tobytes() == r.outputs[0].tobytes(), passes
        bufs = [[a["bufs"] for a in x.stats["allocations"] if a["space"] == "psum"] for x in (r, s)]
        assert (passes == 1 or bufs[0] == bufs[1]) and r.latency_us == s.latency_us, (
            passes, bufs, r.latency_us, s.latency_us)  # (a site declared once is no pool in "allocations")


def test_psum_sites_repeated_by_a_python_loop_in_an_nl_loop():
    # tester23ad F1 addendum: the same passes in the body of an nl.affine_range (the scope of the sites is its
    # iteration) were "0 B free in psum" for passes >= 2: each run of a site's tiles in an iteration is a scope.
    want = A.T @ B
    for passes in (1, 2):
        r = tnki.benchmark(nine_psum_sites, A, B, passes, "nested")
        assert r.outputs[0].tobytes() == (want * np.float32(18 * passes)).tobytes(), passes
        sites = [s for s in r.stats["nki"]["allocation"][0]["sites"] if s["space"] == "psum"]
        assert len(sites) == 9 and all(s["scope_iterations"] == 2 * passes for s in sites), sites


@nki.jit
def staggered(x, n: int):
    # acc[:, :w] += x[r, :, :w] for the loaded tiles and += 0 for the computed ones, n passes of a Python loop:
    # tiles of several widths whose lives end in another order than they begin, computed ones among them (a
    # generated case: a computed tile's second buffer, which its runs never reach, lay on the space of a tile
    # dead before it, and a later load placed there lost its wait for that tile's last read, so the builder
    # found the space still taken: "sbuf tile 't3[0]' [128 x 256 B] at byte 4096: that space is taken").
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 512), dtype=nl.float32)
    for r in range(n):
        t0 = nl.load(x[r, :, 0:512])
        t1 = nl.multiply(acc[:, 0:128], 0.0)
        acc[:, 0:512] = nl.add(acc[:, 0:512], t0)
        t2 = nl.multiply(acc[:, 0:256], 0.0)
        acc[:, 0:128] = nl.add(acc[:, 0:128], t1)
        t3 = nl.load(x[r, :, 0:64])
        t4 = nl.load(x[r, :, 0:384])
        acc[:, 0:64] = nl.add(acc[:, 0:64], t3)
        t5 = nl.load(x[r, :, 0:512])
        acc[:, 0:384] = nl.add(acc[:, 0:384], t4)
        t6 = nl.load(x[r, :, 0:128])
        acc[:, 0:512] = nl.add(acc[:, 0:512], t5)
        t7 = nl.load(x[r, :, 0:384])
        acc[:, 0:384] = nl.add(acc[:, 0:384], t7)
        acc[:, 0:256] = nl.add(acc[:, 0:256], t2)
        acc[:, 0:128] = nl.add(acc[:, 0:128], t6)
    nl.store(out, acc)
    return out


def test_a_load_waits_through_a_buffer_no_tile_used():
    x = np.random.default_rng(3).integers(-4, 5, (3, 128, 512)).astype(np.float32)
    want = np.zeros((128, 512), np.float32)
    for r in range(3):
        for w in (512, 64, 384, 512, 128, 384):
            want[:, :w] += x[r, :, :w]
    assert tnki.simulate_kernel(staggered, x, 3).tobytes() == want.tobytes()


def odd_differences(kind, wide):
    # o[i] = sum(a[i]) on even i, sum(a[i] - a[i - 1]) on odd i (row sums, [128, 1] each), o2 = 2 * c. C
    # ([128, wide] float32) is alive to the end; A, B and their difference are 64 KiB each (B and A - B made
    # on odd i only): at most A, B, A - B and C are alive at once.
    R = {"python": range, "static": nl.static_range, "affine": nl.affine_range, "sequential": nl.sequential_range}[kind]

    @nki.jit
    def k(a, c):
        o = nl.ndarray((4, 128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((128, wide), dtype=nl.float32, buffer=nl.shared_hbm)
        ct = nl.load(c)  # C
        for i in R(4):
            ta = nl.load(a[i])  # A
            if i % 2 == 1:
                tb = nl.load(a[i - 1])  # B
                s = nl.sum(nl.subtract(ta, tb), axis=1, keepdims=True)  # diff
            else:
                s = nl.sum(ta, axis=1, keepdims=True)  # even sum
            nl.store(o[i], s)
        nl.store(o2, nl.multiply(ct, 2.0))
        return o, o2

    return k


def test_a_loop_gets_the_same_buffers_in_every_spelling():
    # tester23af F5: with C (31.25 KiB) alive to the end, A, B and their difference (64 KiB each) fit SBUF's 224
    # KiB at once, with A in 1 buffer. As a Python `for` A's count came from its whole life (B is first used
    # in it); under nl.static_range / affine_range / sequential_range it was asked in iteration 0, where B is
    # not used yet: A got 2 buffers, and the difference of iteration 1 did not fit ("768 B free"). The counts
    # asked over each site's whole life are the fallback there too: the same buffers and time in all four.
    rng = np.random.default_rng(5)
    a = rng.integers(-4, 5, (4, 128, 16384)).astype(np.float32)
    c = rng.integers(-4, 5, (128, 8000)).astype(np.float32)
    want = np.stack([a[0].sum(1), (a[1] - a[0]).sum(1), a[2].sum(1), (a[3] - a[2]).sum(1)])[:, :, None]
    path = __file__
    lines = {m: "test_nki_python_loops.py:%d" % line_of(path, m) for m in ("# A", "# B", "# diff", "# even sum")}
    seen = []
    for kind in ("python", "static", "affine", "sequential"):
        r = tnki.benchmark(odd_differences(kind, 8000), a, c)
        assert r.outputs[0].tobytes() == want.astype(np.float32).tobytes(), kind
        assert r.outputs[1].tobytes() == (2 * c).tobytes(), kind
        bufs = [(x["source"], x["bufs"]) for x in r.stats["allocations"]]
        assert bufs == [(lines["# A"], 1), (lines["# even sum"], 2), (lines["# B"], 1), (lines["# diff"], 1),
                        (lines["# diff"], 2)], (kind, bufs)
        seen.append(r.latency_us)
    assert len(set(seen)) == 1, seen


def test_a_tile_that_does_not_fit_names_what_holds_the_space():
    # tester23af F5: the message listed A, B, C and a sum (163,136 B) beside "768 B free", leaving A's second
    # buffer unnamed. With C at [128, 8200] (32,832 B) the kernel needs 229,440 B: every spelling gives the
    # same error, whose tiles alive then and free space add up to SBUF's 229,376 B per partition.
    a = np.zeros((4, 128, 16384), np.float32)
    c = np.zeros((128, 8200), np.float32)
    at = {m: "test_nki_python_loops.py:%d" % line_of(__file__, m) for m in ("# A", "# B", "# C", "# diff")}
    want = ("%s: SBUF tile [128, 16384] float32 (x 1 alive at once): buffer 1 of 1 (65536 B per partition) does not "
            "fit: 65472 B free in sbuf (of 229376 B per partition) at its first access; the other tiles alive then: "
            "%s: [128, 16384] float32 x 1 (65536 B); %s: [128, 16384] float32 x 1 (65536 B); %s: [128, 8200] "
            "float32 x 1 (32832 B); alive later in its life: %s: [128, 1] float32 x 1 (64 B)"
            % (at["# diff"], at["# A"], at["# B"], at["# C"], at["# diff"]))
    assert 65472 + 65536 + 65536 + 32832 == 229376
    for kind in ("python", "static", "affine", "sequential"):
        e = raises(NkiError, tnki.simulate_kernel, odd_differences(kind, 8200), a, c)
        assert str(e) == want, (kind, str(e))


_SPELL = {"python": range, "static": nl.static_range, "affine": nl.affine_range, "sequential": nl.sequential_range}


def tiled_matmul(outer, inner):
    # o = a.T @ b by [M-tile, N-tile]: x loaded per M tile, y, a PSUM accumulator and its SBUF copy per N tile.
    O, I = _SPELL[outer], _SPELL[inner]

    @nki.jit
    def k(a, b):
        o = nl.ndarray((384, 2048), dtype=nl.float32, buffer=nl.shared_hbm)
        for m in O(3):  # outer loop
            x = nl.load(a[:, m * 128:(m + 1) * 128])
            for n in I(4):
                y = nl.load(b[:, n * 512:(n + 1) * 512])
                acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
                acc += nl.matmul(x, y, transpose_x=True)
                r = nl.copy(acc)
                nl.store(o[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], r)
        return o

    return k


def test_nested_loops_allocate_alike_whether_range_or_static_range():
    # tester23ah F5: with both loops nl.static_range the inner body's sites had the outer iteration as their
    # scope (one placement each, 42.656 us), while a Python `range` at either level split them into a scope
    # per inner iteration (12 placements, 91.667 us), though NKI unrolls both alike while tracing. A
    # static_range loop is now no scope, as a Python loop: range and static_range give the same buffers,
    # scopes and time at every nesting; only affine_range / sequential_range loops are scopes (the outermost
    # one's iteration), so two of them nested keep the outer iteration's scope.
    rng = np.random.default_rng(7)
    a = rng.integers(-2, 3, (128, 384)).astype(np.float32)
    b = rng.integers(-2, 3, (128, 2048)).astype(np.float32)
    want = (a.T @ b).astype(np.float32).tobytes()
    got = {}
    for outer in _SPELL:
        for inner in _SPELL:
            r = tnki.benchmark(tiled_matmul(outer, inner), a, b)
            assert r.outputs[0].tobytes() == want, (outer, inner)
            got[outer, inner] = (r.latency_us, r.stats["nki"]["allocation"][0]["sites"], r.stats["allocations"])
    for (outer, inner), g in got.items():
        same = (outer.replace("static", "python"), inner.replace("static", "python"))
        assert g == got[same], (outer, inner, g, got[same])
        if "static" not in (outer, inner):
            assert g[1:] == got[outer.replace("python", "static"), inner.replace("python", "static")][1:]
    loop = "loop at test_nki_python_loops.py:%d" % line_of(__file__, "# outer loop")
    scopes = {k: [(s["scope"], s["scope_iterations"], s["placements"]) for s in g[1]] for k, g in got.items()}
    run = "each run of its tiles (outside every nl loop)"
    assert scopes["python", "python"] == [(run, 3, 3), (run, 12, 12), (run, 12, 1), (run, 12, 12)], scopes
    assert scopes["affine", "sequential"] == [(loop, 3, 1)] * 4, scopes
    assert scopes["sequential", "python"] == [(loop, 3, 3)] + [
        (loop + ", each run of its tiles in an iteration", 12, p) for p in (12, 1, 12)], scopes
    lat = {k: g[0] for k, g in got.items()}
    assert lat["python", "python"] == lat["affine", "python"] == lat["python", "affine"] > lat["affine", "affine"]
    assert lat["affine", "affine"] == lat["sequential", "sequential"]


if __name__ == "__main__":
    main(globals())
