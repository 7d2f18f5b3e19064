"""NKI's tile masking (docs/nki.md "Masks"): a mask bounds the region an instruction accesses, so the
documented idiom for tail tiles (an index reaching past the tensor, cut back by the mask) runs, reads and
writes only the masked-in part (exact bytes), moves only its bytes (an instruction for the masked-in
extent), skips a call whose mask selects nothing, and refuses every mask form it does not model with an
NkiError at the kernel's line. A tester found the idiom refused ("covers [128, 255], outside [0, 200)")."""

import os
import warnings

import numpy as np

from runner import KERNELS, line_of, main, raises

import trnsim.nki as tnki
from trnsim.nki import NkiError

import nki_masks as K

SRC = os.path.join(KERNELS, "nki_masks.py")
X200 = np.random.RandomState(3).standard_normal((200, 64)).astype(np.float32)


def line(marker):
    with open(SRC) as f:
        for i, text in enumerate(f, 1):
            if marker in text:
                return i
    raise AssertionError(marker)


def test_tail_tile_rows():
    # 3 * x is exact in float32 on both sides (one rounding of the same product).
    r = tnki.benchmark(K.tail_rows, X200)
    y = r.outputs[0]
    assert y.shape == (256, 64)
    assert y[:200].tobytes() == (X200 * np.float32(3)).tobytes()
    assert not y[200:].any(), "rows 200..255 (zeroed first) were written by the masked store"
    # One instruction per call for its masked-in extent: the DMAs move the 200 rows of x and of the output,
    # plus the 56 zeroed rows (4-byte elements, 64 per row), not two whole 128-row tiles each way.
    s = r.stats
    assert s["hbm_bytes_read"] == 200 * 64 * 4, s["hbm_bytes_read"]
    assert s["hbm_bytes_written"] == (200 + 56) * 64 * 4, s["hbm_bytes_written"]


def test_tail_tile_of_a_vector():
    x = np.arange(200, dtype=np.float32)
    y = tnki.simulate_kernel(K.tail_rows_1d, x)
    assert y.tobytes() == x.tobytes()


def test_free_dim_mask_and_both_dims():
    x = np.random.RandomState(4).standard_normal((128, 100)).astype(np.float32)
    r = tnki.benchmark(K.tail_cols, x)
    y = r.outputs[0]
    assert y[:120].tobytes() == (x[:120] + x[:120]).tobytes()
    assert not y[120:].any(), "rows 120..127 (zeroed first, masked out of the stores) were written"
    # Loads: 64 + 36 columns of 128 rows; stores: 64 + 36 columns of 120 rows, and the 8 zeroed rows.
    assert r.stats["hbm_bytes_read"] == 128 * 100 * 4
    assert r.stats["hbm_bytes_written"] == (120 * 100 + 8 * 100) * 4


def test_a_masked_load_assigned_into_a_tile():
    # `buf[...] = nl.load(..., mask=...)` was refused: a [72, 64] result into a [128, 64] region.
    y, cols = tnki.simulate_kernel(K.assigned_tail, X200)
    assert y.tobytes() == X200.tobytes() and cols.tobytes() == X200[:128].tobytes()


def test_mgrid_axes_and_a_free_dim_tail():
    x = np.random.RandomState(6).standard_normal((128, 1000)).astype(np.float32)
    assert tnki.simulate_kernel(K.grid_tail, x).tobytes() == x.tobytes()


def test_isa_calls_with_masks():
    y = tnki.simulate_kernel(K.isa_masks, X200)
    want = (X200 + X200) * np.float32(3)
    want[:64, 8:56] = 0  # (i_f > 7) & (2 * i_f < 112) & (-i_p >= -63)
    assert y.tobytes() == want.tobytes()


def test_iota_and_where_with_masks():
    # Both ignored their mask (nl.where's result was the whole tile, iota's every value).
    x = (np.arange(128 * 64).reshape(128, 64) % 3 == 0).astype(np.float32)
    y = tnki.simulate_kernel(K.iota_and_where, x)
    p, f = np.mgrid[0:128, 0:64]
    want = (2 * p + f + 5).astype(np.float32)
    want[:, :10] = 0
    want[96:] = np.where(x[96:] != 0, x[96:], np.float32(7))
    assert y.tobytes() == want.tobytes()


def test_a_mask_that_selects_nothing_skips_the_store():
    x = np.random.RandomState(5).standard_normal((128, 64)).astype(np.float32)
    r = tnki.benchmark(K.skipped_store, x)
    assert r.outputs[0].tobytes() == x.tobytes()
    assert r.stats["hbm_bytes_written"] == 128 * 64 * 4  # the first store only


def test_unmodelled_masks_are_errors_at_the_kernel_line():
    cases = [
        (K.unmasked_tail, "MARK-unmasked",
         "index expression on dim 0 covers [128, 255], outside [0, 200) (tensor 'x' [200, 64]): a mask= on this "
         "call that keeps it inside"),
        (K.loose_mask, "MARK-loose", "index expression on dim 0 covers [128, 229] under the mask, outside [0, 200)"),
        (K.or_mask, "MARK-or", "masks with | are not modelled"),
        (K.and_mask, "MARK-and", "combine predicates with & (e.g. (i_p < n) & (i_f < m)), not `and`"),
        (K.chained_mask, "MARK-chained", "not `and` or a chained comparison"),
        (K.two_var_mask, "MARK-two-var", "a mask bound of several nl.arange index variables must hold on a rectangle of them"),
        # tester23o F3: bounds on two variables combined with & (nki-samples' MaxPool2D) were "an affine_select
        # predicate is one comparison; NKI does not combine them with & or |", naming neither mask= nor the call.
        # (Its first bound, i_p + i_f >= 0, holds everywhere: a mask of no bound since tester23ad F6; the second
        # cuts a triangle.)
        (K.two_var_and_mask, "MARK-two-var-and",
         "nl.load: mask: a mask bound of several nl.arange index variables must hold on a rectangle of them "
         "(everywhere, nowhere, or as a bound on one variable, e.g. i_p < n), got i0[128] + i1[64] - 100 < 0: only "
         "rectangular masks (a range per variable) are modelled; a comparison of several index variables that cuts "
         "a triangle is nisa.affine_select's predicate"),
        (K.bound_and_two_var_mask, "MARK-bound-and-two-var",
         "nl.load: mask: a mask bound of several nl.arange index variables must hold on a rectangle of them "
         "(everywhere, nowhere, or as a bound on one variable, e.g. i_p < n), got i0[128] - i1[64] - 100 < 0: only"),
        (K.combined_affine_pred, "MARK-affine-and",
         "affine_select: pred is one comparison of nl.arange expressions; NKI does not combine them with & or |"),
        (K.eq_mask, "MARK-eq", "(== and != are not modelled)"),
        (K.tile_mask, "MARK-tile", "mask must be a predicate on nl.arange index expressions"),
        (K.foreign_var_mask, "MARK-foreign", "indexes no operand of this call"),
    ]
    for kernel, marker, text in cases:
        e = raises(NkiError, tnki.simulate_kernel, kernel, X200)
        assert str(e).startswith("nki_masks.py:%d: " % line(marker)), (marker, str(e))
        assert text in str(e), (marker, str(e))


