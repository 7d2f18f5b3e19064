"""Direct allocation (nki.compiler.sbuf / psum .mod_alloc and .alloc): the kernel places each logical tile of a
tensor itself, and trnsim puts it there instead of choosing (NKI Direct Allocation Developer Guide).

A tensor declared with an allocator has block dims (B) before its partition dim, or none: each block is a
logical tile, and the allocator maps its block index to a physical place, (start partition, byte address in
each partition) in SBUF, (bank, start partition, byte address in the bank) in PSUM. mod_alloc is the pages'
modulo formula: the block index modulo `num_*_tiles`, linearised, times the tile's size (partitions, bytes per
partition, one bank), plus the base; so logical tiles i and i + n share a physical tile (rotation over n).
A tensor without block dims is one tile at the base address (the tuples then have nothing to index).

The places are checked when the tensor is declared (the compiler evaluates the allocator over every block):
the start-partition rule, the partition and byte range of the memory, PSUM's one bank per tile at byte 0.
After tracing, `plan` checks lifetimes, the guide's "lifetime conflict": two logical tiles whose bytes overlap
and that hold values at once (a value: from a write of the whole tile to its last access before the next, in
program order) are an error naming both; and it orders the write that starts each value after the last
accesses of the values that held its bytes before (the schedule's `after`). A kernel mixing direct and automatic allocation (a call's new result tile not assigned into a
directly allocated one) is an error, as the guide says. The emitter places the tiles in an arena covering the
memory (one per PSUM bank), so the builder's dependency tracking sees their addresses as they are.
"""

import functools
import inspect
import itertools
import math as _math

from ._errors import NkiError
from ._tensor import HBM, PSUM, SBUF, Buffer


class Place:
    """Where a logical tile lives: start partition and byte offset in the space (PSUM: bank * bank bytes + the
    byte address in the bank); `decl` the tensor it is a block of (a BlockTensor, or its Storage)."""

    __slots__ = ("partition", "offset", "decl", "block")

    def __init__(self, partition, offset, decl, block):
        self.partition, self.offset, self.decl, self.block = partition, offset, decl, block


def _tiles(name, v, nblock, call):
    """A num_*_tiles tuple: positive integers, empty or one per block dim (the pages' rule)."""
    if isinstance(v, int):
        v = (v,)
    try:
        v = tuple(v)
    except TypeError:
        raise NkiError(f"{call}: {name}={v!r} must be a tuple of integers") from None
    if any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in v):
        raise NkiError(f"{call}: {name}={v!r} must hold positive integers")
    if v and nblock and len(v) != nblock:
        raise NkiError(f"{call}: {name}={v!r} has {len(v)} entries for a tensor with {nblock} block dims: it "
                       "must be empty or have one per block dim")
    return v


def _mod(base, shape, scale, idx):
    """The pages' modulo_allocate_func: linearise idx modulo shape (all ones when empty), times scale, plus base."""
    lin = 0
    for i, s in zip(idx, shape or (1,) * len(idx)):
        lin = lin * s + i % s
    return base + lin * scale


def _check_start_partition(what, p, np_, loc, source=""):
    """NkiError unless a tile of np_ partitions may start at partition p (the compute engines' rule, asked of its
    one home, sim/isa/partition_start.h); `source` the page the message cites."""
    from .. import _core

    allowed = _core.engine_start_partitions(np_)
    if p not in allowed:
        raise NkiError(f"{what}: start partition {p} for a tile of {np_} partitions: NKI allows "
                       f"{' or '.join(map(str, allowed))}{source}", loc=loc)


