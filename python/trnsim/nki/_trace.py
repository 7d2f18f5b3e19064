"""Tracing a kernel: the kernel's Python code runs once per program (SPMD: once per physical core under LNC2,
as on hardware), and every nki.isa / nki.language call appends an Op to the program's Trace instead of
emitting it at once. When the kernel function returns, the trace is allocated (_alloc: which physical buffer
each on-chip tensor gets), ordered (_schedule: the compiler's default schedule) and emitted into the builder
(_emit), so allocation can use each tensor's lifetime and scheduling can move loads ahead, as the Neuron
compiler does after tracing.
"""

import sys
import threading

from . import _errors
from ._errors import Loc, NkiError, caller_loc

_current = None  # the Trace being recorded (None outside a kernel)
_new = object.__new__


plain_function = None  # a function without @nki.jit that the runner is calling (_hooks_fill._call)


def not_jit(f, why=""):
    """What to say of plain function `f` (no @nki.jit) failing where an NKI kernel would not; `why`: how."""
    from .._runner import def_loc

    at = def_loc(f)
    at = f" ({Loc(at)})" if at else ""
    return (f"{getattr(f, '__name__', f)!s}{at} is not an @nki.jit kernel: trnsim traces nki.language / nki.isa "
            f"calls only in a function decorated with @nki.jit (a plain function runs on trnsim._core's "
            f"builder{why}); put @nki.jit above `def {f.__name__}`, or pass it through nki.simulate(...), which "
            f"wraps it")


def current(what="this call"):
    t = _current
    if t is None and plain_function is not None:
        raise NkiError(f"{what}: {not_jit(plain_function)}")
    if t is None:
        raise NkiError(f"{what} is only valid inside a kernel being traced (an @nki.jit function run by "
                       "trnsim: trnsim run, trnsim.nki.simulate_kernel or benchmark)")
    return t


def active():
    return _current


class Op:
    """One instruction in program order. `args` maps operand slot names (the opcode table's: dst, data,
    stationary, ...) to views; `reads` / `writes` list the views it reads and writes (dependencies, lifetimes
    and scheduling); `attrs` the rest (engine name or None, flags, immediates)."""

    __slots__ = ("name", "args", "reads", "writes", "attrs", "loc", "index", "load")

    def __init__(self, name, args, reads, writes, attrs, loc, index=-1):
        self.name = name
        self.args = args
        self.reads = reads
        self.writes = writes
        self.attrs = attrs
        self.loc = loc
        self.index = index
        self.load = False  # a DMA from HBM into on-chip memory (the scheduler may issue it earlier)

    def __repr__(self):
        return f"Op({self.name} @ {self.loc})"


