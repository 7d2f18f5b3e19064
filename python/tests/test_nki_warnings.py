"""The front end's Python warnings (a tester's pass on issue 23): a value carried across nl.affine_range
iterations through another region of the same tile, or through a variable rebound to a tile of the previous
iteration, is warned; warnings are attributed to the kernel's file and line (so -W and warning filters by
module and line act on them); and `import nki` keeps module specs consistent, so the front end runs under
`python3 -W error::ImportWarning`."""

import os
import subprocess
import sys
import warnings

import numpy as np

from runner import KERNELS, main

import trnsim.nki as tnki

import nki_carried as K

SRC = os.path.join(KERNELS, "nki_carried.py")
X = np.ones((128, 64), np.float32)


def line(marker):
    with open(SRC) as f:
        for i, text in enumerate(f, 1):
            if marker in text:
                return i
    raise AssertionError(marker)


def caught(kernel, **kwargs):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tnki.simulate_kernel(kernel, X, **kwargs)
    return [m for m in w if issubclass(m.category, RuntimeWarning)]


def test_another_region_of_the_same_tile_is_a_carried_value():
    # Iteration 1's first call reads acc[:, 0:32], which iteration 0's second call wrote: the check took any
    # read of the dst's tile in an add for an accumulation, whatever its region.
    w = caught(K.swapped_regions)
    at = "nki_carried.py:%d" % line("MARK-first")
    assert len(w) == 1, [str(m.message) for m in w]
    assert str(w[0].message).startswith(at + ": tensor_tensor in iteration 1 of the nl.affine_range loop at "
                                        "nki_carried.py:%d reads sbuf" % (line("MARK-first") - 1)), w[0].message
    assert "which iteration 0 wrote: a loop-carried dependency" in str(w[0].message)
    assert caught(K.same_region) == []


def test_a_tile_carried_by_rebinding_is_a_carried_value():
    # NKI's docs: a tensor variable rebound to a new object in a loop is shadowing (NKI warns), and iteration
    # i + 1 then reads iteration i's tile, a loop-carried dependency affine_range must not have.
    w = caught(K.rebound)
    at = "nki_carried.py:%d" % line("MARK-rebound")
    assert len(w) == 1, [str(m.message) for m in w]
    msg = str(w[0].message)
    assert msg.startswith(at + ": nl.add (tensor_scalar) in iteration 1 of the nl.affine_range loop"), msg
    assert "declared at %s in iteration 0's body: a variable rebound to it" % at in msg, msg
    assert caught(K.rebound_sequential) == []


def one_warning(kernel, marker, **kwargs):
    """The one warning the kernel gives, which must be at the line marked `marker`: its message."""
    w = caught(kernel, **kwargs)
    assert len(w) == 1, [str(m.message) for m in w]
    assert (w[0].filename, w[0].lineno) == (SRC, line(marker)), (w[0].filename, w[0].lineno, str(w[0].message))
    return str(w[0].message)


def test_write_after_read_across_iterations():
    # acc[:, i] = acc[:, i + 1] + 1: iteration 1 writes column 1, which iteration 0 read; only iteration 1's
    # reads of what iteration 0 wrote were checked.
    msg = one_warning(K.shifted, "MARK-shift", src=1, dst=0)
    assert msg.startswith("nki_carried.py:%d: tensor_scalar in iteration 1 of the nl.affine_range loop at "
                          "nki_carried.py:%d writes sbuf" % (line("MARK-shift"), line("MARK-shift") - 2)), msg
    assert "which iteration 0 read (write after read" in msg and "a loop-carried dependency" in msg, msg


def test_dependencies_past_iteration_one():
    # Iteration 1 was compared with iteration 0 only: a lag of 2, a branch on the loop index, and the last
    # iteration reading the accumulation were not warned.
    msg = one_warning(K.shifted, "MARK-shift", src=0, dst=2)
    assert ": tensor_scalar in iteration 2 of the nl.affine_range loop" in msg, msg
    assert "which iteration 0 wrote: a loop-carried dependency" in msg, msg
    msg = one_warning(K.branch_carried, "MARK-branch")
    assert ": tensor_tensor in iteration 2 of the nl.affine_range loop" in msg, msg
    assert "which iteration 1 wrote: a loop-carried dependency" in msg, msg
    msg = one_warning(K.last_iteration_reads, "MARK-last")
    assert ": nl.store (dma_copy) in iteration 8 of the nl.affine_range loop" in msg, msg
    assert "which iteration 0 wrote: a loop-carried dependency" in msg, msg
    # A tile each iteration writes before reading it is its own: no warning.
    assert caught(K.scratch_reused) == []


def test_a_nested_loop_in_an_unchecked_outer_iteration():
    # The check left out loops nested in outer iterations it does not check (3-6 of 8 here), assuming their
    # body is the checked iterations'; a branch on the outer index makes outer iteration 5's inner loop carry
    # a value, which went unwarned. A nested loop whose instructions differ from every checked one's is
    # checked now.
    msg = one_warning(K.nested_branch_carried, "MARK-nested")
    assert ": tensor_tensor in iteration 1 of the nl.affine_range loop at nki_carried.py:%d reads" % (
        line("MARK-nested") - 4) in msg, msg
    assert "which iteration 0 wrote: a loop-carried dependency" in msg, msg


