"""The warning of a read where no instruction wrote, of one of a directly allocated block tensor's blocks read at
one kernel line in every iteration of a loop (docs/nki.md "Direct allocation").

nki-samples' contributed pipelined_attention at seqlen 8192 (one section of its 16384 design, which its header
says is the only length it runs): its `scaling_factor[g]` blocks are written only from the second section on,
and every output row is NaN, as the warning says. The warning listed all 64 blocks, each with its line (4.4 KB);
it names them once, by the first and last block. At seqlen 2048 its loop over seqlen // 8192 sections runs no
iteration and nothing writes its output: the error says which loop ran none."""

import warnings

import numpy as np

from runner import line_of, main, raises_at

import trnsim.nki as tnki

import nki
import nki.compiler as ncc
import nki.isa as nisa
import nki.language as nl

G = 4
X = np.arange(128 * 8, dtype=np.float32).reshape(128, 8) / 64


@nki.jit
def scaled_from_the_second_section(x, sections):
    o = nl.ndarray((G, 128, 8), nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 8), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    t[...] = nl.load(x)
    s = nl.ndarray((G, nl.par_dim(128), 1), nl.float32,
                   buffer=ncc.sbuf.mod_alloc(base_addr=64, num_free_tiles=(G,)))  # MARK-scales
    r = nl.ndarray((G, nl.par_dim(128), 8), nl.float32,
                   buffer=ncc.sbuf.mod_alloc(base_addr=128, num_free_tiles=(G,)))
    for sec in nl.sequential_range(sections):
        for g in nl.affine_range(G):
            if sec > 0:
                s[g] = nisa.tensor_copy(t[:, 0:1])
            if sec == sections - 1:
                r[g] = nisa.tensor_scalar(t, nl.multiply, s[g])  # MARK-read
                nl.store(o[g], value=r[g])
    return o


def test_blocks_never_written_are_named_once_by_their_tensor():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = tnki.simulate_kernel(scaled_from_the_second_section, X, 1)
    assert np.isnan(got).all(), got[0, 0, :4]
    said = [str(w.message) for w in caught]
    me = "test_nki_direct_alloc_unwritten_blocks.py"
    assert said == [
        "%s:%d: tensor_scalar reads sbuf [128, 1] float32 of one of the 4 blocks 's[0]' .. 's[3]' (allocated at "
        "%s:%d) where no instruction wrote before (partition 0, byte 0 of the read is the first such): its values "
        "are undefined (a tile starts uninitialised, as numpy.empty's contents; trnsim's memory starts as NaN)" % (
            me, line_of(__file__, "MARK-read"), me, line_of(__file__, "MARK-scales") - 1)], said
    # Two sections: every block is written before it is read, and the result is exact.
    got = tnki.simulate_kernel(scaled_from_the_second_section, X, 2)
    assert got.tobytes() == np.broadcast_to(X * X[:, 0:1], (G, 128, 8)).tobytes()


@nki.jit
def sections_of(x, n):
    o = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
    for _ in nl.sequential_range(n // 8192):  # MARK-sections
        nl.store(o, value=nl.load(x))
    return o  # MARK-return


def test_an_unwritten_output_names_the_loop_that_ran_no_iteration():
    me = "test_nki_direct_alloc_unwritten_blocks.py"
    raises_at(tnki.NkiError, "kernel sections_of returns o (allocated at %s:%d), but no instruction writes it (the "
              "nl.sequential_range(0) loop at %s:%d ran no iteration): store its values (nl.store / nisa.dma_copy "
              "into it) before returning it" % (me, line_of(__file__, "MARK-sections") - 1, me,
                                                 line_of(__file__, "MARK-sections")),
              __file__, "MARK-return", tnki.simulate_kernel, sections_of, X, 2048)
    assert tnki.simulate_kernel(sections_of, X, 8192).tobytes() == X.tobytes()


if __name__ == "__main__":
    main(globals())
