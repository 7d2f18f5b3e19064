"""Errors of the nki front end, each naming the kernel's Python file:line.

A kernel that breaks an NKI API rule (a wrong shape, an out-of-bounds slice, a call trnsim does not model)
raises NkiError at the call, with the location of the kernel line that made it; the hardware rules the
simulator checks later (engine connectivity, PSUM banks, ...) come back from the builder with the same
location, recorded when the call was traced.
"""

import os
import sys

# Files of the trnsim package (nki and the runner that calls the kernel): frames in them are skipped when
# looking for the kernel's line.
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class NkiError(Exception):
    """An NKI API rule broken by the kernel: the message starts with 'file.py:line: '."""

    def __init__(self, message, loc=None):
        self.loc = loc if loc is not None else caller_loc()
        self.bare = message
        super().__init__(f"{self.loc}: {message}" if self.loc else message)


class NkiUnsupported(NkiError):
    """An NKI call (or argument) that trnsim does not model: an error, never a silent no-op."""


class UnsupportedName(NkiUnsupported, AttributeError):
    """A name of nki.language / nki.isa that trnsim does not define (a module __getattr__ raises it):
    NkiUnsupported at the kernel line, and an AttributeError so that hasattr() answers False. Shown as
    NkiUnsupported: that is the error NKI users catch and read."""


class UnsupportedImport(NkiUnsupported, ImportError):
    """`from nki.language import <name>` of a name trnsim does not define: NkiUnsupported with its message at
    the import line (an AttributeError there would become a bare "cannot import name" ImportError), and an
    ImportError so that `except ImportError` still catches it."""


# The class name users see in a message or traceback is the one they catch.
for _c in (UnsupportedName, UnsupportedImport):
    _c.__name__ = _c.__qualname__ = "NkiUnsupported"


def unsupported_name(module, name, why=""):
    """The error for an undefined public name of nki.language / nki.isa (`module`), asked for by the kernel
    line calling the module's __getattr__: UnsupportedImport for `from module import name`, else
    UnsupportedName. `why`: the reason, when the whole module is out of trnsim's scope."""
    import dis

    message = f"{module}.{name} is not modelled by trnsim{': ' + why if why else ''} (docs/nki.md lists the " \
        "supported calls)"
    f = sys._getframe(2)  # the frame asking: unsupported_name <- module __getattr__ <- it
    if f is not None and f.f_code.co_code[f.f_lasti] == dis.opmap["IMPORT_FROM"]:
        return UnsupportedImport(message)
    return UnsupportedName(message)


# Attributes NKI documents on its tensor class that trnsim has no counterpart for (NkiTensor of NKI 2.30: the
# values, which exist only when the kernel runs).
_TENSOR_UNMODELLED = {"sim_value": "a tensor's values exist only when the simulated kernel runs",
                      "device_value": "no device runs the kernel"}


def unsupported_attribute(cls, name):
    """The error for attribute `name` that an NKI tensor object (class `cls`) does not define: a plain
    AttributeError for private names (Python's and NumPy's protocol probes), else UnsupportedName at the
    kernel line naming the NKI attribute (hasattr() answers False)."""
    if name.startswith("_"):
        return AttributeError(f"'{cls.__name__}' object has no attribute '{name}'")
    why = _TENSOR_UNMODELLED.get(name)
    if why is not None:
        return UnsupportedName(f"nki.language.NkiTensor.{name} is not modelled by trnsim: {why}")
    # NumPy's habits that NKI's tensors do not have: the NKI call to use instead.
    hint = {"T": ": transpose with nl.transpose(t) (or nisa.nc_transpose / nisa.dma_transpose)"}.get(name, "")
    return UnsupportedName(f"nki.language.NkiTensor has no attribute '{name}' in NKI 2.21-2.33, nor in trnsim"
                           f"{hint} (docs/nki.md lists the tensor methods)")


class Loc(tuple):
    """(path, line) of a kernel line, made as Loc((path, line)); str() gives 'file.py:line' as the builder's
    messages do."""

    __slots__ = ()

    @property
    def path(self):
        return self[0]

    @property
    def line(self):
        return self[1]

    def __str__(self):
        return f"{os.path.basename(self[0])}:{self[1]}"


_internal = {}  # file name -> inside this package (or Python's import machinery)
_paths = {}  # base name -> the path of the first file outside the package seen with it (kernel files)


def _in_package(filename):
    r = _internal.get(filename)
    if r is None:
        r = _internal[filename] = filename.startswith(_PKG_DIR) or filename.startswith("<frozen")
        if not r:
            _paths.setdefault(os.path.basename(filename), filename)
    return r


def path_of(name):
    """The path of the kernel file whose base name is `name` (as a Loc prints it), or None if no kernel frame
    from such a file was seen."""
    return _paths.get(name)


def user_frame():
    """The innermost frame outside this package (the kernel's code that called into nki), or None."""
    f = sys._getframe(1)
    while f is not None and _in_package(f.f_code.co_filename):
        f = f.f_back
    return f


