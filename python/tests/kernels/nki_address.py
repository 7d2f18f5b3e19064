"""Kernels placing their tiles with nl.ndarray(..., address=(partition_offset, free_offset)) (NKI 2.33's
nki.language.ndarray; nki-library's attention_cte places its PSUM tiles at bank starts so), for
python/tests/test_nki_address.py. Written here."""

import nki
import nki.isa as nisa
import nki.language as nl

BANK = 2048  # bytes of a PSUM bank per partition
given = {}  # the address the tests give `placed_at`'s tile


@nki.jit
def matmul(a, b, psum_bank=None):
    # o = a.T @ b; with psum_bank, every tile at a fixed address: a, b, c in SBUF, the product in PSUM bank
    # psum_bank (without, the tiles are placed by trnsim's allocation)
    def at(free):
        return None if psum_bank is None else (0, free)

    o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm, name="o")
    ta = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf, address=at(0))
    tb = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf, address=at(512))
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum, address=at((psum_bank or 0) * BANK))
    tc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf, address=at(2560))
    nisa.dma_copy(dst=ta, src=a)
    nisa.dma_copy(dst=tb, src=b)
    nisa.nc_matmul(dst=acc, stationary=ta, moving=tb)
    nisa.tensor_copy(dst=tc, src=acc)
    nisa.dma_copy(dst=o, src=tc)
    return o


@nki.jit
def placed_at(x):
    # x [128, 128] float32 copied through one tile at given["address"] in given["buffer"]
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 128), dtype=nl.float32, buffer=given["buffer"], address=given["address"])  # declared
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def overlapping(x):
    # u's bytes 256-767 overlap t's 0-511 while t is still to be read
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0))
    u = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf, address=(0, 256))
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=u, src=x)  # overlaps t
    nisa.tensor_tensor(dst=u, data1=u, data2=t, op=nl.add)  # t read here
    nisa.dma_copy(dst=out, src=u)
    return out