class DirectBuffer(Buffer):
    """A direct allocator given as buffer= (nki.compiler.sbuf.mod_alloc(...), psum.alloc(func), ...)."""

    __slots__ = ("desc", "func", "by_name")

    def __init__(self, space, desc, func):
        super().__init__(desc, space)
        self.desc, self.func, self.by_name = desc, func, _takes_documented_names(func)

    def _call(self, key, np_, fdim, what, loc):
        """The allocator's place for a block: called with the inputs the alloc pages name (idx, pdim_size,
        fdim_size) by those names when it takes them so, else by position; any exception it raises is an
        NkiError at the declaration naming the call made."""
        args = {"idx": tuple(key), "pdim_size": np_, "fdim_size": fdim}
        try:
            return self.func(**args) if self.by_name else self.func(*args.values())
        except NkiError:
            raise
        except Exception as e:
            shown = ", ".join(f"{k}={v!r}" if self.by_name else repr(v) for k, v in args.items())
            raise NkiError(f"{what}: the allocator raised {type(e).__name__}: {e}, called as "
                           f"{_func_name(self.func)}({shown})", loc=loc) from None

    def __repr__(self):
        return self.desc

    def locate(self, key, np_, fdim, name, loc):
        """(start partition, byte offset in the space) of block `key` of a tile of np_ partitions and fdim
        bytes per partition; NkiError at the declaration's line if the place breaks a rule."""
        from ._backend import target

        tg = target()
        named = f"{name} " if name else ""  # (the kernel's name=; the variable is not bound yet)
        what = f"{self.desc}: {named}block {tuple(key)}" if key else f"{self.desc}: {named or 'its tile '}".rstrip()
        r = self._call(key, np_, fdim, what, loc)
        n = 2 if self.space == SBUF else 3
        if not isinstance(r, tuple) or len(r) != n or any(isinstance(x, bool) or not isinstance(x, int)
                                                          for x in r):
            raise NkiError(f"{what}: the allocator returned {r!r}, not {n} integers "
                           f"({'(start_partition, byte_addr)' if n == 2 else '(bank_id, start_partition, byte_addr)'})",
                           loc=loc)
        if self.space == PSUM:
            bank, p, a = r
            banks = tg.psum_bytes // tg.psum_bank_bytes
            if not 0 <= bank < banks:
                raise NkiError(f"{what}: PSUM bank {bank} is not one of the {banks} banks (0-{banks - 1})", loc=loc)
            if p != 0 or a != 0:
                raise NkiError(f"{what}: PSUM start partition {p} and byte address {a}: both must be 0 (a PSUM "
                               "tile of a direct allocation starts a bank: nki.compiler.psum.alloc)", loc=loc)
            if fdim > tg.psum_bank_bytes:
                raise NkiError(f"{what}: a PSUM tile of {fdim} B per partition crosses its "
                               f"{tg.psum_bank_bytes} B bank", loc=loc)
            return 0, bank * tg.psum_bank_bytes
        p, a = r
        _check_start_partition(what, p, np_, loc, " (nki.compiler.sbuf.alloc)")
        if a < 0 or a + fdim > tg.sbuf_bytes:
            raise NkiError(f"{what}: bytes [{a}, {a + fdim}) of each partition are outside SBUF's "
                           f"{tg.sbuf_bytes} B per partition ({tg.generation})", loc=loc)
        return p, a

    def check_all(self, shape, pdim, np_, fdim, name, loc):
        """Evaluates the allocator over every block of a tensor of `shape` (as the compiler does at compile
        time), so a bad place is an error at the declaration."""
        for key in itertools.islice(itertools.product(*map(range, shape[:pdim])), 1 << 16):
            self.locate(key, np_, fdim, name, loc)

    def place(self, key, st, decl):
        """Block `key` of tensor `decl` (.buffer, .loc, .shape) is tile `st`: its Place."""
        p, off = self.locate(key, st.partitions, st.pbytes, st.shown_name(), decl.loc)
        return Place(p, off, decl, key)


class Decl:
    """A directly allocated tensor without block dims (one logical tile): what its Place refers to."""

    __slots__ = ("buffer", "loc", "shape")

    def __init__(self, buffer, loc, shape):
        self.buffer, self.loc, self.shape = buffer, loc, shape


def _takes_documented_names(func):
    """Whether `func` can be called as func(idx=, pdim_size=, fdim_size=), the inputs' names on the alloc pages
    (nki-samples' allocated attention binds its allocator's first parameter by keyword with functools.partial,
    so only that call reaches it); a lambda naming them otherwise is called by position."""
    try:
        inspect.signature(func).bind(idx=(), pdim_size=0, fdim_size=0)
    except (TypeError, ValueError):
        return False
    return True


def _func_name(func):
    """The allocator's name in messages: a functools.partial's function's."""
    while isinstance(func, functools.partial):
        func = func.func
    return getattr(func, "__name__", "func")


def _call_alloc(space, func, call):
    if not callable(func):
        raise NkiError(f"{call}: func must be a callable (idx, pdim_size, fdim_size) -> place, got {func!r}")
    return DirectBuffer(space, f"{call}({_func_name(func)})", func)