def test_a_masked_compute_result_assigned_into_an_indexed_region():
    # Refused ("cannot assign a [32, 5] tile to a [64, 16] region"): the masked instruction writes the
    # masked-in part of the region the assignment's index selects, the rest of buf stays as it was (zero).
    x = np.random.RandomState(7).standard_normal((64, 16)).astype(np.float32)
    y = tnki.simulate_kernel(K.masked_compute_assigned, x)
    want = np.zeros((2, 64, 16), np.float32)
    want[0, :32, :5] = x[:32, :5] * np.float32(2)
    want[1, 32:, 8:] = x[32:, 8:] * np.float32(3)
    assert y.tobytes() == want.tobytes()


def test_masks_tighter_than_the_loads():
    # A compute and a store masked to rows < 150 of a tile loaded with rows < 200 take their part of it
    # (refused: "dim 0 of operand [72, 64] is neither the masked operand's (128) nor its masked-in extent").
    r = tnki.benchmark(K.tighter_masks, X200)
    want = np.zeros((200, 64), np.float32)
    want[:150] = X200[:150] * np.float32(2)
    assert r.outputs[0].tobytes() == want.tobytes()
    # The stores move rows 0..149 and the 72 zeroed rows: 4-byte elements, 64 per row.
    assert r.stats["hbm_bytes_written"] == (150 + 72) * 64 * 4, r.stats["hbm_bytes_written"]


def test_unmasked_computes_between_a_mask_and_a_tighter_one():
    # An unmasked elementwise result holds its operand's part of the index space (the loaded rows < 200,
    # columns < 64), so a tighter store mask takes its part: byte-exact (2x + x is 3x in float32 exactly).
    y, cols = tnki.simulate_kernel(K.unmasked_between_masks, X200)
    want = np.zeros((200, 64), np.float32)
    want[:150] = X200[:150] * np.float32(3)
    assert y.tobytes() == want.tobytes()
    want = np.zeros((128, 96), np.float32)
    want[:, :40] = -X200[:128, :40]
    assert cols.tobytes() == want.tobytes()
    y = tnki.simulate_kernel(K.unmasked_result_assigned, X200)
    assert y.tobytes() == (X200 * np.float32(2)).tobytes()
    # A store mask looser than the load's is refused naming both masks, their lines and the operand (it was
    # "dim 0 of operand [22, 64] is neither the masked operand's (128) nor its masked-in extent (72)").
    e = raises(NkiError, tnki.simulate_kernel, K.looser_than_an_unmasked_compute, X200)
    assert str(e) == (
        "nki_masks.py:%d: nl.store: mask: mask=(t * 128 + i_p < 200) selects [0, 72) of dim 0, but operand "
        "[22, 64] of sbuf tile y "
        "[128, 64] float32 allocated at nki_masks.py:%d holds only [0, 22) of it, the part mask=(t * 128 + i_p < "
        "150) at nki_masks.py:%d selected (a result computed without a mask holds its operand's part): mask that "
        "call as widely, or this one as narrowly" % (line("MARK-wider-store"), line("MARK-wider-store") - 1,
                                                     line("MARK-loaded-150"))), str(e)


def test_a_masked_tile_combined_with_whole_tiles():
    # nl.add(whole, masked), nisa.activation(dst=whole, data=masked), `whole += masked`: the masked-in rows,
    # byte-exact against NumPy (small integers: every sum and product exact in float32).
    x = np.random.RandomState(20).randint(-9, 9, (200, 64)).astype(np.float32)
    w = np.random.RandomState(21).randint(-9, 9, (128, 64)).astype(np.float32)
    out, act = tnki.simulate_kernel(K.masked_with_whole_tiles, x, w)
    w2 = np.concatenate([w, w[:72]])
    assert out.tobytes() == ((w2 + x) - x * w2).tobytes()
    assert act.tobytes() == (x * np.float32(3)).tobytes()


def test_number_stores():
    # nl.store(dst, value=0) was refused ("value must be an on-chip tile"): a memset tile, then the DMA.
    y = tnki.simulate_kernel(K.scalar_stores, X200)
    want = np.zeros((200, 64), np.float32)
    want[10:20, :8] = 1.5
    assert y.tobytes() == want.tobytes()


def test_dmas_start_at_any_partition():
    # A store masked to rows 3..127 and DMAs from and to partition 100 were refused by the engines'
    # start-partition rule (0/32/64/96), which is not the DMAs'.
    y = tnki.simulate_kernel(K.mid_tile_store, X200)
    assert y.tobytes() == X200[:128].tobytes()


def test_a_load_whose_mask_selects_nothing_emits_nothing():
    # Tile 2 starts at row 256 of 200: its masked load and store select nothing and make no instruction (it was
    # an NkiError at the load); tiles 0 and 1 make a load and a store each.
    r = tnki.benchmark(K.empty_load, X200)
    assert r.outputs[0].tobytes() == X200.tobytes()
    assert [a["instructions"] for a in r.stats["nki"]["allocation"]] == [4], r.stats["nki"]["allocation"]


def test_mask_index_and_call_errors_at_the_kernel_line():
    cases = [
        (K.looser_compute_mask, NkiError, "MARK-looser",
         "mask: mask=(t * 128 + i_p < 200) selects [0, 72) of dim 0, but operand [22, 64] of sbuf tile tile "
         "[128, 64] float32 allocated at nki_masks.py:%d holds only [0, 22) of it, the part mask=(t * 128 + i_p < "
         "150) at nki_masks.py:%d selected" % ((line("MARK-looser") - 1,) * 2)),
        (K.plain_tile_under_mask, NkiError, "MARK-neither",
         "mask: dim 0 of operand sbuf tile part [72, 64] float32 allocated at nki_masks.py:%d is neither the "
         "masked operand's (128) nor the extent mask=(i_p < 22) selects (22: [0, 22))" % (line("MARK-neither") - 1)),
        (K.engine_mid_tile_mask, NkiError, "MARK-engine-start",
         "mask: it starts this instruction at partition 100 (28 partitions), but a compute engine's instruction "
         "of 28 partitions starts at partition 0 or 32 or 64 or 96: widen the mask to start there"),
        (K.negated_mask, NkiError, "MARK-negated",
         "a mask cannot be negated with ~ (NKI's masks are comparisons of index expressions combined with &): "
         "write the opposite comparison instead, e.g. (i_p >= 5) for ~(i_p < 5)"),
        (K.dst_call_with_mask, NkiError, "MARK-dst-mask",
         "nki.isa.tensor_copy: the dst= form (NKI 2.27 and later) takes no mask=; index dst and the operands"),
    ]
    for kernel, exc, marker, text in cases:
        e = raises(exc, tnki.simulate_kernel, kernel, X200)
        assert str(e).startswith("nki_masks.py:%d: " % line(marker)), (marker, str(e))
        assert text in str(e), (marker, str(e))