class Trace:
    """The instructions and tensors of one program (one physical core's share of the kernel)."""

    def __init__(self, entry_code, program_id, num_programs, grid, target, options):
        self.entry_code = entry_code  # the kernel function's code object: call stacks stop there
        self.entry_outside = entry_code is not None and not _errors._in_package(entry_code.co_filename)
        self.program_id = program_id  # tuple, one entry per launch-grid dim
        self.num_programs = num_programs  # tuple
        self.grid = grid
        self.target = target  # the hardware facts the front end needs (_backend.Target)
        self.options = options
        self.ops = []
        # (first op, end op, name) of each nl.* call that made instructions: an error in one of them names the
        # kernel's call (_loops.user_call), not only the instruction its lowering made
        self.calls = []
        self.storages = []
        self.names = {}
        self.user_names = set()  # the name= the kernel gave its tensors (the others' are the calls', not its own)
        self.loops = []  # (kind, trip count, loc) of the nl.*_range loops entered
        self.empty_loops = []  # (kind, range, loc) of those that ran no iteration (_jit._check_written says so)
        # Iterations of outermost nl.affine_range / sequential_range loops (static_range loops, unrolled as
        # Python loops are, not counted): [first op, end op (None while running), loop loc]; `outer` is the
        # running one's index (None outside every such loop): a tile declared there has it as its scope
        # iteration (_alloc, kernels/api/alloc_rule.h "Scope").
        self.outer_iters = []
        self.outer = None
        # Every iteration of every nl.*_range loop: [first op, end op, kind, loop loc, loop id, iteration, first
        # storage uid (those from it on were made in the iteration or after it), depth (its index in `scope`)];
        # `scope` the running ones, outermost first (a storage declared there keeps it: _loops' checks).
        self.iters = []
        self.scope = ()
        self.escaped = {}  # storage uid -> the local variable still naming it after its loop (_loops)
        # (loop instance, site, place in the unrolled body, occurrence) -> the allocator, shape and dtype a
        # directly allocated tensor had in the first iteration of the outermost affine / sequential loop around
        # it (_direct.traced_once); occurrences counted per (iteration record, site)
        self.loop_allocs = {}
        self.direct_decls = 0  # directly allocated tensors declared so far (_Range: a body declaring one)
        self.loop_alloc_seen = {}
        self.returned = ()
        # (shape, space, dtype name) of result tiles checked -> (dims, rect, bytes per partition) of the whole
        self.tile_shapes = {}
        self.fresh = {}
        # op index -> the tensor_copy emitted right after that op (a retargeted result used again:
        # _lower.materialize); none, the usual case
        self.followers = {}
        # storage uid -> (index-space shape, first index per dim) of a tile a masked call made (_lower.mask_box)
        self.mask_boxes = {}
        # Storage uids of such tiles that a later call wrote whole (a dst= call, `t[...] = ...`): the kernel's
        # masked result is then its whole tile (_lower.mark_filled, _void.wrapper)
        self.filled = set()
        # Storage uid -> [(first index, size) per dim] of the part a masked call's result that the kernel sees
        # at its tile's whole shape (a LoadPart) holds: a write reaching outside it fills the tile (Trace.filled;
        # _lower.held_part, note_writes)
        self.held = {}
        # (mask, {id(view): (view, dims)}) of the last apply_mask: the dims of each view it returned that the
        # mask bounds, as it applied them (a variable indexes the dim it indexes, not its axis's), for the
        # warning of a call reducing a dim its own mask bounds (_lower._masked_dims)
        self.mask_dims = None
        # Storage uids of tiles made by calls that emitted nothing (a mask selecting nothing), and while such a
        # call runs (the number of storages before it, the frame of the wrapper that ends it) (_void)
        self.void = set()
        self.voiding = None
        self.dropped = 0  # ops marked dropped (drop()): none, the usual case, and the schedule takes ops as they are
        self.dropped_at = []  # their indices
        self.entry_sites = {}  # instruction offset in the kernel function -> its call_stack()
        self.site_locs = {}  # call_stack() -> the Loc of its innermost frame (new tiles' loc)
        self.entry_tiles = {}  # instruction offset in the kernel function -> (its call_stack(), that Loc) (new_tile)
        # Instructions the builder may still emit (Kernel.instructions_left, "max_instructions"): the trace
        # stops there, while the kernel runs, not after it (an endless loop would fill the host's memory).
        self.limit = 1 << 62
        self.max_ops = 1 << 62  # the builder's limit itself; `limit` is also the next memory check (_budget)
        self.kernel = None
        # Idents of the threads other than the tracing one that were running when the kernel started (a thread
        # an earlier kernel left running): an op they record would land in this kernel's program (or the other
        # core's), so record() refuses it (run_program sets it).
        self.foreign = frozenset()
        self.psum_groups = {}  # PSUM storage uid -> its open accumulation groups (_ops.touch_psum)
        # (id of an HBM view, the two slices' start, stop, step) -> (that view, the view its slicing gave):
        # a tiled kernel slices the same tiles of its inputs again and again (NkiTensor.__getitem__).
        self.hbm_slices = {}
        # storage uid -> {id(view): (view, error, Loc)} of the .ap views made of it that reach outside it, else
        # None (the usual case): the range is checked where an instruction uses such a view (record), not where
        # .ap makes it (NkiTensor._ap; tester23x F3)
        self.bad_ap = None

    # ---- recording
    def record(self, name, args, reads, writes, attrs, loc=None):
        if type(reads) is not tuple:
            reads = tuple(reads)
        if type(writes) is not tuple:
            writes = tuple(writes)
        if self.foreign and _get_ident() in self.foreign:
            _foreign_call(self, loc)
        ops = self.ops
        i = len(ops)
        if i >= self.limit:
            self.over_limit(loc or caller_loc())
        # Op(name, args, reads, writes, attrs, loc, i), its fields set here (a class call with __init__ costs as
        # much again; python/tests/test_nki_fast_paths.py checks the fields).
        op = _new(Op)
        op.name = name
        op.args = args
        op.reads = reads
        op.writes = writes
        op.attrs = attrs
        op.loc = loc or caller_loc()
        op.index = i
        op.load = False
        ops.append(op)
        if self.bad_ap is not None:
            _bad_ap(self.bad_ap, op, reads, writes)
        for v in reads:
            st = v.st
            if st.trace is not self:
                _stale(self, op, v)
            if st.first < 0:
                st.first = i if st.moved_to is None else _materialize(self, st, op)
            st.last = i
        for v in writes:
            st = v.st
            if st.trace is not self:
                _stale(self, op, v)
            if st.first < 0:
                st.first = i if st.moved_to is None else _materialize(self, st, op)
            st.last = i
        if self.held:
            _note_writes(self, writes)
        return op

    def over_limit(self, loc):
        """Every op emits at least one instruction: one op more than the builder may still emit fails now,
        with the builder's own message (the limit, its key, this kernel line). Before that, every
        _budget.CHECK_EVERY ops: the host-memory check (_budget.check)."""
        n = len(self.ops)
        if n < self.max_ops:
            from . import _budget

            _budget.check(n, self.max_ops, loc)
            self.limit = min(self.max_ops, n + _budget.CHECK_EVERY)
            return
        if self.kernel is not None:
            self.kernel.fail_instruction_limit(loc=(loc[0], loc[1]) if loc else None)
        raise NkiError(f"the kernel records more than {self.max_ops} instructions (max_instructions)", loc=loc)

    def unique_name(self, base):
        n = self.names.get(base, 0)
        self.names[base] = n + 1
        return base if n == 0 else f"{base}.{n}"

    def call_stack(self, depth=2):
        """(file, line) of each frame from the kernel function down to the caller of nki: an allocation
        site (a tile declared at the same line of the same helper called from the same line is one site).
        `depth`: where the kernel's frame is when the nki call came straight from it (2: call_stack's
        caller's caller; more when the frames between are nki's own, e.g. nl.load -> _lower.load ->
        new_tile): that frame is looked at first, without making the frames between (the usual case)."""
        if depth > 2:
            f = sys._getframe(depth)
            if f.f_code is WRAPPER_CODE:
                f = f.f_back  # an nl call through language._names_errors: the kernel's frame is one further
            if f.f_code is self.entry_code and self.entry_outside:
                site = self.entry_sites.get(f.f_lasti)
                if site is None:
                    site = self.entry_sites[f.f_lasti] = ((f.f_code.co_filename, f.f_lineno),)
                return site
        f = sys._getframe(2)
        frames = []
        entry = self.entry_code
        internal = _errors._internal
        while f is not None:
            code = f.f_code
            fn = code.co_filename
            r = internal.get(fn)
            if r is None:
                r = _errors._in_package(fn)
            if not r:
                if code is entry and not frames:
                    # A call in the kernel function itself (the usual site): one tuple per instruction
                    # offset, made once (its line is found once too).
                    site = self.entry_sites.get(f.f_lasti)
                    if site is None:
                        site = self.entry_sites[f.f_lasti] = ((fn, f.f_lineno),)
                    return site
                frames.append((fn, f.f_lineno))
            if code is entry:
                break
            f = f.f_back
        frames.reverse()
        return tuple(frames)


