"""Runs a Python (NKI) kernel on the builder: the Python half of python/src/py_kernel.cpp.

NKI_CONTRACT.md section 3 / docs/nki.md: the kernel function runs once per core inside
``_core.build_program``; its inputs are HBM tensors declared from the workload's dtypes and shapes (wrapped by
``trnsim.nki._hooks.wrap_input``), its parameters come as keyword arguments, and the tensors it returns
(unwrapped by ``trnsim.nki._hooks.unwrap``) are the run's outputs.
"""

import contextlib
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import json
import os
import sys
import traceback

from . import _core

class _Sources:
    """The Python source files a workload's kernel ran, each with the SHA-256 of the bytes executed: the
    kernel and reference files (load_function) and every module they import from their folders (a
    meta-path finder), the standard library, site packages and trnsim itself excepted. A sweep keys a point
    by them (tools/sweep/point_check.cpp) and checks that its child ran the same bytes. Modules are executed
    from the bytes hashed, never from a cached .pyc."""

    def __init__(self):
        self.hashes = {}    # absolute path -> sha256 hex, in the order loaded
        self.folders = []   # the kernel and reference files' folders
        self.modules = []   # names of the local modules imported this session
        self.files = {}     # absolute path -> module (load_function's, this session)
        self.dirs = {}      # module name (load_function's) -> the folder its file's neighbours come from
        self.own = {}       # folder -> {name: module}: its local modules, set aside while another folder's run


_session = _Sources()


class KernelExit(Exception):
    """Kernel code (its file, a module it imports, its reference) called os._exit, sys.exit, exit or quit, or
    raised SystemExit: trnsim's process is not the kernel's to end (an os._exit(0) made `trnsim run` exit 0
    having written nothing). Raised at that line instead; ``loc`` is 'file.py:line', ``bare`` the message
    without it (as NkiError's)."""

    def __init__(self, call, loc, whose="the kernel's code"):
        self.loc = loc
        self.bare = ("%s called by %s: a kernel cannot end trnsim's process (raise an exception to stop it)"
                     % (call, whose))
        super().__init__("%s: %s" % (loc, self.bare) if loc else self.bare)


def _user_line(tb=None):
    """'file.py:line' of the innermost frame outside trnsim (of traceback ``tb``, else of the calling stack)."""
    if tb is not None:
        frames = [f for f in traceback.extract_tb(tb) if not _internal(f.filename)]
        return "%s:%d" % (os.path.basename(frames[-1].filename), frames[-1].lineno) if frames else None
    f = sys._getframe(1)
    while f is not None and _internal(f.f_code.co_filename):
        f = f.f_back
    return "%s:%d" % (os.path.basename(f.f_code.co_filename), f.f_lineno) if f is not None else None


class _NoExit:
    """While kernel code runs: os._exit, sys.exit, exit and quit raise KernelExit naming the call and the
    line, and a SystemExit the code raises becomes a KernelExit (not an exit of the process)."""

    _depth = 0
    _whose = []  # whose code runs, innermost last ("the kernel's code", "the reference's code", ...)
    _WHOSE = {"kernel": "the kernel's code", "reference": "the reference's code",
              "load": "the code of a kernel or reference file as it was loaded"}

    def __init__(self, what):
        self.what = what

    @staticmethod
    def _stand_in(name):
        def stand_in(*args, **kwargs):
            shown = ", ".join([repr(a) for a in args] + ["%s=%r" % kv for kv in kwargs.items()])
            raise KernelExit("%s(%s)" % (name, shown), _user_line(), _NoExit._current_whose())
        stand_in.__name__ = name.rpartition(".")[2]
        return stand_in

    @staticmethod
    def _current_whose():
        return _NoExit._whose[-1] if _NoExit._whose else "the kernel's code"

    def __enter__(self):
        import builtins
        _NoExit._whose.append(self._WHOSE.get(self.what, "the kernel's code"))
        _NoExit._depth += 1
        if _NoExit._depth == 1:
            self.saved = [(os, "_exit", os._exit), (sys, "exit", sys.exit)]
            self.saved += [(builtins, n, getattr(builtins, n)) for n in ("exit", "quit") if hasattr(builtins, n)]
            for mod, name, _ in self.saved:
                setattr(mod, name, self._stand_in(("os." if mod is os else "sys." if mod is sys else "") + name))
        return self

    def __exit__(self, etype, value, tb):
        whose = _NoExit._whose.pop()
        _NoExit._depth -= 1
        if _NoExit._depth == 0:
            for mod, name, fn in self.saved:
                setattr(mod, name, fn)
        if etype is not None and issubclass(etype, SystemExit):
            code = "" if value is None or value.code is None else repr(value.code)
            # With the kernel's frames (the traceback printed for the other ways out, whose stand-ins raise
            # inside the kernel's call).
            raise KernelExit("SystemExit(%s)" % code, _user_line(tb), whose).with_traceback(tb) from None
        return False


