"""Direct allocation (nki.compiler.sbuf / psum .mod_alloc and .alloc): each logical tile at the place its
allocator gives, as NKI's pages compute it (the modulo formula), reported in stats.json; the Direct Allocation
guide's errors (lifetime conflicts, mixing with automatic allocation, places outside the memory or the
partition rule) are NkiErrors at the kernel line."""

import os
import warnings

import numpy as np

from runner import KERNELS, line_of, main, raises, raises_at

import trnsim.nki as tnki
from trnsim.nki import NkiError
from trnsim.nki import compiler as ncc
from trnsim.nki import language as nl

import nki_direct as K

SRC = os.path.join(KERNELS, "nki_direct.py")
X = np.arange(512 * 128, dtype=np.float32).reshape(512, 128) / 64


def test_places_and_values():
    # Four blocks over two physical tiles each (mod_alloc's num_free_tiles=(2,): block i at base + (i % 2) *
    # 512 B, a [128, 128] float32 tile's bytes per partition; PSUM block i in bank 2 + i % 2). Block i + 2
    # reuses block i's bytes: its load must wait for block i's reads, or the output would not be x.
    r = tnki.benchmark(K.through_psum, X, np.identity(128, dtype=np.float32))
    assert r.outputs[0].tobytes() == X.tobytes()
    (core,) = r.stats["nki"]["allocation"]
    assert core["sites"] == []
    got = {d["tensor"]: (d["line"], d["allocator"], d["logical_tiles"], d["physical_tiles"])
           for d in core["direct"]}
    assert got == {
        "ident": ("nki_direct.py:20", "nki.compiler.sbuf.mod_alloc(base_addr=4096)", 1,
                  [{"partition": 0, "byte": 4096}]),
        "t": ("nki_direct.py:22", "nki.compiler.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,))", 4,
              [{"partition": 0, "byte": 0}, {"partition": 0, "byte": 512}]),
        "s": ("nki_direct.py:24", "nki.compiler.sbuf.mod_alloc(base_addr=1024, num_free_tiles=(2,))", 4,
              [{"partition": 0, "byte": 1024}, {"partition": 0, "byte": 1536}]),
        "p": ("nki_direct.py:26", "nki.compiler.psum.mod_alloc(base_bank=2, num_bank_tiles=(2,))", 4,
              [{"bank": 2, "partition": 0, "byte": 0}, {"bank": 3, "partition": 0, "byte": 0}]),
    }, got
    # stats.json "allocations": each tensor as a pool of its physical tiles, chosen by the kernel;
    # bytes_per_partition is one buffer's, as for every site (tester23ak F4: it was all the physical tiles').
    recs = {a["name"]: (a["bufs"], a["trip_count"], a["bytes_per_partition"], a["chosen_by"], a["reason"])
            for a in r.stats["allocations"]}
    assert recs["t"] == (2, 4, 512, "explicit",
                         "direct allocation: nki.compiler.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,))"), recs
    assert recs["ident"][:3] == (1, 1, 512) and recs["p"][:3] == (2, 4, 512), recs


def test_custom_allocator_partitions():
    # sbuf.alloc(func): four [32, 128] blocks at partitions 0, 32, 64, 96, all at byte 0, alive together.
    x = X[:128]
    r = tnki.benchmark(K.quarters, x)
    assert r.outputs[0].tobytes() == x.tobytes()
    (d,) = r.stats["nki"]["allocation"][0]["direct"]
    assert d["allocator"] == "nki.compiler.sbuf.alloc(by_quarters)" and d["logical_tiles"] == 4, d
    assert d["physical_tiles"] == [{"partition": p, "byte": 0} for p in (0, 32, 64, 96)], d


def test_allocator_called_by_the_documented_names():
    # tester23aa F4: an allocator taking a parameter of its own first, bound by keyword with functools.partial
    # (nki-samples' allocated attention), was called by position and died in trnsim's code ("got multiple values
    # for argument 'bank_map'"). Called as func(idx=, pdim_size=, fdim_size=), block i is in bank banks[(i,)].
    x = X[:256]
    r = tnki.benchmark(K.doubled_in_banks, x, {(0,): 5, (1,): 1})
    assert r.outputs[0].tobytes() == (2 * x).tobytes()
    (d,) = [d for d in r.stats["nki"]["allocation"][0]["direct"] if d["space"] == "psum"]
    assert d["allocator"] == "nki.compiler.psum.alloc(bank_of)", d
    assert d["physical_tiles"] == [{"bank": b, "partition": 0, "byte": 0} for b in (5, 1)], d


