"""A keyword argument NKI's signature does not name: a RuntimeWarning at the kernel line where NKI's earlier
signature of the call takes **kwargs (the nki.isa forms returning a new tile, nki.language's calls), an NkiError
naming the argument and the line where no NKI signature of it does (the dst= forms, dma_copy, sendrecv,
select_reduce, ...). main ignored every such argument silently (and a missing argument was a bare TypeError)."""

import os
import warnings

import numpy as np

from runner import KERNELS, line_of, main, raises

import trnsim.nki as tnki

import nki_unknown_kwargs as K

SRC = os.path.join(KERNELS, "nki_unknown_kwargs.py")
X = np.full((128, 128), 0.5, np.float32)


def run(form):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = tnki.simulate_kernel(K.k, X, form=form)
    return out, [x for x in w if issubclass(x.category, RuntimeWarning)]


def test_warned_where_earlier_signatures_take_kwargs():
    for form, call, marker, want in (
            ("nl.exp", "nl.exp", "nl.exp(t, bogus=1)", np.exp(X)),
            ("old nc_matmul", "nki.isa.nc_matmul", "nisa.nc_matmul(t, t, bogus=1)", X.T @ X),
            ("nl.sum", "nl.sum", "nl.sum(t, axis=1", np.full_like(X, 64.0))):
        out, w = run(form)
        assert len(w) == 1, [str(x.message) for x in w]
        assert os.path.basename(w[0].filename) == "nki_unknown_kwargs.py" and w[0].lineno == line_of(SRC, marker)
        assert str(w[0].message) == (f"{call}: keyword argument 'bogus' is ignored: NKI's earlier signature of "
                                     f"{call} accepts any keyword (**kwargs) and trnsim models no argument of that "
                                     "name"), w[0].message
        assert np.abs(out - want).max() <= 1e-6 * np.abs(want).max(), form  # the call ran as without it
    _, w = run("plain")
    assert not w, [str(x.message) for x in w]


def test_error_where_no_signature_takes_kwargs():
    for form, text, marker in (
            ("new nc_matmul", "nki.isa.nc_matmul has no argument 'bogus'", "nisa.nc_matmul(dst=p"),
            ("dma_copy", "nki.isa.dma_copy has no argument 'bogus'", "nisa.dma_copy(dst=u, src=t, bogus=1)"),
            ("missing", "nki.isa.tensor_copy: missing 1 required positional argument: 'src'",
             "nisa.tensor_copy(dst=u)")):
        e = raises(tnki.NkiError, run, form)
        assert str(e).startswith(f"nki_unknown_kwargs.py:{line_of(SRC, marker)}: {text}"), e


if __name__ == "__main__":
    main(globals())