@functools.lru_cache(maxsize=None)
def _excluded_dirs():
    import sysconfig
    dirs = {os.path.dirname(os.path.abspath(__file__))}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        d = sysconfig.get_paths().get(key)
        if d:
            dirs.add(os.path.realpath(d))
    dirs.update(os.path.realpath(p) for p in sys.path if "site-packages" in p or "dist-packages" in p)
    return tuple(d.rstrip(os.sep) + os.sep for d in dirs)


def _under(path, dirs):
    return any(path.startswith(d) for d in dirs)


def _read_hashed(path):
    import hashlib
    with open(path, "rb") as f:
        data = f.read()
    _session.hashes[path] = hashlib.sha256(data).hexdigest()
    nul = data.find(b"\0")
    if nul >= 0:  # compile() would say only "source code string cannot contain null bytes", naming no file
        line = data.count(b"\n", 0, nul) + 1
        raise SyntaxError("%s has a null byte (byte %d, line %d): a Python source file is text" % (
            path, nul, line), (path, line, nul - data.rfind(b"\n", 0, nul), None))
    return data


class _LocalLoader(importlib.abc.SourceLoader):
    def __init__(self, fullname, path):
        self.name, self.path = fullname, path

    def get_filename(self, fullname):
        return self.path

    def get_data(self, path):
        return _read_hashed(path) if path == self.path else open(path, "rb").read()

    def exec_module(self, module):
        _session.modules.append(module.__name__)
        super().exec_module(module)


class _LocalFinder(importlib.abc.MetaPathFinder):
    """Imports a module found under a kernel's folder through _LocalLoader (hashing what it runs)."""

    def find_spec(self, fullname, path=None, target=None):
        if not _session.folders:
            return None
        spec = None
        if path is None and _InFolder.current:  # the folder of the file whose code runs comes first
            spec = importlib.machinery.PathFinder.find_spec(fullname, [_InFolder.current[-1]])
        if spec is None:
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        origin = getattr(spec, "origin", None) if spec is not None else None
        if not origin or not origin.endswith(".py"):
            return None
        # Keyed by the path it is imported as, not the file a symlink there points to: a link retargeted to
        # a file of the same bytes is the same source (sources()).
        real, origin = os.path.realpath(origin), os.path.abspath(origin)
        if not _under(real, tuple(f + os.sep for f in _session.folders)) or _under(real, _excluded_dirs()):
            return None
        return importlib.util.spec_from_file_location(
            fullname, origin, loader=_LocalLoader(fullname, origin),
            submodule_search_locations=spec.submodule_search_locations)


