"""The hardware facts the front end reads while tracing (partitions, SBUF / PSUM sizes, generation, cores),
taken from the builder's kernel context (trnsim._core.Kernel.limits()); a Trn2 default outside a run."""

from . import _trace


class Target:
    __slots__ = ("generation", "partitions", "sbuf_bytes", "psum_bytes", "psum_bank_bytes", "num_programs_hw")

    def __init__(self, generation="trn2", partitions=128, sbuf_bytes=224 * 1024, psum_bytes=16 * 1024,
                 psum_bank_bytes=2048, num_programs_hw=1):
        self.generation = generation
        self.partitions = partitions
        self.sbuf_bytes = sbuf_bytes  # per partition
        self.psum_bytes = psum_bytes  # per partition
        self.psum_bank_bytes = psum_bank_bytes
        self.num_programs_hw = num_programs_hw  # physical cores running the kernel (LNC2: 2)

    @staticmethod
    def of_kernel(k):
        lim = k.limits()
        gen = {"Trn1": "trn1", "Trn3": "trn3"}.get(str(lim.generation).rsplit(".", 1)[-1], "trn2")
        return Target(gen, lim.partitions, lim.sbuf_bytes_per_partition, lim.psum_bytes_per_partition,
                      lim.psum_bank_bytes, k.num_programs())


_DEFAULT = Target()


def target():
    t = _trace.active()
    return t.target if t is not None else _DEFAULT
