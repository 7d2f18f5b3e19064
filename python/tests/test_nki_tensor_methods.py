"""nki.language.NkiTensor's view methods of NKI 2.33 and the earlier nki.tensor's astype / assert_shape, and
nl.tile_size's alignment constants: values checked against NumPy; an NKI attribute trnsim lacks is
NkiUnsupported naming it and the kernel line. On main each of these was a bare AttributeError."""

import os

import numpy as np

from runner import KERNELS, line_of, main, raises

import trnsim.nki as tnki

import nki.isa as nisa
import nki.language as nl

import nki_views as K

SRC = os.path.join(KERNELS, "nki_views.py")
X = np.arange(128 * 64, dtype=np.float32).reshape(128, 64) / 4


def same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    assert got.tobytes() == want.tobytes(), np.argwhere(got != want)[:5]


def test_view_methods():
    want = np.concatenate([X[:, 8:24], X[:, 0:64:8], X[:, 24:32], X[:, 40:48],
                           X[:, 48:56].reshape(128, 2, 4).transpose(0, 2, 1).reshape(128, 8), X[:, 48:56],
                           X[:, 56:64]], axis=1)
    same(tnki.simulate_kernel(K.views, X), want)
    assert K.seen["pattern"] == [[64, 128], [2, 8]], K.seen["pattern"]  # partition stride: 64 elements
    assert K.seen["contiguous"] == (True, False, False, True), K.seen["contiguous"]
    assert K.seen["indirect"] == (False, True, False), K.seen["indirect"]
    assert K.seen["shapes"] == ((128, 8, 8), (128, 1, 8), (128, 4, 2), (128, 8), (128, 64)), K.seen["shapes"]


def test_ap_of_get_pattern():
    same(tnki.simulate_kernel(K.ap_of_pattern, X), X[:, 1:64:2])


@tnki.jit
def k_ap_in_guarded_loop(x):
    # nki-library's output_projection_tkg (TRANSPOSE_OUT) shape (tester23x F3): every iteration makes an .ap view,
    # those with j >= 8 reach past the tile's 64 elements per partition, and only the views with j < 8 are read.
    o = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32)
    nisa.dma_copy(dst=t, src=x)
    acc = nl.ndarray((128, 8), dtype=nl.float32)
    nisa.memset(dst=acc, value=0.0)
    for j in nl.sequential_range(16):  # acc carries from one iteration to the next
        v = t.ap(pattern=[[64, 128], [8, 8]], offset=j)
        if j < 8:
            nisa.tensor_tensor(dst=acc, data1=acc, data2=v, op=nl.add)
    nl.store(o, acc)
    return o


@tnki.jit
def k_ap_used_out_of_range(x, on_chip):
    o = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    if on_chip:
        t = nl.ndarray((128, 64), dtype=nl.float32)
        nisa.dma_copy(dst=t, src=x)
        v = t.ap(pattern=[[64, 128], [8, 8]], offset=9)  # MARK-ap-made-sbuf
        r = nl.ndarray((128, 8), dtype=nl.float32)
        nisa.tensor_copy(dst=r, src=v)  # MARK-ap-used-sbuf
        nl.store(o, r)
    else:
        v = x.ap(pattern=[[64, 128], [1, 8]], offset=60)  # MARK-ap-made-hbm
        nisa.dma_copy(dst=o, src=v)  # MARK-ap-used-hbm
    return o


def test_an_unused_out_of_range_ap_view_is_no_error():
    # View j (j < 8) is columns j, j + 8, ..., j + 56: acc[:, k] sums columns 8 k to 8 k + 7; views j >= 8 are
    # made and never read.
    same(tnki.simulate_kernel(k_ap_in_guarded_loop, X), X.reshape(128, 8, 8).sum(axis=2, dtype=np.float32))


def test_a_used_out_of_range_ap_view_is_an_error_at_the_instruction():
    me = os.path.basename(__file__)

    def at(mark):
        return "%s:%d" % (me, line_of(__file__, mark))

    e = raises(tnki.NkiError, tnki.simulate_kernel, k_ap_used_out_of_range, X, True)
    assert str(e) == (f"{at('MARK-ap-used-sbuf')}: tensor_copy: access pattern covers bytes [36, 264) outside sbuf "
                      f"tile t [128, 64] float32 allocated at {me}:%d (256 bytes per partition) (the view made by "
                      f".ap at {at('MARK-ap-made-sbuf')})" % (line_of(__file__, "MARK-ap-made-sbuf") - 2)), str(e)
    e = raises(tnki.NkiError, tnki.simulate_kernel, k_ap_used_out_of_range, X, False)
    assert str(e) == (f"{at('MARK-ap-used-hbm')}: dma_copy: access pattern covers bytes [240, 32784) outside hbm "
                      f"'x'[128, 64] float32 (32768 bytes) (the view made by .ap at {at('MARK-ap-made-hbm')})"), str(e)