def traced_once(t, direct, dims, dtype, site, call, loc):
    """The allocator a tensor declared with `direct` in the body of an nl.affine_range or nl.sequential_range
    loop takes: NKI traces such a body once (its index a loop variable; only static_range and Python loops
    are unrolled while tracing), so a declaration there has the allocator, shape and dtype of the body's one
    trace, which trnsim's first iteration of the outermost such loop stands for. Python state the body
    changes (nki-samples' allocated attention adds each buffer's size to a `cur_addr` it passes as base_addr)
    does not move later iterations' tiles; each is placed by that allocator, called with its block index, as
    the first iteration's. A declaration is matched to the first iteration's by its call site, the iteration
    of each static_range loop and the instance of each loop between (a loop entered twice in a body), and
    its occurrence in the innermost iteration (a Python loop in the body). Another shape or dtype than the
    first iteration's is an NkiError: the one trace cannot give two."""
    scope = t.scope
    k = 0
    while k < len(scope) and scope[k][2] == "static_range":
        k += 1
    if k == len(scope):
        return direct  # static_range loops only: unrolled while NKI traces, as here
    outer = scope[k]
    seen = t.loop_alloc_seen
    path = []
    for j in range(k + 1, len(scope)):
        r = scope[j]
        entered = seen.setdefault((id(scope[j - 1]), r[3]), [])  # the loops at r's line entered in the parent
        if r[4] not in entered:
            entered.append(r[4])
        path.append((entered.index(r[4]), r[5] if r[2] == "static_range" else 0))
    ck = (id(scope[-1]), site)
    occ = seen.get(ck, 0)
    seen[ck] = occ + 1
    key = (outer[4], site, tuple(path), occ)
    first = t.loop_allocs.get(key)
    if first is None:
        t.loop_allocs[key] = (direct, dims, dtype, outer[5])
        return direct
    buf, fdims, fdtype, n = first
    if fdims != dims or fdtype != dtype:
        raise NkiError(f"{call}: {list(dims)} {dtype.name} here, in iteration {outer[5]} of the nl.{outer[2]} loop "
                       f"at {outer[3]}, but {list(fdims)} {fdtype.name} in its iteration {n}: NKI traces the "
                       "loop's body once, so a tensor it declares has one shape and dtype (and its direct "
                       f"allocation, {buf.desc}, one place per block); use nl.static_range (unrolled while "
                       "tracing) or declare it before the loop", loc=loc)
    return buf