def test_indices_that_step_backwards():
    # `x[63 - i_p, i_f]` reached the builder and failed there ("pattern dim 0 is [-64, 64] (size >= 1, stride
    # >= 0)", no kernel line); the access patterns step backwards where the hardware's do (free dims, DMA
    # rows), so these run: byte-exact against NumPy's reversed views.
    y = tnki.simulate_kernel(K.reversed_access, X200)
    want = np.zeros((3, 128, 64), np.float32)
    want[0, :64] = X200[63::-1]
    want[1, :, :16] = X200[:128, 15::-1]
    want[1, :100, 16:] = X200[127:27:-1, 63:15:-1]
    want[2] = X200[127::-1, ::-1]
    assert y.tobytes() == want.tobytes()


def test_a_copy_assigned_over_its_own_source():
    # The copy was retargeted into t itself, and tensor_copy streams element by element: row 0 of the shift
    # came out all zeros and the reversal as [0..7, 7..0] (a tester's finding). Now the copy's own tile first.
    x = np.arange(128 * 16, dtype=np.float32).reshape(128, 16)
    y = tnki.simulate_kernel(K.copy_into_its_source, x)
    shifted = x.copy()
    shifted[:, 1:16] = x[:, 0:15]
    assert y[0].tobytes() == shifted.tobytes()
    assert y[1].tobytes() == x[:, ::-1].tobytes()


def test_a_partition_index_stepping_backwards_is_an_error_at_the_line():
    # An on-chip partition index cannot step backwards (an instruction's partitions are contiguous and
    # ascending); the error said so without naming the index.
    e = raises(NkiError, tnki.simulate_kernel, K.reversed_partitions, X200)
    assert str(e) == ("nki_masks.py:%d: the partition index must be a single nl.arange variable (plus a "
                      "constant) with step 1, got -i0[64] + 63 on dim 0: an instruction's partitions are "
                      "contiguous and ascending (no partition stride)" % line("MARK-reversed-partition")), str(e)


def test_masked_results_of_other_shapes_assigned_into_a_region():
    # `stats[i_p, i_s] = nisa.bn_stats(t[i_p, i_f], mask=(i_p < 72))` was refused ("cannot assign a [72, 6]
    # tile to a [128, 6] region"), as were bn_aggr, tensor_reduce, memset, iota, nc_transpose, nl.sum and
    # nl.mean results: the mask limits the rows (the transpose's columns) written; the rest of each zeroed
    # region stays zero.
    y = tnki.simulate_kernel(K.masked_results_assigned, X200)
    whole, part = y[0], y[1]
    widths = {0: 6, 1: 2, 2: 1, 3: 64, 4: 64, 7: 1, 8: 1}
    for j, w in widths.items():
        assert part[j, :72, :w].tobytes() == whole[j, :72, :w].tobytes(), j
        assert not part[j, 72:].any() and not part[j, :, w:].any(), j
    x = X200[128:]
    assert (part[3, :72] == 1).all()
    assert part[4, :72].tobytes() == np.arange(72 * 64, dtype=np.float32).reshape(72, 64).tobytes()
    tp = np.concatenate([part[5, :64], part[6, :64]], axis=1)  # [64, 128]
    assert tp[:, :72].tobytes() == x.T.tobytes() and not tp[:, 72:].any() and not part[5:7, 64:].any()
    # bn_aggr's and nl.mean's means against NumPy within FP32 (different summation orders).
    assert np.allclose(part[8, :72, 0], x.mean(axis=1), rtol=1e-5, atol=1e-6)
    assert np.allclose(part[1, :72, 0], x.mean(axis=1), rtol=1e-5, atol=1e-6)


def test_a_masked_matmul_result_assigned_into_a_region():
    # nc_matmul(..., mask=(i_n >= 8)) into ps[...] was refused ("cannot assign a [128, 88] tile to a [128, 96]
    # region"): the product goes to columns 8-95. Small integers: every product and sum exact in FP32.
    a = np.random.RandomState(30).randint(-4, 5, (64, 128)).astype(np.float32)
    b = np.random.RandomState(31).randint(-4, 5, (64, 96)).astype(np.float32)
    want = np.zeros((128, 96), np.float32)
    want[:, 8:] = a.T @ b[:, 8:]
    assert tnki.simulate_kernel(K.masked_matmul_assigned, a, b).tobytes() == want.tobytes()


def test_masked_results_indexed_with_index_expressions():
    # t[i_p, i_f] on a result of mask=(i_f >= 16) read its held columns from 0, so the store of columns 16..47
    # got 3 * x[:, 32:64] + 1 (tester23j finding 1); results holding rows 0..95 and 64..127 added over their
    # overlap were refused. Small integers: every product and sum exact in FP32.
    x = np.random.RandomState(40).randint(-9, 9, (128, 64)).astype(np.float32)
    y = tnki.simulate_kernel(K.masked_results_reindexed, x)
    want = np.zeros((2, 128, 64), np.float32)
    want[0, :, 16:48] = x[:, 16:48] * np.float32(3) + np.float32(1)
    want[1, 64:96, 16:] = x[64:96, 16:] * np.float32(2) + x[64:96, 16:] * np.float32(5)
    assert y.tobytes() == want.tobytes()
    # Rows 0..63 of v were never computed (it silently added x[r + 64]; then it was the looser-mask error): v's
    # tile has the whole index space's shape, as in NKI, and the add reads its rows 0..63 where no instruction
    # wrote (NaN here) with the simulator's warning at that line (tester23ac F3).
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = tnki.simulate_kernel(K.disjoint_masked_results, x)
    assert y.shape == (64, 64) and np.isnan(y).all(), y[0, :4]
    said = [str(w.message) for w in caught]
    assert len(said) == 1 and said[0].startswith(
        "nki_masks.py:%d: nl.add: its tensor_tensor (made by trnsim's lowering of nl.add) reads sbuf 'v' [64, 64] "
        "float32 allocated at nki_masks.py:%d where no instruction wrote before (partition 0, byte 0 of the read "
        "is the first such)" % (line("MARK-disjoint-add"), line("MARK-disjoint-v"))), said


def test_masked_matmuls_accumulated_into_a_region():
    # `ps[j_p, i_n] += nisa.nc_matmul(..., mask=(i_m < 50))` (and nl.matmul's) was refused ("nc_matmul on PE:
    # shape: dst must be [50, 96], got [64, 96]", tester23j finding 4). Small integers: exact in FP32.
    a = np.random.RandomState(41).randint(-4, 5, (128, 64)).astype(np.float32)
    b = np.random.RandomState(42).randint(-4, 5, (128, 96)).astype(np.float32)
    want = np.zeros((2, 64, 96), np.float32)
    p = a.T @ b
    want[0, :50] = p[:50] + p[:50]
    want[1, :, 8:] = p[:, 8:]
    assert tnki.simulate_kernel(K.masked_matmuls_accumulated, a, b).tobytes() == want.tobytes()


