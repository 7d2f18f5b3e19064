"""Python state an nl.affine_range / sequential_range body carries from one iteration to the next (tester23al
F3): NKI traces the body once, so every iteration of the device's loop sees the state as it was before the
loop, while trnsim runs the body once per iteration. A value the body changes and reads (a counter used as an
index, a list whose len() places a tile) is warned at the loop's line, naming it; the common patterns that
carry nothing (tiles appended to a list made before the loop, loop-invariant state, a counter the body sets
afresh, one only read after the loop) are not. Exact values against NumPy."""

import os

import numpy as np

from runner import line_of, main, same_f32, warned

import trnsim.nki as tnki

import nki
import nki.language as nl

THIS = os.path.basename(__file__)
X = np.arange(512 * 64, dtype=np.float32).reshape(512, 64)


def line(marker):
    return line_of(__file__, marker)


@nki.jit
def counter_as_index(x, kind):
    N, F = x.shape
    o = nl.ndarray((N, F), dtype=x.dtype, buffer=nl.shared_hbm)
    off = 0
    loop = nl.sequential_range if kind == "sequential" else nl.affine_range
    for i in loop(N // 128):  # MARK-counter-loop
        t = nl.load(x[off:off + 128, :])
        nl.store(o[off:off + 128, :], value=t)
        off += 128
    return o


@nki.jit
def list_length_places_a_tile(x):
    o = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    used = []
    for i in nl.affine_range(3):  # MARK-len-loop
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nki.compiler.sbuf.mod_alloc(base_addr=256 * len(used)))
        used.append(256)
        t[...] = nl.load(x)
        nl.store(o, value=t)
    return o


@nki.jit
def nothing_carried(x):
    N, F = x.shape
    o = nl.ndarray((N, F), dtype=x.dtype, buffer=nl.shared_hbm)
    tiles = []
    step, done = 128, 0
    for i in nl.affine_range(N // 128):
        tiles.append(nl.load(x[i * step:(i + 1) * step, :]))  # a loop-invariant step; tiles kept for later
        off = i * 128  # set afresh by each iteration, then advanced
        off += 0
        nl.store(o[off:off + 128, :], value=tiles[-1])
        done += 1  # only read after the loop
    assert done == N // 128
    for i in nl.static_range(N // 128):  # unrolled while tracing, as NKI does: nothing to warn
        done += 1
        nl.store(o[(done - N // 128 - 1) * 128:(done - N // 128) * 128, :], value=tiles[i])
    return o


def test_a_counter_the_body_advances_and_reads_is_warned():
    # trnsim copies each tile where the counter says (all rows), where NKI's one trace would use off = 0 in every
    # iteration: warned at the loop (it was silent)
    for kind in ("affine", "sequential"):
        got, ws = warned(tnki.simulate_kernel, counter_as_index, X, kind)
        same_f32(got, X)
        name = "nl.sequential_range" if kind == "sequential" else "nl.affine_range"
        assert ws == [f"{THIS}:{line('MARK-counter-loop')}: {name}: its body changes 'off' (0 before the loop, 128 "
                      "after its first iteration) and reads it: NKI traces the body once, so on the device every "
                      "iteration sees 'off' as it was before the loop, while trnsim runs each iteration with what "
                      "the earlier ones left (docs/nki.md \"Loops\"); compute it from the loop index instead"], ws


def test_a_list_whose_length_places_a_tile_is_warned():
    got, ws = warned(tnki.simulate_kernel, list_length_places_a_tile, X[:128])
    same_f32(got, X[:128])
    assert ws == [f"{THIS}:{line('MARK-len-loop')}: nl.affine_range: its body changes len(used) (0 before the "
                  "loop, 1 after its first iteration) and reads it: NKI traces the body once, so on the device "
                  "every iteration sees len(used) as it was before the loop, while trnsim runs each iteration "
                  "with what the earlier ones left (docs/nki.md \"Loops\"); compute it from the loop index "
                  "instead"], ws


def test_state_that_carries_nothing_is_not_warned():
    got, ws = warned(tnki.simulate_kernel, nothing_carried, X)
    same_f32(got, X)
    assert ws == [], ws


if __name__ == "__main__":
    main(globals())
