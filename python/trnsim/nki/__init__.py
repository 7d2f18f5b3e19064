"""trnsim's implementation of NKI (``import nki`` resolves here once trnsim.nki is imported).

The language side: nki.language, nki.isa, nki.jit, dtypes, indexing, allocation and scheduling
(docs/nki.md); the platform side gives the entry points simulate_kernel and benchmark (trnsim/nki/_entry.py).
"""

from . import _aliases

_aliases.install()

from ._entry import benchmark, simulate_kernel, typed  # noqa: E402,F401  # platform

from . import compiler, isa, language  # noqa: E402,F401
from . import typing  # noqa: E402,F401
from ._errors import NkiError, NkiUnsupported  # noqa: E402,F401
from ._jit import JitKernel, jit  # noqa: E402,F401
from ._hooks_fill import install as _install_hooks  # noqa: E402

_install_hooks()

# NKI's names for the same things.
trace = jit
baremetal_kernel = jit


def baremetal(kernel=None, **kwargs):
    """nki.baremetal(kernel)(*arrays): runs the kernel on the simulator and returns its outputs."""
    if kernel is None:
        return lambda k: baremetal(k, **kwargs)

    def run(*args, **kw):
        return simulate_kernel(kernel, *args, **kw)

    return run


simulate = baremetal
