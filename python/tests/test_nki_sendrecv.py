"""nisa.sendrecv under LNC2: the two cores' n-th calls pair up (the builder's pairing, one check for C++ and
Python kernels). Core 0 sending 64 columns into core 1's dst of 32 is a RuleError naming both calls' lines,
from Python and from `trnsim run` (main wrote past core 1's dst and exited 3 on the numerics); tiles at
different SBUF addresses on the two cores exchange correctly (main wrote into the peer at this core's dst
address)."""

import json
import os
import subprocess

import numpy as np

from runner import KERNELS, line_of, main, raises, tmpdir, trnsim_exe, warned

import trnsim
import trnsim.nki as tnki

import nki_sendrecv as K

SRC = os.path.join(KERNELS, "nki_sendrecv.py")
X = np.arange(256 * 64, dtype=np.float32).reshape(256, 64)


def test_exchange_between_tiles_at_different_addresses():
    out = tnki.simulate_kernel(K.swap_halves[2], X)
    want = np.concatenate([X[128:], X[:128]])
    want[128:256, 0] = 0.0  # core 1's store of pad's first column (zeros) over its rows' first column
    assert out.tobytes() == want.tobytes(), np.argwhere(out != want)[:5]



def test_dma_engine_enum():
    # nki.isa.dma_engine is NKI's enum of sendrecv's DMA (dma, gpsimd_dma); trnsim had it as engine.dma, so
    # sendrecv(dma_engine=nisa.dma_engine.dma) failed ("not a compute engine") and .gpsimd_dma was an
    # AttributeError. The default DMA runs; GpSimd's internal DMA is NkiUnsupported at the call's line.
    import nki.isa as nisa

    want = tnki.simulate_kernel(K.swap_halves[2], X)
    assert tnki.simulate_kernel(K.swap_halves[2], X, dma=nisa.dma_engine.dma).tobytes() == want.tobytes()
    e = raises(tnki.NkiUnsupported, tnki.simulate_kernel, K.swap_halves[2], X, dma=nisa.dma_engine.gpsimd_dma)
    assert str(e).startswith(f"nki_sendrecv.py:{line_of(SRC, 'MARK-sendrecv')}: nki.isa.sendrecv(dma_engine="
                             "nki.isa.dma_engine.gpsimd_dma) is not modelled by trnsim: GpSimd's internal DMA"), e

def test_a_masked_tile_is_sent_whole():
    # A [128, 64] tile whose masked load wrote 40 rows, sent into a [128, 64] dst: it was "sendrecv on SP:
    # element count: src has 2560 elements, dst has 8192" (the held part's count). NKI's tile is [128, 64]: sent
    # whole, its 88 unwritten rows read with the simulator's warning (NaN here). Into a dst of its 40 rows, those.
    out, ws = warned(tnki.simulate_kernel, K.masked_tile[2], X)
    want = np.full((256, 64), np.nan, np.float32)
    want[0:40], want[128:168] = X[128:168], X[0:40]
    assert np.array_equal(out, want, equal_nan=True), np.argwhere(~np.isclose(out, want, equal_nan=True))[:5]
    assert out[0:40].tobytes() == X[128:168].tobytes() and out[128:168].tobytes() == X[0:40].tobytes()
    line = line_of(SRC, "MARK-masked")
    assert ws == [f"nki_sendrecv.py:{line}: sendrecv reads sbuf 't' [128, 64] float32 allocated at "
                  f"nki_sendrecv.py:{line - 2} where no instruction wrote before (partition 40, byte 0 of the read "
                  "is the first such): its values are undefined (a tile starts uninitialised, as numpy.empty's "
                  "contents; trnsim's memory starts as NaN)"], ws
    want = np.zeros((256, 64), np.float32)
    want[0:40], want[128:168] = X[128:168], X[0:40]
    out = tnki.simulate_kernel(K.masked_tile[2], X, held=True)
    assert out.tobytes() == want.tobytes(), np.argwhere(out != want)[:5]


def message(core0, core1):
    return (f"nki_sendrecv.py:{core0}: sendrecv: element count: sendrecv 1 of core 0 sends src "), (
        f"(8192 elements) to core 1, whose sendrecv 1 at nki_sendrecv.py:{core1} receives into dst"), \
        "(4096 elements); the two cores' n-th sendrecvs must move as many elements each way"


def test_mismatched_sizes_name_both_lines():
    c0, c1 = line_of(SRC, "MARK-core0"), line_of(SRC, "MARK-core1")
    e = raises(trnsim.RuleError, tnki.simulate_kernel, K.mismatched[2], X)
    for part in message(c0, c1):
        assert part in str(e), (part, str(e))
    d = tmpdir()
    w = {"name": "sr", "hardware": "trn2", "lnc": 2, "kernel": {"nki": SRC, "function": "mismatched"},
         "inputs": {"x": {"generator": "normal", "seed": 1, "shape": [256, 64], "dtype": "float32"}}}
    with open(os.path.join(d, "w.json"), "w") as f:
        json.dump(w, f)
    p = subprocess.run([trnsim_exe(), "run", os.path.join(d, "w.json"), "--out", os.path.join(d, "o")],
                       capture_output=True, text=True)
    assert p.returncode == 1, (p.returncode, p.stderr)
    for part in message(c0, c1):
        assert part in p.stderr, (part, p.stderr)


if __name__ == "__main__":
    main(globals())
