"""t.indirect(idx, num_elem=n), NKI's Tensor Indirection (NeuronCore-v4; NkiUnsupported before, tester23am F2):
columns of an SBUF tile at uint16 offsets read when the kernel runs, one offset list per group of 16 partitions
(column i of group g: idx[16g + i % 16, i // 16]), gathered as an instruction's input or scattered as its dst.
Compared byte for byte with NumPy on trn3; trn2 is a clear error."""

import numpy as np

from runner import main, raises_at, same_f32

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl

RNG = np.random.default_rng(2320)
P, F, K = 48, 40, 3  # three partition groups, 16 * 3 offsets each
N = 16 * K
X = RNG.standard_normal((P, F)).astype(np.float32)


def offsets(kind):
    if kind == "repeated":
        idx = RNG.integers(0, 5, (P, K))  # few values: each repeated
    else:
        idx = np.stack([RNG.permutation(F)[:K] for _ in range(P)])  # unordered, distinct per row
    return idx.astype(np.uint16)


def columns(idx, n):
    """[P, n]: the data column each (partition, i) names."""
    col = np.empty((P, n), np.int64)
    for p in range(P):
        g = p - p % 16
        for i in range(n):
            col[p, i] = idx[g + i % 16, i // 16]
    return col


@nki.jit
def gather(x, idx):
    t = nl.load(x)
    n = idx.shape[1] * 16
    out = nl.ndarray((x.shape[0], n), dtype=x.dtype, buffer=nl.shared_hbm)
    d = nl.ndarray((x.shape[0], n), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(d, t.indirect(nl.load(idx), num_elem=n), nl.multiply, 2.0)  # MARK-gather
    nl.store(out, d)
    return out


@nki.jit
def scatter(x, idx, v):
    t = nl.load(x)
    n = v.shape[1]
    nisa.tensor_copy(t.indirect(nl.load(idx), num_elem=n), nl.load(v), engine=nisa.engine.vector)  # MARK-scatter
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out


def test_gather_reads_the_columns_of_each_group():
    for kind in ("unordered", "repeated"):
        idx = offsets(kind)
        got = tnki.simulate_kernel(gather, X, tnki.typed(idx, nl.uint16), hardware="trn3")
        same_f32(got, np.take_along_axis(X, columns(idx, N), axis=1) * np.float32(2))


def test_scatter_writes_the_columns_the_last_repeat_winning():
    for kind, n in (("unordered", N), ("repeated", N), ("unordered", 20)):
        idx = offsets(kind)
        v = RNG.standard_normal((P, n)).astype(np.float32)
        got = tnki.simulate_kernel(scatter, X, tnki.typed(idx, nl.uint16), v, hardware="trn3")
        want = X.copy()
        col = columns(idx, n)
        for p in range(P):
            for i in range(n):
                want[p, col[p, i]] = v[p, i]  # in order: a repeated offset keeps the last value
        same_f32(got, want)


def test_trn2_and_bad_offsets_are_clear_errors():
    idx = tnki.typed(offsets("unordered"), nl.uint16)
    raises_at(tnki.NkiUnsupported, "nki.language.NkiTensor.indirect is not modelled by trnsim: Tensor Indirection "
              "is a NeuronCore-v4 feature (trn3)", __file__, "MARK-gather", tnki.simulate_kernel, gather, X, idx,
              hardware="trn2")
    raises_at(tnki.NkiError, "nki.language.NkiTensor.indirect: the index tensor must be an SBUF tile of uint16 "
              "offsets, got a sbuf uint32 tensor [48, 3]", __file__, "MARK-gather", tnki.simulate_kernel, gather, X,
              offsets("unordered").astype(np.uint32), hardware="trn3")
    bad = offsets("unordered")
    bad[17, 2] = F  # group 1, its column 2 * 16 + 1
    for k, args in ((gather, ()), (scatter, (np.zeros((P, N), np.float32),))):
        raises_at(Exception, "nc_n_gather on POOL: index: indices[16, 33] = 40 is outside data's 40 elements per "
                  "partition", __file__, "MARK-" + k.__name__, tnki.simulate_kernel, k, X,
                  tnki.typed(bad, nl.uint16), *args, hardware="trn3")


@nki.jit
def sub_view(x, idx, v, p0, p1):
    """Gather from, then scatter into, the view t[p0:p1, :] (idx and v of its rows)."""
    t = nl.load(x)
    n = v.shape[1]
    g = nl.ndarray((p1 - p0, n), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(g, t[p0:p1, :].indirect(nl.load(idx), num_elem=n))
    nisa.tensor_copy(t[p0:p1, :].indirect(nl.load(idx), num_elem=n), nl.load(v))
    out = nl.ndarray((P + p1 - p0, F), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out[0:P, :], t)
    nl.store(out[P:P + p1 - p0, 0:n], g)
    nl.store(out[P:P + p1 - p0, n:F], t[p0:p1, n:F])
    return out


def test_a_view_from_partition_16_or_48_is_gathered_and_scattered():
    # (tester23an F1: a view of whole groups from 16 or 48, no start of an instruction over its partitions, was
    # the RuleError of the lowering's own nc_n_gather; now the lowering works on a DMA copy of it from 0.)
    for p0, p1 in ((16, 32), (16, 48), (32, 48), (0, 48)):
        idx = offsets("unordered")[p0:p1]
        n = 20
        v = RNG.standard_normal((p1 - p0, n)).astype(np.float32)
        got = tnki.simulate_kernel(sub_view, X, tnki.typed(idx, nl.uint16), v, p0, p1, hardware="trn3")
        whole = np.zeros((P, K), np.uint16)
        whole[p0:p1] = idx
        col = columns(whole, n)[p0:p1]
        same_f32(got[P:, 0:n], np.take_along_axis(X[p0:p1], col, axis=1))
        want = X.copy()
        for p in range(p1 - p0):
            want[p0 + p, col[p]] = v[p]
        same_f32(got[0:P], want)


@nki.jit
def misuse(x, idx, how):
    t = nl.load(x)
    v = t.indirect(nl.load(idx))
    d = nl.ndarray(v.shape, dtype=x.dtype, buffer=nl.sbuf)
    if how == "dma":
        nisa.dma_copy(dst=d, src=v)  # MARK-dma
    elif how == "slice":
        nisa.tensor_copy(d[:, 0:8], v[:, 0:8])  # MARK-slice
    elif how == "add":
        d = v + 1.0  # MARK-add
    elif how == "radd":
        d = 1.0 + v  # MARK-radd
    elif how == "store":
        nl.store(nl.ndarray(v.shape, dtype=x.dtype, buffer=nl.shared_hbm), v)  # MARK-store
    else:
        nisa.memset(v, 0.0)  # MARK-memset
    out = nl.ndarray(v.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, d)
    return out


def test_a_dma_or_memset_of_the_view_is_a_clear_error():
    idx = tnki.typed(offsets("unordered"), nl.uint16)
    raises_at(tnki.NkiError, "dma_copy: src is a Tensor Indirection view (t.indirect), which a compute instruction "
              "reads or writes, not a DMA", __file__, "MARK-dma", tnki.simulate_kernel, misuse, X, idx, "dma",
              hardware="trn3")
    raises_at(tnki.NkiUnsupported, "nki.language.NkiTensor.indirect as the dst of memset is not modelled by "
              "trnsim: an indirect dst is lowered for the elementwise instructions only", __file__, "MARK-memset",
              tnki.simulate_kernel, misuse, X, idx, "memset", hardware="trn3")



def test_a_slice_operator_or_store_of_the_view_is_a_clear_error():
    # (tester23an F3: `v[:, 0:8]` and `v + 1.0` were Python TypeErrors naming trnsim's class IndirectView.)
    idx = tnki.typed(offsets("unordered"), nl.uint16)
    use = ("nki.language.NkiTensor.indirect: an indirect view is only an operand or the dst of one instruction "
           "(nisa.*, nl.*); %s is not modelled: copy it into a tile with nisa.tensor_copy and use that tile")
    for how, what in (("slice", "a slice or index of it"), ("add", "an operator on it (`+`, `<`, ...)"),
                      ("radd", "an operator on it (`+`, `<`, ...)")):
        raises_at(tnki.NkiError, use % what, __file__, "MARK-" + how, tnki.simulate_kernel, misuse, X, idx, how,
                  hardware="trn3")
    raises_at(tnki.NkiError, "nl.store: value must be an on-chip tile or a number, got a Tensor Indirection view "
              "(t.indirect)", __file__, "MARK-store", tnki.simulate_kernel, misuse, X, idx, "store",
              hardware="trn3")



@nki.jit
def gather_hbm(x, idx):
    d = nl.ndarray((x.shape[0], 16), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(d, x.indirect(nl.load(idx), num_elem=16))  # MARK-hbm
    out = nl.ndarray(d.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, d)
    return out


def test_an_hbm_data_tensor_must_be_loaded_into_sbuf():
    # (tester23an F4: the reason given was about PSUM.)
    raises_at(tnki.NkiUnsupported, "nki.language.NkiTensor.indirect is not modelled by trnsim: the data tensor is an "
              "HBM tensor; Tensor Indirection reads an on-chip tensor: the data tensor must be in SBUF (nl.load it "
              "into an SBUF tile first)", __file__, "MARK-hbm", tnki.simulate_kernel, gather_hbm, X,
              tnki.typed(offsets("unordered"), nl.uint16), hardware="trn3")


if __name__ == "__main__":
    main(globals())
