"""An HBM -> HBM dma_copy's time (sim/timing/dma_spread.h, docs/timing.md "HBM -> HBM"): it has no partition
side, so its bytes go to all 16 DMA engines whatever view the kernel takes of them; more bytes never take less
time. (The engines were ceil(dim 0 / 8): 4 MiB as [8, 131072] took 193 us, as [1024, 1024] 22 us.)"""

import numpy as np

from runner import main

import trnsim.nki as tnki
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def hbm_copy(x):
    o = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o, src=x)
    return o


def latency_ns(shape):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    r = tnki.benchmark(hbm_copy, x)
    return round(r.latency_us * 1000, 3)


def test_views_of_the_same_bytes_take_the_same_time():
    # 4 MiB of FP32, one contiguous chunk on both sides: 16 packets of 256 KiB whatever the view.
    times = {s: latency_ns(s) for s in [(8, 131072), (16, 65536), (1024, 1024), (8, 128, 1024), (1048576, 1)]}
    assert len(set(times.values())) == 1, times
    # Its data: (4194304 + 16 x 96 x 23) / 368 = 11493.6 ns at 16 engines of 23 B/ns; at ceil(8 / 8) = 1 engine
    # it would be 16 times that, so the kernel's latency is well under the one-engine data time alone.
    assert times[(8, 131072)] < 16 * 11493.6 / 2, times


def test_more_bytes_never_take_less_time():
    # [n, 128, 512] FP32 for n = 8, 12, 16 (2, 3, 4 MiB): each 1 MiB more adds at least its 1 MiB at the
    # 368 B/ns of 16 engines (2849 ns); the rows rule gave 101.91, 79.12 and 101.91 us.
    t = [latency_ns((n, 128, 512)) for n in (8, 12, 16)]
    assert t[1] - t[0] >= 1048576 / 368 and t[2] - t[1] >= 1048576 / 368, t


if __name__ == "__main__":
    main(globals())