def drop(op):
    """Marks a recorded op as not emitted (a memset a matmul's overwrite makes useless)."""
    op.attrs["dropped"] = True
    _current.dropped += 1
    _current.dropped_at.append(op.index)


class _Range:
    """nl.affine_range / sequential_range / static_range: iterates Python ints (the kernel is unrolled while
    it is traced, as the compiler's tracer does) and records the loop for allocation and scheduling."""

    __slots__ = ("kind", "r", "loc", "in_order")

    def __init__(self, kind, args):
        ints = []
        for a in args:
            # Integers only (as Python's range): a float such as 1.5 was truncated to 1 iteration.
            if isinstance(a, bool) or not hasattr(a, "__index__"):
                raise NkiError(f"nl.{kind}: bounds must be integers known while tracing, got "
                               f"{type(a).__name__} {a!r:.60}")
            ints.append(a.__index__())
        if len(ints) == 3 and ints[2] == 0:  # (Python's range says "range() arg 3 must not be zero")
            raise NkiError(f"nl.{kind}({', '.join(map(str, ints))}): step 0: a loop's step must not be zero")
        self.kind = kind
        self.r = range(*ints)
        try:
            len(self.r)
        except OverflowError:  # (len() of a range past sys.maxsize: Python's OverflowError from trnsim's code)
            raise NkiError(f"nl.{kind}({', '.join(map(str, ints))}): more iterations than a kernel can trace "
                           f"(each is traced; max_instructions bounds a kernel's instructions)") from None
        self.loc = caller_loc()
        self.in_order = False  # directives=no_reorder(): the loop's instructions keep program order

    def __iter__(self):
        t = _current
        if t is None:
            return iter(self.r)
        return self._iter(t)

    def _iter(self, t):
        # The outermost affine_range / sequential_range loop: its iterations are the allocation scopes (_alloc).
        # A static_range loop is none: NKI unrolls it while tracing, as it does a Python loop, which trnsim
        # cannot see, so the two must allocate alike (tester23ah F5).
        outermost = self.kind != "static_range" and all(k == "static_range" for k, _n, _loc in t.loops)
        t.loops.append((self.kind, len(self.r), self.loc))
        if not self.r:
            t.empty_loops.append((self.kind, self.r, self.loc))
        its = t.outer_iters
        scope, loop, rec = t.scope, len(t.iters), None
        first = len(t.ops)
        traced = self.kind != "static_range"
        direct = t.direct_decls
        kept = None  # the counters the body advances, as its first iteration left them (_keep_first)
        state = None  # the ints reachable from the body's names, as its first iteration left them (_int_state)
        carried = _carried_state(self.loc, sys._getframe(1)) if traced and len(self.r) > 1 else None
        moved = ()  # the names of `carried` whose value the first iteration changed
        try:
            for n, i in enumerate(self.r):
                if outermost:
                    t.outer = len(its)
                    its.append([len(t.ops), None, self.loc])
                rec = [len(t.ops), None, self.kind, self.loc, loop, n, len(t.storages), len(scope), scope]
                t.iters.append(rec)
                t.scope = scope + (rec,)
                yield i
                rec[1] = len(t.ops)
                if outermost:
                    its[-1][1] = len(t.ops)
                if n == 0 and traced and len(self.r) > 1:
                    kept = _counters(self.loc, sys._getframe(1))
                    if carried:
                        moved = _carried_changes(carried, sys._getframe(1))
                    if t.direct_decls:  # (a kernel placing tiles directly: the state its allocator keeps)
                        state = _int_state(self.loc, sys._getframe(1))
            if t.direct_decls > direct:
                rebound = _keep_first(kept, sys._getframe(1)) if kept else ()
                if state:
                    _restore(state)
                for k in rebound:
                    t.kernel.warn(str(self.loc), (
                        f"nl.{self.kind}: its body rebinds '{k}' ({type(kept[k]).__name__}), which after the loop "
                        "is what its last iteration left, not its first as after NKI's one trace of the body: "
                        "trnsim sets back only the integers the body changes (docs/nki.md \"Direct allocation\"), "
                        f"so a tile placed from '{k}' after the loop may lie elsewhere than on the device"))
            for k, what, before, after in moved:
                if what == "len" or t.direct_decls == direct:  # (a counter of direct allocation: _keep_first)
                    _warn_carried(t, self, k, what, before, after)
        finally:
            t.loops.pop()
            t.scope = scope
            if self.in_order:
                from ._schedule import keep_order

                keep_order(t, first)
            if rec is not None:
                if rec[1] is None:
                    rec[1] = len(t.ops)
                if self.kind != "static_range":
                    from . import _loops
                    _loops.note_exit(t, loop, sys._getframe(1))
            if outermost:
                if its and its[-1][1] is None:
                    its[-1][1] = len(t.ops)
                t.outer = None

    def __len__(self):
        return len(self.r)

    def __reversed__(self):
        return reversed(self.r)


