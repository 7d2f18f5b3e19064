"""Errors of the nki front end, each naming the kernel's Python file:line.

A kernel that breaks an NKI API rule (a wrong shape, an out-of-bounds slice, a call trnsim does not model)
raises NkiError at the call, with the location of the kernel line that made it; the hardware rules the
simulator checks later (engine connectivity, PSUM banks, ...) come back from the builder with the same
location, recorded when the call was traced.
"""

import os
import sys

# Files of this package: frames in them are skipped when looking for the kernel's line.
_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


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


def unsupported_name(module, name):
    """The error for an undefined public name of nki.language / nki.isa (`module`), asked for by the kernel
    line calling the module's __getattr__: UnsupportedImport for `from module import name`, else
    UnsupportedName."""
    import dis

    message = f"{module}.{name} is not modelled by trnsim (docs/nki.md lists the supported calls)"
    f = sys._getframe(2)  # the frame asking: unsupported_name <- module __getattr__ <- it
    if f is not None and f.f_code.co_code[f.f_lasti] == dis.opmap["IMPORT_FROM"]:
        return UnsupportedImport(message)
    return UnsupportedName(message)


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


def _in_package(filename):
    r = _internal.get(filename)
    if r is None:
        r = _internal[filename] = filename.startswith(_PKG_DIR) or filename.startswith("<frozen")
    return r


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


def unsupported(call, why=""):
    """Raises NkiUnsupported for `call` (e.g. 'nki.isa.bn_stats')."""
    extra = f": {why}" if why else ""
    raise NkiUnsupported(f"{call} is not modelled by trnsim{extra} (docs/nki.md lists the supported calls)")
