"""NKI kernels with masks (tile masking: tail tiles, free-dim masks, masks on compute calls), for
test_nki_masks.py. Written for this project, in the style NKI's docs describe for masks."""

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def tail_rows(x):
    # Tiles of 128 rows over a [200, 64] input, the last masked to its 72 rows; nothing computes on the mask
    # but the load and the store. Rows 200..255 of the [256, 64] output are zeroed first and must stay so.
    out = nl.ndarray((256, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out[200:256, :], value=nl.zeros((56, 64), dtype=x.dtype, buffer=nl.sbuf))
    i_f = nl.arange(64)[None, :]
    for t in nl.affine_range(2):
        i_p = nl.arange(128)[:, None]
        tile = nl.load(x[t * 128 + i_p, i_f], mask=(t * 128 + i_p < 200))
        y = nl.multiply(tile, 3.0)
        nl.store(out[t * 128 + i_p, i_f], value=y, mask=(t * 128 + i_p < 200))
    return out


@nki.jit
def tail_rows_1d(x):
    # The 1-D form: nl.arange without new axes, a [200] vector in tiles of 128.
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(2):
        i = t * 128 + nl.arange(128)
        tile = nl.load(x[i], mask=(i < x.shape[0]))
        nl.store(out[i], value=tile, mask=(i < x.shape[0]))
    return out


@nki.jit
def tail_cols(x):
    # A [128, 100] input in column tiles of 64, the last masked on the free dim to 36 columns; the add is
    # masked too, and the store also drops rows 120..127 (a mask on both dims), which stay zero.
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out[120:128, :], value=nl.zeros((8, 100), dtype=x.dtype, buffer=nl.sbuf))
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    for t in nl.affine_range(2):
        tile = nl.load(x[i_p, t * 64 + i_f], mask=(t * 64 + i_f < 100))
        y = nl.add(tile, tile, mask=(t * 64 + i_f < 100))
        nl.store(out[i_p, t * 64 + i_f], value=y, mask=(t * 64 + i_f < 100) & (i_p < 120))
    return out