_ADVANCED = {}  # (file, line of an nl.*_range call) -> (the names its for statement's body advances, or (),
#                                                       the names the body uses)


def _advanced(loc):
    """The local names the body of the `for` statement whose iterable is at `loc` advances: targets of an
    augmented assignment (`cur += size`) or of an assignment reading the name itself (`cur = cur + size`),
    not the loop's own targets nor names in functions defined in the body; () when no such statement."""
    return _body_names(loc)[0]


def _for_node(loc):
    """The ast.For statement of file loc[0] whose iterable spans line loc[1], or None (no source, no such loop)."""
    import ast
    import linecache

    try:
        tree = ast.parse("".join(linecache.getlines(loc[0])))
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and node.iter.lineno <= loc[1] <= (node.iter.end_lineno or node.iter.lineno):
            return node
    return None


def _body_names(loc):
    """(_advanced, the names the body uses but the loop's own targets: variables, objects, functions)."""
    got = _ADVANCED.get(loc)
    if got is not None:
        return got
    import ast

    got = ((), ())
    node = _for_node(loc)
    if node is not None:
        own = {x.id for x in ast.walk(node.target) if isinstance(x, ast.Name)}
        names, todo = set(), list(node.body)
        while todo:
            x = todo.pop()
            if isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(x, ast.AugAssign) and isinstance(x.target, ast.Name):
                names.add(x.target.id)
            elif isinstance(x, (ast.Assign, ast.AnnAssign)) and x.value is not None:
                read = {y.id for y in ast.walk(x.value) if isinstance(y, ast.Name)}
                for tg in (x.targets if isinstance(x, ast.Assign) else [x.target]):
                    if isinstance(tg, ast.Name) and tg.id in read:
                        names.add(tg.id)
            todo.extend(ast.iter_child_nodes(x))
        used = {x.id for b in node.body for x in ast.walk(b) if isinstance(x, ast.Name)}
        got = (tuple(sorted(names - own)), tuple(sorted(used - own)))
    _ADVANCED[loc] = got
    return got


