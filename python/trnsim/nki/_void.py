"""Calls that emit no instruction: a mask that selects nothing, and the tiles such calls give back.

NKI's masking ("NKI API Masking") makes the compiler emit an instruction for the masked-in region only, and
none when nothing is masked in: the SPMD tail idiom (`nl.load(x[base + i_p, i_f], mask=(base + i_p < N))`
on a program whose rows start at or past N) is legal NKI. The call's result is still a tile of the index's
shape, which no instruction wrote. Here, likewise: a call whose mask selects nothing runs its lowering with
recording off (the trace's record() gives an Op that is not in the trace), so every tile it makes is a tile
no instruction wrote, and such a tile is "void" (Trace.void, storage uids). A later call that meets a void
tile as an operand (any argument but `dst=`) computes the part of it the mask kept, which is nothing: it
emits nothing too, and its own new tiles are void (nl.exp of it, nl.store of it, an nc_matmul operand,
`acc[...] = it`, `acc += it`). A call that writes into a void tile makes it an ordinary tile again: its
other elements were never written, and reading them is what reading any tile nobody wrote is (trnsim's
memory starts as NaN; the run warns at the read, naming the tile).

Every nl.* and nisa.* call goes through one wrapper (wrapper() below: its frame is the only one between the
kernel and the call's implementation), which calls run() while void tiles exist; _lower.apply_mask calls
begin() for a mask that selects nothing in a call that returns a new tile (a store's or dma_copy's empty mask
skips the call as before).
"""

import sys

from . import _trace
from ._errors import NkiError, bad_call, by_call


def wrapper(impl, call, bind=None, calls=None):
    """The function the kernel calls for nl.* / nisa.* call `call` ("nl.exp", "nisa.tensor_copy") implemented
    by `impl`: void tiles (run / end); an NkiError about an instruction the call made names the call first
    (by_call); with `bind` ("nki.isa.tensor_copy"), a TypeError binding the arguments is an NkiError naming
    them (bad_call); with `calls` (the nl name), the ops the call made are noted in Trace.calls. Every wrapper
    shares one code object (WRAPPER_CODE): Trace.call_stack's fast path and begin() step over its frame."""

    def nki_call(*args, **kwargs):
        t = _trace._current
        try:
            if t is None:
                return impl(*args, **kwargs)
            n = len(t.ops)
            if t.filled:
                args, kwargs = _filled(t, args, kwargs)
            r = run(impl, args, kwargs) if t.void else impl(*args, **kwargs)
        except TypeError as e:
            err = bad_call(e, bind, (WRAPPER_CODE, impl.__code__, run.__code__)) if bind else None
            if err is None:
                raise
            raise err from None
        except NkiError as e:
            raise by_call(e, call) from None
        finally:
            if t is not None and t.voiding is not None:
                end(t, sys._getframe())
        if calls is not None and len(t.ops) > n:
            t.calls.append((n, len(t.ops), calls))
        return r

    return nki_call


def _filled(t, args, kwargs):
    """The call's arguments with each masked call's result whose whole tile a later call wrote (Trace.filled)
    as that whole tile: it holds all of it now (tester23ag F6: `nisa.memset(dst=t, ...)` of a masked load's t,
    then `nl.max(t, axis=1)`, reduced the columns the load held)."""
    from ._tensor import LoadPart, NkiTensor

    def whole(a):
        if type(a) is LoadPart and a.st.uid in t.filled:
            return NkiTensor.whole(a.st)
        return a

    return tuple(whole(a) for a in args), {k: whole(a) for k, a in kwargs.items()}


WRAPPER_CODE = _trace.WRAPPER_CODE = wrapper(None, "").__code__


def run(fn, args, kwargs):
    """fn(*args, **kwargs), one nl.* / nisa.* call of the kernel made while void tiles exist (the wrappers'
    slow path): it emits nothing when it meets one; a write into one makes it an ordinary tile."""
    t = _trace._current
    if t.voiding is not None:
        return fn(*args, **kwargs)  # (a call made while another emits nothing)
    me = sys._getframe()
    if _meets(t, args, kwargs):
        _off(t, me)
    n = len(t.ops)
    try:
        return fn(*args, **kwargs)
    finally:
        if t.voiding is not None:
            end(t, me)
        else:
            for op in t.ops[n:]:
                for w in op.writes:
                    t.void.discard(w.st.uid)


def unread(t):
    """The running call met a void tile as an operand that it reads none of (an affine_select whose predicate keeps
    no element of its on_true_tile: its result is on_false_value everywhere, whatever that tile holds): recording
    on again, so that its instruction is emitted and its new tiles are ordinary. Only when this call's run()
    turned recording off for meeting a void tile (not for an empty mask, nor inside another call emitting
    nothing)."""
    if t.voiding is None:
        return
    f = sys._getframe(1)
    while f is not None and f.f_code is not run.__code__:
        f = f.f_back
    if f is not None and t.voiding[1] is f:
        t.voiding = None
        del t.record  # (the class's again)


def begin(t):
    """Recording off until the innermost running nl.* / nisa.* call returns (its wrapper calls end()); False
    when no such call is running (a mask applied by an assignment): the caller keeps its error."""
    f = sys._getframe(1)
    while f is not None and f.f_code is not WRAPPER_CODE:
        f = f.f_back
    if f is None:
        return False
    if t.voiding is None:
        _off(t, f)
    return True


def end(t, frame):
    """When the call whose wrapper runs in `frame` turned recording off (a call inside it leaves it off): the
    tiles made since are void, recording is on again."""
    if t.voiding[1] is not frame:
        return
    first, t.voiding = t.voiding[0], None
    del t.record  # (the class's again)
    for st in t.storages[first:]:
        if st.first < 0:
            t.void.add(st.uid)


def _off(t, owner):
    t.voiding = (len(t.storages), owner)
    t.record = _record_nothing


def _meets(t, args, kwargs):
    from ._tensor import NkiTensor, Unbounded

    void = t.void

    def hit(a):
        if isinstance(a, (list, tuple)):
            return any(hit(b) for b in a)
        return isinstance(a, NkiTensor) and type(a) is not Unbounded and a.st.uid in void

    return any(hit(a) for a in args) or any(hit(a) for k, a in kwargs.items() if k != "dst")


def _record_nothing(name, args, reads, writes, attrs, loc=None):
    return _trace.Op(name, args, tuple(reads), tuple(writes), attrs, loc, -1)