def test_allocator_exceptions_name_the_call():
    # An exception from the allocator is an NkiError at the tensor's declaration naming the call trnsim made.
    raises_at(NkiError, "nki.compiler.psum.alloc(bank_of): block (1,): the allocator raised KeyError: (1,), "
              "called as bank_of(idx=(1,), pdim_size=128, fdim_size=512)", SRC, "# banked",
              tnki.simulate_kernel, K.doubled_in_banks, X[:256], {(0,): 5})
    K.given["buffer"] = ncc.sbuf.alloc(lambda i: (0, 0))
    raises_at(NkiError, "nki.compiler.sbuf.alloc(<lambda>): block (0,): the allocator raised TypeError: "
              "test_allocator_exceptions_name_the_call.<locals>.<lambda>() takes 1 positional argument but 3 were "
              "given, called as <lambda>((0,), 128, 512)", SRC, "# declared", tnki.simulate_kernel, K.placed,
              np.zeros((128, 128), np.float32))


def test_lifetime_conflicts():
    # Block 2 of t takes block 0's bytes (two physical tiles) while block 0 waits for the second loop.
    raises_at(NkiError, "t[2] (partitions 0-127, bytes 0-511 of SBUF) is first used here while t[0] "
              "(partitions 0-127, bytes 0-511), on bytes it shares, is alive until nki_direct.py:45: a lifetime "
              "conflict of the direct allocation (NKI Direct Allocation Developer Guide, common error 3)", SRC,
              "third load", tnki.simulate_kernel, K.all_loaded_first, np.zeros((1024, 128), np.float32))
    raises_at(NkiError, "b (partitions 0-127, bytes 512-1535 of SBUF) is first used here while a (partitions "
              "0-127, bytes 0-1023), on bytes it shares, is alive until nki_direct.py:57", SRC,
              "overlaps a, read below", tnki.simulate_kernel, K.overlapping, np.zeros((128, 256), np.float32))


def test_a_block_holds_one_value_per_outer_iteration():
    # tester23s F2: t[j] reused in each iteration over g holds a value from its load to its store, dead until the
    # next iteration's load: no lifetime conflict with t[j + 2] (it was one, t[0] counted alive to g = 1's store).
    x = np.arange(2 * 4 * 128 * 128, dtype=np.float32).reshape(2, 4, 128, 128)
    assert tnki.simulate_kernel(K.reloaded, x).tobytes() == x.tobytes()
    raises_at(NkiError, "t[0] (partitions 0-127, bytes 0-511 of SBUF) is written again here while t[2] (partitions "
              "0-127, bytes 0-511), on bytes it shares, is alive until nki_direct.py:%d: a lifetime conflict"
              % line_of(SRC, "nl.store(out[0, 2], t[2])"), SRC, "x[1, 0])  # written again", tnki.simulate_kernel,
              K.reloaded, x, clash=True)


