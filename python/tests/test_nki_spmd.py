"""LNC2 SPMD: a kernel launched as kernel[2] runs once per physical core; nl.program_id(0) is the core and
nl.num_programs() the launch size; a larger grid runs its programs in turn on the run's cores (lnc=)."""

import numpy as np

from runner import line_of, main, raises

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl

X = np.arange(512 * 64, dtype=np.float32).reshape(512, 64) / 64


@nki.jit
def mark_rows(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    pid, n = nl.program_id(0), nl.num_programs()
    per = x.shape[0] // n
    for b in nl.affine_range(per // 128):
        r0 = pid * per + b * 128
        t = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r0:r0 + 128, :])
        u = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=u, data=t, op0=nl.add, operand0=1000.0 * (pid + 1))
        nisa.dma_copy(dst=out[r0:r0 + 128, :], src=u)
    return out


def expected(n):
    per = 512 // n
    add = np.repeat(1000.0 * (np.arange(n) + 1), per)[:, None]
    return (X + add).astype(np.float32)


def test_two_cores_each_run_their_half():
    r = tnki.benchmark(mark_rows[2], X)
    assert np.array_equal(r.outputs[0], expected(2))
    one = tnki.benchmark(mark_rows, X)
    assert np.array_equal(one.outputs[0], expected(1))
    # two cores share the work: the LNC2 run is faster than one core doing all of it
    assert r.latency_ns < one.latency_ns, (r.latency_ns, one.latency_ns)


def test_grid_of_four_on_two_cores():
    # kernel[4] runs its four programs on the run's cores: one unless lnc=2 (the workload's "lnc": 2), which
    # gives core 0 programs 0 and 2, core 1 programs 1 and 3. main's benchmark passed lnc= to the kernel
    # (TypeError) and simulate_kernel had no way to say it: kernel[4] ran on one core.
    out = tnki.simulate_kernel(mark_rows[4], X, lnc=2)
    assert np.array_equal(out, expected(4))
    one, two = tnki.benchmark(mark_rows[4], X), tnki.benchmark(mark_rows[4], X, lnc=2)
    assert one.stats["cores"] == 1 and two.stats["cores"] == 2, (one.stats["cores"], two.stats["cores"])
    assert np.array_equal(one.outputs[0], expected(4)) and np.array_equal(two.outputs[0], expected(4))
    assert two.latency_ns < one.latency_ns, (two.latency_ns, one.latency_ns)
    e = raises(ValueError, tnki.simulate_kernel, mark_rows[2], X, lnc=1)
    assert str(e) == "lnc=1 conflicts with the kernel's launch grid mark_rows[2], which runs it on 2 cores (one " \
        "program per core): drop lnc= or the [...]", e
    # tester23j #8: kernel[nl.nc(2), 2] names its two cores as kernel[nl.nc(2)] does, so lnc=1 conflicts with
    # it too (it ran its four programs on one core); without lnc= it runs on the two cores.
    # The message names the grid as written and the nl.nc(2) that needs two cores (it said "launch grid [2]").
    for grid, text in (((nl.nc(2), 2), "nl.nc(2), 2"), (nl.spmd_dim(nl.nc(2), 2), "nl.spmd_dim(nl.nc(2), 2)")):
        e = raises(ValueError, tnki.simulate_kernel, mark_rows[grid], X, lnc=1)
        assert str(e) == (f"lnc=1 conflicts with the kernel's launch grid mark_rows[{text}], which runs it on 2 "
                          "cores (its nl.nc(2) places programs on 2 physical cores: the LNC2 pair, lnc=2): drop "
                          "lnc= or the [...]"), e
    r = tnki.benchmark(mark_rows[nl.spmd_dim(nl.nc(2), 2)], X)
    assert r.stats["cores"] == 2 and np.array_equal(r.outputs[0], expected(4)), r.stats["cores"]
    e = raises(ValueError, tnki.benchmark, mark_rows, X, lnc=4)
    assert str(e) == "lnc=4: trnsim runs 1 core or the LNC2 pair (lnc=2)", e


@nki.jit
def both_cores_write_all(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x[0:128, :])
    nl.store(out, t)  # MARK-race
    return out


