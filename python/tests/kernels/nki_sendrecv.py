"""LNC2 kernels exchanging tiles with nisa.sendrecv, for test_nki_sendrecv.py. Written for this project."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def swap_halves(x, dma=None):
    # x [256, 64]: core c loads rows [128c, 128c + 128) and sends them to the peer; each core stores what it
    # received to its own rows, so out = x with the halves swapped. Core 1 allocates a tile first: its r sits
    # at another SBUF address than core 0's.
    out = nl.ndarray((256, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    if pid == 1:
        pad = nl.zeros((128, 96), dtype=nl.float32)
    t = nl.load(x[pid * 128:(pid + 1) * 128, :])
    r = nl.ndarray((128, 64), dtype=nl.float32)
    nisa.sendrecv(src=t, dst=r, send_to_rank=1 - pid, recv_from_rank=1 - pid, dma_engine=dma)  # MARK-sendrecv
    nl.store(out[pid * 128:(pid + 1) * 128, :], r)
    if pid == 1:
        nl.store(out[128:256, 0:1], nl.copy(pad[:, 0:1]))  # keeps pad alive past the exchange (zeros)
    return out


@nki.jit
def mismatched(x):
    # Core 0 sends 64 columns, core 1 receives into 32: each call's own src and dst agree.
    out = nl.ndarray((256, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    r = nl.zeros((128, 64), dtype=nl.float32)
    if pid == 0:
        t = nl.load(x[0:128, 0:64])
        nisa.sendrecv(src=t, dst=r[:, 0:64], send_to_rank=1, recv_from_rank=1, pipe_id=0)  # MARK-core0
    else:
        t = nl.load(x[128:256, 0:32])
        nisa.sendrecv(src=t, dst=r[:, 0:32], send_to_rank=0, recv_from_rank=0, pipe_id=0)  # MARK-core1
    nl.store(out[pid * 128:(pid + 1) * 128, :], r)
    return out


@nki.jit
def masked_tile(x, held=False):
    # Each core sends a [128, 64] tile whose masked load wrote rows 0-39 (its rows of x) and stores what it
    # received; held: into a dst of the 40 rows the tile holds, the rest of r zeros.
    out = nl.ndarray((256, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    t = nl.load(x[pid * 128 + i_p, i_f], mask=(i_p < 40))
    r = nl.zeros((128, 64), dtype=nl.float32)
    nisa.sendrecv(src=t, dst=r[0:40, :] if held else r, send_to_rank=1 - pid, recv_from_rank=1 - pid)  # MARK-masked
    nl.store(out[pid * 128:(pid + 1) * 128, :], r)
    return out