def test_a_body_traced_once_keeps_its_first_places():
    # tester23ac F2: a host counter advanced after each declaration in an affine_range (or sequential_range)
    # body moved every iteration's tiles (64 KiB + 2 KiB further each: block 0 of iteration 3 at byte 202752
    # was past SBUF's 229376 B, nki-samples' allocated attention's error). NKI traces such a body once, so each
    # iteration's a and b are placed by the first iteration's allocators: a at bytes 0 / 32768 (block i % 2),
    # b at 65536, four logical tiles each in stats.json.
    x = np.arange(4 * 128 * 512, dtype=np.float32).reshape(4, 128, 512) / 7
    for kind in ("affine_range", "sequential_range"):
        r = tnki.benchmark(K.counter_in_body, x, kind=kind)
        assert r.outputs[0].tobytes() == (2 * x).tobytes(), kind
        got = [(d["tensor"], d["line"], d["allocator"], d["logical_tiles"], d["physical_tiles"])
               for d in r.stats["nki"]["allocation"][0]["direct"]]
        assert got == [
            ("a", "nki_direct.py:%d" % (line_of(SRC, "# rotating") - 1),
             "nki.compiler.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,))", 4,
             [{"partition": 0, "byte": 0}, {"partition": 0, "byte": 32768}]),
            ("b", "nki_direct.py:%d" % line_of(SRC, "# doubled"), "nki.compiler.sbuf.mod_alloc(base_addr=65536)", 4,
             [{"partition": 0, "byte": 65536}]),
        ], (kind, got)
    # static_range is unrolled while NKI traces: each iteration's declarations are its own, at the counter's
    # place then (a: base 6144 * i, block i % 2 of 2048 B; b: base 6144 * i + 4096).
    r = tnki.benchmark(K.counter_in_body, x[:, :, :], kind="small_static")
    assert r.outputs[0].tobytes() == (2 * x).tobytes()
    places = [(d["tensor"], d["physical_tiles"][0]["byte"]) for d in r.stats["nki"]["allocation"][0]["direct"]]
    assert places == [p for i in range(4) for p in (("a", 6144 * i + 2048 * (i % 2)), ("b", 6144 * i + 4096))], places
    # Nested: an affine_range over g around a static_range over j (three declarations in the one trace of g's
    # body, three places: bytes 0, 256, 512) around an affine_range; g = 1 reuses g = 0's three.
    x2 = np.arange(2 * 3 * 128 * 64, dtype=np.float32).reshape(2, 3, 128, 64)
    r = tnki.benchmark(K.counter_nested, x2)
    assert r.outputs[0].tobytes() == (x2 + np.arange(3, dtype=np.float32)[None, :, None, None]).tobytes()
    got = [(d["allocator"], d["logical_tiles"], d["physical_tiles"]) for d in r.stats["nki"]["allocation"][0]["direct"]]
    assert got == [("nki.compiler.sbuf.mod_alloc(base_addr=%d)" % b, 2, [{"partition": 0, "byte": b}])
                   for b in (0, 256, 512)], got
    # Another shape in a later iteration: one trace cannot declare two.
    raises_at(NkiError, "nl.ndarray: [128, 64] float32 here, in iteration 1 of the nl.affine_range loop at "
              "nki_direct.py:%d, but [128, 32] float32 in its iteration 0: NKI traces the loop's body once, so a "
              "tensor it declares has one shape and dtype" % (line_of(SRC, "# grows") - 1), SRC, "# grows",
              tnki.simulate_kernel, K.growing_in_body, np.zeros((128, 64), np.float32))


def test_a_counter_after_a_loop_traced_once():
    # tester23af F2: after an affine_range / sequential_range loop whose body advanced a host counter by 64 KiB
    # after each declaration, a tile declared at the counter was placed at 4 x 64 KiB (past SBUF: "bytes
    # [262144, 264192) ... are outside SBUF's 229376 B"), where NKI's one trace of the body leaves it at 64 KiB.
    x = np.arange(4 * 128 * 512, dtype=np.float32).reshape(4, 128, 512) / 7
    for kind in ("affine_range", "sequential_range"):
        r = tnki.benchmark(K.counter_after_loop, x, kind=kind)
        assert r.outputs[0].tobytes() == x.tobytes() and r.outputs[1].tobytes() == (3 * x[0]).tobytes(), kind
        got = [(d["line"], d["allocator"], d["logical_tiles"], d["physical_tiles"])
               for d in r.stats["nki"]["allocation"][0]["direct"]]
        assert got == [
            ("nki_direct.py:%d" % (line_of(SRC, "cur += 65536") - 1), "nki.compiler.sbuf.mod_alloc(base_addr=0)",
             4, [{"partition": 0, "byte": 0}]),
            ("nki_direct.py:%d" % line_of(SRC, "# after the loop"),
             "nki.compiler.sbuf.mod_alloc(base_addr=65536)", 1, [{"partition": 0, "byte": 65536}]),
        ], (kind, got)
    # static_range and a Python loop are unrolled while NKI traces: the counter is advanced four times.
    for kind in ("static_range", "python"):
        raises_at(NkiError, "nki.compiler.sbuf.mod_alloc(base_addr=262144): its tile: bytes [262144, 264192) of "
                  "each partition are outside SBUF's 229376 B per partition (trn2)", SRC, "# after the loop",
                  tnki.simulate_kernel, K.counter_after_loop, x, kind=kind)


