"""Bad NKI kernels: each error is clear, names the kernel's Python line, and `trnsim run` exits 1 (an
unsupported call, wrong shapes, an out-of-bounds slice, a PSUM tile over 2 KiB per partition, SBUF tiles alive
at once over the core's SBUF, a partition dim over 128, a hardware rule, a Python exception, a missing reference)."""

import json
import os
import subprocess

import numpy as np

from runner import KERNELS, main, raises, tmpdir, trnsim_exe

import trnsim
import trnsim.nki as tnki

BAD = os.path.join(KERNELS, "nki_bad.py")
X = np.zeros((128, 64), dtype=np.float32)


def line(marker):
    with open(BAD) as f:
        for i, text in enumerate(f, 1):
            if marker in text:
                return i
    raise AssertionError(marker)


def run_cli(function, **over):
    w = {"name": "bad", "hardware": "trn2", "kernel": {"nki": BAD, "function": function},
         "inputs": {"x": {"generator": "normal", "seed": 1, "shape": [128, 64], "dtype": "float32"}}}
    w.update(over)
    d = tmpdir()
    path = os.path.join(d, "w.json")
    with open(path, "w") as f:
        json.dump(w, f)
    p = subprocess.run([trnsim_exe(), "run", path, "--out", os.path.join(d, "out")], capture_output=True,
                       text=True)
    return p.returncode, p.stderr


def check(function, marker, words, exc=tnki.NkiError):
    import nki_bad

    e = raises(exc, tnki.simulate_kernel, getattr(nki_bad, function), X)
    where = "nki_bad.py:%d" % line(marker)
    if isinstance(e, tnki.NkiError) or isinstance(e, trnsim.Error):
        assert where in str(e), (where, str(e))
    else:  # the kernel's own exception, raised as it is: its traceback reaches the line
        import traceback

        frames = ["%s:%d" % (os.path.basename(f.filename), f.lineno) for f in traceback.extract_tb(e.__traceback__)]
        assert where in frames, (where, frames)
    for w in words:
        assert w in str(e), (w, str(e))
    rc, err = run_cli(function)
    assert rc == 1, (rc, err)
    assert where in err, (where, err)
    return err


def test_unsupported_call():
    check("unsupported_call", "MARK-unsupported", ["nki.isa.range_select", "not modelled"], tnki.NkiUnsupported)


def test_wrong_shapes():
    check("wrong_shapes", "MARK-shapes", ["tensor_tensor", "[128, 32]", "[128, 64]"])


def test_out_of_bounds_slice():
    check("out_of_bounds", "MARK-oob", ["32:96", "out of bounds", "size 64"])


def test_psum_tile_over_a_bank():
    check("psum_too_big", "MARK-psum", ["PSUM", "4096 bytes", "2048-byte PSUM bank"])


def test_sbuf_tiles_alive_at_once_over_the_core():
    # Two [128, 32768] FP32 tiles alive together: 2 x 128 KiB per partition, SBUF holds 224 KiB; the second
    # is named with what is free then (224 - 128 = 96 KiB).
    check("sbuf_too_full", "MARK-sbuf-full", ["SBUF", "does not fit", "131072 B per partition", "98304 B free"])


def test_partition_dim_over_128():
    check("partitions_over_128", "MARK-partitions", ["partition dim 256", "128 partitions"])


def test_python_exception():
    check("python_exception", "MARK-exception", ["division"], ZeroDivisionError)


def test_python_exception_cli_traceback():
    rc, err = run_cli("python_exception")
    assert rc == 1 and "ZeroDivisionError" in err and "Traceback" in err, err


def test_hardware_rule_names_the_line():
    check("hardware_rule", "MARK-rule", ["tensor_copy"], trnsim.Error)


def test_missing_reference():
    rc, err = run_cli("copy_kernel", reference={"nki": BAD, "function": "no_such_ref"})
    assert rc == 1, (rc, err)
    assert "no_such_ref" in err and "reference" in err, err


def test_messages_name_the_call_and_the_line_once():
    # nl.zeros's error names nl.zeros (not the nl.ndarray it is built on); the CLI gives the line once and
    # none of trnsim's own frames.
    err = check("zeros_over_128", "MARK-zeros", ["nl.zeros: partition dim 256"])
    assert "nl.ndarray" not in err, err
    first = err.splitlines()[0]
    where = "nki_bad.py:%d" % line("MARK-zeros")
    assert first.count(where) == 1, first
    assert "/trnsim/nki/" not in err, err


