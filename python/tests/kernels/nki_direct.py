"""NKI kernels placing their tiles with direct allocation (nki.compiler.sbuf / psum .mod_alloc and .alloc), for
test_nki_direct_alloc.py: a double-buffered copy through SBUF and PSUM, and the Direct Allocation guide's
errors. Written for this project."""

import functools

import nki
import nki.compiler as ncc
import nki.isa as nisa
import nki.language as nl

given = {}  # what an error kernel is asked to place (set by the test)


@nki.jit
def through_psum(x, eye):
    # out = x, [512, 128] float32, block i of 128 rows: loaded into SBUF, multiplied by the identity into PSUM
    # (exact: one product per sum is not zero), copied back to SBUF and stored. Every tile placed directly.
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ident = nl.ndarray((128, 128), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=4096))
    ident[...] = nl.load(eye)
    t = nl.ndarray((4, nl.par_dim(128), 128), dtype=nl.float32,
                   buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))  # loaded blocks
    s = nl.ndarray((4, nl.par_dim(128), 128), dtype=nl.float32,
                   buffer=ncc.sbuf.mod_alloc(base_addr=1024, num_free_tiles=(2,)))  # copied back
    p = nl.ndarray((4, nl.par_dim(128), 128), dtype=nl.float32,
                   buffer=ncc.psum.mod_alloc(base_bank=2, num_bank_tiles=(2,)))  # products
    for i in nl.affine_range(4):
        t[i] = nl.load(x[i * 128:(i + 1) * 128, :])
        p[i] = nisa.nc_matmul(stationary=ident, moving=t[i])
        s[i] = nisa.tensor_copy(p[i])
        nl.store(out[i * 128:(i + 1) * 128, :], s[i])
    return out


@nki.jit
def all_loaded_first(x):
    # The guide's lifetime conflict: eight logical tiles over two physical ones, all loaded before any is read.
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((8, nl.par_dim(128), 128), dtype=nl.float32,
                   buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
    for i in nl.affine_range(8):
        t[i] = nl.load(x[i * 128:(i + 1) * 128, :])  # third load: t[0] still to be read
    for i in nl.affine_range(8):
        nl.store(out[i * 128:(i + 1) * 128, :], t[i])
    return out


@nki.jit
def overlapping(x):
    # The guide's partly overlapping tensors: a bytes 0-1023, b bytes 512-1535, both alive at once.
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.ndarray((128, 256), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    b = nl.ndarray((128, 256), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=512))
    a[...] = nl.load(x)
    b[...] = nl.load(x)  # overlaps a, read below
    nl.store(out, a)
    nl.store(out, b)
    return out


@nki.jit
def placed(x):
    # One tile at the place given["buffer"] gives it; x [128, 128] float32 copied through it.
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((2, nl.par_dim(128), 128), dtype=nl.float32, buffer=given["buffer"])  # declared
    t[0] = nl.load(x)
    nl.store(out, t[0])
    return out


@nki.jit
def mixed(x):
    # A direct tile and a call's own result tile (automatic allocation): the guide's common error 1.
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 128), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    t[...] = nl.load(x)
    u = nl.exp(t)  # its own tile
    nl.store(out, u)
    return out


def by_quarters(idx, pdim_size, fdim_size):
    # The guide's custom allocator form: block i of 32 partitions at partition 32 * i, all at byte 0.
    (i,) = idx
    return (i * pdim_size, 0)


@nki.jit
def quarters(x):
    # x [128, 128] float32 loaded as four [32, 128] blocks placed one above the other, stored back.
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((4, nl.par_dim(32), 128), dtype=nl.float32, buffer=ncc.sbuf.alloc(by_quarters))
    for i in nl.affine_range(4):
        t[i] = nl.load(x[i * 32:(i + 1) * 32, :])
    for i in nl.affine_range(4):
        nl.store(out[i * 32:(i + 1) * 32, :], t[i])
    return out


# all_loaded_first with its allocator ignored (the decorator above @nki.jit): the model's allocation, no conflict.
forced = nki.compiler.force_auto_alloc(nki.jit(all_loaded_first.fn))