def warn_at(message, category, loc=None):
    """A Python warning attributed to a kernel line: `loc` (path, line), else the innermost frame outside
    this package (the user's call), so that warning filters by module and line (-W error::...:k:12) and the
    report's file:line name the user's code rather than trnsim's."""
    import warnings

    module_globals = None
    if loc is None:
        f = user_frame()
        if f is None:
            warnings.warn(message, category, stacklevel=2)
            return
        loc = (f.f_code.co_filename, f.f_lineno)
        # The module's loader gives the source line, but code from no file ("<string>" of `python -c` and of
        # exec, "<stdin>" of stdin and the REPL) has none: __main__'s loader there is BuiltinImporter, whose
        # get_source raises ImportError, and an exec'd string's module would give its own, other line.
        name = f.f_code.co_filename
        module_globals = None if name.startswith("<") and name.endswith(">") else f.f_globals
    filename, lineno = loc
    module = os.path.splitext(os.path.basename(filename))[0] or "<unknown>"
    registry = None
    if module_globals is not None:
        module = module_globals.get("__name__", module)
        registry = module_globals.setdefault("__warningregistry__", {})
    else:
        mod = next((m for m in list(sys.modules.values())
                    if getattr(m, "__file__", None) == filename), None)
        if mod is not None:
            module = mod.__name__
            registry = mod.__dict__.setdefault("__warningregistry__", {})
    warnings.warn_explicit(message, category, filename, lineno, module=module, registry=registry,
                           module_globals=module_globals)


def caller_loc():
    """The innermost frame outside this package: the kernel line that called into nki."""
    f = sys._getframe(1)
    internal = _internal
    while f is not None:
        fn = f.f_code.co_filename
        r = internal.get(fn)
        if r is None:
            r = _in_package(fn)
        if not r:
            return Loc((fn, f.f_lineno))
        f = f.f_back
    return None


def host_loc():
    """caller_loc() past NumPy's and Python's own frames too (np.sum(t), float(t) reach the package through
    them): the kernel line."""
    import numpy

    skip = (os.path.dirname(numpy.__file__) + os.sep, "<")
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not _in_package(fn) and not fn.startswith(skip):
            return Loc((fn, f.f_lineno))
        f = f.f_back
    return caller_loc()


def ignored_kwargs(call, kwargs):
    """A RuntimeWarning at the kernel line for each keyword argument of `call` that trnsim gives no meaning:
    calls whose earlier NKI signature ends in **kwargs (the calls returning a new tile, nki.language's) take
    any name there, so an unknown one is a warning, not an error."""
    for k in kwargs:
        warn_at(f"{call}: keyword argument '{k}' is ignored: NKI's earlier signature of {call} accepts any "
                "keyword (**kwargs) and trnsim models no argument of that name", RuntimeWarning)


def bad_call(e, call, callers):
    """NkiError naming the argument and the kernel line for TypeError `e` if Python raised it binding the
    arguments of a call of `call` (the innermost frame is one of `callers`' code objects: the frames that
    call the implementation), else None (a TypeError from inside the call)."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    text = str(e)
    if tb is None or tb.tb_frame.f_code not in callers or "() " not in text:
        return None
    what = text.split("() ", 1)[1]
    if what.startswith("got an unexpected keyword argument "):
        return NkiError(f"{call} has no argument {what.rsplit(' ', 1)[1]} (NKI's signature of this form has no "
                        "**kwargs; docs/nki.md, Errors)")
    return NkiError(f"{call}: {what}")


def unsupported(call, why=""):
    """Raises NkiUnsupported for `call` (e.g. 'nki.isa.bn_stats')."""
    extra = f": {why}" if why else ""
    raise NkiUnsupported(f"{call} is not modelled by trnsim{extra} (docs/nki.md lists the supported calls)")


def lowered(call, inst, rest):
    """The message of an error about an instruction trnsim's lowering of the kernel's `call` made (nl.sum's
    tensor_reduce): the call first, then the instruction and the rule."""
    return f"{call}: its {inst} (made by trnsim's lowering of {call}, not a call of the kernel): {rest}"


def by_call(e, call):
    """NkiError `e`, raised by an instruction `call` (an nl.* function) made, as the same error naming `call`
    first (lowered()); `e` itself when it already names a call of the kernel."""
    import re

    from . import isa

    if e.bare.startswith("mask"):  # the call's mask= (its lowering's instructions are cut to it)
        err = type(e)(f"{call}: {e.bare}", loc=e.loc)
        err.__traceback__ = e.__traceback__
        return err
    m = re.match(r"(\w+)( on \w+)?: ", e.bare)
    if m is None or not hasattr(isa, m.group(1)) or call.endswith("." + m.group(1)):
        return e
    err = type(e)(lowered(call, m.group(1) + (m.group(2) or ""), e.bare[m.end():]), loc=e.loc)
    err.__traceback__ = e.__traceback__
    return err