def _carried_names(loc):
    """(names, lens) of the `for` statement whose iterable is at `loc`: the local names its body advances
    (_advanced) and reads in another statement, and the names whose len() the body reads; neither the loop's
    own targets nor a name the body sets afresh (`off = i * 128`, `used = []`, an inner loop's target), whose
    value one iteration cannot carry to the next."""
    got = _CARRIED.get(loc)
    if got is not None:
        return got
    import ast

    got = ((), ())
    node = _for_node(loc)
    if node is not None:
        own = {x.id for x in ast.walk(node.target) if isinstance(x, ast.Name)}
        fresh, reads, lens, todo = set(own), set(), set(), [(b, None) for b in node.body]
        while todo:
            x, setting = todo.pop()
            if isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(x, (ast.Assign, ast.AnnAssign)) and x.value is not None:
                read = {y.id for y in ast.walk(x.value) if isinstance(y, ast.Name)}
                setting = set()
                for tg in (x.targets if isinstance(x, ast.Assign) else [x.target]):
                    for y in ast.walk(tg):
                        if isinstance(y, ast.Name):
                            (setting if y.id in read else fresh).add(y.id)
            elif isinstance(x, (ast.For, ast.comprehension)):
                fresh |= {y.id for y in ast.walk(x.target) if isinstance(y, ast.Name)}
            elif isinstance(x, ast.Name) and isinstance(x.ctx, ast.Load) and not (setting and x.id in setting):
                reads.add(x.id)
            elif isinstance(x, ast.Call) and isinstance(x.func, ast.Name) and x.func.id == "len" and (
                    len(x.args) == 1 and isinstance(x.args[0], ast.Name)):
                lens.add(x.args[0].id)
            todo.extend((c, setting) for c in ast.iter_child_nodes(x))
        names = set(_advanced(loc)) & reads
        got = (tuple(sorted(names - fresh)), tuple(sorted(lens - fresh)))
    _CARRIED[loc] = got
    return got