def test_allocator_state_after_a_loop_traced_once():
    # tester23ah F6: after an affine_range / sequential_range loop whose body declared a directly allocated tile,
    # only integer local variables were as its one traced iteration left them; an allocator's state in an
    # object (nki-library's allocator classes: `self.top = ...` in the method the body calls), a list item, a
    # dict value, a dict in a list in an object or a closure's variable still advanced once per iteration, so
    # the tile declared after the loop was at 4 x 64 KiB, past SBUF ("bytes [262144, 264192) of each partition
    # are outside SBUF's 229376 B"), where NKI places it at 64 KiB. Each int the body changed is now as the
    # first iteration left it (a count of tiles in the dict too: 1).
    x = np.arange(4 * 128 * 512, dtype=np.float32).reshape(4, 128, 512) / 7
    for holder in ("method", "attr", "list", "dict", "nested", "closure", "numpy"):
        for kind in ("affine_range", "sequential_range"):
            r = tnki.benchmark(K.state_after_loop, x, holder, kind=kind)
            assert r.outputs[0].tobytes() == x.tobytes() and r.outputs[1].tobytes() == (3 * x[0]).tobytes()
            got = [(d["allocator"], d["logical_tiles"], d["physical_tiles"])
                   for d in r.stats["nki"]["allocation"][0]["direct"]]
            assert got == [("nl.ndarray(address=(0, 0))", 4, [{"partition": 0, "byte": 0}]),
                           ("nl.ndarray(address=(0, 65536))", 1, [{"partition": 0, "byte": 65536}])], (holder, kind,
                                                                                                     got)
    # Unrolled while NKI traces: the state advances four times.
    for kind in ("static_range", "python"):
        raises_at(NkiError, "nl.ndarray(address=(0, 262144)): its tile: bytes [262144, 264192) of each partition "
                  "are outside SBUF's 229376 B per partition (trn2)", SRC, "# after the loop: placed",
                  tnki.simulate_kernel, K.state_after_loop, x, "method", kind=kind)


def test_a_local_the_body_rebinds_to_another_object_is_warned():
    # An allocator the body replaces by a new object each iteration (`cur = cur.past(4096)`) is not set back:
    # the tile after the loop is at 16 KiB (the last iteration's cursor), at 4 KiB on the device; warned at the
    # loop's line.
    x = np.arange(4 * 128 * 512, dtype=np.float32).reshape(4, 128, 512) / 7
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = tnki.benchmark(K.rebound_cursor, x)
    assert r.outputs[0].tobytes() == x.tobytes() and r.outputs[1].tobytes() == x[0].tobytes()
    assert [d["physical_tiles"] for d in r.stats["nki"]["allocation"][0]["direct"]] == [
        [{"partition": 0, "byte": 0}], [{"partition": 0, "byte": 16384}]]
    assert [str(w.message) for w in caught] == [
        "nki_direct.py:%d: nl.affine_range: its body rebinds 'cur' (Cursor), which after the loop is what its last "
        "iteration left, not its first as after NKI's one trace of the body: trnsim sets back only the integers "
        "the body changes (docs/nki.md \"Direct allocation\"), so a tile placed from 'cur' after the loop may lie "
        "elsewhere than on the device" % line_of(SRC, "# rebinds cur")], caught


