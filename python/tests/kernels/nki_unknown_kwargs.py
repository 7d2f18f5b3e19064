"""NKI kernels passing a keyword argument NKI's signature does not name, for test_nki_unknown_kwargs.py:
`form` picks the call. Written for this project."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def k(x, form):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    u = nl.ndarray((128, 128), dtype=nl.float32)
    p = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    if form == "nl.exp":
        u = nl.exp(t, bogus=1)  # warned: earlier nl.exp(x, *, dtype, mask, **kwargs)
    elif form == "old nc_matmul":
        u = nl.copy(nisa.nc_matmul(t, t, bogus=1))  # warned: earlier nc_matmul(..., **kwargs)
    elif form == "nl.sum":
        u = nl.sum(t, axis=1, keepdims=True, bogus=1).broadcast_to((128, 128))  # warned
    elif form == "new nc_matmul":
        nisa.nc_matmul(dst=p, stationary=t, moving=t, bogus=1)  # error: the dst= form has no **kwargs
        u = p
    elif form == "dma_copy":
        nisa.dma_copy(dst=u, src=t, bogus=1)  # error: dma_copy never had **kwargs
    elif form == "missing":
        nisa.tensor_copy(dst=u)  # error: src missing
    else:
        u = t
    nl.store(out, u)
    return out
