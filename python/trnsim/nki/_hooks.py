"""How the kernel runner (trnsim/_runner.py) hands a kernel to the language layer.

The language layer (trnsim.nki) replaces these at import: ``wrap_input(view)`` turns an input's ``_core.View``
(an HBM tensor) into the object the kernel function receives; ``unwrap(obj)`` turns an object the kernel
returns into its ``_core.View``; ``call(func, inputs, params)`` runs the function on one core; ``stats()``
gives stats.json's "nki" section after the build; ``constants()`` the kernel's own constant inputs; ``warnings(lines)`` rewords the build's warnings;
``debug_outputs()`` names the outputs that are debug copies (nl.device_print), which a reference does not give;
``written_inputs()`` the inputs the kernel writes without returning them, which the run also gives back;
``moved_bytes()`` the roofline's compulsory HBM bytes of the build (None: every input and output once).
"""


def wrap_input(view):
    return view


def unwrap(obj):
    return getattr(obj, "_view", obj)


def call(func, inputs, params):
    """Runs the kernel function on one core (inside build_program; _core.Kernel.current() is that core's).
    ``inputs``: the wrapped inputs passed positionally (the function's leading parameters); ``params``: the
    keyword arguments (the kernel's parameters, and any input that is not among the leading parameters)."""
    return func(*inputs, **params)


def stats():
    """After a build: a JSON-able dict shown as stats.json "nki" (empty: no section)."""
    return {}


def constants():
    """After a build: the inputs whose values the kernel gave itself (nl.shared_constant), as (name, array,
    DType, label); the runner binds each as a given input."""
    return []


def warnings(lines):
    """After a build: its warnings ("k.py:12: message"), as the language layer words them."""
    return lines


def debug_outputs():
    """After a build: the names of the outputs that only copy values for debugging (nl.device_print's): written
    like the others, but no reference gives them, so the run checks none of them."""
    return []


def written_inputs():
    """After a build: the inputs the kernel writes but does not return, in the order it wrote them first. The
    run gives each back like an output (unchecked, as a debug copy), so that the caller's array can be updated
    as NKI's simulator updates it."""
    return []


def moved_bytes():
    """After a build: the HBM bytes the kernel must move, the roofline's compulsory bytes: the inputs its
    instructions read or write and the outputs they write, each whole and once (None: every input and output
    of the run once, as a C++ kernel's)."""
    return None
