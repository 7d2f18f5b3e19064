"""How the kernel runner (trnsim/_runner.py) hands tensors to the language layer and takes them back.

The language layer (trnsim.nki.language) replaces both at import: ``wrap_input(view)`` turns an input's
``_core.View`` (an HBM tensor) into the object the kernel function receives; ``unwrap(obj)`` turns an object the
kernel returns into its ``_core.View``.
"""


def wrap_input(view):
    return view


def unwrap(obj):
    return getattr(obj, "_view", obj)