@nki.jit
def hbm_scratch(x):
    # An HBM tensor neither input nor returned, in a kernel placing its tiles: the guide's known limitation.
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    s = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)  # scratch
    t = nl.ndarray((128, 128), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    t[...] = nl.load(x)
    nl.store(s, t)
    nl.store(out, t)
    return out


@nki.jit
def reloaded(x, clash=False):
    # x [2, 4, 128, 128]: out[g, j] = x[g, j] through t[j], four logical tiles over two physical ones, declared
    # before the loop over g, so each block holds one value per g (tester23s F2's kernel). clash: t[0] is
    # written again while t[2], on its bytes, still holds a value read below.
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((4, nl.par_dim(128), 128), dtype=nl.float32,
                   buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
    if clash:
        t[0] = nl.load(x[0, 0])
        nl.store(out[0, 0], t[0])
        t[2] = nl.load(x[0, 2])
        t[0] = nl.load(x[1, 0])  # written again
        nl.store(out[0, 2], t[2])
        nl.store(out[1, 0], t[0])
        return out
    for g in nl.affine_range(2):
        for j in nl.affine_range(4):
            t[j] = nl.load(x[g, j])
            nl.store(out[g, j], t[j])
    return out


def bank_of(bank_map, idx, pdim_size, fdim_size):
    # An allocator with a parameter of its own first, bound by keyword with functools.partial, so that only a
    # call by the pages' input names (idx=, pdim_size=, fdim_size=) reaches it: block idx in bank bank_map[idx].
    return (bank_map[idx], 0, 0)


@nki.jit
def doubled_in_banks(x, banks):
    # out = 2 * x, [256, 128] float32 in two blocks of 128 rows, each doubled into the PSUM bank
    # banks[(i,)] gives it (through functools.partial(bank_of, bank_map=banks)) and copied back to SBUF.
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((2, nl.par_dim(128), 128), dtype=nl.float32,
                   buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
    s = nl.ndarray((2, nl.par_dim(128), 128), dtype=nl.float32,
                   buffer=ncc.sbuf.mod_alloc(base_addr=1024, num_free_tiles=(2,)))
    p = nl.ndarray((2, nl.par_dim(128), 128), dtype=nl.float32,  # banked
                   buffer=ncc.psum.alloc(functools.partial(bank_of, bank_map=banks)))
    for i in nl.affine_range(2):
        t[i] = nl.load(x[i * 128:(i + 1) * 128, :])
        p[i] = nl.multiply(t[i], 2.0)
        s[i] = nisa.tensor_copy(p[i])
        nl.store(out[i * 128:(i + 1) * 128, :], s[i])
    return out


@nki.jit
def counter_in_body(x, kind="affine_range"):
    # x [4, 128, 512] float32: out[i] = 2 * x[i]. Each iteration's body declares its buffers at an address a
    # host counter gives and advances the counter by their bytes (nki-samples' allocated attention does so in
    # an affine_range body): 64 KiB + 2 KiB per body, so four bodies' worth would pass SBUF's 224 KiB. NKI
    # traces an affine_range / sequential_range body once; static_range unrolls it (here four bodies of 2 KiB
    # + 2 KiB with kind="small_static").
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    free = 8192 if kind != "small_static" else 512
    loop = getattr(nl, "static_range" if kind == "small_static" else kind)
    cur = 0
    for i in loop(4):
        a = nl.ndarray((2, nl.par_dim(128), free), dtype=nl.float32,
                       buffer=ncc.sbuf.mod_alloc(base_addr=cur, num_free_tiles=(2,)))  # rotating
        cur += 2 * free * 4
        b = nl.ndarray((128, 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=cur))  # doubled
        cur += 512 * 4
        a[i % 2, :, 0:512] = nl.load(x[i])
        b[...] = nl.multiply(a[i % 2, :, 0:512], 2.0)
        nl.store(out[i], b)
    return out


@nki.jit
def counter_nested(x):
    # x [2, 3, 128, 64] float32: out[g, j] = x[g, j] + j. An affine_range over g around a static_range over j
    # (unrolled in NKI's one trace of g's body: three declarations, three places) around an affine_range over
    # k; the counter moves in every body.
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    cur = 0
    for g in nl.affine_range(2):
        for j in nl.static_range(3):
            for k in nl.affine_range(1):
                t = nl.ndarray((128, 64), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=cur))  # in j
                cur += 64 * 4
                t[...] = nl.load(x[g, j])
                t[...] = nl.add(t, float(j))
                nl.store(out[g, j], t)
    return out


@nki.jit
def counter_after_loop(x, kind="affine_range"):
    # x [4, 128, 512] float32: out[i] = x[i], out2 = 3 * x[0]. The loop's body declares a tile at a host counter
    # and advances it by 64 KiB; a tile declared after the loop is placed at the counter. NKI traces an
    # affine_range / sequential_range body once (the counter is 64 KiB after the loop) and unrolls a
    # static_range or Python loop (256 KiB, past SBUF's 224 KiB).
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out2 = nl.ndarray(x.shape[1:], dtype=x.dtype, buffer=nl.shared_hbm)
    loop = range if kind == "python" else getattr(nl, kind)
    cur = 0
    for i in loop(4):
        t = nl.ndarray((128, 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=cur))
        cur += 65536
        t[...] = nl.load(x[i])
        nl.store(out[i], t)
    big = nl.ndarray((128, 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=cur))  # after the loop
    big[...] = nl.load(x[0])
    big[...] = nl.multiply(big, 3.0)
    nl.store(out2, big)
    return out, out2


class Stack(nl.NKIObject):
    """A stack of SBUF bytes per partition, as a kernel library keeps its allocator: each tile at the top, the top
    then raised past it, aligned to `align` bytes; `frames` the tops to go back to (a list of dicts)."""

    def __init__(self, align):
        self.top = 0
        self.align = align
        self.frames = [{"top": 0, "tiles": 0}]

    def tile(self, shape, dtype):
        t = nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf, address=(0, self.top))
        size = shape[1] * 4  # (float32 tiles)
        self.top = (self.top + size + self.align - 1) // self.align * self.align
        self.frames[-1]["tiles"] += 1
        return t


@nki.jit
def state_after_loop(x, holder, kind="affine_range"):
    # x [4, 128, 512] float32: out[i] = x[i], out2 = 3 * x[0]. The loop's body declares a tile where an allocator
    # state says and advances that state by 64 KiB; a tile declared after the loop is placed where the state says
    # then: 64 KiB after NKI's one trace of an affine_range / sequential_range body, 256 KiB (past SBUF's 224 KiB)
    # after a static_range or Python loop, unrolled while tracing. The state: an allocator object's attribute
    # advanced by its method ("method") or by the body ("attr"), a list item, a dict value, a dict in a list in
    # an object ("nested"), a variable of a closure the body calls ("closure"), a NumPy integer ("numpy").
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out2 = nl.ndarray(x.shape[1:], dtype=x.dtype, buffer=nl.shared_hbm)
    loop = range if kind == "python" else getattr(nl, kind)
    import numpy as np

    stack, offsets, table = Stack(65536), [0, 7], {"sbuf": 0}
    nxt, counter = 0, np.int64(0)

    def take(size):
        nonlocal nxt
        at, nxt = nxt, nxt + size
        return at

    for i in loop(4):
        if holder == "method":
            t = stack.tile((128, 512), nl.float32)  # in the loop
        elif holder == "attr":
            t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf, address=(0, stack.top))
            stack.top += 65536
        elif holder == "list":
            t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf, address=(0, offsets[0]))
            offsets[0] += 65536
        elif holder == "dict":
            t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf, address=(0, table["sbuf"]))
            table["sbuf"] = table["sbuf"] + 65536
        elif holder == "numpy":
            t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf, address=(0, int(counter)))
            counter += 65536
        elif holder == "nested":
            t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf, address=(0, stack.frames[-1]["top"]))
            stack.frames[-1]["top"] += 65536
        else:
            t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf, address=(0, take(65536)))
        t[...] = nl.load(x[i])
        nl.store(out[i], t)
    at = {"method": stack.top, "attr": stack.top, "list": offsets[0], "dict": table["sbuf"],
          "nested": stack.frames[-1]["top"], "closure": nxt, "numpy": int(counter)}[holder]
    big = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf, address=(0, at))  # after the loop: placed
    big[...] = nl.load(x[0])
    big[...] = nl.multiply(big, 3.0)
    nl.store(out2, big)
    assert stack.frames[-1]["tiles"] == (1 if holder == "method" and kind.endswith("_range") and
                                         kind != "static_range" else 4 if holder == "method" else 0)
    return out, out2