def begin_load():
    """Starts a workload's loading: forgets the files an earlier workload loaded (their local modules are
    imported afresh, as a new process would), so sources() names exactly what this one runs."""
    global _session
    for name in _session.modules:
        sys.modules.pop(name, None)
    for module in _session.files.values():
        sys.modules.pop(module.__name__, None)
    _session = _Sources()
    if not any(isinstance(f, _LocalFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _LocalFinder())


def record_source(path, data):
    """Records a data file the kernel read while it was traced (nl.shared_constant's .npy) among sources(), by the
    SHA-256 of the bytes read."""
    import hashlib

    _session.hashes[path] = hashlib.sha256(data).hexdigest()


def sources():
    """{absolute path: SHA-256 hex} of the Python files this workload's kernel ran (see _Sources): each path
    as the workload or the import names it (symlinks not resolved), the hash of the bytes run."""
    return dict(_session.hashes)


_serial = [0]


def _package_of(folder):
    """(root, dotted name) of the package `folder` is, when it holds an __init__.py: root is the folder
    above its outermost package; ("", "") otherwise."""
    parts = []
    while os.path.isfile(os.path.join(folder, "__init__.py")) and os.path.dirname(folder) != folder:
        parts.insert(0, os.path.basename(folder))
        folder = os.path.dirname(folder)
    return (folder, ".".join(parts)) if parts else ("", "")


def _check_package_name(path, root, top):
    """ImportError when the package a kernel file sits in has the name of a module Python already imported from
    elsewhere (json, random, typing: trnsim's own imports): its relative imports would resolve in that module."""
    held = sys.modules.get(top)
    if held is None:
        return
    mine = os.path.realpath(os.path.join(root, top))
    theirs = os.path.realpath(getattr(held, "__file__", None) or "")
    if not theirs.startswith(mine + os.sep):
        raise ImportError("%s is inside the package '%s' (%s), but Python has already imported another module of "
                          "that name (%s): rename the package's folder, or name a kernel file outside it that "
                          "imports the kernel" % (path, top, mine, theirs or "built in"))


def _shadowed_by(folder):
    """The names of the local modules already imported (by another workload file, from another folder) that
    `folder` has its own file for, each top-level name with its submodules: a file of `folder` that imports
    one must get `folder`'s, as it does run from there (a kernel's utils.py and its reference's)."""
    tops = {n.split(".")[0] for n in _session.modules}
    clash = []
    for top in sorted(tops):
        held = getattr(sys.modules.get(top), "__file__", None)
        if not held:
            continue
        spec = importlib.machinery.PathFinder.find_spec(top, [folder])
        origin = getattr(spec, "origin", None) if spec is not None else None
        if origin and os.path.isfile(origin) and os.path.realpath(origin) != os.path.realpath(held):
            clash.append(top)
    return [n for n in sys.modules if n.split(".")[0] in clash]


class _InFolder:
    """While code of a workload file runs (the file as it loads, the kernel's call, the reference's call): an
    `import` in it, at the top or run later inside a function, gets the module of that name beside the file,
    not the one another workload file's folder gave (a kernel's helper.py and its reference's). The other
    folder's modules are set aside meanwhile and this folder's kept for its next run (the same module objects
    its file imported when it loaded)."""

    current = []  # the folders whose code runs, innermost last

    def __init__(self, folder):
        self.folder = folder

    def __enter__(self):
        if self.folder is None:
            return self
        self.aside = {n: sys.modules.pop(n) for n in _shadowed_by(self.folder)}
        sys.modules.update(_session.own.pop(self.folder, {}))
        _InFolder.current.append(self.folder)
        return self

    def __exit__(self, etype, value, tb):
        if self.folder is None:
            return False
        _InFolder.current.pop()
        tops = {n.split(".")[0] for n in self.aside}
        mine = {n: sys.modules.pop(n) for n in list(sys.modules) if n.split(".")[0] in tops}
        if mine:
            _session.own.setdefault(self.folder, {}).update(mine)
        sys.modules.update(self.aside)
        return False


def _folder_of(func):
    """The folder whose modules `func`'s code imports: its file's (load_function's), or None for a function
    of no workload file (a Python caller's, whose imports are Python's own)."""
    try:
        func = inspect.unwrap(resolve_kernel(func)[0])
    except (TypeError, ValueError):
        return None
    return _session.dirs.get(getattr(func, "__module__", None))


def load_function(path, name):
    """The object called ``name`` in the Python file ``path`` (executed once per path and begin_load(), as a
    module of its own, from the bytes sources() hashes). LookupError if the file defines no such name."""
    # The nki module names resolve to trnsim's before the kernel's imports run.
    importlib.import_module(__package__ + ".nki")

    # The file as the workload names it (sources() key it by that path, so a symlink retargeted to a file of
    # the same bytes is no change); its neighbours are imported from the folder of the file it is.
    path = os.path.abspath(path)
    module = _session.files.get(path)
    if module is None:
        mod_name = "_trnsim_kernel_%d" % _serial[0]
        _serial[0] += 1
        kernel_dir = os.path.dirname(os.path.realpath(path))
        root, package = _package_of(kernel_dir)
        if package:
            # A file inside a package (nki-library's kernels): a module of it, so its relative imports
            # (`from ..utils import x`) resolve, with the package's root importable and its files hashed.
            mod_name = package + "." + mod_name
            _check_package_name(path, root, package.split(".")[0])
            if root not in _session.folders:
                _session.folders.append(root)
            if root not in sys.path:
                sys.path.insert(0, root)
        if kernel_dir not in _session.folders:
            _session.folders.append(kernel_dir)
        code = compile(_read_hashed(path), path, "exec", dont_inherit=True)
        spec = importlib.util.spec_from_loader(mod_name, loader=None, origin=path)
        module = importlib.util.module_from_spec(spec)
        module.__file__ = path
        module.__package__ = package or None
        sys.modules[mod_name] = module
        # A kernel file may import its neighbours, which come first: a utils.py beside it rather than one
        # beside the workload's other file, whose module of that name is set aside while this file runs
        # (and while its functions run: _InFolder).
        if kernel_dir in sys.path:
            sys.path.remove(kernel_dir)
        sys.path.insert(0, kernel_dir)
        _session.dirs[mod_name] = kernel_dir
        try:
            # What the file prints as it loads goes to stderr: stdout is the command's result (`trnsim list
            # --json` is read as JSON), not a kernel's debug output.
            with _InFolder(kernel_dir), _NoExit("load"), contextlib.redirect_stdout(sys.stderr):
                exec(code, module.__dict__)
        except BaseException:
            del sys.modules[mod_name]
            raise
        _session.files[path] = module
    if not hasattr(module, name):
        defined = sorted(n for n, v in vars(module).items()
                         if not n.startswith("_") and callable(v) and getattr(v, "__module__", None) == module.__name__)
        raise LookupError("'%s' is not defined in %s (%s)" % (
            name, os.path.basename(path),
            "it defines " + ", ".join(defined) if defined else "it defines no function"))
    obj = getattr(module, name)
    if not callable(obj):
        raise LookupError("'%s' in %s is %s, not a function" % (
            name, os.path.basename(path), "a module" if isinstance(obj, type(os)) else "a " + type(obj).__name__))
    return obj


def resolve_kernel(obj):
    """(function, grid): the function an nki.jit object wraps (``.func``) and its launch grid (``.grid``,
    1 or 2 programs, or None), or a plain function and None. A function nki.baremetal / nki.simulate /
    nki.profile returned stands for the kernel it runs (``__trnsim_kernel__``)."""
    obj = getattr(obj, "__trnsim_kernel__", obj)
    if getattr(obj, "__trnsim_jit__", False):
        func = obj.func
        grid = getattr(obj, "grid", None)
    else:
        func, grid = obj, None
    if not callable(func):
        raise TypeError("%r is not a function" % (func,))
    if grid is not None:
        if isinstance(grid, (tuple, list)):
            n = 1
            for g in grid:
                n *= int(g)
            grid = n
        grid = int(grid)
        if grid not in (1, 2):
            raise ValueError("launch grid of %d programs: trnsim runs 1 or 2 (LNC2)" % grid)
    return func, grid


def _parameters(func):
    try:
        return list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return []


def input_order(kernel, names):
    """The input names in the order of the function's parameters; ValueError naming an input that is not
    one of them."""
    func, _ = resolve_kernel(kernel)
    params = _parameters(func)
    pos = {p.name: i for i, p in enumerate(params)}
    takes_kwargs = any(p.kind == p.VAR_KEYWORD for p in params)
    for n in names:
        if n not in pos and not takes_kwargs:
            raise ValueError(_not_a_parameter(n, func, params))
    return sorted(names, key=lambda n: pos.get(n, len(pos)))


def _not_a_parameter(name, func, params):
    shown = ", ".join(("*" if p.kind == p.VAR_POSITIONAL else "**" if p.kind == p.VAR_KEYWORD else "") + p.name
                      for p in params)
    star = [p.name for p in params if p.kind == p.VAR_POSITIONAL]
    return "'%s' is not a parameter of %s(%s)%s" % (
        name, func.__name__, shown, ": *%s parameters are not supported (each input is a named parameter of the "
        "kernel)" % star[0] if star else "")


def _where(func):
    """'kern (k.py:3)': the function's name and its def line, as the binding messages name it."""
    loc = def_loc(func)
    name = getattr(func, "__name__", "the kernel")
    return "%s (%s:%d)" % (name, os.path.basename(loc[0]), loc[1]) if loc else name


def binding_problem(kernel, inputs, params):
    """The first mismatch between a workload's "inputs" (names) and "params" (a dict) and the kernel
    function's signature, as (key, message), key naming the JSON entry ("params.eps", "inputs.b"); None
    when the call binds. Checked before the kernel runs, so the message is about the workload, not a
    TypeError from inside the call."""
    func, _ = resolve_kernel(kernel)
    params = params if isinstance(params, dict) else {}
    sig = _parameters(func)
    by_name = {p.name: p for p in sig}
    open_kwargs = any(p.kind == p.VAR_KEYWORD for p in sig)
    where = _where(func)
    inputs = list(inputs)
    values = [p.name for p in sig if p.name not in inputs and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    for n in inputs:
        p = by_name.get(n)
        if p is None and not open_kwargs:
            # The workload's mistake, before the reference's signature is looked at (which the extra input
            # would otherwise be blamed on).
            return ("inputs", _not_a_parameter(n, func, sig))
        if p is not None and p.kind == p.VAR_POSITIONAL:  # (the call passed it by keyword: a TypeError)
            return ("inputs.%s" % n, "%s takes *%s: *%s parameters are not supported (each input is a named "
                    "parameter of the kernel)" % (where, n, n))
        if p is not None and p.kind == p.VAR_KEYWORD:
            return None  # input_order names it
    for n in params:
        if n in inputs:
            return ("params.%s" % n, "'%s' is an input of %s (inputs.%s): a parameter cannot set it too" % (
                n, where, n))
        p = by_name.get(n)
        if p is not None and p.kind == p.POSITIONAL_ONLY:
            return ("params.%s" % n, "'%s' of %s is positional-only: params are passed by keyword" % (n, where))
        if (p is None and not open_kwargs) or (p is not None and p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)):
            return ("params.%s" % n, _core.no_parameter_message(  # the sweep's wording (tools/sweep/spec.cpp)
                where, n, values, none="none besides its inputs " + ", ".join(inputs)))
        if p is not None and params[n] is not None and p.default is not p.empty and _no_json_value(p.default):
            return ("params.%s" % n, "'%s' of %s takes a %s (default %s): no JSON value gives one (%s is a %s); "
                    "leave it out, or null, to keep the default" % (
                        n, where, _what_object(p.default), describe_params(p.default), json.dumps(params[n]),
                        type(params[n]).__name__))
    given = set(inputs) | {n for n, v in params.items()}
    for p in sig:
        if p.default is not p.empty or p.name in given or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.kind == p.KEYWORD_ONLY:
            return ("params.%s" % p.name, "required by %s, no default" % where)
        return ("inputs.%s" % p.name, "missing: %s takes %s and the workload gives %s (a value rather than "
                "a tensor goes in params.%s)" % (
                    where, ", ".join(q.name for q in sig if q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD)),
                    "input " + ", ".join(inputs) if len(inputs) == 1 else
                    "inputs " + ", ".join(inputs) if inputs else "no inputs", p.name))
    return None