def test_psum_tiles_alive_are_listed():
    # Nine one-bank PSUM tiles alive at once (8 banks): the error lists the others, whether from eight other
    # lines or from the same line (a Python loop).
    err = check("nine_psum_tiles", "MARK-psum-i", ["PSUM tile [128, 512]", "does not fit"])
    first = line("MARK-psum-a")
    for i in range(8):
        assert "nki_bad.py:%d: [128, 512] float32" % (first + i) in err, (first + i, err)
    err = check("nine_psum_tiles_one_line", "MARK-psum-9", ["x 9 alive at once"])
    assert "the other tiles alive then: 8 more of this one (nki_bad.py:%d)" % line("MARK-psum-9") in err, err


def test_sbuf_overflow_figures_agree():
    # The free figure is at the tile's first access: a tile declared later is listed as alive later, not as
    # holding space then (main listed it as "alive then" beside "229376 B free"), and the SBUF's size is given.
    err = check("sbuf_tile_over_the_sbuf", "MARK-sbuf-big",
                ["SBUF tile [120, 128, 512] float32 (x 1 alive at once): buffer 1 of 1 (245760 B per partition) "
                 "does not fit: 229376 B free in sbuf (of 229376 B per partition) at its first access; the other "
                 "tiles alive then: none; alive later in its life: nki_bad.py:%d: [128, 512] float32 x 1 (2048 B)"
                 % line("MARK-sbuf-later")])
    assert "229376 B free" in err, err