_CARRIED = {}  # (file, line of an nl.*_range call) -> _carried_names


def _carried_state(loc, frame):
    """[(name, "value" or "len", what it is before the loop)] of _carried_names in `frame`, about to run the
    loop at `loc`: the numbers among the names the body advances, the sizes of those whose len() it reads."""
    names, lens = _carried_names(loc)
    if not names and not lens:
        return None
    import numbers

    loc_vars = frame.f_locals
    out = [(k, "value", loc_vars[k]) for k in names if k in loc_vars and isinstance(loc_vars[k], numbers.Number)
           and not isinstance(loc_vars[k], bool) and not _trnsims(loc_vars[k])]
    for k in lens:
        if type(loc_vars.get(k)) in (list, dict, tuple, str):
            out.append((k, "len", len(loc_vars[k])))
    return out


def _carried_changes(carried, frame):
    """[(name, kind, before, after)] of `carried` (_carried_state) that the loop's first iteration changed."""
    loc_vars, out = frame.f_locals, []
    for k, what, before in carried:
        v = loc_vars.get(k)
        try:
            after = len(v) if what == "len" else v
            if after != before:
                out.append((k, what, before, after))
        except Exception:
            continue  # (rebound to something len() or != does not answer)
    return out


def _warn_carried(t, loop, k, what, before, after):
    """The warning of a value a traced loop's body carries from one iteration to the next (tester23al F3:
    `off += 128` then `x[off:off + 128, :]`; `used.append(...)` then `mod_alloc(base_addr=256 * len(used))`)."""
    shown = f"len({k})" if what == "len" else f"'{k}'"
    t.kernel.warn(str(loop.loc), (
        f"nl.{loop.kind}: its body changes {shown} ({before} before the loop, {after} after its first iteration) "
        f"and reads it: NKI traces the body once, so on the device every iteration sees {shown} as it was before "
        "the loop, while trnsim runs each iteration with what the earlier ones left (docs/nki.md \"Loops\"); "
        "compute it from the loop index instead"))


def _counters(loc, frame):
    """{name: value} of the locals of `frame` (running an nl.affine_range / sequential_range loop at `loc`) that
    the loop's body advances (_advanced), as they are when its first iteration ends."""
    names = _advanced(loc)
    if not names:
        return None
    loc_vars = frame.f_locals
    return {k: loc_vars[k] for k in names if k in loc_vars}


def _is_int(v):
    """An integer counter: a Python int or a NumPy integer, not a bool."""
    import numbers

    return type(v) is int or (isinstance(v, numbers.Integral) and not isinstance(v, bool))


def _trnsims(v):
    """One of trnsim's own objects (a tensor, a loop, a dtype)."""
    return str(getattr(type(v), "__module__", "")).startswith("trnsim.")


def _keep_first(kept, frame):
    """Sets the integer locals of `kept` back in `frame` (the loop is over): NKI traces an affine_range or
    sequential_range body once, so the counters the body advanced are, after the loop, as that one trace left
    them (docs/nki.md "Direct allocation": a tensor declared after the loop at `base_addr=cur`). Only in a loop
    whose body declared a directly allocated tensor. Returns the names of the other locals the body advances
    that the later iterations rebound to another value (`alloc = alloc.bump(size)`), which are not set back."""
    loc_vars = frame.f_locals
    changed, rebound = {}, []
    for k, v in kept.items():
        if k not in loc_vars:
            continue
        cur = loc_vars[k]
        if _is_int(v) and _is_int(cur):
            if cur != v:
                changed[k] = v
        elif cur is not v and not _trnsims(cur) and not _trnsims(v) and not (
                type(cur) is type(v) and type(v) in (float, str, bool, tuple) and cur == v):
            rebound.append(k)
    if not changed:
        return rebound
    if sys.version_info >= (3, 13):  # (PEP 667: f_locals writes through to the frame)
        for k, v in changed.items():
            loc_vars[k] = v
        return rebound
    import ctypes

    loc_vars.update(changed)
    ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))
    return rebound


