"""nki.compiler: the decorators and options kernels carry for the Neuron compiler. Those that do not change
what trnsim simulates are accepted and return the kernel unchanged (each is named here); the rest raise."""

from . import _direct, _schedule
from ._errors import unsupported

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


class CompileConfig:
    def __init__(self, *args, **kwargs):
        unsupported("nki.compiler.CompileConfig", "trnsim has one allocation and schedule model (docs/nki.md)")


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
