"""Runs nki_carried.swapped_regions with simulate_kernel (test_nki_warnings.py runs it under -W options)."""

import numpy as np

import trnsim.nki as tnki

import nki_carried

y = tnki.simulate_kernel(nki_carried.swapped_regions, np.ones((128, 64), np.float32))
print("finished", float(y[0, 0]))
