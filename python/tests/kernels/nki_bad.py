"""Kernels that break one rule each (python/tests/test_nki_errors.py): every error must name its line."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def unsupported_call(x):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    s = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.range_select(s, t, nl.greater, nl.less, t, t)  # MARK-unsupported
    return x


@nki.jit
def wrong_shapes(x):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    u = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_tensor(dst=u, data1=t, data2=t, op=nl.add)  # MARK-shapes
    return x


@nki.jit
def out_of_bounds(x):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[:, 32:96])  # MARK-oob
    return x


@nki.jit
def psum_too_big(x):
    p = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)  # MARK-psum
    return x


@nki.jit
def sbuf_too_full(x):
    a = nl.ndarray((128, 32768), dtype=nl.float32, buffer=nl.sbuf)
    b = nl.ndarray((128, 32768), dtype=nl.float32, buffer=nl.sbuf)  # MARK-sbuf-full
    nisa.memset(dst=a, value=0.0)
    nisa.memset(dst=b, value=0.0)
    nisa.tensor_copy(dst=a[:, 0:64], src=b[:, 0:64])
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=a[:, 0:64])
    return out


@nki.jit
def partitions_over_128(x):
    t = nl.ndarray((256, 64), dtype=nl.float32, buffer=nl.sbuf)  # MARK-partitions
    return x


@nki.jit
def python_exception(x):
    n = x.shape[0] // 0  # MARK-exception
    return x


@nki.jit
def hardware_rule(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x)
    p = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
    nisa.tensor_copy(dst=p, src=a, engine=nisa.gpsimd_engine)  # MARK-rule: GpSimd cannot write PSUM
    nisa.dma_copy(dst=out, src=a)
    return out


@nki.jit
def copy_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def unwritten_output(x):
    y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    return y  # MARK-unwritten


@nki.jit
def returns_none(x):  # MARK-returns-none
    y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=y, src=t)


@nki.jit
def returns_a_slice(x):
    o = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm, name="o")
    nl.store(o, nl.load(x))
    return o[64:128, 0:8]  # MARK-returns-slice


@nki.jit
def unimplemented_language_name(x):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    u = nl.tan(t)  # MARK-unimplemented-nl
    return x


@nki.jit
def zeros_over_128(x):
    z = nl.zeros((256, 64), dtype=nl.float32, buffer=nl.sbuf)  # MARK-zeros
    return x


def _psum_tiles(tiles):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for p in tiles:
        nisa.tensor_tensor(dst=acc, data1=acc, data2=p, op=nl.add)
    nisa.dma_copy(dst=out, src=acc[:, 0:64])
    return out


@nki.jit
def nine_psum_tiles_one_line(x):
    tiles = [nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(9)]  # MARK-psum-9
    return _psum_tiles(tiles)


@nki.jit
def sbuf_tile_over_the_sbuf(x):
    # 120 blocks of [128, 512] float32: 245,760 B per partition, over Trn2's 229,376; a tile declared after it
    # is alive later in its life, not when it is placed.
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    s = nl.ndarray((120, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.sbuf)  # MARK-sbuf-big
    for i in nl.affine_range(120):
        nisa.memset(dst=s[i], value=0.0)
    acc = nl.copy(s[0])  # MARK-sbuf-later
    nl.store(out, acc[:, 0:64])
    return out


@nki.jit
def nine_psum_tiles(x):
    p0 = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)  # MARK-psum-a
    p1 = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    p2 = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    p3 = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    p4 = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    p5 = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    p6 = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    p7 = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    p8 = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)  # MARK-psum-i
    return _psum_tiles([p0, p1, p2, p3, p4, p5, p6, p7, p8])


@nki.jit
def output_named_a_path(x):
    # Its output would be written as OUT/../victim.npy, outside the run's folder.
    y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm, name="../victim")
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=y, src=t)
    return y  # MARK-output-path


@nki.jit
def output_named_stats(x):
    # OUT/stats.npy would sit beside trnsim's own stats.json.
    y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm, name="stats")
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=y, src=t)
    return y  # MARK-output-stats