def test_memset_and_iota_with_lower_bound_masks_into_a_region():
    # c[i_p, i_f] = nisa.memset((128, 8), 9, nl.int32, mask=(i_p >= 64)) was refused ("cannot assign a [64, 8]
    # tile to a [128, 8] region", tester23j finding 5); likewise iota with mask=(i_f >= 2).
    y = tnki.simulate_kernel(K.memset_iota_lower_bounds)
    want = np.zeros((3, 128, 8), np.int32)
    want[0] = 5
    want[0, 64:] = 9
    want[1] = -1
    p, f = np.mgrid[0:32, 2:8]
    want[1, :32, 2:] = p * 10 + f
    want[2, 96:, 3:] = 7
    assert y.tobytes() == want.tobytes()


def test_a_tail_tile_read_whole_by_index_expressions():
    # NKI's LayerNorm tutorial with 300 rows reads all 128 rows of its tail tile (bn_stats masked on the free
    # dim only): refused ("covers [0, 127] under the mask, outside [0, 44)", tester23j finding 6).
    # The rows past the load's mask are read undefined, and trnsim says so (as the tutorial's are).
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = tnki.simulate_kernel(K.tail_tile_read_whole, X200)
    assert any("where no instruction wrote before (partition 72" in str(w.message) for w in caught), caught
    want = np.zeros((2, 200, 64), np.float32)
    want[0] = X200 * np.float32(2)
    want[1, :, 32:] = X200[:, 32:] + np.float32(1)
    assert y.tobytes() == want.tobytes()


def test_a_matmul_accumulated_into_a_region_of_another_shape_names_the_call():
    # It was the PE's rule naming nc_matmul for an nl.matmul ("nc_matmul on PE: shape: dst must be [50, 96],
    # got [32, 96]", tester23j finding 7).
    a = np.ones((128, 64), np.float32)
    b = np.ones((128, 96), np.float32)
    for isa_call, call, shape, mark in ((False, "nl.matmul", "[50, 96]", "MARK-acc-nl"),
                                        (True, "nisa.nc_matmul", "[64, 96]", "MARK-acc-isa")):
        e = raises(NkiError, tnki.simulate_kernel, K.matmul_accumulated_into_a_smaller_region, a, b,
                   isa_call=isa_call)
        assert str(e) == ("nki_masks.py:%d: `+=` of a %s result %s into a [32, 96] region: the product "
                          "accumulates into a region of its own shape" % (line(mark), call, shape)), str(e)


_RNG = np.random.default_rng(1)
_A, _B, _B2 = (_RNG.integers(-3, 4, shape).astype(np.float32) for shape in ((64, 64), (64, 96), (64, 96)))


@tnki.jit
def _sub_region_iadd(a, b, b2, masked):
    import nki.isa as nisa
    import nki.language as nl

    out = nl.ndarray((64, 96), nl.float32, buffer=nl.shared_hbm)
    ta, tb, tb2 = nl.load(a), nl.load(b), nl.load(b2)
    ps = nl.zeros((64, 96), nl.float32, buffer=nl.psum)
    ps[:, :] += nisa.nc_matmul(ta, tb)
    if masked:
        i_k, i_m, i_n = nl.arange(64)[:, None], nl.arange(64)[None, :], nl.arange(96)[None, :]
        ps[...] += nisa.nc_matmul(ta[i_k, i_m], tb2[i_k, i_n], mask=(i_m < 50))
    else:
        ps[:, 0:48] += nisa.nc_matmul(ta, tb2[:, 0:48])
    nl.store(out, nl.copy(ps))
    return out


def test_iadd_of_a_matmul_over_part_of_an_open_group_adds():
    # tester23k #2: `ps[:, 0:48] += nc_matmul(...)` after `ps[:, :] += nc_matmul(...)` (or a masked one over rows
    # < 50) overwrote its part with the second product instead of adding: a new accumulation group over another
    # region started with accumulate=False. Small integers: every sum is exact in FP32.
    p1, p2 = _A.T @ _B, _A.T @ _B2
    want = p1.copy()
    want[:, :48] += p2[:, :48]
    assert tnki.simulate_kernel(_sub_region_iadd, _A, _B, _B2, False).tobytes() == want.tobytes()
    want = p1.copy()
    want[:50] += p2[:50]
    assert tnki.simulate_kernel(_sub_region_iadd, _A, _B, _B2, True).tobytes() == want.tobytes()


@tnki.jit
def _held_slices(x, case):
    import nki.language as nl

    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    t = nl.load(x)
    e = nl.add(t, 1.0, mask=(i_f >= 16) & (i_f < 48))
    if case == "slice":
        out = nl.ndarray((128, 16), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=e[:, 16:32])
    elif case == "int":
        out = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=e[i_p, 20])
    else:
        out = nl.ndarray((128, 16), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=e[:, 8:24])  # MARK-held-past
    return out


def test_slices_and_integers_of_a_masked_result_address_the_whole_index_space():
    # tester23k #1: e[:, 16:32] of a result of mask=(i_f >= 16) & (i_f < 48) read columns 32-47 (the held
    # part's own 16-31), e[i_p, 20] column 36; now as index expressions: the call's whole index space.
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    got = tnki.simulate_kernel(_held_slices, x, "slice")
    assert got.tobytes() == (x[:, 16:32] + np.float32(1)).tobytes()
    got = tnki.simulate_kernel(_held_slices, x, "int")
    assert got.tobytes() == (x[:, 20:21] + np.float32(1)).tobytes()
    # Columns 8-23 reach past the held 16-47: e's tile has the whole space's shape, as in NKI, so they read
    # columns 8-15 where no instruction wrote (NaN here, with the simulator's warning at the store) and the held
    # 16-23 (tester23ac F3: it was the looser-mask error).
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = tnki.simulate_kernel(_held_slices, x, "past")
    assert np.isnan(got[:, :8]).all() and got[:, 8:].tobytes() == (x[:, 16:24] + np.float32(1)).tobytes(), got[0]
    said = [str(w.message) for w in caught]
    assert len(said) == 1 and said[0].startswith(
        "test_nki_masks.py:%d: nl.store: its dma_copy (made by trnsim's lowering of nl.store) reads sbuf 'e' "
        "[128, 16] float32 allocated at test_nki_masks.py:%d where no instruction wrote before (partition 0, byte 0 "
        "of the read is the first such)" % (line_of(__file__, "MARK-held-past"), line_of(__file__, "e = nl.add(t, 1.0, mask=")
                                            )), said