def _int_state(loc, frame):
    """[(container, key, value)] of the ints reachable from the names the body of the loop at `loc` uses (as the
    body's one trace in NKI could change them), in `frame` running the loop, as its first iteration left them:
    attributes of objects (an allocator class's `self.offset += size`), list items and dict values, up to 3
    levels from the name; the module globals a function it names uses and the variables of its closure (a
    counter it advances with `global` or `nonlocal`); a global of the loop's own module the body names. Local
    ints are _counters'. A container is a list, a dict (an object's __dict__ too) or, for a closure variable,
    its cell (key None); an object's __slots__, the object (key the slot's name, as a str in a tuple)."""
    import types

    names = _body_names(loc)[1]
    if not names:
        return None
    f_locals, f_globals = frame.f_locals, frame.f_globals
    out, seen, todo = [], set(), []
    for k in names:
        if k in f_locals:
            todo.append((f_locals[k], 0))
        elif k in f_globals:
            v = f_globals[k]
            if _is_int(v):
                out.append((f_globals, k, v))
            else:
                todo.append((v, 0))
    budget = 20000  # (elements looked at: a large table reachable from the body is left after that many)
    while todo and budget > 0:
        obj, depth = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        kind = type(obj)
        if kind is types.FunctionType:
            g = obj.__globals__
            for k in obj.__code__.co_names:
                v = g.get(k)
                if _is_int(v):
                    out.append((g, k, v))
            for cell in obj.__closure__ or ():
                try:
                    v = cell.cell_contents
                except ValueError:  # (an empty cell)
                    continue
                if _is_int(v):
                    out.append((cell, None, v))
                elif depth < 3:
                    todo.append((v, depth + 1))
            continue
        if kind is list or kind is tuple:
            items, container = enumerate(obj), (obj if kind is list else None)
        elif kind is dict:
            items, container = list(obj.items()), obj
        elif isinstance(obj, (types.ModuleType, type, types.BuiltinFunctionType, types.MethodType)) or _trnsims(obj):
            continue  # (modules, classes, and trnsim's own objects: tensors, loops, dtypes)
        else:
            try:
                d = getattr(obj, "__dict__", None)
                slots = getattr(kind, "__slots__", ())
                slots = (slots,) if isinstance(slots, str) else slots
            except Exception:  # (an object that will not be looked at)
                continue
            items, container = (list(d.items()) if type(d) is dict else []), d
            for k in slots:
                try:
                    v = getattr(obj, k, None) if isinstance(k, str) else None
                except Exception:
                    continue
                if _is_int(v):
                    out.append((obj, (k,), v))
                elif v is not None and depth < 3:
                    todo.append((v, depth + 1))
        for k, v in items:
            budget -= 1
            if _is_int(v):
                if container is not None:
                    out.append((container, k, v))
            elif depth < 3 and not isinstance(v, (str, bytes, float, bool, type(None))):
                todo.append((v, depth + 1))
    return out


def _restore(state):
    """Sets each int of `state` (_int_state) that the loop's later iterations changed back to what the first
    left: NKI traces an affine_range or sequential_range body once (docs/nki.md "Direct allocation")."""
    for container, k, v in state:
        try:
            if k is None:
                if _is_int(container.cell_contents) and container.cell_contents != v:
                    container.cell_contents = v
            elif type(k) is tuple:
                if _is_int(getattr(container, k[0], None)) and getattr(container, k[0]) != v:
                    setattr(container, k[0], v)
            elif _is_int(container[k]) and container[k] != v:
                container[k] = v
        except (LookupError, ValueError, AttributeError, TypeError):
            continue  # (an item the later iterations removed)