def test_a_read_where_nothing_wrote_names_the_directly_allocated_tile():
    # tester23ad F3: the warning named the memory's arena, "sbuf 'direct sbuf' [128, 1] float32 allocated at" the
    # line of the test's own simulate_kernel call; it names the block read and the tensor's declaration.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = tnki.simulate_kernel(K.unwritten_block, np.ones((128, 64), np.float32))
    assert np.isnan(got).all(), got[0, :4]
    said = [str(w.message) for w in caught]
    assert said == [
        "nki_direct.py:%d: tensor_scalar reads sbuf 's[1]' [128, 1] float32 allocated at nki_direct.py:%d where no "
        "instruction wrote before (partition 0, byte 0 of the read is the first such): its values are undefined (a "
        "tile starts uninitialised, as numpy.empty's contents; trnsim's memory starts as NaN)" % (
            line_of(SRC, "# unwritten"), line_of(SRC, "# scales") - 1)], said


def test_force_auto_alloc():
    # The lifetime conflict of all_loaded_first is gone when the kernel's allocator is ignored: SBUF blocks of
    # the model's allocation are one tile side by side, no direct placements reported.
    x = np.arange(1024 * 128, dtype=np.float32).reshape(1024, 128)
    r = tnki.benchmark(K.forced, x)
    assert r.outputs[0].tobytes() == x.tobytes()
    (core,) = r.stats["nki"]["allocation"]
    assert "direct" not in core and len(core["sites"]) == 1, core


def test_kernel_wide_rules():
    # The guide's common error 1 (a tile the model would place, in a kernel placing its tiles) and known
    # limitation (an HBM tensor neither input nor returned), each at the line of the tensor breaking it.
    for kernel, marker, message in [
        (K.mixed, "its own tile",
         "sbuf tile u [128, 128] float32 allocated at nki_direct.py:78 (made by activation at nki_direct.py:78) is "
         "allocated automatically while the kernel places sbuf tile t [128, 128] float32 allocated at "
         "nki_direct.py:76 with nki.compiler.sbuf.mod_alloc(base_addr=0): NKI does not mix direct and automatic "
         "allocation"),
        (K.hbm_scratch, "# scratch",
         "hbm tensor s [128, 128] float32 allocated at nki_direct.py:109 is neither an input nor a returned output "
         "of the kernel, which places sbuf tile t [128, 128] float32 allocated at nki_direct.py:110 with "
         "nki.compiler.sbuf.mod_alloc(base_addr=0): with direct allocation NKI allows no other HBM tensor"),
    ]:
        raises_at(NkiError, message, SRC, marker, tnki.simulate_kernel, kernel, np.zeros((128, 128), np.float32))


def test_bad_places():
    # Each checked over every block when the tensor is declared: the error names the declaration's line.
    top = nl.tile_size.total_available_sbuf_size
    for buf, message in [
        (ncc.sbuf.alloc(lambda idx, p, f: (32, 0)),
         "nki.compiler.sbuf.alloc(<lambda>): block (0,): start partition 32 for a tile of 128 partitions: NKI "
         "allows 0"),
        (ncc.sbuf.mod_alloc(base_addr=top - 256),
         f"nki.compiler.sbuf.mod_alloc(base_addr={top - 256}): block (0,): bytes [{top - 256}, {top + 256}) of "
         f"each partition are outside SBUF's {top} B per partition (trn2)"),
        (ncc.psum.mod_alloc(base_bank=7, num_bank_tiles=(2,)),
         "nki.compiler.psum.mod_alloc(base_bank=7, num_bank_tiles=(2,)): block (1,): PSUM bank 8 is not one "
         "of the 8 banks (0-7)"),
        (ncc.psum.mod_alloc(base_bank=0, base_addr=512),
         "block (0,): PSUM start partition 0 and byte address 512: both must be 0"),
        (ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2, 2)),
         "nki.compiler.sbuf.mod_alloc: num_free_tiles=(2, 2) has 2 entries for a tensor with 1 block dims: it "
         "must be empty or have one per block dim"),
        (ncc.sbuf.alloc(lambda idx, p, f: 0), "the allocator returned 0, not 2 integers"),
    ]:
        K.given["buffer"] = buf
        raises_at(NkiError, message, SRC, "# declared", tnki.simulate_kernel, K.placed,
                  np.zeros((128, 128), np.float32))
    e = raises(NkiError, ncc.sbuf.mod_alloc, base_addr=0.5)
    assert "nki.compiler.sbuf.mod_alloc: base_addr=0.5 must be an integer" in str(e), str(e)


if __name__ == "__main__":
    main(globals())