def test_astype():
    # Quarters below 32 have at most 7 significant bits: exact in bfloat16 (8). simulate_kernel gives
    # bfloat16 outputs as float32 values.
    same(tnki.simulate_kernel(K.casts, X % 32), X % 32)


def test_select_and_vector_select():
    x = np.arange(4 * 128 * 8, dtype=np.float32).reshape(4, 128, 8)
    rows = np.random.RandomState(4).randint(0, 128, (128, 1)).astype(np.int32)
    got = tnki.simulate_kernel(K.selects, x, rows, np.array([[2]], np.int32))
    same(got, np.stack([x[2], x[1][rows[:, 0]]]))


def test_tile_size_constants():
    tnki.simulate_kernel(K.tile_sizes, X)
    # psum/sbuf_min_align: docs/facts/trainium-hardware.md §1.4 [S27]; Trn2: 8 banks of 2 KiB, 128 x 224 KiB.
    assert K.seen["tile_size"] == (4, 1, 8, 512, 2048, 128 * 224 * 1024, 128), K.seen["tile_size"]


def test_missing_attributes_are_nki_unsupported_at_the_line():
    for what, text in (("sim_value", "nki.language.NkiTensor.sim_value is not modelled by trnsim"),
                       ("bogus", "nki.language.NkiTensor has no attribute 'bogus'"),
                       ("indirect", "nki.language.NkiTensor.indirect is not modelled by trnsim: Tensor "
                                    "Indirection is a NeuronCore-v4 feature (trn3); run the kernel with "
                                    "hardware=\"trn3\""),
                       ("tile_size", "nki.language.tile_size.bogus_fmax is not modelled"),
                       ("block", "nki.language.NkiTensor.size of a PSUM tensor with block dims [2, 128, 64] is "
                                 "not modelled by trnsim")):
        e = raises(tnki.NkiUnsupported, tnki.simulate_kernel, K.bad, X, what=what)
        line = line_of(SRC, {"sim_value": "t.sim_value", "bogus": "t.bogus", "indirect": "t.indirect(t)",
                             "tile_size": "nl.tile_size.bogus_fmax", "block": "buffer=nl.psum).size"}[what])
        assert str(e).startswith(f"nki_views.py:{line}: ") and text in str(e), e
        assert type(e).__name__ == "NkiUnsupported", type(e)
        assert isinstance(e, AttributeError) == (what != "indirect"), type(e)  # attributes: hasattr() False
    tnki.simulate_kernel(K.bad, X, what="hasattr")
    assert K.seen["hasattr"] == (False, True), K.seen["hasattr"]


def test_view_method_errors_name_the_rule_and_line():
    for what, text in (("assert_shape", "assert_shape: the tensor's shape is [128, 64], not [128, 32]"),
                       ("squeeze", "squeeze_dim(1): dim 1 has size 64, not 1"),
                       ("flatten", "flatten_dims(1, 2): dims 1..2 of [128, 8, 8] are not contiguous in memory"),
                       ("partition", "squeeze_dim(0): dim 0 has size 128, not 1")):
        e = raises(tnki.NkiError, tnki.simulate_kernel, K.bad, X, what=what)
        marker = {"assert_shape": "t.assert_shape((128, 32))", "squeeze": "t.squeeze_dim(1)",
                  "flatten": "permute((0, 2, 1)).flatten_dims", "partition": "t.squeeze_dim(0)"}[what]
        assert str(e).startswith(f"nki_views.py:{line_of(SRC, marker)}: ") and text in str(e), e



def test_buffer_predicates():
    # nki.language.is_sbuf / is_psum / is_hbm / is_on_chip(buffer) answer for a buffer (a tensor's .buffer
    # too); on main each was NkiUnsupported. Anything but a buffer is an NkiError naming the call.
    import nki
    import nki.language as nl

    seen = {}

    @nki.jit
    def k(x):
        t = nl.load(x)
        p = nl.ndarray((128, 64), nl.float32, buffer=nl.psum)
        for name in ("is_sbuf", "is_psum", "is_hbm", "is_on_chip"):
            f = getattr(nl, name)
            seen[name] = [f(b) for b in (nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm, nl.private_hbm, t.buffer,
                                         p.buffer, x.buffer)]
        seen["error"] = raises(tnki.NkiError, nl.is_sbuf, t)
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    same(tnki.simulate_kernel(k, X), X)
    assert seen["is_sbuf"] == [True, False, False, False, False, True, False, False], seen
    assert seen["is_psum"] == [False, True, False, False, False, False, True, False], seen
    assert seen["is_hbm"] == [False, False, True, True, True, False, False, True], seen
    assert seen["is_on_chip"] == [True, True, False, False, False, True, True, False], seen
    assert "nl.is_sbuf(" in str(seen["error"]) and "expected a buffer" in str(seen["error"]), seen["error"]


if __name__ == "__main__":
    main(globals())