@nki.jit
def assigned_tail(x):
    # `buf[...] = nl.load(..., mask=...)` writes the masked-in part of buf: rows on a [200, 64] input, then
    # columns on its first 128 rows in tiles of 48 (the last 16 wide); nothing else is written.
    out = nl.ndarray((200, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    cols = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    j = nl.arange(48)[None, :]
    for t in nl.affine_range(2):
        buf = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
        buf[...] = nl.load(x[t * 128 + i_p, i_f], mask=(t * 128 + i_p < 200))
        nl.store(out[t * 128 + i_p, i_f], value=buf, mask=(t * 128 + i_p < 200))
        part = nl.ndarray((128, 48), dtype=x.dtype, buffer=nl.sbuf)
        part[i_p, j] = nl.load(x[i_p, t * 48 + j], mask=(t * 48 + j < 64))
        nl.store(cols[i_p, t * 48 + j], value=part[i_p, j], mask=(t * 48 + j < 64))
    return out, cols


@nki.jit
def grid_tail(x):
    # nl.mgrid's grid named by its axes (grid.p, grid.x), a [128, 1000] input in column tiles of 512.
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        g = nl.mgrid[0:128, 0:512]
        tile = nl.load(x[g.p, i * 512 + g.x], mask=(i * 512 + g.x < 1000))
        nl.store(out[g.p, i * 512 + g.x], value=tile, mask=(i * 512 + g.x < 1000))
    return out


@nki.jit
def isa_masks(x):
    # nki.isa calls of the earlier style with mask=, on the tail tile of a [200, 64] input, and bounds with
    # <=, >, >= and a coefficient: the store of the last call keeps columns 8..55 of rows 0..63 only.
    out = nl.ndarray((200, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    for t in nl.affine_range(2):
        m = t * 128 + i_p <= 199
        a = nl.load(x[t * 128 + i_p, i_f], mask=m)
        b = nisa.tensor_tensor(a, a, op=nl.add, mask=m)
        c = nisa.tensor_scalar(b, np.multiply, 3.0, mask=m)
        d = nisa.tensor_copy(c, mask=m)
        e = nisa.activation(op=nl.copy, data=d, mask=m)
        nisa.dma_copy(dst=out[t * 128 + i_p, i_f], src=e, mask=m)
    z = nl.zeros((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=out[i_p, i_f], src=z, mask=(i_f > 7) & (2 * i_f < 112) & (-i_p >= -63))
    return out


@nki.jit
def skipped_store(x):
    # A store whose mask selects nothing: NKI emits no instruction (its index, outside the output, is then
    # never checked).
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(x))
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    nl.store(out[128 + i_p, i_f], value=nl.zeros((128, 64), dtype=x.dtype, buffer=nl.sbuf),
             mask=(128 + i_p < 128))
    return out


@nki.jit
def iota_and_where(x):
    # nisa.iota and nl.where with masks: each result is its masked-in region (stored without a mask).
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    nl.store(out, value=nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf))
    t = nisa.iota(2 * i_p + i_f + 5, dtype=nl.float32, mask=(i_p < 96) & (i_f >= 10))
    nl.store(out[0:96, 10:64], value=t)
    c = nl.load(x)
    w = nl.where(c, c, 7.0, mask=(i_p >= 96))
    nl.store(out[96:128, :], value=w)
    return out


@nki.jit
def unmasked_tail(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    for t in nl.affine_range(2):
        tile = nl.load(x[t * 128 + i_p, i_f])  # MARK-unmasked
        nl.store(out[t * 128 + i_p, i_f], value=tile, mask=(t * 128 + i_p < 200))
    return out


@nki.jit
def loose_mask(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    for t in nl.affine_range(2):
        tile = nl.load(x[t * 128 + i_p, i_f], mask=(t * 128 + i_p < 230))  # MARK-loose
        nl.store(out[t * 128 + i_p, i_f], value=tile, mask=(t * 128 + i_p < 200))
    return out


@nki.jit
def or_mask(x):
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    return nl.load(x[i_p, i_f], mask=(i_p < 100) | (i_f < 3))  # MARK-or


@nki.jit
def and_mask(x):
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    return nl.load(x[i_p, i_f], mask=(i_p < 100) and (i_f < 3))  # MARK-and


@nki.jit
def chained_mask(x):
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    return nl.load(x[i_p, i_f], mask=(0 <= i_p < 100))  # MARK-chained


@nki.jit
def two_var_mask(x):
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    return nl.load(x[i_p, i_f], mask=(i_p + i_f < 100))  # MARK-two-var


@nki.jit
def two_var_and_mask(x):
    # MaxPool2D's padding mask: bounds on two variables combined with &.
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    return nl.load(x[i_p, i_f], mask=(i_p + i_f >= 0) & (i_p + i_f < 100))  # MARK-two-var-and


@nki.jit
def bound_and_two_var_mask(x):
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    return nl.load(x[i_p, i_f], mask=(i_p < 100) & (i_p - i_f < 100))  # MARK-bound-and-two-var


@nki.jit
def combined_affine_pred(x):
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    t = nl.load(x[0:128, :])
    return nisa.affine_select((i_p >= i_f) & (i_p < i_f + 8), t, 0.0)  # MARK-affine-and


@nki.jit
def eq_mask(x):
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    return nl.load(x[i_p, i_f], mask=(i_p == 3))  # MARK-eq


@nki.jit
def tile_mask(x):
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    t = nl.load(x[i_p, i_f])
    return nl.load(x[i_p, i_f], mask=t)  # MARK-tile


@nki.jit
def foreign_var_mask(x):
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    j = nl.arange(32)[:, None]
    return nl.load(x[i_p, i_f], mask=(j < 3))  # MARK-foreign


@nki.jit
def empty_load(x):
    out = nl.ndarray((200, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    for t in nl.affine_range(3):
        tile = nl.load(x[t * 128 + i_p, i_f], mask=(t * 128 + i_p < 200))  # MARK-empty
        nl.store(out[t * 128 + i_p, i_f], value=tile, mask=(t * 128 + i_p < 200))
    return out


@nki.jit
def masked_compute_assigned(x):
    # `buf[i_p, i_f] = <masked compute>`: the instruction writes the masked-in region of buf[i_p, i_f] only
    # (x is [64, 16]; buf and buf2 are zeroed first).
    out = nl.ndarray((2, 64, 16), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(16)[None, :]
    t = nl.load(x)
    buf = nl.zeros((64, 16), dtype=x.dtype, buffer=nl.sbuf)
    buf[i_p, i_f] = nl.multiply(t[i_p, i_f], 2.0, mask=(i_p < 32) & (i_f < 5))
    buf2 = nl.zeros((64, 16), dtype=x.dtype, buffer=nl.sbuf)
    buf2[i_p, i_f] = nisa.tensor_scalar(t[i_p, i_f], np.multiply, 3.0, mask=(i_p >= 32) & (i_f >= 8))
    nl.store(out[0], value=buf)
    nl.store(out[1], value=buf2)
    return out


@nki.jit
def tighter_masks(x):
    # A [200, 64] input in tiles of 128 rows, loaded with the tail mask (rows < 200) and then computed and
    # stored under a tighter one (rows < 150): the compute and the store take their part of the loaded tile.
    out = nl.ndarray((200, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out[128:200, :], value=nl.zeros((72, 64), dtype=x.dtype, buffer=nl.sbuf))
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    for t in nl.affine_range(2):
        tile = nl.load(x[t * 128 + i_p, i_f], mask=(t * 128 + i_p < 200))
        y = nl.multiply(tile, 2.0, mask=(t * 128 + i_p < 150))
        nl.store(out[t * 128 + i_p, i_f], value=y, mask=(t * 128 + i_p < 150))
    return out


@nki.jit
def unmasked_between_masks(x):
    # The same with the computes unmasked (an operator, an nki.isa call of the earlier style, nl.copy): each
    # result holds the loaded part of the index space, so the tighter store takes its part of it, as of the
    # loaded tile (refused: "dim 0 of operand [72, 64] is neither the masked operand's (128) nor its
    # masked-in extent (22)"). On the free dim too: columns < 40 of a load masked to columns < 64.
    out = nl.ndarray((200, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    cols = nl.ndarray((128, 96), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out[128:200, :], value=nl.zeros((72, 64), dtype=x.dtype, buffer=nl.sbuf))
    nl.store(cols[:, 40:96], value=nl.zeros((128, 56), dtype=x.dtype, buffer=nl.sbuf))
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    j = nl.arange(48)[None, :]
    for t in nl.affine_range(2):
        tile = nl.load(x[t * 128 + i_p, i_f], mask=(t * 128 + i_p < 200))
        y = tile * 2.0
        z = nisa.tensor_tensor(y, tile, op=nl.add)
        nl.store(out[t * 128 + i_p, i_f], value=nl.copy(z), mask=(t * 128 + i_p < 150))
        part = nl.load(x[i_p, t * 48 + j], mask=(t * 48 + j < 64))
        nl.store(cols[i_p, t * 48 + j], value=nl.negative(part), mask=(t * 48 + j < 40))
    return out, cols


@nki.jit
def unmasked_result_assigned(x):
    # `buf[...] = <unmasked compute of a masked load>` writes the loaded part of buf (refused: "cannot assign
    # a [72, 64] tile to a [128, 64] region").
    out = nl.ndarray((200, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    buf = nl.zeros((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    for t in nl.affine_range(2):
        tile = nl.load(x[t * 128 + i_p, i_f], mask=(t * 128 + i_p < 200))
        buf[...] = nl.multiply(tile, 2.0)
        nl.store(out[t * 128 + i_p, i_f], value=buf, mask=(t * 128 + i_p < 200))
    return out


@nki.jit
def masked_with_whole_tiles(x, w):
    # A masked load's tile combined, unmasked, with whole [128, 64] tiles (an operand, a dst=, an
    # accumulator): in NKI the loaded tile has the whole shape, its masked-out rows holding whatever was
    # there, so the results' masked-out rows are unspecified; each call computes the masked-in rows (was
    # refused: "nl.add: operands [128, 64] and [72, 64] do not broadcast", "activation: dst [128, 64] and
    # data [72, 64] must have the same partitions").
    out = nl.ndarray((200, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    act = nl.ndarray((200, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(64)[None, :]
    wt = nl.load(w)
    for t in nl.affine_range(2):
        i_p = t * 128 + nl.arange(128)[:, None]
        tile = nl.load(x[i_p, i_f], mask=(i_p < 200))
        z = nl.subtract(nl.add(wt, tile), nl.multiply(tile, wt))
        buf = nl.zeros((128, 64), dtype=x.dtype, buffer=nl.sbuf)  # (rows 72+ read below: set)
        nisa.activation(dst=buf, op=nl.copy, data=tile, scale=2.0)
        acc = nl.zeros((128, 64), dtype=x.dtype, buffer=nl.sbuf)
        acc += tile
        nisa.tensor_tensor(dst=buf, data1=buf, data2=acc, op=nl.add)
        nl.store(out[i_p, i_f], value=z, mask=(i_p < 200))
        nl.store(act[i_p, i_f], value=buf, mask=(i_p < 200))
    return out, act


@nki.jit
def looser_than_an_unmasked_compute(x):
    out = nl.ndarray((200, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    for t in nl.affine_range(2):
        tile = nl.load(x[t * 128 + i_p, i_f], mask=(t * 128 + i_p < 150))  # MARK-loaded-150
        y = nl.exp(tile)
        nl.store(out[t * 128 + i_p, i_f], value=y, mask=(t * 128 + i_p < 200))  # MARK-wider-store
    return out


@nki.jit
def plain_tile_under_mask(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    part = nl.zeros((72, 64), dtype=x.dtype, buffer=nl.sbuf)
    nl.store(out[i_p, i_f], value=part, mask=(i_p < 22))  # MARK-neither
    return out


@nki.jit
def looser_compute_mask(x):
    out = nl.ndarray((200, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    for t in nl.affine_range(2):
        tile = nl.load(x[t * 128 + i_p, i_f], mask=(t * 128 + i_p < 150))
        y = nl.multiply(tile, 2.0, mask=(t * 128 + i_p < 200))  # MARK-looser
        nl.store(out[t * 128 + i_p, i_f], value=y, mask=(t * 128 + i_p < 200))
    return out


@nki.jit
def scalar_stores(x):
    # nl.store of a number: the whole [200, 64] output set to 0, then rows 10..19 of columns 0..7 to 1.5.
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out[0:128, :], value=0)
    nl.store(out[128:200, :], value=0)
    i_p = nl.arange(16)[:, None]
    i_f = nl.arange(64)[None, :]
    nl.store(out[10 + i_p, i_f], value=1.5, mask=(i_p < 10) & (i_f < 8))
    return out


@nki.jit
def mid_tile_store(x):
    # A masked store of rows 3..127 of a tile, and a DMA into partitions 100..127: DMAs start at any
    # partition (the compute engines' start rule is not theirs).
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    t = nl.load(x[0:128, :])
    buf = nl.zeros((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=buf[100:128, :], src=x[0:28, :])
    nl.store(out[i_p, i_f], value=t, mask=(i_p >= 3))
    nl.store(out[0:3, :], value=buf[100:103, :])
    return out


@nki.jit
def engine_mid_tile_mask(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    t = nl.load(x[0:128, :])
    y = nl.multiply(t[i_p, i_f], 2.0, mask=(i_p >= 100))  # MARK-engine-start
    nl.store(out[i_p, i_f], value=y, mask=(i_p >= 100))
    return out


@nki.jit
def negated_mask(x):
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    return nl.load(x[i_p, i_f], mask=~(i_p < 5))  # MARK-negated


@nki.jit
def dst_call_with_mask(x):
    i_p = nl.arange(128)[:, None]
    t = nl.load(x[0:128, :])
    buf = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=buf, src=t, mask=(i_p < 5))  # MARK-dst-mask
    return buf


@nki.jit
def reversed_access(x):
    # Indices that step backwards (a negative coefficient, a negative slice step) on x [200, 64]: rows 63..0
    # of HBM (the DMA's row step is negative), columns 15..0 of an SBUF tile (the copy's free step), and
    # rows 127..0 with columns 63..0 by slices and by a masked index (its first 100 rows: rows 127..28).
    out = nl.ndarray((3, 128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(64)[None, :]
    nl.store(out[0, 0:64, :], value=nl.load(x[63 - i_p, i_f]))
    nl.store(out[0, 64:128, :], value=nl.zeros((64, 64), dtype=x.dtype, buffer=nl.sbuf))
    t = nl.load(x[0:128, :])
    j_p = nl.arange(128)[:, None]
    j_f = nl.arange(16)[None, :]
    nl.store(out[1, :, 0:16], value=nl.copy(t[j_p, 15 - j_f]))
    u = nl.load(x[127::-1, ::-1])
    nl.store(out[2], value=u)
    nl.store(out[1, :, 16:64], value=nl.load(x[127 - j_p, 63 - nl.arange(48)[None, :]], mask=(j_p < 100)),
             mask=(j_p < 100))
    nl.store(out[1, 100:128, 16:64], value=nl.zeros((28, 48), dtype=x.dtype, buffer=nl.sbuf))
    return out


@nki.jit
def reversed_partitions(x):
    out = nl.ndarray((64, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(64)[None, :]
    t = nl.load(x[0:64, :])
    nl.store(out, value=nl.copy(t[63 - i_p, i_f]))  # MARK-reversed-partition
    return out


@nki.jit
def copy_into_its_source(x):
    # `t[...] = nl.copy(...)` whose destination overlaps its source, on x [128, 16]: a shift by one column and
    # a reversal, each as NumPy's assignment (the copy's result first, then the assignment).
    out = nl.ndarray((2, 128, 16), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    t[:, 1:16] = nl.copy(t[:, 0:15])
    nl.store(out[0], value=t)
    u = nl.load(x)
    u[:, ::-1] = nl.copy(u, dtype=x.dtype)
    nl.store(out[1], value=u)
    return out


@nki.jit
def masked_results_assigned(x):
    # Each nki.isa call of the earlier style that takes mask= and returns a new tile (and nl.sum, nl.mean),
    # masked to the 72 rows of the tail tile of a [200, 64] input and assigned into a region of the whole
    # tile's shape: the mask limits the rows written, the rest of each (zeroed) region stays zero. out[0] is
    # the same calls unmasked, for comparison (on a tile whose rows 72-127 are zero).
    out = nl.ndarray((2, 9, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    i_s = nl.arange(6)[None, :]
    t = nl.load(x[128 + i_p, i_f], mask=(128 + i_p < 200))
    for k in nl.static_range(2):
        m = i_p < 72 if k else i_p < 128
        tile = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        tile[...] = t
        stats = nl.zeros((128, 6), dtype=nl.float32, buffer=nl.sbuf)
        stats[i_p, i_s] = nisa.bn_stats(tile[i_p, i_f], mask=m, dtype=nl.float32)
        aggr = nl.zeros((128, 2), dtype=nl.float32, buffer=nl.sbuf)
        aggr[...] = nisa.bn_aggr(stats, mask=m, dtype=nl.float32)
        red = nl.zeros((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        red[...] = nisa.tensor_reduce(np.add, tile[i_p, i_f], axis=1, keepdims=True, mask=m)
        ones = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        ones[...] = nisa.memset((128, 64), 1.0, nl.float32, mask=m)
        io = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        io[...] = nisa.iota(i_p * 64 + i_f, dtype=nl.float32, mask=m)
        tp = nl.zeros((64, 128), dtype=nl.float32, buffer=nl.psum)
        tp[...] = nisa.nc_transpose(tile[i_p, i_f], mask=m)
        sm = nl.zeros((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        sm[...] = nl.sum(tile[i_p, i_f], axis=1, keepdims=True, mask=m)
        mx = nl.zeros((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        mx[...] = nl.mean(tile, axis=1, keepdims=True, mask=m)
        rows = [stats, aggr, red, ones, io, tp[0:64, 0:64], tp[0:64, 64:128], sm, mx]
        for j in nl.static_range(9):
            r = rows[j]
            buf = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
            buf[0:r.shape[0], 0:r.shape[1]] = nisa.tensor_copy(r)
            nl.store(out[k, j], value=buf)
    return out


@nki.jit
def masked_matmul_assigned(a, b):
    # a [64, 128] (K, M) and b [64, 96] (K, N); the mask keeps columns 8-95 of N: the [128, 88] product goes to
    # those columns of the zeroed PSUM tile, columns 0-7 stay zero.
    out = nl.ndarray((128, 96), dtype=nl.float32, buffer=nl.shared_hbm)
    i_k = nl.arange(64)[:, None]
    i_m = nl.arange(128)[None, :]
    i_n = nl.arange(96)[None, :]
    ta = nl.load(a)
    tb = nl.load(b)
    ps = nl.zeros((128, 96), dtype=nl.float32, buffer=nl.psum)
    ps[...] = nisa.nc_matmul(ta[i_k, i_m], tb[i_k, i_n], mask=(i_n >= 8))
    nl.store(out, nl.copy(ps))
    return out


@nki.jit
def masked_results_reindexed(x):
    # Index expressions on a masked result address the call's whole index space (columns 16..63 held here):
    # the later, tighter mask takes columns 16..47 of it, not its first 32 held columns.
    out = nl.ndarray((2, 128, 64), nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    nl.store(out[0], 0.0)
    nl.store(out[1], 0.0)
    t = nl.load(x[i_p, i_f], mask=(i_f >= 16))
    v = nl.multiply(t[i_p, i_f], 3.0, mask=(i_f >= 16))
    w = nl.add(v[i_p, i_f], 1.0, mask=(i_f >= 16) & (i_f < 48))
    nl.store(out[0, i_p, i_f], value=w, mask=(i_f >= 16) & (i_f < 48))
    # Two results holding rows 0..95 and 64..127, added over their overlap.
    u = nl.multiply(t[i_p, i_f], 2.0, mask=(i_p < 96) & (i_f >= 16))
    s = nl.multiply(t[i_p, i_f], 5.0, mask=(i_p >= 64) & (i_f >= 16))
    r = nl.add(u[i_p, i_f], s[i_p, i_f], mask=(i_p >= 64) & (i_p < 96) & (i_f >= 16))
    nl.store(out[1, i_p, i_f], value=r, mask=(i_p >= 64) & (i_p < 96) & (i_f >= 16))
    return out


@nki.jit
def disjoint_masked_results(x):
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    t = nl.load(x[i_p, i_f])
    u = nl.multiply(t[i_p, i_f], 2.0, mask=(i_p < 64))
    v = nl.multiply(t[i_p, i_f], 3.0, mask=(i_p >= 64))  # MARK-disjoint-v
    out = nl.ndarray((64, 64), nl.float32, buffer=nl.shared_hbm)
    r = nl.add(u[i_p, i_f], v[i_p, i_f], mask=(i_p < 64))  # MARK-disjoint-add
    nl.store(out[i_p, i_f], value=r, mask=(i_p < 64))
    return out


@nki.jit
def masked_matmuls_accumulated(a, b):
    # `ps[...] += <masked matmul>` accumulates the product into the part of ps the mask keeps (rows 0..49,
    # twice; columns 8..95), as `ps[...] = ...` writes it.
    out = nl.ndarray((2, 64, 96), nl.float32, buffer=nl.shared_hbm)
    i_k = nl.arange(128)[:, None]
    i_m = nl.arange(64)[None, :]
    i_n = nl.arange(96)[None, :]
    j_p = nl.arange(64)[:, None]
    x = nl.load(a)
    y = nl.load(b)
    ps = nl.zeros((64, 96), nl.float32, buffer=nl.psum)
    for _ in nl.sequential_range(2):
        ps[j_p, i_n] += nisa.nc_matmul(x[i_k, i_m], y[i_k, i_n], mask=(i_m < 50))
    nl.store(out[0], value=nl.copy(ps))
    ps2 = nl.zeros((64, 96), nl.float32, buffer=nl.psum)
    ps2[j_p, i_n] += nl.matmul(x[i_k, i_m], y[i_k, i_n], transpose_x=True, mask=(i_n >= 8))
    nl.store(out[1], value=nl.copy(ps2))
    return out


@nki.jit
def memset_iota_lower_bounds():
    # The earlier-style memset and iota under masks with lower bounds, assigned into a region (its masked-in
    # part is written), then a part of the memset's result stored by index expressions.
    out = nl.ndarray((3, 128, 8), nl.int32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(8)[None, :]
    c = nl.full((128, 8), 5, nl.int32)
    c[i_p, i_f] = nisa.memset((128, 8), 9, nl.int32, mask=(i_p >= 64))
    nl.store(out[0], value=c)
    d = nl.full((128, 8), -1, nl.int32)
    d[i_p, i_f] = nisa.iota(i_p * 10 + i_f, dtype=nl.int32, mask=(i_p < 32) & (i_f >= 2))
    nl.store(out[1], value=d)
    m = nisa.memset((128, 8), 7, nl.int32, mask=(i_p >= 64) & (i_f >= 1))
    nl.store(out[2], value=nl.full((128, 8), 0, nl.int32))
    nl.store(out[2, i_p, i_f], value=m[i_p, i_f], mask=(i_p >= 96) & (i_f >= 3))
    return out


@nki.jit
def tail_tile_read_whole(x):
    # The tail tile's index expressions read all 128 rows of the loaded tile (its rows past the load's mask
    # are undefined, as in NKI) under masks on the free dim only or none; the stores keep the loaded rows.
    out = nl.ndarray((2, 200, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    nl.store(out[1, 0:128, 0:32], value=0.0)
    nl.store(out[1, 128:200, 0:32], value=0.0)
    for t in nl.affine_range(2):
        tile = nl.load(x[t * 128 + i_p, i_f], mask=(t * 128 + i_p < 200))
        y = nl.multiply(tile[i_p, i_f], 2.0)
        nl.store(out[0, t * 128 + i_p, i_f], value=y, mask=(t * 128 + i_p < 200))
        z = nl.add(tile[i_p, i_f], 1.0, mask=(i_f >= 32))
        nl.store(out[1, t * 128 + i_p, i_f], value=z, mask=(t * 128 + i_p < 200) & (i_f >= 32))
    return out


@nki.jit
def matmul_accumulated_into_a_smaller_region(a, b, isa_call):
    out = nl.ndarray((32, 96), nl.float32, buffer=nl.shared_hbm)
    i_k = nl.arange(128)[:, None]
    i_m = nl.arange(64)[None, :]
    i_n = nl.arange(96)[None, :]
    x = nl.load(a)
    y = nl.load(b)
    ps = nl.zeros((32, 96), nl.float32, buffer=nl.psum)
    if isa_call:
        ps[...] += nisa.nc_matmul(x[i_k, i_m], y[i_k, i_n])  # MARK-acc-isa
    else:
        ps[...] += nl.matmul(x[i_k, i_m], y[i_k, i_n], transpose_x=True, mask=(i_m < 50))  # MARK-acc-nl
    nl.store(out, value=nl.copy(ps))
    return out
