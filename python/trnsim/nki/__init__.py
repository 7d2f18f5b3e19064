"""trnsim's implementation of NKI (``import nki`` resolves here once trnsim.nki is imported).

The language side (nki.language, nki.isa, nki.jit, ...) is filled in by its own modules; the platform side
gives the entry points simulate_kernel and benchmark (trnsim/nki/_entry.py).
"""

from . import _aliases

_aliases.install()

from ._entry import benchmark, simulate_kernel, typed  # noqa: E402,F401  # platform
