"""nl.finfo: the limits of a float dtype, a host-side query as numpy.finfo (nki-samples' vision kernels fill
with `nl.finfo(dtype).min`); nothing is simulated."""

import math

import numpy as np

from ._dtypes import as_dtype
from ._errors import NkiError

# Formats NumPy has no finfo of: (mantissa bits, exponent of the smallest normal, largest finite value).
_FORMATS = {
    "bfloat16": (7, -126, (2 - 2.0**-7) * 2.0**127),
    "float8_e4m3fn": (3, -6, 448.0),  # OCP E4M3FN: no Inf, S.1111.111 is NaN
    "float8_e4m3": (3, -6, 240.0),  # IEEE-style E4M3: the top exponent is Inf/NaN
    "float8_e5m2": (2, -14, 57344.0),
}


class finfo:
    """nl.finfo(dtype): a float dtype's limits as numpy.finfo names them (bits, eps, max, min, tiny =
    smallest_normal), Python floats; NkiError for a dtype that is not a float format."""

    def __init__(self, dtype):
        d = as_dtype(dtype)
        self.dtype = d
        self.bits = 8 * d.itemsize
        if d.name in _FORMATS:
            mant, emin, top = _FORMATS[d.name]
            self.eps, self.max, self.tiny = 2.0**-mant, top, 2.0**emin
        elif d.kind == "f" and d.np is not None and d.np.kind == "f":
            f = np.finfo(d.np)
            self.eps, self.max, self.tiny = float(f.eps), float(f.max), float(f.tiny)
        else:
            raise NkiError(f"nl.finfo: {d!r} is not a float dtype with known limits (nl.finfo takes float32, "
                           f"float16, bfloat16 and the float8 formats)")
        self.min = -self.max
        self.smallest_normal = self.tiny
        self.resolution = 10.0 ** -math.floor(math.log10(2) * -math.log2(self.eps))

    def __repr__(self):
        return f"finfo(resolution={self.resolution}, min={self.min}, max={self.max}, dtype={self.dtype!r})"
