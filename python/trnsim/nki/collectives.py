"""nki.collectives: communication between ranks (NeuronCores of other chips or devices: all-reduce, all-gather,
collective permutes, replica groups). trnsim simulates one logical NeuronCore, so the module imports (a kernel
file that imports it runs its other kernels) and each of its names is NkiUnsupported at the kernel line using it.
The two cores of an LNC2 pair talk through nisa.core_barrier / sendrecv instead (docs/nki.md)."""

WHY = "collectives between ranks are outside a one-NeuronCore simulator"


def __getattr__(name):
    if name.startswith("_"):
        raise AttributeError(f"module 'nki.collectives' has no attribute '{name}'")
    from ._errors import unsupported_name

    raise unsupported_name("nki.collectives", name, WHY)