def make_range(kind, *args, **kwargs):
    if not args:
        raise NkiError(f"nl.{kind} needs a stop (and optionally start, step)")
    from ._schedule import no_reorder

    in_order = isinstance(kwargs.get("directives"), no_reorder)  # (directives=nki.compiler.no_reorder())
    if in_order:
        kwargs = {k: v for k, v in kwargs.items() if k != "directives"}
    if kwargs:
        from ._errors import ignored_kwargs

        ignored_kwargs(f"nl.{kind}", kwargs)
    r = _Range(kind, args)
    r.in_order = in_order
    return r


_get_ident = threading.get_ident


def _note_writes(trace, writes):
    from . import _lower

    _lower.note_writes(trace, writes)


def _materialize(trace, st, op):
    """`st` is the tile of a result an assignment retargeted (_lower._retarget), used again by `op`."""
    from . import _lower

    return _lower.materialize(trace, st, op)


# The code of language._names_errors' wrapper (set there): a frame of it sits between an nl call and the kernel.
WRAPPER_CODE = None


def _stale(trace, op, v):
    """`v` belongs to another kernel's trace (kept in a global or a closure from an earlier call)."""
    trace.ops.pop()
    raise NkiError(f"{op.name}: tensor {v.st.name or '?'} {list(v.shape)} was made by an earlier kernel call "
                   "(kept past its kernel's return, e.g. in a global): a tensor lives only in the call of the "
                   "kernel that made it", op.loc)


def _bad_ap(bad_ap, op, reads, writes):
    """The error of an instruction using an .ap view reaching outside its tensor (NkiTensor._ap defers the check
    to here): at the instruction's line, naming the line that made the view."""
    for v in reads + writes:
        views = bad_ap.get(v.st.uid)
        if views is None:
            continue
        made = views.get(id(v))
        if made is not None and made[0] is v:
            raise NkiError(f"{op.name}: {made[1]} (the view made by .ap at {made[2]})", op.loc)
        bad = v.bounds_error()  # a view made of such a view (its slice, its reshape)
        if bad is not None:
            raise NkiError(f"{op.name}: {bad}", op.loc)


def _foreign_call(trace, loc):
    th = threading.current_thread()
    raise NkiError(f"an nki call from thread '{th.name}', which was already running when kernel "
                   f"{trace.entry_code.co_name if trace.entry_code else '?'} started (a thread an earlier kernel "
                   "left running), is not part of this kernel: join the threads a kernel starts before it "
                   "returns", loc or caller_loc())


def run_program(fn, args, kwargs, trace):
    """Runs the kernel function with `trace` recording; returns its result. trace.return_loc is then the
    (file, line) it returned from (None if that could not be seen)."""
    global _current
    me = threading.current_thread()
    trace.foreign = frozenset(th.ident for th in threading.enumerate() if th is not me)
    prev = _current
    _current = trace
    watch = _ReturnWatch(fn.__code__)
    try:
        return watch.call(fn, args, kwargs)
    finally:
        _current = prev
        trace.return_loc, trace.return_locals = watch.result()


class _ReturnWatch:
    """Finds the line a function returned from: a profile hook, removed as soon as the function's frame
    starts, keeps that frame, whose line after the return is the return statement's (no cost while the
    kernel runs). Not installed when another profiler is active."""

    def __init__(self, code):
        self.code = code
        self.frame = None

    def _hook(self, frame, event, arg):
        if event == "call" and frame.f_code is self.code:
            self.frame = frame
            sys.setprofile(None)

    def call(self, fn, args, kwargs):
        if sys.getprofile() is not None:
            return fn(*args, **kwargs)
        sys.setprofile(self._hook)
        try:
            return fn(*args, **kwargs)
        finally:
            if sys.getprofile() == self._hook:
                sys.setprofile(None)

    def result(self):
        """(Loc of the return, the function's local variables then), or (None, None)."""
        f, self.frame = self.frame, None
        if f is None or not f.f_lineno:
            return None, None
        return Loc((self.code.co_filename, f.f_lineno)), dict(f.f_locals)