def def_loc(func):
    """(file, line) of the ``def`` statement of the function (through nki.jit and functools.wraps wrappers;
    a decorated function's code starts at its first decorator), or None."""
    import linecache

    func = inspect.unwrap(func) if callable(func) else func
    code = getattr(func, "__code__", None)
    if code is None:
        return None
    line = code.co_firstlineno
    for n in range(line, line + 50):
        if linecache.getline(code.co_filename, n).lstrip().startswith(("def ", "async def ")):
            return (code.co_filename, n)
    return (code.co_filename, line)


def without_nulls(func, params):
    """``params`` without the JSON nulls given for parameters that have a default: null means the default
    (docs/nki.md), as an absent key does; None goes only to a parameter whose default is None or that has
    none."""
    defaults = {p.name for p in _parameters(func) if p.default is not p.empty}
    return {k: v for k, v in params.items() if v is not None or k not in defaults}


def takes_kwargs(func):
    """True if the function takes **kwargs: a workload's "params" (and a sweep) may then set any name."""
    return any(p.kind == p.VAR_KEYWORD for p in _parameters(func))


_JSON_TYPES = ((bool, "bool"), (int, "int"), (float, "float"), (str, "string"))


def describe_params(value):
    """A Python caller's keyword arguments as stats.json "params" shows them: JSON values as they are (NumPy
    scalars as their value, tuples as lists), anything else by name (``nl.int8``, ``dtype('float32')``,
    ``trnsim.nki.language.exp`` for a function); the kernel gets the objects themselves."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): describe_params(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [describe_params(v) for v in value]
    if hasattr(value, "dtype") and hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        return describe_params(value.item())
    name = getattr(value, "__qualname__", None)
    if name is not None:  # a function or class (its repr has an address, which differs run to run)
        return "%s.%s" % (getattr(value, "__module__", None) or "?", name)
    shown = repr(value)
    return shown if " at 0x" not in shown else "<%s object>" % type(value).__qualname__


def kernel_params(kernel, inputs):
    """The parameters a workload's "params" can set: the kernel function's parameters that are not among
    ``inputs`` (keyword arguments), each as {"name", "type", "default" (absent: required), "nullable"}; the
    type is the default's (bool, int, float, string), "string" when it has none (any JSON value goes). A
    default that is no JSON value (a dtype, a config object, a function, a tuple) makes the parameter optional
    (nullable: null or absent keeps it) and is shown as "default_shown" (describe_params' form)."""
    func, _ = resolve_kernel(kernel)
    inputs = set(inputs)
    out = []
    for p in _parameters(func):
        if p.name in inputs or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        d = {"name": p.name, "type": "string", "nullable": p.default is None}
        if p.default is p.empty:
            d["any"] = True  # no default, so no known type: any JSON value goes (shown so: `trnsim list`)
        else:
            for t, name in _JSON_TYPES:
                if isinstance(p.default, t):
                    d["type"], d["default"] = name, p.default
                    break
            else:
                if p.default is not None:
                    shown = describe_params(p.default)
                    d["nullable"] = True
                    d["default_shown"] = shown if isinstance(shown, str) else json.dumps(shown)
                    if _is_dtype(p.default):
                        d["default_shown"] += '; a dtype name sets it, e.g. "%s"' % _dtype_name(p.default)
                    elif _no_json_value(p.default):
                        d["default_shown"] += "; no JSON value gives a %s: leave it out" % _what_object(p.default)
        out.append(d)
    return out


def _dtype_name(value):
    """The NKI dtype name of a dtype default (nl.float32, np.float32, np.dtype('float16')), or None."""
    from .nki._dtypes import as_dtype

    if isinstance(value, str):
        return None
    try:
        return as_dtype(value).name
    except Exception:
        return None


def _is_dtype(value):
    return _dtype_name(value) is not None


def _no_json_value(default):
    """A parameter default no JSON value can stand for (a function, a class: the kernel calls it), so a workload
    cannot set the parameter: null or absent keeps the default. A dtype is set by its name."""
    return callable(default) and not _is_dtype(default)


def _what_object(value):
    return "class" if isinstance(value, type) else "function"


class CoreRunner:
    """Called by the builder once per core with the core's ``_core.Kernel``: declares the inputs, calls the
    kernel function, returns the names of the tensors it returned (None if it returned nothing)."""

    def __init__(self, func, inputs, params, as_given=False):
        from .nki import _hooks
        self.hooks = _hooks
        self.func = func
        self.inputs = inputs  # [(name, DType, shape)]
        # A workload's JSON params (a null is the default), or a Python caller's keyword arguments as given.
        self.params = params if as_given else without_nulls(inspect.unwrap(func), params)
        # The inputs are declared at the kernel's def line (where its parameters are), not at trnsim's wrapper.
        self.loc = def_loc(func)
        # How many inputs are the function's leading positional parameters (in order).
        params_ = [p for p in _parameters(func)
                   if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self.positional_count = 0
        for p, (n, _, _) in zip(params_, inputs):
            if p.name != n:
                break
            self.positional_count += 1

    def __call__(self, k):
        wrap = self.hooks.wrap_input
        tensors = [wrap(k.input(n, dt, shape, loc=self.loc)) for n, dt, shape in self.inputs]
        # Inputs that are the function's leading parameters go positionally, any other by keyword.
        lead = self.positional_count
        kwargs = dict(self.params)
        kwargs.update((n, t) for (n, _, _), t in zip(self.inputs[lead:], tensors[lead:]))
        with _InFolder(_folder_of(self.func)), _NoExit("kernel"):
            ret = self.hooks.call(self.func, tensors[:lead], kwargs)
        if ret is None:
            return None
        items = list(ret) if isinstance(ret, (tuple, list)) else [ret]
        names = []
        for item in items:
            view = self.hooks.unwrap(item)
            if not isinstance(view, _core.View):
                raise TypeError("the kernel returned %r: expected tensors it allocated in nl.shared_hbm" % (item,))
            if view.space != _core.MemSpace.HBM:
                raise TypeError("the kernel returned %s: an output must be an HBM tensor (nl.shared_hbm)"
                                % view.describe())
            if view.name not in names:
                names.append(view.name)
        return names


def _reference_args(ref, params):
    """The params a reference is called with: every one given (nulls for its defaulted ones dropped: null
    is the default)."""
    return without_nulls(ref, params)


def _reference_lacks(ref, params):
    """A message naming the reference and the first param it does not take (no such parameter and no
    **kwargs), or None: calling it without one would compare the kernel's outputs with another computation
    (a numerics FAIL that says nothing of why)."""
    sig = _parameters(ref)
    if not sig or any(p.kind == p.VAR_KEYWORD for p in sig):
        return None
    accepted = {p.name for p in sig if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    for k, v in params.items():
        if k not in accepted and v is not None:
            return ("%s does not take the kernel's parameter '%s' (%s=%r is given to the kernel): the reference "
                    "is called with the same params; add %s to its parameters (or **kwargs to ignore it)" % (
                        _where(ref), k, k, v, k))
    return None


def reference_problem(ref, inputs, params):
    """Why ``ref(*inputs arrays, **params)`` cannot be called (a message for reference.function), or
    None."""
    try:
        sig = inspect.signature(ref)
    except (TypeError, ValueError):
        return None
    params = params if isinstance(params, dict) else {}
    lacks = _reference_lacks(ref, params)
    if lacks:
        return lacks
    kw = _reference_args(ref, params)
    try:
        sig.bind(*[None] * len(inputs), **kw)
    except TypeError as e:
        return "%s cannot be called as the reference: it is called as %s(%s) (the kernel's inputs in order, " \
            "then the params it names), and %s" % (
                _where(ref), getattr(ref, "__name__", "ref"), ", ".join(list(inputs) + ["%s=..." % k for k in kw]),
                str(e).replace("%s() " % getattr(ref, "__name__", ""), "it "))
    return None


def call_reference(ref, arrays, params, outputs, as_given=False):
    """The reference's outputs: ``ref(*arrays, **params)`` (a workload's JSON params without the nulls for
    its defaulted parameters; a Python caller's keyword arguments ``as_given``),
    as a list of float64 arrays, one for each of the kernel's ``outputs`` ([(name, shape)], in return
    order). _core.InputError naming reference.function, the reference's def line and the outputs expected
    when it returns anything else (None, a dict, a string, complex values, too few or too many arrays, another
    shape)."""
    import numpy as np

    from . import _core

    if isinstance(outputs, int):  # a count (older callers): names and shapes unknown
        outputs = [("output %d" % i, None) for i in range(outputs)]
    outputs = [(n, list(s) if s is not None else None) for n, s in outputs]
    lacks = _reference_lacks(ref, params)
    if lacks:
        raise _core.InputError("reference.function: " + lacks)
    if not as_given:
        params = _reference_args(ref, params)
    with _InFolder(_folder_of(ref)), _NoExit("reference"):
        out = ref(*arrays, **params)

    def expected():
        return "expected %s%s" % (
            "an array for " if len(outputs) == 1 else "a tuple of %d arrays, in the kernel's return order, for "
            % len(outputs),
            ", ".join("'%s'%s" % (n, " %s" % s if s is not None else "") for n, s in outputs))

    def fail(what):
        raise _core.InputError("reference.function: %s returned %s: %s" % (_where(ref), what, expected()))

    if out is None or isinstance(out, (str, bytes, dict)):  # (not "1 array" when the kernel has more outputs)
        fail("None" if out is None else "a " + type(out).__name__)
    items = list(out) if isinstance(out, (tuple, list)) and len(outputs) != 1 or isinstance(out, tuple) \
        else [out]
    if len(items) != len(outputs):
        fail("%d array%s for %d kernel output%s" % (len(items), "" if len(items) == 1 else "s", len(outputs),
                                                    "" if len(outputs) == 1 else "s"))
    res = []
    for i, (o, (name, shape)) in enumerate(zip(items, outputs)):
        which = "" if len(outputs) == 1 else " as output %d ('%s')" % (i, name)
        if o is None or isinstance(o, (str, bytes, dict)):
            fail("%s%s" % ("None" if o is None else "a " + type(o).__name__, which))
        if np.iscomplexobj(o):  # float64 would drop the imaginary part with only NumPy's warning
            fail("%s values%s: the check compares real numbers" % (np.asarray(o).dtype, which))
        try:
            a = np.asarray(o, dtype=np.float64)
        except (TypeError, ValueError):
            fail("%s%s, which is not numbers" % (type(o).__name__, which))
        if shape is not None and (a.size != int(np.prod(shape)) or (a.ndim == len(shape) and list(a.shape) != shape)):
            fail("shape %s%s" % (list(a.shape), which))
        res.append(a)
    return res


def _internal(filename):
    """A frame of trnsim's own or of Python's import machinery: no concern of the user's."""
    return filename.startswith(os.path.dirname(os.path.abspath(__file__)) + os.sep) or filename.startswith("<frozen ")


def format_exception(etype, value, tb):
    """'<file>:<line>: <Type>: <message>' at the innermost frame outside trnsim, then the traceback of the
    user's own frames only (the kernel file, the modules it imports, its reference): trnsim's frames and
    Python's import machinery are no concern of the user's, and the message is said once (no traceback
    when no user frame is on it). An NKI rule the kernel broke (NkiError: it carries the kernel line) gives
    that line."""
    user = [f for f in traceback.extract_tb(tb) if not _internal(f.filename)]
    loc = getattr(value, "loc", None)
    if hasattr(value, "bare") and loc is not None:
        head = "%s: %s: %s" % (loc, etype.__name__, value.bare)
        if not user:
            return _utf8(head)
        return _utf8(head + "\nTraceback of the kernel (most recent call last):\n" +
                     "".join(traceback.format_list(user)).rstrip("\n"))
    where = ""
    if isinstance(value, SyntaxError) and value.filename:
        where = "%s:%s: " % (os.path.basename(value.filename), value.lineno)
    elif user:
        where = "%s:%d: " % (os.path.basename(user[-1].filename), user[-1].lineno)
    head = "%s%s: %s" % (where, etype.__name__, _text(value))
    body = "".join(traceback.format_list(user))
    if isinstance(value, SyntaxError):  # the source line and its caret
        body += "".join(traceback.format_exception_only(etype, value)[:-1])
    if not body.strip():
        return _utf8(head)
    return _utf8(head + "\nTraceback (most recent call last):\n" + body.rstrip("\n"))


def _text(value):
    """str(value), or what Python's own traceback prints when that raises."""
    try:
        return str(value)
    except Exception:
        return "<exception str() failed>"


def _utf8(text):
    """text that encodes as UTF-8: a lone surrogate (an undecodable byte of a file name or message) shown as
    its escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