def sbuf_mod_alloc(*, base_addr, base_partition=0, num_par_tiles=(), num_free_tiles=()):
    call = "nki.compiler.sbuf.mod_alloc"
    args = [f"base_addr={base_addr}"] + ([f"base_partition={base_partition}"] if base_partition else [])
    args += [f"{k}={tuple(v) if not isinstance(v, int) else (v,)}" for k, v in
             (("num_par_tiles", num_par_tiles), ("num_free_tiles", num_free_tiles)) if v]
    for k, v in (("base_addr", base_addr), ("base_partition", base_partition)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise NkiError(f"{call}: {k}={v!r} must be an integer")

    def func(idx, pdim_size, fdim_size):
        par = _tiles("num_par_tiles", num_par_tiles, len(idx), call)
        free = _tiles("num_free_tiles", num_free_tiles, len(idx), call)
        return (_mod(base_partition, par, pdim_size, idx), _mod(base_addr, free, fdim_size, idx))

    return DirectBuffer(SBUF, f"{call}({', '.join(args)})", func)


def psum_mod_alloc(*, base_bank, base_addr=0, base_partition=0, num_bank_tiles=(), num_par_tiles=(),
                   num_free_tiles=()):
    call = "nki.compiler.psum.mod_alloc"
    args = [f"base_bank={base_bank}"] + [f"{k}={v}" for k, v in (("base_addr", base_addr),
                                                                  ("base_partition", base_partition)) if v]
    args += [f"{k}={tuple(v) if not isinstance(v, int) else (v,)}" for k, v in
             (("num_bank_tiles", num_bank_tiles), ("num_par_tiles", num_par_tiles),
              ("num_free_tiles", num_free_tiles)) if v]
    for k, v in (("base_bank", base_bank), ("base_addr", base_addr), ("base_partition", base_partition)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise NkiError(f"{call}: {k}={v!r} must be an integer")

    def func(idx, pdim_size, fdim_size):
        banks = _tiles("num_bank_tiles", num_bank_tiles, len(idx), call)
        for k, v in (("num_par_tiles", num_par_tiles), ("num_free_tiles", num_free_tiles)):
            if any(x != 1 for x in _tiles(k, v, len(idx), call)):
                raise NkiError(f"{call}: {k}={v!r}: one PSUM tile per bank, so it must be empty or all ones")
        return (_mod(base_bank, banks, 1, idx), _mod(base_partition, (), pdim_size, idx),
                _mod(base_addr, (), fdim_size, idx))

    return DirectBuffer(PSUM, f"{call}({', '.join(args)})", func)


def sbuf_alloc(func):
    return _call_alloc(SBUF, func, "nki.compiler.sbuf.alloc")


def psum_alloc(func):
    return _call_alloc(PSUM, func, "nki.compiler.psum.alloc")


def at_address(buffer, address, call):
    """nl.ndarray(..., address=(partition_offset, free_offset)) (NKI 2.33's nki.language.ndarray: a fixed place in
    SBUF or PSUM, the free offset in bytes of each partition; PSUM's 16 KiB are its banks side by side): a direct
    allocation of the tensor's one tile there (_AtAddress)."""
    from ._errors import unsupported

    shown = f"{call}(address={address!r})"
    if buffer.space == HBM:
        unsupported(f"{call}(address=...) in HBM", "HBM tensors are placed by name, not by address")
    if isinstance(buffer, DirectBuffer):
        raise NkiError(f"{shown}: buffer={buffer.desc} places the tensor already: give address= or the allocator")
    if not isinstance(address, (tuple, list)) or len(address) != 2 or any(
            isinstance(x, bool) or not isinstance(x, int) for x in address):
        raise NkiError(f"{shown}: an SBUF or PSUM address is 2 integers (partition_offset, free_offset)")
    if min(address) < 0:
        raise NkiError(f"{shown}: offsets must not be negative")
    return _AtAddress(buffer.space, shown, tuple(address))


class _AtAddress(DirectBuffer):
    """A tile at a fixed address. SBUF: as an allocator's place. PSUM: any byte of a bank (the page sets no
    bank-start rule; nki-library's kernels place tiles inside banks), the tile within that one bank, its start
    partition as SBUF's rule."""

    __slots__ = ()

    def __init__(self, space, desc, address):
        super().__init__(space, desc, lambda idx, np_, fdim: address)

    def locate(self, key, np_, fdim, name, loc):
        if key:
            raise NkiError(f"{self.desc}: a tensor with block dims (nl.par_dim) has one address per block: declare "
                           "each block with its own address, or use nki.compiler's allocators", loc=loc)
        if self.space == SBUF:
            return super().locate(key, np_, fdim, name, loc)
        from ._backend import target

        tg = target()
        p, f = self.func((), np_, fdim)
        bb, banks = tg.psum_bank_bytes, tg.psum_bytes // tg.psum_bank_bytes
        bank, a = divmod(f, bb)
        if bank >= banks:
            raise NkiError(f"{self.desc}: free offset {f} is past PSUM's {banks * bb} B per partition ({banks} "
                           f"banks of {bb} B)", loc=loc)
        if a + fdim > bb:
            raise NkiError(f"{self.desc}: the tile's bytes [{a}, {a + fdim}) of bank {bank} cross the bank's end "
                           f"({bb} B): a PSUM tile lies in one bank", loc=loc)
        _check_start_partition(self.desc, p, np_, loc)
        return p, f


# ---- after tracing: the plan's part for directly allocated tiles


class DirectPool:
    """The allocation plan's entry for one logical tile placed directly: one buffer at its place."""

    __slots__ = ("st", "pool_size", "partitions", "offsets", "direct")

    def __init__(self, st):
        self.st, self.pool_size, self.partitions = st, 1, st.partitions
        self.offsets = [st.direct.offset]
        self.direct = st.direct


def _span(st):
    d = st.direct
    return d.partition, d.partition + st.partitions, d.offset, d.offset + st.pbytes


def _where(st):
    p0, p1, a0, a1 = _span(st)
    return f"partitions {p0}-{p1 - 1}, bytes {a0}-{a1 - 1}"


def check_no_mixing(direct, auto):
    """The guide's common error 1: every on-chip tile of a kernel using direct allocation is placed directly."""
    if direct and auto:
        a, d = min(auto, key=lambda s: s.first), direct[0]
        op = a.trace.ops[a.first]
        raise NkiError(f"{a.label()} (made by {op.name} at {op.loc or a.loc}) is allocated automatically while the "
                       f"kernel places {d.label()} with {d.direct.decl.buffer.desc}: NKI does not mix direct and "
                       "automatic allocation in a kernel (NKI Direct Allocation Developer Guide, common error 1); "
                       "declare it with a direct allocator and assign the call's result into it (t[...] = ...)",
                       loc=op.loc or a.loc)


def check_hbm(trace, direct):
    """The guide's known limitation 1: with direct allocation a kernel's HBM tensors are its inputs and the
    tensors it returns (and nl.device_print's copies, which trnsim adds)."""
    for st in trace.storages:
        if st.space == HBM and st.role == "scratch" and st.first >= 0:
            raise NkiError(f"{st.label()} is neither an input nor a returned output of the kernel, which places "
                           f"{direct[0].label()} with {direct[0].direct.decl.buffer.desc}: with direct allocation "
                           "NKI allows no other HBM tensor (NKI Direct Allocation Developer Guide, known "
                           "limitations: a non-IO HBM tensor is not supported in an allocated kernel)", loc=st.loc)


def _values(trace, direct):
    """The live ranges of the directly placed tiles: (first op, last op, tile) per value a tile holds. A value
    starts at an op that writes the whole tile without reading it (a load, a memset, a call's result assigned
    into it) and lives until the tile's last access before the next such write: a block reused in each
    iteration of an outer loop (t[j] in every iteration over g) holds one value per iteration, dead between."""
    out = []
    span = {}  # storage uid -> [first op, last op] of the value it holds now
    whole = {st.uid: _math.prod(st.shape) for st in direct}
    for op in trace.ops[min(st.first for st in direct):max(st.last for st in direct) + 1]:
        read = {v.st.uid: v.st for v in op.reads if v.st.uid in whole}
        for v in op.writes:
            st = v.st
            if st.uid not in whole:
                continue
            cur = span.get(st.uid)
            if cur is not None and st.uid not in read and v.partitions * v.free_size == whole[st.uid]:
                out.append((cur[0], cur[1], st))  # overwritten whole: its value ends where it was last used
                cur = None
            if cur is None:
                span[st.uid] = [op.index, op.index]
            else:
                cur[1] = op.index
        for st in read.values():
            cur = span.get(st.uid)
            if cur is None:
                span[st.uid] = [op.index, op.index]  # (read before any write: the poisoned first value)
            else:
                cur[1] = op.index
    by_uid = {st.uid: st for st in direct}
    out += [(a, b, by_uid[u]) for u, (a, b) in span.items()]
    return sorted(out, key=lambda r: (r[0], r[2].uid))


# "k.py:15" -> {(read shape, dtype name): {(tile name, declaration line)}} of the directly allocated tiles the
# last build's instructions read at that line (note_reads): the builder knows each such tile as a view of the
# memory's arena ("direct sbuf"), so its warning of a read where no instruction wrote names the tile by this
# (_jit.warnings_by_call; cleared there).
reads_at = {}


def note_reads(trace, direct):
    """reads_at for the kernel `trace`, whose directly placed tiles are `direct`."""
    if not direct:
        return
    for op in trace.ops:
        for v in op.reads:
            st = v.st
            if st.direct is not None and op.loc:
                d = reads_at.setdefault(str(op.loc), {})
                d.setdefault((tuple(v.shape), v.dtype.name), set()).add((_name(st), str(st.direct.decl.loc)))


def _block_order(name):
    """A block's name ("s[1, 10]") ordered by its indices, numbers as numbers."""
    import re

    return [int(n) for n in re.findall(r"\d+", name.rsplit("[", 1)[-1])]


def name_in_warning(w):
    """Warning `w` of the build about a read of a directly allocated tile ("k.py:15: tensor_scalar reads sbuf
    'direct sbuf' [128, 1] float32 allocated at <the host's line> ...") naming the tile and its declaration
    when one tile of that shape was read at that line ("sbuf 's[1]' [128, 1] float32 allocated at k.py:13"),
    else the tiles it may be; `w` as it is when it names no arena."""
    import re

    m = re.match(r"([^\s:]+:\d+): .*?(\w+) '(direct (?:sbuf|psum bank \d+))' \[([\d, ]*)\] (\w+)"
                 r"( allocated at [^\s:]+:\d+)?", w, re.S)
    if m is None:
        return w
    shape = tuple(int(n) for n in m.group(4).split(", ") if n)
    found = sorted(reads_at.get(m.group(1), {}).get((shape, m.group(5)), ()))
    if not found:
        return w
    if len(found) == 1:
        (name, at), = found
        said = f"{m.group(2)} '{name}' [{m.group(4)}] {m.group(5)} allocated at {at}"
    else:
        # The blocks of one block tensor (pipelined attention's scaling_factor[g], read at one line in every
        # iteration of a loop over g) by that tensor, once; other tiles each by name.
        groups = {}
        for n, a in found:
            groups.setdefault((n.split("[", 1)[0] + "[" if n.endswith("]") and "[" in n else n, a), []).append(n)
        def tiles(ns, a):
            if len(ns) == 1:
                return f"'{ns[0]}' (allocated at {a})"
            ns = sorted(ns, key=_block_order)
            return f"the {len(ns)} blocks '{ns[0]}' .. '{ns[-1]}' (allocated at {a})"

        said = (f"{m.group(2)} [{m.group(4)}] {m.group(5)} of one of "
                + ("" if len(groups) == 1 else "the directly allocated tiles ")
                + ", ".join(tiles(ns, a) for (_, a), ns in groups.items()))
    return w[:m.start(2)] + said + w[m.end():]


def plan(trace, direct):
    """(pools, phys set on each storage, after): each logical tile its own buffer at its place; NkiError at
    the kernel line for two tiles holding values at once on overlapping bytes."""
    note_reads(trace, direct)
    pools, after = [], {}
    for st in sorted(direct, key=lambda s: s.first):
        st.phys = (len(pools), 0)
        pools.append(DirectPool(st))
    holders = {SBUF: [], PSUM: []}  # per space: values whose bytes no later value has covered yet
    ops = trace.ops
    for first, last, st in _values(trace, direct):
        p0, p1, a0, a1 = _span(st)
        keep = []
        for h in holders[st.space]:
            h_last, hs = h
            q0, q1, b0, b1 = _span(hs)
            if not (p0 < q1 and q0 < p1 and a0 < b1 and b0 < a1):
                keep.append(h)
                continue
            if hs is not st:
                if h_last >= first:
                    raise NkiError(
                        f"{_name(st)} ({_where(st)} of {st.space.upper()}) is "
                        f"{'first used' if first == st.first else 'written again'} here while {_name(hs)} "
                        f"({_where(hs)}), on bytes it shares, is alive until {ops[h_last].loc or '?'}: a lifetime "
                        "conflict of the direct allocation (NKI Direct Allocation Developer Guide, common error 3); "
                        "give the tensors bytes of their own, or more physical tiles (num_free_tiles, "
                        "num_bank_tiles) than the logical tiles alive at once", loc=ops[first].loc or st.loc)
                after.setdefault(first, []).append(hs.uid)
            if not (p0 <= q0 and q1 <= p1 and a0 <= b0 and b1 <= a1):
                keep.append(h)  # partly covered: a later tile on its other bytes waits for it too
        keep.append((last, st))
        holders[st.space] = keep
    return pools, after


def _name(st):
    d = st.direct
    base = st.shown_name()
    return f"{base}{list(d.block)}" if d.block else base


def report(direct):
    """Per directly allocated tensor: its allocator, logical tiles used and the physical tiles they map to
    (stats.json "nki" -> "allocation" -> "direct"). A declaration in an affine / sequential loop body, made
    again in each iteration with the first iteration's allocator (traced_once), is one tensor, its logical
    tiles those of every iteration."""
    by_decl = {}
    for st in sorted(direct, key=lambda s: s.first):
        decl = st.direct.decl
        by_decl.setdefault((id(decl.buffer), decl.loc, st.shown_name()), []).append(st)
    out = []
    for sts in by_decl.values():
        st, d = sts[0], sts[0].direct
        tiles = []
        for s in sts:
            t = (s.direct.partition, s.direct.offset)
            if t not in tiles:
                tiles.append(t)
        if st.space == PSUM:
            bank = st.trace.target.psum_bank_bytes
            phys = [{"bank": o // bank, "partition": p, "byte": o % bank} for p, o in tiles]
        else:
            phys = [{"partition": p, "byte": o} for p, o in tiles]
        decl = d.decl
        out.append({"tensor": st.shown_name(), "line": str(decl.loc) if decl.loc else "?", "space": st.space,
                    "allocator": decl.buffer.desc, "shape": list(decl.shape), "dtype": st.dtype.name,
                    "logical_tiles": len(sts), "physical_tiles": phys, "bytes_per_partition": st.pbytes})
    return out
