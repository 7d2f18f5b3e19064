"""The host-memory budget of a kernel's trace: the recorded ops stay in memory until the kernel returns and
is emitted, so a runaway loop (``nl.sequential_range(10**9)``) would grow the trace until max_instructions
stops it, or the host runs out of memory first on a smaller machine. Every CHECK_EVERY ops the trace asks
how much memory the host has left (``_core.available_host_bytes``: MemAvailable + SwapFree, capped by the
cgroup and ``ulimit -v`` limits, or $TRNSIM_HOST_MEMORY_BYTES) and stops with an NkiError at the kernel line
when that is less than emitting the ops recorded so far needs (docs/nki.md "Errors")."""

from ._errors import NkiError

CHECK_EVERY = 1 << 16
# Host bytes one recorded op holds in the trace (its Op, views, index tuples, locations), for the message:
# the process's RSS growth between the checks at 2^16, 2^17, 2^18 ops of `t = nl.add(t, 1.0)` in
# nl.sequential_range(10**9) on a [128, 64] float32 tile was 1679-1703 bytes per op.
TRACE_BYTES_PER_OP = 1700
# Host bytes each recorded op needs when it is emitted: the builder's instruction (about 0.5 KB,
# kernels/api/kernel.h BuildOptions::max_instructions) besides the trace that is still held.
EMIT_BYTES_PER_OP = 512
# Kept free besides: the interpreter, the simulator's own state and the rest of the process.
RESERVE_BYTES = 256 << 20


def _size(b):
    return "%.1f GB" % (b / 1e9) if b >= 1e9 else "%.0f MB" % (b / 1e6)


def check(n_ops, max_ops, loc):
    """NkiError at ``loc`` when the host has less memory left than emitting ``n_ops`` recorded ops needs."""
    from .. import _core

    avail = _core.available_host_bytes()
    if avail is None:
        return
    need = n_ops * EMIT_BYTES_PER_OP + RESERVE_BYTES
    if avail >= need:
        return
    raise NkiError(
        "the kernel's trace holds %d instructions (about %s of host memory at %.1f KB each) and the host has "
        "%s left, less than emitting them needs (about %s): the trace stops here rather than exhaust the host's "
        "memory (max_instructions would stop it at %d); is a loop running away? Reduce the kernel's shapes or "
        "trip counts, or run it on a host with more memory" % (
            n_ops, _size(n_ops * TRACE_BYTES_PER_OP), TRACE_BYTES_PER_OP / 1e3, _size(avail), _size(need),
            max_ops), loc=loc)
