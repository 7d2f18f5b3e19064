"""nki.compiler: the decorators and options kernels carry for the Neuron compiler. Those that do not change
what trnsim simulates are accepted and return the kernel unchanged (each is named here); the rest raise."""

import enum

from . import _direct, _schedule
from ._errors import caller_loc, warn_at

no_reorder = _schedule.no_reorder  # (nki.compiler.no_reorder: nl.no_reorder's other name)


def skip_middle_end_transformations(f):
    """Accepted: trnsim runs the traced instructions as written (no middle-end rewrites to skip)."""
    return f


def enable_stack_allocator(f=None, **kwargs):
    """Accepted: trnsim's allocation (docs/nki.md) does not change with the allocator flag."""
    return f if f is not None else (lambda g: g)


def force_auto_alloc(f=None, **kwargs):
    """The kernel's direct allocators are ignored: its tensors are placed by trnsim's allocation model, as
    nl.sbuf / nl.psum ones (the guide's check for a lifetime conflict the compiler missed)."""
    if f is None:
        return force_auto_alloc
    if hasattr(f, "options") and hasattr(f, "fn"):  # above @nki.jit: the kernel
        f.options["force_auto_alloc"] = True
    else:  # below it: the function, whose kernel takes the option (_jit.JitKernel)
        f.__trnsim_force_auto_alloc__ = True
    return f


class AddressRotation(enum.Enum):
    """nki.compiler.AddressRotation: whether the backend may rotate a memloc's address (CompileConfig's
    address_rotation)."""

    AUTO = "auto"
    ENABLE = "enable"
    DISABLE = "disable"


class _Config:
    """A per-kernel config of NKI 2.33 (nki.jit's compile_config / specialization_config): keyword fields
    only, each checked for its type; a value trnsim cannot honour is a RuntimeWarning at the line that gives
    it, naming the field (never silently ignored). _FIELDS: name -> (type, values honoured, why not)."""

    _FIELDS = {}

    def __init__(self, *args, **kwargs):
        where = caller_loc()
        name = f"{where}: nki.compiler.{type(self).__name__}" if where else f"nki.compiler.{type(self).__name__}"
        if args:
            raise TypeError(f"{name}() takes keyword arguments only ({', '.join(self._FIELDS)}), got {len(args)} "
                            "positional")
        for k, v in kwargs.items():
            if k not in self._FIELDS:
                raise TypeError(f"{name}() got an unexpected keyword argument '{k}' (NKI 2.33's fields: "
                                f"{', '.join(self._FIELDS)})")
            kind, honoured, why = self._FIELDS[k]
            if kind is bool and not isinstance(v, bool) or kind is not bool and not isinstance(v, kind):
                raise TypeError(f"{name}: {k}={v!r}: expected "
                                f"{'True or False' if kind is bool else 'an nki.compiler.' + kind.__name__}")
            if v not in honoured:
                warn_at(f"nki.compiler.{type(self).__name__}: {k}={v!r} is ignored: {why}", RuntimeWarning)
            setattr(self, k, v)

    def __repr__(self):
        given = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._FIELDS if k in self.__dict__)
        return f"{type(self).__name__}({given})"


_NO_PASSES = "trnsim runs the traced instructions as written (no backend pass runs)"


class CompileConfig(_Config):
    """nki.compiler.CompileConfig (NKI 2.33): the fields are taken; those with no counterpart in the
    simulator warn (docs/nki.md, "Target platform and LNC")."""

    _FIELDS = {
        "address_rotation": (AddressRotation, (), "trnsim places tensors by its own allocation model "
                                                  "(docs/nki.md, Allocation)"),
        "non_ssa_legalization": (bool, (), _NO_PASSES),
        "dead_code_elim": (bool, (False,), _NO_PASSES + ": nothing is eliminated"),
        "barrier_check": (bool, (True,), "trnsim always checks that the two LNC2 cores make the same "
                                         "core_barrier and sendrecv calls"),
        "prefetch_auto": (bool, (False,), "trnsim models no prefetch ring: loads go where the kernel and the "
                                          "allocation model put them"),
        "nki_alloc_fallback": (bool, (False,), "trnsim has no fallback allocation flow: an allocation that "
                                               "does not fit is an error"),
    }


class SpecializationConfig(_Config):
    """nki.compiler.SpecializationConfig (NKI 2.33)."""

    _FIELDS = {
        "allow_nested_config_override": (bool, (), "trnsim compares no nested kernel's config: a nested "
                                                   "@nki.jit kernel runs inline under its caller's"),
    }


class _Space:
    """nki.compiler.sbuf / psum: direct allocation (_direct.py: mod_alloc, alloc) and auto_alloc (the buffer
    nl.sbuf / nl.psum, which trnsim's allocation model places)."""

    def __init__(self, space, mod_alloc, alloc):
        self.space, self.mod_alloc, self.alloc = space, mod_alloc, alloc

    def auto_alloc(self):
        from . import language as nl

        return getattr(nl, self.space)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        from ._errors import unsupported_name

        raise unsupported_name(f"nki.compiler.{self.space}", name)


sbuf = _Space("sbuf", _direct.sbuf_mod_alloc, _direct.sbuf_alloc)
psum = _Space("psum", _direct.psum_mod_alloc, _direct.psum_alloc)


def __getattr__(name):
    """Any other public name: NkiUnsupported at the kernel line (an AttributeError too: hasattr() is False)."""
    if name.startswith("_"):
        raise AttributeError(f"module 'nki.compiler' has no attribute '{name}'")
    from ._errors import unsupported_name

    raise unsupported_name("nki.compiler", name)