def validate_cli(function):
    w = {"name": "bad", "hardware": "trn2", "kernel": {"nki": BAD, "function": function},
         "inputs": {"x": {"generator": "normal", "seed": 1, "shape": [128, 64], "dtype": "float32"}}}
    d = tmpdir()
    path = os.path.join(d, "w.json")
    with open(path, "w") as f:
        json.dump(w, f)
    p = subprocess.run([trnsim_exe(), "validate", path], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def check_run_and_validate(function, marker, words):
    """simulate_kernel raises NkiError naming the line, `trnsim run` and `trnsim validate` exit 1 naming it."""
    err = check(function, marker, words)
    assert "roofline" not in err and "simulator bug" not in err, err
    rc, out = validate_cli(function)
    where = "nki_bad.py:%d" % line(marker)
    assert rc == 1 and where in out, (rc, out)
    for w in words:
        assert w in out, (w, out)


def test_output_never_written():
    # y is returned but no instruction writes it: named at the return, not a roofline "simulator bug".
    check_run_and_validate("unwritten_output", "MARK-unwritten",
                           ["unwritten_output", "returns y", "no instruction writes it"])


def test_output_written_by_one_core_of_two():
    # LNC2: the output is written by program 0 alone; program 1's trace writes nothing, which is no error.
    import nki
    import nki.language as nl

    @nki.jit
    def first_core_writes(x):
        y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        if nl.program_id(0) == 0:
            nl.store(y, nl.load(x))
        return y

    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    assert np.array_equal(tnki.simulate_kernel(first_core_writes[2], x), x)


def test_kernel_returning_none():
    # The kernel writes y but returns nothing: its outputs are unknown; named at the def line.
    check_run_and_validate("returns_none", "MARK-returns-none", ["returns_none", "returns None"])


def test_kernel_returning_a_slice_of_its_output():
    # tester23p F3: simulate_kernel gave back the whole [128, 64] tensor from row 0 for `return o[64:128, 0:8]`.
    import nki_bad

    text = ("kernel returns_a_slice returns a [64, 8] part of hbm 'o'[128, 64] float32: an output is a whole "
            "tensor (or a reshape of it); return o and take the part of the result")
    where = "nki_bad.py:%d" % line("MARK-returns-slice")
    e = raises(tnki.NkiError, tnki.simulate_kernel, nki_bad.returns_a_slice, X)
    assert str(e) == f"{where}: {text}", str(e)
    err = check("returns_a_slice", "MARK-returns-slice", [])
    assert err.splitlines()[0].endswith(f"{where}: NkiError: {text}"), err


def test_output_names_are_plain_file_stems():
    # An output is written as OUT/<name>.npy: a name with '/' or '.' would write outside the run's folder,
    # and stats/host/chain_stats would sit beside trnsim's own files. Refused at the return line.
    check("output_named_a_path", "MARK-output-path", ["'../victim'", "OUT/<name>.npy"])
    check("output_named_stats", "MARK-output-stats", ["'stats'", "chain_stats"])
    # One rule with the builder's (sim/io/output_name.h, which k.output and every OUT/<name>.npy use): the
    # NKI message is that rule's own sentence.
    from trnsim import _core

    err = check("output_named_stats", "MARK-output-stats", [])
    assert _core.output_name_problem("stats") in err, err


def test_unimplemented_language_name():
    # An nki.language name trnsim does not implement: NkiUnsupported naming it and the line, not AttributeError.
    err = check("unimplemented_language_name", "MARK-unimplemented-nl", ["nki.language.tan"],
                tnki.NkiUnsupported)
    assert "AttributeError" not in err, err


def test_every_nki_api_name_is_defined_or_unsupported():
    # The names of nki.language / nki.isa in NKI's API reference (2.21 to 2.33, the autosummary lists of
    # nki/api/nki.language.rst and nki.isa.rst): each is defined by trnsim (supported, or a stub raising
    # NkiUnsupported when called). Any other name raises NkiUnsupported naming it and the line asking.
    import nki.isa as nisa
    import nki.language as nl

    language = """NkiTensor abs abs_max abs_min add affine_range all all_reduce arange arctan atomic_rmw bfloat16
        bitwise_and bitwise_or bitwise_xor bool_ broadcast_to bypass ceil copy cos device_print divide dropout ds
        dynamic_range empty_like equal erf erf_dx exp expand_dims float16 float32 float4_e2m1fn_x4 float8_e4m3
        float8_e4m3fn float8_e4m3fn_x4 float8_e5m2 float8_e5m2_x4 float8_e8m0fnu floor fmod fori_loop fp32 full
        gather_flattened gelu gelu_apprx_sigmoid gelu_apprx_sigmoid_dx gelu_apprx_tanh gelu_dx greater
        greater_equal hbm int16 int32 int8 invert is_hbm is_on_chip is_psum is_sbuf left_shift less less_equal
        load load_transpose2d log logical_and logical_not logical_or logical_xor loop_reduce matmul max maximum
        mean mgrid min minimum mish mod multiply nc ndarray negative no_reorder not_equal num_programs ones
        par_dim power prelu private_hbm prod program_id program_ndim psum rand random_seed reciprocal relu
        right_shift rms_norm rsqrt sbuf sequential_range shared_constant shared_hbm shared_identity_matrix
        sigmoid sign silu silu_dx sin softmax softplus spmd_dim sqrt square static_range store subtract sum tan
        tanh tfloat32 tile_size transpose trunc uint16 uint32 uint8 var where while_loop zeros zeros_like"""
    isa = """NkiInstruction VirtualRegister activate2 activation activation_reduce affine_select bn_aggr bn_stats
        core_barrier dge_mode dma_compute dma_copy dma_engine dma_transpose dropout engine exponential
        get_nc_version gpsimd_engine iota local_gather matmul_perf_mode max8 memset nc_find_index8
        nc_match_replace8 nc_matmul nc_matmul_mx nc_n_gather nc_stream_shuffle nc_transpose nc_version
        nonzero_with_count oob_mode quantize_mx rand2 rand_get_state rand_set_state range_select reciprocal
        reduce_cmd register_alloc register_load register_move register_store rng scalar_engine
        scalar_tensor_tensor select_reduce sendrecv sequence_bounds set_rng_seed tensor_copy
        tensor_copy_dynamic_dst tensor_copy_dynamic_src tensor_copy_predicated tensor_engine
        tensor_partition_reduce tensor_reduce tensor_scalar tensor_scalar_cumulative tensor_scalar_reduce
        tensor_tensor tensor_tensor_scan topk unknown_engine vector_engine"""
    for mod, names in ((nl, language), (nisa, isa)):
        missing = [n for n in names.split() if n not in vars(mod)]
        assert not missing, (mod.__name__, missing)
    e = raises(tnki.NkiUnsupported, lambda: nl.some_future_call)  # MARK-future-name
    assert "nki.language.some_future_call is not modelled by trnsim" in str(e), str(e)
    assert "test_nki_errors.py:%d" % line_in(__file__, "MARK-future-name") in str(e), str(e)
    assert not hasattr(nisa, "some_future_call")


def line_in(path, marker):
    with open(path) as f:
        for i, text in enumerate(f, 1):
            if marker in text and "line_in(" not in text:
                return i
    raise AssertionError(marker)


def test_expand_dims():
    # nl.expand_dims inserts a size-1 free dim (a view, no instruction); the values pass through unchanged.
    import nki
    import nki.isa as nisa
    import nki.language as nl

    @nki.jit
    def k(x):
        t = nl.load(x)
        e = nl.expand_dims(t, 2)
        assert tuple(e.shape) == (128, 64, 1), e.shape
        assert tuple(nl.expand_dims(t, (-1, -2)).shape) == (128, 64, 1, 1)
        y = nl.ndarray((128, 64, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(y, e)
        return y

    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    y = tnki.simulate_kernel(k, x)
    assert y.shape == (128, 64, 1) and np.array_equal(y[:, :, 0], x), y.shape

    @nki.jit
    def bad(x):
        t = nl.load(x)
        nl.expand_dims(t, 0)  # MARK-expand-partition
        return x

    e = raises(tnki.NkiError, tnki.simulate_kernel, bad, x)
    assert "nl.expand_dims: axis 0" in str(e) and "partition dim" in str(e), str(e)
    assert "test_nki_errors.py:%d" % line_in(__file__, "MARK-expand-partition") in str(e), str(e)


main(globals())