@tnki.jit
def _one_operand_indexed(aT, b, case):
    """A matmul of x = aT [K=128, M=64] and y = b [K=128, N=512] whose mask bounds one operand's index
    variables while the other is passed whole; out [64, 512] holds the product's masked-in part, zeros else."""
    import nki.isa as nisa
    import nki.language as nl

    out = nl.ndarray((64, 512), nl.float32, buffer=nl.shared_hbm)
    i_k, i_n, i_m = nl.arange(128)[:, None], nl.arange(512)[None, :], nl.arange(64)[None, :]
    x, y = nl.load(aT), nl.load(b)
    z = nl.zeros((64, 512), nl.float32)
    nl.store(out, z)
    if case == "n":  # N bounded through y's variable: x is whole
        p = nl.matmul(x, y[i_k, i_n], transpose_x=True, mask=(i_n < 300))
        nl.store(out[:, 0:300], nl.copy(p[:, 0:300]))
    elif case == "n_isa":
        p = nisa.nc_matmul(x, y[i_k, i_n], mask=(i_n < 300))
        nl.store(out[:, 0:300], nl.copy(p[:, 0:300]))
    elif case == "k":  # K bounded through y's variable: x's K too
        p = nl.matmul(x, y[i_k, i_n], transpose_x=True, mask=(i_k < 100))
        nl.store(out, nl.copy(p))
    else:  # M bounded through x's variable: y is whole
        p = nisa.nc_matmul(x[i_k, i_m], y, mask=(i_m < 40))
        nl.store(out[0:40, :], nl.copy(p[0:40, :]))
    return out


def test_a_matmul_mask_on_one_indexed_operand_leaves_the_whole_one():
    # tester23ad F2: `nl.matmul(x, y[i_k, i_n], transpose_x=True, mask=(i_n < 300))` (and nc_matmul's) was
    # "dim 1 of operand sbuf tile x [128, 64] ... is neither the masked operand's (512) nor the extent mask=(i_n <
    # 300) selects": i_n indexes y's N only. The tile shares K with the indexed operand and nothing else, so it is
    # cut on K only. Small integers: every product and sum exact in float32.
    aT = np.random.RandomState(50).randint(-3, 4, (128, 64)).astype(np.float32)
    b = np.random.RandomState(51).randint(-3, 4, (128, 512)).astype(np.float32)
    for case, want in (("n", aT.T @ b[:, :300]), ("n_isa", aT.T @ b[:, :300]), ("k", aT[:100].T @ b[:100]),
                       ("m", aT[:, :40].T @ b)):
        got = tnki.simulate_kernel(_one_operand_indexed, aT, b, case)
        full = np.zeros((64, 512), np.float32)
        full[:want.shape[0], :want.shape[1]] = want
        assert got.tobytes() == full.tobytes(), case


@tnki.jit
def _result_rows_mask(aT, b, rows_range=128):
    """acc[i_mp, i_n] += nl.matmul(x, y, transpose_x=True, mask=(i_r < M) & (i_n < N)) of an M-tail x [128, M]
    and an N-tail y [128, N] loaded whole on K: i_mp indexes only acc's rows, the mask's i_r is
    nl.arange(rows_range)[:, None] (i_mp itself for 128)."""
    import nki.language as nl

    K, M = aT.shape
    N = b.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    i_k, i_m, i_n = nl.arange(128)[:, None], nl.arange(128)[None, :], nl.arange(512)[None, :]
    i_mp = nl.arange(128)[:, None]
    i_r = i_mp if rows_range == 128 else nl.arange(rows_range)[:, None]
    x = nl.load(aT[i_k, i_m], mask=(i_m < M))
    y = nl.load(b[i_k, i_n], mask=(i_n < N))
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    acc[i_mp, i_n] += nl.matmul(x, y, transpose_x=True, mask=(i_r < M) & (i_n < N))  # MARK-rows-mask
    nl.store(out, nl.copy(acc[0:M, 0:N]))
    return out


