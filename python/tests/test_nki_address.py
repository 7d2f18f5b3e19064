"""nl.ndarray(..., address=(partition_offset, free_offset)) (NKI 2.33's nki.language.ndarray: a fixed place in SBUF
or PSUM, the free offset in bytes of each partition, PSUM's banks side by side): the tile is placed there as
direct allocation places its tiles (_direct.py), with its rules and errors at the declaration's line; tiles on
shared bytes alive at once are the guide's lifetime conflict."""

import os

import numpy as np

from runner import KERNELS, line_of, main, raises, raises_at

import trnsim.nki as tnki
from trnsim.nki import NkiError, NkiUnsupported

import nki.language as nl
import nki_address as K

SRC = os.path.join(KERNELS, "nki_address.py")
RNG = np.random.default_rng(5)
A = RNG.standard_normal((128, 128)).astype(np.float32)
B = RNG.standard_normal((128, 512)).astype(np.float32)
X = np.arange(128 * 128, dtype=np.float32).reshape(128, 128)


def test_tiles_at_their_addresses():
    auto = tnki.benchmark(K.matmul, A, B)
    r = tnki.benchmark(K.matmul, A, B, 5)
    assert r.outputs[0].tobytes() == auto.outputs[0].tobytes()
    (core,) = r.stats["nki"]["allocation"]
    got = {d["tensor"]: (d["allocator"], d["physical_tiles"]) for d in core["direct"]}
    # PSUM free offset 5 * 2048 is bank 5's start; SBUF offsets are bytes of each partition.
    assert got == {
        "ta": ("nl.ndarray(address=(0, 0))", [{"partition": 0, "byte": 0}]),
        "tb": ("nl.ndarray(address=(0, 512))", [{"partition": 0, "byte": 512}]),
        "acc": ("nl.ndarray(address=(0, 10240))", [{"bank": 5, "partition": 0, "byte": 0}]),
        "tc": ("nl.ndarray(address=(0, 2560))", [{"partition": 0, "byte": 2560}]),
    }, got


def test_a_psum_tile_inside_a_bank():
    # Bytes 1024-1535 of bank 3 (free offset 3 * 2048 + 1024): a [128, 128] float32 tile is 512 B per partition.
    K.given.update(buffer=nl.psum, address=(0, 3 * 2048 + 1024))
    r = tnki.benchmark(K.placed_at, X)
    assert r.outputs[0].tobytes() == X.tobytes()
    (d,) = r.stats["nki"]["allocation"][0]["direct"]
    assert d["physical_tiles"] == [{"bank": 3, "partition": 0, "byte": 1024}], d


def test_bad_addresses():
    top = nl.tile_size.total_available_sbuf_size
    for buf, address, message in [
        (nl.psum, (0, 2048 + 1792), "nl.ndarray(address=(0, 3840)): the tile's bytes [1792, 2304) of bank 1 "
                                    "cross the bank's end (2048 B): a PSUM tile lies in one bank"),
        (nl.psum, (0, 8 * 2048), "nl.ndarray(address=(0, 16384)): free offset 16384 is past PSUM's 16384 B per "
                                 "partition (8 banks of 2048 B)"),
        (nl.sbuf, (0, top - 256), f"nl.ndarray(address=(0, {top - 256})): its tile: bytes [{top - 256}, {top + 256}) of "
                                  f"each partition are outside SBUF's {top} B per partition (trn2)"),
        (nl.sbuf, (32, 0), "nl.ndarray(address=(32, 0)): its tile: start partition 32 for a tile of 128 partitions: "
                           "NKI allows 0"),
        (nl.psum, (32, 0), "nl.ndarray(address=(32, 0)): start partition 32 for a tile of 128 partitions: NKI "
                           "allows 0"),
        (nl.sbuf, (0,), "nl.ndarray(address=(0,)): an SBUF or PSUM address is 2 integers (partition_offset, "
                        "free_offset)"),
        (nl.sbuf, (0, -512), "nl.ndarray(address=(0, -512)): offsets must not be negative"),
    ]:
        K.given.update(buffer=buf, address=address)
        raises_at(NkiError, message, SRC, "# declared", tnki.simulate_kernel, K.placed_at, X)
    K.given.update(buffer=nl.shared_hbm, address=(0,))
    raises_at(NkiUnsupported, "nl.ndarray(address=...) in HBM is not modelled by trnsim: HBM tensors are placed "
              "by name, not by address", SRC, "# declared", tnki.simulate_kernel, K.placed_at, X)


def test_overlapping_tiles_alive_at_once():
    raises_at(NkiError, "u (partitions 0-127, bytes 256-767 of SBUF) is first used here while t (partitions 0-127, "
              "bytes 0-511), on bytes it shares, is alive until nki_address.py:%d" % line_of(SRC, "t read here"),
              SRC, "overlaps t", tnki.simulate_kernel, K.overlapping, X)


def test_an_address_and_an_allocator_are_one_too_many():
    import nki.compiler as ncc

    K.given.update(buffer=ncc.sbuf.mod_alloc(base_addr=0), address=(0, 0))
    e = raises(NkiError, tnki.simulate_kernel, K.placed_at, X)
    assert "nl.ndarray(address=(0, 0)): buffer=nki.compiler.sbuf.mod_alloc(base_addr=0) places the tensor " \
           "already: give address= or the allocator" in str(e), str(e)


if __name__ == "__main__":
    main(globals())