def test_an_unnamed_hbm_tensor_is_named_in_the_warning():
    # It was "reads hbm 'None'[128, 64] float32": the kernel's variable and where it was allocated now.
    msg = one_warning(K.hbm_carried, "MARK-hbm")
    assert "reads hbm tensor y [128, 64] float32 allocated at nki_carried.py:%d, which iteration 0 wrote" % (
        line("MARK-hbm") - 4) in msg, msg
    # The kernel's call is named (it said "dma_copy in iteration 1", the instruction nl.load makes).
    assert msg.startswith("nki_carried.py:%d: nl.load (dma_copy) in iteration 1 of the nl.affine_range loop" % (
        line("MARK-hbm"))), msg


def test_tiles_are_named_by_the_kernels_variables():
    # An nl.load result was named 'load' and an nl.ndarray / nl.zeros without name= 'tile' (the calls'
    # names, not the user's): the variable the allocation line assigns, and the line.
    msg = one_warning(K.loaded_and_named, "MARK-loaded")
    assert "reads sbuf tile prev [128, 64] float32 allocated at nki_carried.py:%d, which iteration 0 wrote" % (
        line("MARK-loaded") - 8) in msg, msg
    w = caught(K.swapped_regions)
    assert "reads sbuf tile acc [128, 64] float32 allocated at nki_carried.py:%d, which iteration 0 wrote" % (
        line("MARK-first") - 2) in str(w[0].message), w[0].message
    # A tile given name= keeps it.
    w = caught(K.loaded_and_named, named=True)
    assert any("reads sbuf 'acc_buf'[128, 64] float32, which iteration 0 wrote" in str(m.message) for m in w), \
        [str(m.message) for m in w]


def test_stale_columns_a_masked_store_drops_are_no_carried_value():
    # The unmasked compute over a scratch tile whose tail columns the last iteration's masked load left
    # stale was warned as carried, though the masked store drops what it made of them.
    assert caught(K.masked_tail_scratch) == []
    y = tnki.simulate_kernel(K.masked_tail_scratch, np.arange(128 * 64, dtype=np.float32).reshape(128, 64))
    assert y.tobytes() == (np.arange(128 * 64, dtype=np.float32).reshape(128, 64) * 2 + 1).tobytes()
    # A sum over the whole result reads them: warned at the line that read the stale columns.
    msg = one_warning(K.masked_tail_scratch, "MARK-tail", reduce=True)
    assert "nl.multiply (tensor_scalar) in iteration 1 of the nl.affine_range loop at nki_carried.py:%d reads sbuf tile buf " \
        "[128, 48] float32 allocated at nki_carried.py:%d, which iteration 0 wrote" % (
            line("MARK-tail") - 2, line("MARK-tail") - 5) in msg, msg


def test_unwritten_tiles_and_allocation_sites_are_named_by_the_kernels_variables():
    # The read-before-write warning (the builder's) and stats.json "allocations" named an nl.ndarray tile
    # 'tile' (no line) and the sites of nl.load / nl.exp 'load' and 'exp'.
    w = [str(m.message) for m in caught(K.unwritten_tiles)]
    for name, space, made, read in (("mytile", "sbuf", "MARK-mytile", "MARK-read-mytile"),
                                    ("ps", "psum", "MARK-ps", "MARK-read-ps")):
        # The instruction is named after the nl call of its line whose lowering made it (nl.add's); on a line
        # of several calls (nl.store(out, nl.add(y, nl.copy(ps)))) as it is.
        inst = "nl.add: its tensor_scalar (made by trnsim's lowering of nl.add)" if name == "mytile" else \
            "tensor_copy"
        want = "nki_carried.py:%d: %s reads %s '%s' [128, 64] float32 allocated at nki_carried.py:%d where no " \
            "instruction wrote before" % (line(read), inst, space, name, line(made))
        assert any(m.startswith(want) for m in w), (want, w)
    r = tnki.benchmark(K.loop_sites, X)
    assert [a["name"] for a in r.stats["allocations"]] == ["t", "e"], r.stats["allocations"]


def test_warnings_are_attributed_to_the_kernel_line():
    # They were attributed to trnsim/nki/__init__.py:64 (the kernel's line only in the text).
    w = caught(K.swapped_regions)
    assert (w[0].filename, w[0].lineno) == (SRC, line("MARK-first")), (w[0].filename, w[0].lineno)
    # So a filter by module and line makes that warning an error, and a filter on another line does not.
    script = os.path.join(KERNELS, "nki_carried_main.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([KERNELS, os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-W", "error::RuntimeWarning:nki_carried:%d" % line("MARK-first"),
                        script], capture_output=True, text=True, env=env)
    assert p.returncode == 1 and "RuntimeWarning: nki_carried.py:%d: tensor_tensor" % line("MARK-first") in \
        p.stderr, p.stderr
    p = subprocess.run([sys.executable, "-W", "error::RuntimeWarning:nki_carried:%d" % (line("MARK-first") + 1),
                        script], capture_output=True, text=True, env=env)
    assert p.returncode == 0 and "finished" in p.stdout, p.stderr


def test_simulate_kernel_under_import_warnings_as_errors():
    # After `import nki`, trnsim.nki's __spec__ was the alias's (parent 'nki', __package__ 'trnsim.nki'):
    # the relative imports simulate_kernel runs raised ImportWarning, an error under -W error::ImportWarning.
    import nki
    import nki.language

    assert nki is tnki and tnki.__spec__.parent == tnki.__package__ == "trnsim.nki"
    assert nki.language.__spec__.name == nki.language.__name__ == "trnsim.nki.language"
    script = os.path.join(KERNELS, "nki_carried_main.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([KERNELS, os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-W", "error::ImportWarning", script], capture_output=True, text=True,
                       env=env)
    assert p.returncode == 0 and "finished" in p.stdout, p.stderr


if __name__ == "__main__":
    main(globals())