def test_a_bound_on_the_result_rows_is_no_contraction_bound():
    # tester23ad F4: for M == 1 or M == N the axis-0 variable of the mask, which indexes only acc, bounded the
    # contraction K of the whole tiles to M rows: a silently wrong product (max error 16-38). A variable whose
    # range is not the 128 K rows the tiles hold cannot index them: the error naming the rule.
    for m, n in ((1, 512), (64, 64), (100, 300)):
        aT = np.ones((128, m), np.float32)
        b = np.ones((128, n), np.float32)
        e = raises(NkiError, tnki.simulate_kernel, _result_rows_mask, aT, b, m)
        assert str(e).startswith(
            "test_nki_masks.py:%d: nl.matmul: mask=((i_r < M) & (i_n < N)) bounds a variable of axis 0 to [0, %d): "
            "of tiles passed whole, that is the contraction dim K (a matmul's mask is that of nisa.nc_matmul"
            % (line_of(__file__, "MARK-rows-mask"), m)), e
        assert str(e).endswith("but x holds K rows [0, 128), so the mask would drop rows of the contraction. A bound "
                               "on the result's rows (M) is not one on K: index the operands with their own variables "
                               "(x[i_k, i_m] with mask=(i_m < M)), or leave the M tail to x's masked load and the "
                               "masked store"), e
    # One of the K rows' range (i_mp itself) is the documented K bound, as a padded input's K tail is
    # (tester23af F3): the product sums K rows [0, M), and a warning says so and names the M reading.
    aT = np.random.RandomState(60).randint(-3, 4, (128, 64)).astype(np.float32)
    b = np.random.RandomState(61).randint(-3, 4, (128, 64)).astype(np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = tnki.simulate_kernel(_result_rows_mask, aT, b)
    assert got.tobytes() == (aT[:64].T @ b[:64]).tobytes()
    said = [str(w.message) for w in caught if "bounds a variable of axis 0" in str(w.message)]
    assert len(said) == 1 and said[0].endswith(
        "but x holds K rows [0, 128): the product sums K rows [0, 64) only (a K tail of a padded input); if the "
        "bound was meant for the result's rows (M), index the operands with their own variables (x[i_k, i_m] with "
        "mask=(i_m < M)) or leave the M tail to the loads and the store"), said
    aT = np.random.RandomState(60).randint(-3, 4, (128, 128)).astype(np.float32)
    b = np.random.RandomState(61).randint(-3, 4, (128, 128)).astype(np.float32)
    assert tnki.simulate_kernel(_result_rows_mask, aT, b).tobytes() == (aT.T @ b).tobytes()


@tnki.jit
def _window_max(x):
    """out[c, h, w] = max of x[c, 2h:2h+2, 2w:2w+2] for x [64, 16, 16], through a mask of two variables per
    bound that holds over the whole index space (stride 2, no padding: every window inside x)."""
    import nki.language as nl

    out = nl.ndarray((64, 8, 8), nl.float32, buffer=nl.shared_hbm)
    c = nl.arange(64)[:, None, None, None, None]
    h = nl.arange(8)[None, :, None, None, None]
    w = nl.arange(8)[None, None, :, None, None]
    a = nl.arange(2)[None, None, None, :, None]
    b = nl.arange(2)[None, None, None, None, :]
    t = nl.load(x)
    m = nl.max(t[c, 2 * h + a, 2 * w + b], axis=[3, 4],
               mask=(2 * h + a >= 0) & (2 * w + b >= 0) & (2 * h + a < 16) & (2 * w + b < 16))
    nl.store(out, m)
    return out


@tnki.jit
def _flat_prefix(x, n):
    """out = x + 1 on the first n elements of x [128, 512] taken flat (`512 * i_p + i_f < n`), 0 elsewhere."""
    import nki.language as nl

    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(512)[None, :]
    nl.store(out, nl.zeros((128, 512), nl.float32))
    t = nl.load(x[i_p, i_f], mask=(512 * i_p + i_f < n))
    nl.store(out[i_p, i_f], nl.add(t, 1.0), mask=(512 * i_p + i_f < n))  # MARK-flat
    return out


def test_a_mask_of_several_variables_that_is_a_rectangle():
    # tester23ad F6: a bound on an expression of several variables was refused ("a mask bound must involve one
    # nl.arange index variable") even where it holds over the whole index space (nki-samples' MaxPool2D without
    # padding) or bounds whole rows (the tutorial's flat `512 * ix + iy < n`, n a multiple of 512). Evaluated over
    # the variables' ranges, known while tracing, such a bound is a mask of one variable (or none).
    x = np.random.RandomState(70).randint(-50, 50, (64, 16, 16)).astype(np.float32)
    want = x.reshape(64, 8, 2, 8, 2).max(axis=(2, 4))
    assert tnki.simulate_kernel(_window_max, x).tobytes() == want.tobytes()
    x = np.arange(128 * 512, dtype=np.float32).reshape(128, 512) / 4
    want = np.zeros((128, 512), np.float32)
    want[:37] = x[:37] + np.float32(1)
    assert tnki.simulate_kernel(_flat_prefix, x, 37 * 512).tobytes() == want.tobytes()
    # A bound that cuts a row in two is no rectangle: still the error, at the line.
    e = raises(NkiError, tnki.simulate_kernel, _flat_prefix, x, 37 * 512 + 100)
    assert str(e).startswith("test_nki_masks.py:%d: nl.load: mask: a mask bound of several nl.arange index "
                             "variables must hold on a rectangle of them (everywhere, nowhere, or as a bound on one "
                             "variable, e.g. i_p < n), got 512*i0[128] + i1[512] - 19044 < 0: only rectangular "
                             "masks" % (line_of(__file__, "MARK-flat") - 1)), e


@tnki.jit
def _m_tail_matmul(a, b, case):
    """The tutorial-style tiled matmul of a [M, K] (cases "transpose_x", "nc_matmul": its transpose [K, M])
    and b [K, N] with an M tail (M < 128: one row tile, its rows masked) and a K tail (K not a multiple of
    128), into a [128, N] PSUM accumulator."""
    import nki.isa as nisa
    import nki.language as nl

    M, K = a.shape[::-1] if case in ("transpose_x", "nc_matmul") else a.shape
    N = b.shape[1]
    rows = 128 if case == "rows" else M
    out = nl.ndarray((rows, N), nl.float32, buffer=nl.shared_hbm)
    i_m, i_k = nl.arange(128)[:, None], nl.arange(128)[None, :]
    i_kp, i_n = nl.arange(128)[:, None], nl.arange(N)[None, :]
    acc = nl.zeros((128, N), nl.float32, buffer=nl.psum)
    for kt in nl.affine_range((K + 127) // 128):
        y = nl.load(b[kt * 128 + i_kp, i_n], mask=(kt * 128 + i_kp < K))
        if case in ("transpose_x", "nc_matmul"):
            # a [K, M] loaded with its columns (M) masked: x.T @ y as the PE computes it
            xt = nl.load(a[kt * 128 + i_kp, i_k], mask=(kt * 128 + i_kp < K) & (i_k < M))
            if case == "nc_matmul":
                acc += nisa.nc_matmul(xt, y)
            else:
                acc += nl.matmul(xt, y, transpose_x=True)
            continue
        x = nl.load(a[i_m, kt * 128 + i_k], mask=(i_m < M) & (kt * 128 + i_k < K))
        if case in ("iadd", "rows"):
            acc += nl.matmul(x, y)
        else:
            acc[...] = nl.matmul(x, y)  # (one K tile)
    if rows == 128:
        nl.store(out, nl.copy(acc))
    else:
        nl.store(out[i_m, i_n], nl.copy(acc), mask=(i_m < M))
    return out


def _ints(shape, seed):
    return np.random.RandomState(seed).randint(-3, 4, shape).astype(np.float32)


def test_m_tail_tile_accumulates_into_its_rows_of_the_accumulator():
    # tester23x F1: a masked load's M-tail tile x (rows < 96 of [128, 128]), used unmasked in
    # `acc += nl.matmul(x, y)` with a [128, N] PSUM accumulator, was "`+=` of a nl.matmul result [96, 300] into a
    # [128, 300] region". The product's rows accumulate into the same rows of acc (docs/nki.md "Masks").
    # Small integers: every sum is exact.
    tiled = ("iadd", "transpose_x", "nc_matmul")
    for (m, k), cases in (((96, 256), tiled), ((96, 200), tiled), ((128, 200), tiled), ((96, 128), ("assign",))):
        a, b = _ints((m, k), 5), _ints((k, 300), 6)
        want = (a.astype(np.float64) @ b).astype(np.float32)
        for case in cases:
            x = np.ascontiguousarray(a.T) if case in ("transpose_x", "nc_matmul") else a
            got = tnki.simulate_kernel(_m_tail_matmul, x, b, case)
            assert got.tobytes() == want.tobytes(), (m, k, case, np.abs(got - want).max())
    # Rows 96-127 of acc keep what they held (zeros; NKI leaves them unspecified).
    a, b = _ints((96, 200), 7), _ints((200, 300), 8)
    prod = (a.astype(np.float64) @ b).astype(np.float32)
    got = tnki.simulate_kernel(_m_tail_matmul, a, b, "rows")
    assert got[:96].tobytes() == prod.tobytes() and not got[96:].any()


@tnki.jit
def _k_tail_masked_matmul(a, b, form, padded_to=None):
    """x.T @ y over K = 300 in three K tiles, the last one's rows masked on the loads and on the matmul; with
    `padded_to` K (a and b hold padded_to >= K rows, in whole tiles) the loads are whole and only the matmul's
    mask bounds K."""
    import nki.isa as nisa
    import nki.language as nl

    rows, M = a.shape
    K = padded_to or rows
    N = b.shape[1]
    o = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, N), nl.float32, buffer=nl.psum)
    for k in nl.affine_range((K + 127) // 128):
        i_k, i_m, i_n = nl.arange(128)[:, None], nl.arange(M)[None, :], nl.arange(N)[None, :]
        load_mask = None if padded_to else (k * 128 + i_k < K)
        x = nl.load(a[k * 128 + i_k, i_m], mask=load_mask)
        y = nl.load(b[k * 128 + i_k, i_n], mask=load_mask)
        if form == "nl":
            acc += nl.matmul(x, y, transpose_x=True, mask=(k * 128 + i_k < K))
        elif form == "nl_transpose":
            acc += nl.matmul(nl.transpose(x), y, mask=(k * 128 + i_k < K))
        else:
            acc += nisa.nc_matmul(x, y, mask=(k * 128 + i_k < K))
    nl.store(o, nl.copy(acc))
    return o


def test_a_k_tail_mask_on_matmul_bounds_the_contraction():
    # tester23y F3: a mask read as bounding M (a result-space rule tried for tester23x F1) made nl.matmul add
    # only rows 0-43 of the last K tile, silently; nl.matmul and nc_matmul follow the one axis rule.
    # tester23z F2: with x transposed by nl.transpose instead (x [M, K], no transpose_x), the mask cut x's dim 0,
    # M: rows 44-127 missed the last K tile, silently. The mask is the lowered nc_matmul(x.T, y)'s: K.
    a, b = _ints((300, 128), 9), _ints((300, 512), 10)
    want = (a.T.astype(np.float64) @ b).astype(np.float32)
    for form in ("nl", "nl_transpose", "nc"):
        got = tnki.simulate_kernel(_k_tail_masked_matmul, a, b, form)
        assert got.tobytes() == want.tobytes(), (form, np.abs(got - want).max())
    # tester23af F3: with whole loads of inputs padded to 384 rows (the pad not zero), the matmul's mask alone
    # bounds K (i_k spans the 128 K rows the tiles hold); the guard for tester23ad F4 refused it.
    pad_a = np.concatenate([a, _ints((84, 128), 11) + 100]).astype(np.float32)
    pad_b = np.concatenate([b, _ints((84, 512), 12) + 100]).astype(np.float32)
    # The cut of the last tile's 128 rows to 44 is said once per call (the warning's text: the test above).
    for form in ("nl", "nl_transpose", "nc"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = tnki.simulate_kernel(_k_tail_masked_matmul, pad_a, pad_b, form, 300)
        assert got.tobytes() == want.tobytes(), (form, "padded", np.abs(got - want).max())
        said = [str(w.message) for w in caught if "the product sums K rows [0, 44) only" in str(w.message)]
        assert len(said) == 1, (form, [str(w.message) for w in caught])


@tnki.jit
def _tail_operands_matmul(at, b, form):
    """at.T @ b for at [K, M] and b [K, N] with M <= 128 and N <= 512 tails (the loads' masks) and a K tail,
    into a whole [128, 512] PSUM tile: form "dst" the current style nc_matmul(dst=acc, ...), "mask" the
    earlier style `acc += nc_matmul(x, y, mask=...)` with the K mask on the matmul too. All of acc is
    stored: its rows and columns the tails do not hold keep their zeros."""
    import nki.isa as nisa
    import nki.language as nl

    K, M = at.shape
    N = b.shape[1]
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    i_k, i_m, i_n = nl.arange(128)[:, None], nl.arange(128)[None, :], nl.arange(512)[None, :]
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    for k in nl.affine_range((K + 127) // 128):
        x = nl.load(at[k * 128 + i_k, i_m], mask=(k * 128 + i_k < K) & (i_m < M))
        y = nl.load(b[k * 128 + i_k, i_n], mask=(k * 128 + i_k < K) & (i_n < N))
        if form == "dst":
            nisa.nc_matmul(dst=acc, stationary=x, moving=y)
        elif form == "nl":
            acc += nl.matmul(x, y, transpose_x=True, mask=(k * 128 + i_k < K))
        else:
            acc += nisa.nc_matmul(x, y, mask=(k * 128 + i_k < K))
    nl.store(out, nl.copy(acc))
    return out


def test_tail_operands_of_nc_matmul_with_dst_or_mask_go_to_their_rows_and_columns():
    # tester23y F1, F2: with a masked load's M-tail / N-tail tile, `nisa.nc_matmul(dst=acc, stationary=x,
    # moving=y)` with a whole [128, 512] acc was "dst [128, 512] must be [96, 512]", and the earlier style
    # `acc += nisa.nc_matmul(x, y, mask=...)` "`+=` of a nisa.nc_matmul result [96, 300] into a [128, 512]
    # region". The product goes to its rows and columns of acc; the rest keeps its zeros. Small integers.
    # tester23z F1: nl.matmul(x, y, transpose_x=True, mask=...) of the same tiles was still refused so.
    for k, m, n in ((300, 96, 300), (128, 96, 512), (200, 128, 300), (256, 128, 512)):
        at, b = _ints((k, m), 11), _ints((k, n), 12)
        want = np.zeros((128, 512), np.float32)
        want[:m, :n] = (at.T.astype(np.float64) @ b).astype(np.float32)
        for form in ("dst", "mask", "nl"):
            got = tnki.simulate_kernel(_tail_operands_matmul, at, b, form)
            assert got.tobytes() == want.tobytes(), (k, m, n, form, np.abs(got - want).max())


@tnki.jit
def _k_tail_of_x_rows(a, b, var_axis):
    """a @ b for a [M, K] loaded as K-tail column tiles x [M, 128 or 44] and b as row tiles, with
    `acc += nl.matmul(x, y, mask=...)` (no transpose_x): `var_axis` 0 the K mask on a variable of axis 0, as
    nc_matmul(x.T, y) has it; 1 on x's own column variable (axis 1), which bounds M and N instead."""
    import nki.language as nl

    M, K = a.shape
    N = b.shape[1]
    o = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((M, N), nl.float32, buffer=nl.psum)
    i_m, i_kf = nl.arange(M)[:, None], nl.arange(128)[None, :]
    i_k, i_n = nl.arange(128)[:, None], nl.arange(N)[None, :]
    for k in nl.affine_range((K + 127) // 128):
        x = nl.load(a[i_m, k * 128 + i_kf], mask=(k * 128 + i_kf < K))
        y = nl.load(b[k * 128 + i_k, i_n], mask=(k * 128 + i_k < K))
        acc += nl.matmul(x, y, mask=(k * 128 + (i_k if var_axis == 0 else i_kf) < K))  # MARK-k-rows
    nl.store(o, nl.copy(acc))
    return o


def test_a_k_mask_on_a_matmul_without_transpose_x_is_the_lowered_nc_matmuls():
    # tester23z F3: a K mask on x's column variable (axis 1) was "dim 1 of operand y [128, 512] is neither the
    # mask variable's range (128) nor the extent ... selects", saying nothing of K. The rule is nc_matmul's: a
    # variable of axis 0 bounds K (right here), one of axis 1 M and N: refused with the rule where it does not
    # fit N, and where it would fit (N = 128) but repeats the K part x holds, refused rather than cutting M, N.
    a = _ints((128, 300), 13)
    for n in (512, 128):
        b = _ints((300, n), 14)
        got = tnki.simulate_kernel(_k_tail_of_x_rows, a, b, 0)
        assert got.tobytes() == (a.astype(np.float64) @ b).astype(np.float32).tobytes(), n
    with open(__file__) as f:
        at = next(f"test_nki_masks.py:{i}: nl.matmul: " for i, t in enumerate(f, 1) if "# MARK-k-rows" in t)
    # (N = 512: the variable of range 128 bounds x's M only, which has its range (tester23af F10), so the
    # same error for both N.)
    for n in (512, 128):
        e = str(raises(NkiError, tnki.simulate_kernel, _k_tail_of_x_rows, a, _ints((300, n), 14), 1))
        assert e.startswith(at) and ("bounds a variable of axis 1 to [0, 44), the very part of x's K (dim 1) that x "
                                     "holds from a masked load" in e and "a variable of axis 0 (nl.arange(n)[:, None]) "
                                     "bounds the contraction dim K of both operands" in e and
                                     "here it would cut M (and N if of its range) to [0, 44)" in e), e


@tnki.jit
def _tail_transpose_into_whole_dst(x, call):
    """A masked load's partition-tail tile t (rows < 96 of [128, 128]) transposed into a whole [128, 128]
    dst= (zeros first): the transpose goes to its columns 0-95."""
    import nki.isa as nisa
    import nki.language as nl

    out = nl.ndarray((128, 128), nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:128]
    t = nl.load(x[i_p, i_f], mask=(i_p < 96))
    if call == "nc_transpose":
        p = nl.zeros((128, 128), nl.float32, buffer=nl.psum)
        nisa.nc_transpose(dst=p, data=t)
        nl.store(out, nl.copy(p))
    else:
        p = nl.zeros((128, 128), nl.float32, buffer=nl.sbuf)
        nisa.dma_transpose(dst=p, src=t)
        nl.store(out, p)
    return out


def test_a_tail_tile_transposed_into_a_whole_dst():
    # tester23y F1 addendum: "nc_transpose: dst [128, 128] must be [128, 96] for data [96, 128]" (and
    # dma_transpose's "must be the transpose of src [96, 128]") for a whole-shape dst= of a tail tile.
    x = _ints((128, 128), 13)
    want = np.zeros((128, 128), np.float32)
    want[:, :96] = x[:96].T
    for call in ("nc_transpose", "dma_transpose"):
        got = tnki.simulate_kernel(_tail_transpose_into_whole_dst, x, call)
        assert got.tobytes() == want.tobytes(), (call, np.abs(got - want).max())



@tnki.jit
def _reduce_of_a_masked_result(x, form):
    """Row sums of exp(x) computed on columns 0-39 only (form "sum": nl.sum; "act": activation_reduce) or
    column sums of rows 0-99 (form "partition": tensor_partition_reduce), the reduction itself unmasked."""
    import numpy as np
    import nki.isa as nisa
    import nki.language as nl

    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    t = nl.load(x)
    if form == "partition":
        o = nl.ndarray((1, 64), nl.float32, buffer=nl.shared_hbm)
        e = nl.exp(t, mask=(i_p < 100))  # MARK-reduce-mask-p
        nl.store(o, nisa.tensor_partition_reduce(np.add, e))  # MARK-reduce-p
        return o
    o = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
    e = nl.exp(t, mask=(i_f < 40))  # MARK-reduce-free-mask
    if form == "sum":
        s = nl.sum(e, axis=1, keepdims=True)  # MARK-reduce-sum
    else:
        s = nl.ndarray((128, 1), nl.float32)
        nisa.activation_reduce(op=nl.copy, data=e, reduce_op=np.add, reduce_res=s)  # MARK-reduce-act
    nl.store(o, s)
    return o


def test_a_reduction_over_a_dim_a_masked_result_holds_in_part_is_warned():
    # tester23af F7: an unmasked reduction of a result masked on the reduced dim reduces the part the mask
    # computed (trnsim) where the device also reads the undefined rest: the values are the held part's, and a
    # warning at the reducing line says so (it was silent).
    x = (np.arange(128 * 64, dtype=np.float32).reshape(128, 64) % 7) / np.float32(8)
    line = lambda m: line_of(__file__, m)
    for form, mark, dim, held, full, made in (
            ("sum", "MARK-reduce-sum", 1, "[128, 40]", 64, "MARK-reduce-free-mask"),
            ("act", "MARK-reduce-act", 1, "[128, 40]", 64, "MARK-reduce-free-mask"),
            ("partition", "MARK-reduce-p", 0, "[100, 64]", 128, "MARK-reduce-mask-p")):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = tnki.simulate_kernel(_reduce_of_a_masked_result, x, form)
        e = np.exp(x.astype(np.float64))
        ref = e[:100].sum(axis=0, keepdims=True) if form == "partition" else e[:, :40].sum(axis=1, keepdims=True)
        assert np.allclose(got, ref, rtol=1e-5), (form, np.abs(got - ref).max())
        said = [str(w.message) for w in caught if "written by no instruction" in str(w.message)]
        n = int(held[1:-1].split(", ")[dim])
        op = "tensor_partition_reduce" if form == "partition" else "activation" if form == "act" else "tensor_reduce"
        assert len(said) == 1 and said[0] == (
            "test_nki_masks.py:%d: %s reduces dim %d of %s of sbuf tile %s[%s] float32 allocated at "
            "test_nki_masks.py:%d, which holds only [0, %d) of its %d (the part mask=(%s) at test_nki_masks.py:%d "
            "selected): trnsim reduces that part; the device reduces all %d, %d of them written by no instruction "
            "(undefined): mask this call as the one that made the operand"
            % (line(mark), op, dim, held, "e ", "128, 64", line(made), n, full,
               "i_p < 100" if form == "partition" else "i_f < 40", line(made), full, full - n)), (form, said)



@tnki.jit
def _store_of_a_masked_result(x):
    """nl.store of a result whose mask computed rows 0-99 only, passed whole to an unmasked store."""
    import nki.language as nl

    o = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    e = nl.exp(nl.load(x), mask=(i_p < 100))  # MARK-store-masked-made
    nl.store(o, e)  # MARK-store-whole
    return o


def test_an_unmasked_store_of_a_masked_result_is_the_looser_mask_error():
    # tester23af F1: it said "cannot copy a [100, 64] tile to a [128, 64] region (... nl.transpose / .reshape
    # change the shape)" of a tile whose .shape is (128, 64) in the kernel.
    x = np.zeros((128, 64), np.float32)
    e = raises(NkiError, tnki.simulate_kernel, _store_of_a_masked_result, x)
    made = line_of(__file__, "MARK-store-masked-made")
    assert str(e) == (
        "test_nki_masks.py:%d: nl.store: the copy reads [0, 128) of dim 0, but operand [100, 64] of sbuf tile e "
        "[128, 64] float32 allocated at test_nki_masks.py:%d holds only [0, 100) of it, the part mask=(i_p < 100) "
        "at test_nki_masks.py:%d selected: mask the store as that call, or index e (e[i_p, i_f]: its "
        "undefined rest is read with a warning)" % (line_of(__file__, "MARK-store-whole"), made, made)), str(e)


if __name__ == "__main__":
    main(globals())
