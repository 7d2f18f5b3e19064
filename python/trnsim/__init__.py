"""trnsim: a cycle-approximate simulator of AWS Trainium, from Python.

``trnsim._core`` is the library's C++ API (NKI_CONTRACT.md / docs/nki.md); ``trnsim.nki`` runs NKI kernels
written in Python (``import nki`` resolves to it once it is imported).
"""

import os as _os

from . import _core

Error, InputError, RuleError = _core.Error, _core.InputError, _core.RuleError  # trnsim.Error, ...

# Builder calls made from trnsim's own modules record the user's kernel line, not theirs.
_core.add_internal_path(_os.path.dirname(_os.path.abspath(__file__)) + _os.sep)


def load_hw(spec="trn2", overrides=None):
    """A hardware config by name ("trn2", "trn3") or .json path, with {"path": value} overrides."""
    return _core.load_hw_config(spec, overrides or {})