class Cursor(nl.NKIObject):
    """An allocator that never changes: each tile's place gives a new cursor past it."""

    def __init__(self, at):
        self.at = at

    def past(self, size):
        return Cursor(self.at + size)


@nki.jit
def rebound_cursor(x):
    # x [4, 128, 512] float32: out[i] = x[i], out2 = x[0]. The body rebinds `cur` to a new Cursor 4 KiB further,
    # which trnsim does not set back after the loop (warned): out2's tile at 16 KiB, at 4 KiB on the device.
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out2 = nl.ndarray(x.shape[1:], dtype=x.dtype, buffer=nl.shared_hbm)
    cur = Cursor(0)
    for i in nl.affine_range(4):  # rebinds cur
        t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf, address=(0, cur.at))
        cur = cur.past(4096)
        t[...] = nl.load(x[i])
        nl.store(out[i], t)
    last = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf, address=(0, cur.at))
    last[...] = nl.load(x[0])
    nl.store(out2, last)
    return out, out2


@nki.jit
def growing_in_body(x):
    # A tensor of another shape in each iteration of an affine_range body: one trace cannot give two.
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        t = nl.ndarray((128, 32 * (i + 1)), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))  # grows
        t[...] = nl.load(x[:, 0:32 * (i + 1)])
        nl.store(out[:, 0:32 * (i + 1)], t)
    return out


@nki.jit
def unwritten_block(x):
    # out = x * s[1], where no instruction wrote block 1 of s: the read's warning names s[1] and its line.
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    t[...] = nl.load(x)
    s = nl.ndarray((2, nl.par_dim(128), 1), dtype=nl.float32,
                   buffer=ncc.sbuf.mod_alloc(base_addr=512, num_free_tiles=(2,)))  # scales
    u = nl.ndarray((128, 64), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=1024))
    u[...] = nisa.tensor_scalar(t, nl.multiply, s[1])  # unwritten
    nl.store(out, u)
    return out
