"""nl.device_print: a tile's values printed with a prefix (nki.language.device_print).

The values exist only when the simulated kernel runs, after tracing. So the call copies the tensor (an SBUF
tile or an HBM tensor, as the page allows) with one DMA into an HBM tensor of its own, an extra output of the
run named `device_print_<n>` (n counts the calls the kernel traced; on LNC2 [2, ...], core c's values at [c],
both cores printing tensors of the same shapes); after the run, simulate_kernel and benchmark print each, in
trace order, as the page's CPU simulation does: `print(prefix, values)` to stdout, then drop them from the
returned outputs. The page gives no
cost; on hardware the runtime takes the tensor off the chip through its debug stream, and trnsim charges that
one copy to HBM (a DMA on the kernel's queues, numerics untouched). A CLI run writes them as outputs
(`device_print_<n>.npy` beside the others).
"""

from . import _ops, _trace
from ._errors import NkiError, caller_loc, unsupported
from ._tensor import HBM, PSUM, BlockTensor, NkiTensor, Storage

# (prefix, output name, n, core, shape, cores) of the run being built, in trace order (cleared by _entry._prepare
# and by the build of core 0, _jit._build_core)
printed = []
PREFIX = "device_print_"


def device_print(print_prefix, tensor, *, mask=None, **kwargs):
    call = "nl.device_print"
    t = _trace.current(call)
    if kwargs:
        from ._errors import ignored_kwargs

        ignored_kwargs(call, list(kwargs))
    if not isinstance(print_prefix, str):
        raise NkiError(f"{call}: print_prefix must be a constant string (evaluated when the kernel is traced), "
                       f"got {type(print_prefix).__name__}")
    if mask is not None:
        unsupported(f"{call}(mask=...)", "print the masked part: index the tile instead")
    if isinstance(tensor, BlockTensor):
        raise tensor.whole_error(call + ": the whole of")
    if not isinstance(tensor, NkiTensor):
        raise NkiError(f"{call}: tensor must be an SBUF tile or an HBM tensor, got {type(tensor).__name__}")
    if tensor.st.space == PSUM:
        raise NkiError(f"{call}: {tensor.st.label()} is in PSUM; the page prints a tensor in SBUF or HBM: copy "
                       "it to SBUF first (nisa.tensor_copy)")
    n = t.device_prints = getattr(t, "device_prints", -1) + 1  # (this trace's calls so far)
    k = getattr(t, "kernel", None)
    core, cores = (k.program_id(), k.num_programs()) if k is not None else (0, 1)
    name = f"{PREFIX}{n}"
    loc = caller_loc()
    shape = tuple(tensor.shape)
    if cores > 1:  # one output for both cores' n-th print, core c's values at [c]
        first = [p for p in printed if p[1] == name and p[3] == 0]
        if core and (not first or first[0][4] != shape):
            raise NkiError(f"{call}: print {n} of core {core} is of {list(shape)}, core 0's "
                           f"{'of ' + str(list(first[0][4])) if first else 'none'}: on LNC2 both cores print the "
                           "same number of tensors, of the same shapes (one output per print)")
        shape = (cores,) + shape
    st = Storage(t, name, HBM, tensor.dtype, shape, role="print", loc=loc)
    dst = NkiTensor.whole(st)
    _ops.dma_copy(dst[core] if cores > 1 else dst, tensor, loc=loc)
    printed.append((print_prefix, name, n, core, tuple(tensor.shape), cores))


def debug_outputs():
    """The outputs of the run just built that hold device_print copies (its reference gives none of them)."""
    return sorted({p[1] for p in printed})


def show(outs):
    """Prints the run's device_print outputs (name -> array) in trace order; returns the names printed."""
    names = []
    for prefix, name, _n, core, _shape, cores in printed:
        if name in outs:
            print(prefix, outs[name][core] if cores > 1 else outs[name])
            names.append(name)
    return names