@nki.jit
def both_cores_write_in_turn(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x[0:128, :])
    if nl.program_id(0) == 0:
        nl.store(out, t)
    nisa.core_barrier(out)
    if nl.program_id(0) == 1:
        nl.store(out, t)
    return out


@nki.jit
def cores_write_interleaved_rows(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    t = nl.load(x[pid:128:2, :])
    nl.store(out[pid:128:2, :], t)
    return out


def _warnings_of(kernel, *args):
    import warnings

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = tnki.simulate_kernel(kernel, *args)
    return out, [str(m.message) for m in w if issubclass(m.category, RuntimeWarning)]


def test_two_cores_writing_the_same_rows_race():
    # LNC2: both cores store all 128 rows of out with no core_barrier between: on hardware the writes race.
    # A warning (the kernel is legal NKI, and both cores may write the same values) naming both writes.
    out, msgs = _warnings_of(both_cores_write_all[2], X)
    assert np.array_equal(out, X[0:128])
    at = "test_nki_spmd.py:%d" % line_of(__file__, "MARK-race")
    race = [m for m in msgs if "race" in m]
    decl = "test_nki_spmd.py:%d" % (line_of(__file__, "MARK-race") - 2)
    assert race == [f"{at}: output 'out' float32 [128, 64] declared at {decl}: core 1 writes rows 0-127, which "
                    f"core 0 also writes "
                    f"({at}), with no core_barrier between the two writes: on hardware the two cores' writes race "
                    "and which lands last is undefined (this run keeps one order); give each core its own rows "
                    "(nl.program_id), or order the writes with nisa.core_barrier"], msgs


@nki.jit
def both_cores_write_all_tiles(x):
    out = nl.ndarray((256, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        nl.store(out[i * 128:(i + 1) * 128, :], nl.load(x[i * 128:(i + 1) * 128, :]))  # MARK-race-tiles
    gaps = nl.ndarray((256, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        nl.store(gaps[i * 192:i * 192 + 64, :], nl.load(x[0:64, :]))  # MARK-race-gaps
    return out, gaps


def test_a_race_names_all_the_rows_both_cores_write():
    # Each core stores rows 0-255 in two 128-row tiles: the warning said "rows 0-127", the first racing store's
    # rows; it names the rows of all the line's racing accesses, merged, at the same line.
    _, msgs = _warnings_of(both_cores_write_all_tiles[2], X[:256])
    race = sorted(m for m in msgs if "race" in m)
    at, gaps = ("test_nki_spmd.py:%d" % line_of(__file__, m) for m in ("MARK-race-tiles", "MARK-race-gaps"))
    assert len(race) == 2, msgs
    d0, d1 = (at.replace(str(n), str(n - 2)) for at, n in ((at, line_of(__file__, "MARK-race-tiles")),
                                                            (gaps, line_of(__file__, "MARK-race-gaps"))))
    assert race[0].startswith(f"{at}: output 'out' float32 [256, 64] declared at {d0}: core 1 writes rows 0-255, "
                              f"which core 0 also writes ({at}), with no core_barrier between the two writes"), race
    # An output declared without name= is named by the kernel's variable (it was "output 'out_1'").
    assert race[1].startswith(f"{gaps}: output gaps float32 [256, 64] declared at {d1}, without name= (saved as "
                              f"out_1.npy): core 1 writes rows 0-63, 192-255, which core 0 also writes ({gaps})"), race


@nki.jit
def both_cores_write_columns(x):
    pid = nl.program_id(0)
    out = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out[:, 0:64], nl.load(x[0:128, :]))  # MARK-race-cols
    blocks = nl.ndarray((256, 128), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        nl.store(blocks[i * 128:(i + 1) * 128, i * 64:(i + 1) * 64], nl.load(x[0:128, :]))  # MARK-race-blocks
    strided = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(strided[:, pid:64:2], nl.load(x[0:128, 0:32]))
    nl.store(strided[:, 1 - pid:64:2], nl.load(x[0:128, 0:32]))  # MARK-race-strided
    return out, blocks, strided


def test_a_race_on_some_columns_names_rows_and_columns():
    # Both cores store columns 0-63 of every row: main said "rows 0, 1, 2 and 125 more ranges" (each row's part
    # counted as a whole row), and "rows 0, 0, 0 and 4093 more ranges" for every other column. Now the rows
    # grouped by the columns they hold, an equal stride shortened exactly.
    _, msgs = _warnings_of(both_cores_write_columns[2], X)
    race = {m.split(":")[1]: m for m in msgs if "race" in m}
    cols, blocks, strided = (line_of(__file__, "MARK-race-" + m) for m in ("cols", "blocks", "strided"))
    f = "test_nki_spmd.py:"
    assert race[str(cols)].startswith(f"{f}{cols}: output 'out' float32 [128, 128] declared at {f}{cols - 1}: "
                                      "core 1 writes rows 0-127, columns 0-63, which core 0 also writes"), race
    assert race[str(blocks)].startswith(f"{f}{blocks}: output blocks float32 [256, 128] declared at {f}"
                                        f"{blocks - 2}, without name= (saved as out_1.npy): core 1 writes rows "
                                        "0-127, columns 0-63; rows 128-255, columns 64-127, which"), race
    # Core 1's second store (columns 0, 2, ..., 62) meets core 0's first.
    assert race[str(strided)].startswith(f"{f}{strided}: output strided float32 [128, 64] declared at {f}"
                                         f"{strided - 2}, without name= (saved as out_2.npy): core 1 writes "
                                         "rows 0-127, columns 0, 2, ..., 62, which core 0 also writes "
                                         f"(test_nki_spmd.py:{strided - 1})"), race


def test_cores_writing_apart_or_in_turn_do_not_race():
    # A core_barrier between the writes orders them; interleaved rows (a stride of 2) never meet; one core
    # running the whole grid in turn is no race either.
    for k in (both_cores_write_in_turn[2], cores_write_interleaved_rows[2], both_cores_write_all, mark_rows[2]):
        _, msgs = _warnings_of(k, X)
        assert not [m for m in msgs if "race" in m], (k, msgs)


def _scratch_round_trip(buffer):
    @nki.jit
    def k(x):
        out = nl.ndarray((256, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        scr = nl.ndarray((128, 64), dtype=x.dtype, buffer=buffer)  # MARK-scr
        pid = nl.program_id(0)
        nl.store(scr, nl.multiply(nl.load(x[pid * 128:(pid + 1) * 128, :]), 2.0))
        nl.store(out[pid * 128:(pid + 1) * 128, :], nl.load(scr))
        return out

    return k


def test_nl_hbm_is_each_cores_own():
    # nl.hbm is "an alias of private_hbm" (nki.language.hbm): each core of kernel[2] its own scratch. It was
    # shared: core 0 read back core 1's rows.
    for buffer in (nl.hbm, nl.private_hbm):
        out = tnki.simulate_kernel(_scratch_round_trip(buffer)[2], X[:256])
        assert out.tobytes() == (X[:256] * 2).tobytes(), buffer
    assert nl.hbm.private and not nl.shared_hbm.private


@nki.jit
def copy_blocks(x):
    # Program p of grid dim 0 copies block p (p + 1 times: the programs' instruction counts tell the cores
    # apart); grid dim 1 splits the columns.
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    p, q = nl.program_id(0), nl.program_id(1)
    for _ in nl.static_range(p + 1):
        nl.store(out[p, :, q * 8:q * 8 + 8], nl.load(x[p, :, q * 8:q * 8 + 8]))
    return out


def test_spmd_dim_sizes_and_cores():
    # nki.language.spmd_dim: its size is the product of its sub-dims, numbered row-major; the nl.nc(2)
    # sub-dim's index is the core: (nl.nc(2), 2) puts programs 0-1 on core 0 and 2-3 on core 1, (2, nl.nc(2))
    # alternates; nl.nc(2) * 2 and 2 * nl.nc(2) are the same. The dim was the first argument only (2 programs
    # of 4: half the output never written), nl.nc(2) first was an int, and nl.nc(2) * 2 a TypeError.
    x = np.arange(4 * 128 * 16, dtype=np.float32).reshape(4, 128, 16)
    blocks, alternate = [(1 + 2) * 2 * 2, (3 + 4) * 2 * 2], [(1 + 3) * 2 * 2, (2 + 4) * 2 * 2]
    for dim0, per_core in ((nl.spmd_dim(nl.nc(2), 2), blocks), (nl.nc(2) * 2, blocks),
                           (nl.spmd_dim(2, nl.nc(2)), alternate), (2 * nl.nc(2), alternate)):
        r = tnki.benchmark(copy_blocks[dim0, 2], x, lnc=2)
        assert r.outputs[0].tobytes() == x.tobytes(), dim0
        # Each program: p + 1 loads and stores per column half (dim 1 of 2).
        assert [a["instructions"] for a in r.stats["nki"]["allocation"]] == per_core, dim0
    assert copy_blocks[nl.spmd_dim(nl.nc(2), 2), 2].launch_grid == (4, 2)


@nki.jit
def copy_to_hbm(a):
    b = nl.empty_like(a, buffer=nl.hbm)
    nl.store(b, value=nl.load(a))
    return b  # MARK-private-return


def test_one_program_may_return_an_nl_hbm_tensor():
    # nki.simulate_kernel's own example returns nl.empty_like(a, buffer=nl.hbm): with one program the
    # private tensor is the output (it was an NkiError); with two programs each has its own: an error at the
    # return line.
    a = X[:3, :4] * 10
    out = tnki.simulate_kernel(copy_to_hbm, a)
    assert out.dtype == np.float32 and out.tobytes() == a.tobytes()
    e = raises(tnki.NkiError, tnki.simulate_kernel, copy_to_hbm[2], a)
    assert f"test_nki_spmd.py:{line_of(__file__, 'MARK-private-return')}" in str(e), e
    assert "returns an nl.private_hbm tensor (nl.hbm is its alias) from 2 programs" in str(e), e


def _exchange(barrier):
    @nki.jit
    def k(x):
        out = nl.ndarray((256, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        scr = nl.ndarray((256, 64), dtype=x.dtype, buffer=nl.shared_hbm, name="scr")
        pid = nl.program_id(0)
        nl.store(scr[pid * 128:(pid + 1) * 128, :], nl.load(x[pid * 128:(pid + 1) * 128, :]))  # MARK-xw
        if barrier:
            nisa.core_barrier(data=scr, cores=(0, 1))
        u = nl.load(scr[(1 - pid) * 128:(2 - pid) * 128, :])  # MARK-xr
        nl.store(out[pid * 128:(pid + 1) * 128, :], u)
        return out

    return k


def test_shared_scratch_races_are_warned():
    # LNC2: the race warning covered outputs only. A shared_hbm scratch both cores write, or that one core
    # reads where the other writes, with no core_barrier between, races on hardware too; nl.private_hbm
    # scratch (each core its own) and a core_barrier between do not.
    w, r = "test_nki_spmd.py:%d" % line_of(__file__, "MARK-xw"), "test_nki_spmd.py:%d" % line_of(__file__, "MARK-xr")
    tail = ("with no core_barrier between the write and the read: on hardware the read sees the bytes before or "
            "after the other core's write, undefined (this run keeps one order); order them with "
            "nisa.core_barrier")
    _, msgs = _warnings_of(_exchange(False)[2], X[:256])
    race = sorted(m for m in msgs if "core_barrier between" in m)
    scr = "shared_hbm tensor 'scr' float32 [256, 64] declared at test_nki_spmd.py:%d" % (
        line_of(__file__, "MARK-xw") - 2)
    assert race == [f"{w}: {scr}: core 1 writes rows 128-255, which core 0 reads ({r}), {tail}",
                    f"{r}: {scr}: core 1 reads rows 0-127, which core 0 writes ({w}), {tail}"], msgs
    out, msgs = _warnings_of(_exchange(True)[2], X[:256])
    assert out.tobytes() == np.concatenate([X[128:256], X[:128]]).tobytes()
    assert not [m for m in msgs if "race" in m or "core_barrier between" in m], msgs
    _, msgs = _warnings_of(_scratch_round_trip(nl.private_hbm)[2], X[:256])
    assert not [m for m in msgs if "core_barrier between" in m], msgs
    _, msgs = _warnings_of(_scratch_round_trip(nl.shared_hbm)[2], X[:256])
    both = [m for m in msgs if "also writes" in m]
    assert len(both) == 1 and "core 1 writes rows 0-127, which core 0 also writes" in both[0] and \
        "give each core its own rows (nl.program_id) or its own scratch (nl.private_hbm)" in both[0], msgs
    # The scratch declared without name= is named by the kernel's variable and its line, never by a name that
    # reads as the kernel's (it was "shared_hbm tensor 'scratch_2' float32 [128, 64]", no line).
    assert ": shared_hbm tensor scr float32 [128, 64] declared at test_nki_spmd.py:%d, without name=: core 1 " \
        "writes" % line_of(__file__, "MARK-scr") in both[0], both


@nki.jit
def barrier_on_core_0_only(x):
    out = nl.ndarray((256, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    t = nl.load(x[pid * 128:(pid + 1) * 128, :])
    nl.store(out[pid * 128:(pid + 1) * 128, :], t)
    if pid == 0:
        nisa.core_barrier(data=out, cores=(0, 1))  # MARK-one-sided
    return out


def test_unmatched_cross_core_calls_name_the_line():
    # It said "... core 0 made 1 core_barrier on POOL, 0 sendrecv; core 1 made 0 sendrecv": no kernel line,
    # no barrier count for core 1.
    from runner import raises

    e = raises(tnki.NkiError, tnki.simulate_kernel, barrier_on_core_0_only[2], X)
    assert str(e) == (
        "test_nki_spmd.py:%d: core_barrier: core 0's 1st core_barrier on POOL, which core 1 does not make: the two "
        "cores of an LNC2 kernel must make the same cross-core calls (each waits for the other's; control flow "
        "must match): core 0 made 1 core_barrier, 0 sendrecv; core 1 made 0 core_barrier, 0 sendrecv"
        % line_of(__file__, "MARK-one-sided")), str(e)


@nki.jit
def returns_own_output(x):
    pid = nl.program_id(0)
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm, name="out%d" % pid)  # MARK-own-out
    nl.store(out, nl.load(x[0:128, :]))
    return out  # MARK-own-return


def test_cores_returning_different_tensors_is_an_error_at_the_return_line():
    # tester23m F10: "returns_own_output: the two cores return different tensors (out0 and out1)" (the builder's
    # check) named no line, unlike the other checks of what a kernel returns.
    e = raises(tnki.NkiError, tnki.simulate_kernel, returns_own_output[2], X)
    at = "test_nki_spmd.py:%d" % line_of(__file__, "MARK-own-out")
    assert str(e) == (
        "test_nki_spmd.py:%d: kernel returns_own_output: the two cores return different tensors (core 0 'out0': "
        "out (allocated at %s); core 1 'out1': out (allocated at %s)); an LNC2 kernel's outputs are the "
        "nl.shared_hbm tensors both return, allocated alike on each core (the same name=, or the same line)"
        % (line_of(__file__, "MARK-own-return"), at, at)), str(e)


@nki.jit
def returns_own_unnamed(x):
    first = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)  # MARK-unnamed-first
    second = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)  # MARK-unnamed-second
    t = nl.load(x[0:128, :])
    if nl.program_id(0) == 0:
        nl.store(first, nl.add(t, 1.0))
        return first
    nl.store(second, nl.add(t, 2.0))
    return second  # MARK-unnamed-return


@nki.jit
def returns_unnamed_from_one_line(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    nl.store(out[pid * 64:pid * 64 + 64, :], nl.add(nl.load(x[pid * 64:pid * 64 + 64, :]), 1.0))
    return out


def test_cores_returning_different_unnamed_tensors_is_an_error_too():
    # tester23ab F5: both were the run's output 'out', so core 1's second silently replaced core 0's first
    # (one array of 2.0), with only a race warning that named first's line as second's declaration.
    e = raises(tnki.NkiError, tnki.simulate_kernel, returns_own_unnamed[2], X)
    assert str(e) == (
        "test_nki_spmd.py:%d: kernel returns_own_unnamed: the two cores return different tensors (core 0 first "
        "(allocated at test_nki_spmd.py:%d); core 1 second (allocated at test_nki_spmd.py:%d)); an LNC2 kernel's "
        "outputs are the nl.shared_hbm tensors both return, allocated alike on each core (the same name=, or the "
        "same line)" % (line_of(__file__, "MARK-unnamed-return"), line_of(__file__, "MARK-unnamed-first"),
                        line_of(__file__, "MARK-unnamed-second"))), str(e)
    # One line's tensor on each core is one output, each core writing its half.
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    assert np.array_equal(tnki.simulate_kernel(returns_unnamed_from_one_line[2], x), x + 1)


main(globals())
