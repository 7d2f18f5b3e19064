"""NKI kernels calling nl.device_print, for test_nki_device_print.py. Written for this project."""

import nki
import nki.language as nl


@nki.jit
def printing(a_tensor, prints=True):
    # b = a + 1; with `prints`, the loaded tile, the sum and the input are printed.
    b = nl.ndarray(a_tensor.shape, dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    a = nl.load(a_tensor)
    if prints:
        nl.device_print("value of a:", a)
    c = nl.add(a, 1.0)
    if prints:
        nl.device_print("a + 1:", c)
        nl.device_print("input:", a_tensor)
    nl.store(b, value=c)
    return b


@nki.jit
def bad_print(a_tensor, what):
    b = nl.ndarray(a_tensor.shape, dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    a = nl.load(a_tensor)
    p = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.psum)
    p[...] = nl.copy(a)
    if what == "psum":
        nl.device_print("p", p)  # a PSUM tile
    else:
        nl.device_print(3, a)  # not a string
    nl.store(b, value=a)
    return b


@nki.jit
def per_core(a_tensor):
    # Run as per_core[2] on LNC2: each core loads, prints and stores its half of the rows.
    b = nl.ndarray(a_tensor.shape, dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    a = nl.load(a_tensor[i * 2:(i + 1) * 2, :])
    nl.device_print(f"core {i}:", a)
    nl.store(b[i * 2:(i + 1) * 2, :], value=a)
    return b
