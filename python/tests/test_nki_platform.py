"""The hardware and LNC a Python call picks when trnsim's hardware= / lnc= do not say: the kernel's
nki.jit(platform_target=...), NEURON_PLATFORM_TARGET_OVERRIDE and NEURON_LOGICAL_NC_CONFIG (tester23s F4, F5),
and nki.jit's keywords with NKI 2.33's CompileConfig / SpecializationConfig (F6)."""

import contextlib
import os
import warnings

import numpy as np

from runner import line_of, main, raises, raises_at

import trnsim.nki as tn
import nki
import nki.language as nl
import nki.isa as nisa
from nki.compiler import AddressRotation, CompileConfig, SpecializationConfig

HERE = os.path.abspath(__file__)
X = np.arange(16, dtype=np.float32).reshape(4, 4)


@contextlib.contextmanager
def env(**values):
    """The environment with `values` set (None: unset), restored afterwards."""
    def put(vals):
        for k, v in vals.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    old = {k: os.environ.get(k) for k in values}
    try:
        put(values)
        yield
    finally:
        put(old)


def _copy(x):
    o = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(o, nl.load(x))
    return o


copy_trn3 = nki.jit(platform_target="trn3")(_copy)
copy_gen2 = nki.jit(platform_target="gen2")(_copy)
copy_any = nki.jit(_copy)


@nki.jit(platform_target="trn3")  # quant's def
def quant(x):
    # quantize_mx exists on Trn3 only: it runs only if the kernel's platform_target picked trn3.
    p, f = x.shape
    data = nl.ndarray((p, f // 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.shared_hbm)
    q = nl.ndarray((p, f // 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    s = nl.ndarray((p, f // 4), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.quantize_mx(dst=q, src=nl.load(x, dtype=nl.bfloat16), dst_scale=s)
    nl.store(data, q)
    return data


@nki.jit
def programs(x):
    # Each core stores num_programs at its program id; one program stores -1 at index 1.
    o = nl.ndarray((1, 2), dtype=nl.int32, buffer=nl.shared_hbm)
    n = nl.num_programs(0)
    pid = nl.program_id(0)
    nl.store(o[0:1, pid:pid + 1], nl.full((1, 1), n, dtype=nl.int32))
    if n == 1:
        nl.store(o[0:1, 1:2], nl.full((1, 1), -1, dtype=nl.int32))
    return o


def hardware_of(kernel, **kw):
    return tn.benchmark(kernel, X, **kw).stats["hardware"]


def test_platform_target_picks_the_hardware():
    with env(NEURON_PLATFORM_TARGET_OVERRIDE=None):
        assert hardware_of(copy_trn3) == "trn3"
        assert hardware_of(copy_gen2) == "trn1"  # gen2 (trn1|inf2|gen2): Trn1's NeuronCore
        assert hardware_of(copy_any) == "trn2"  # nothing says: trn2, as before
        x = np.ones((32, 64), np.float32)
        assert tn.simulate_kernel(quant, x).shape == (32, 16)  # it was "quantize_mx exists on Trn3 only"
        assert quant(x).shape == (32, 16)  # the direct call too
        assert hardware_of(copy_trn3, hardware="trn3") == "trn3"  # hardware= of the same generation


def test_hardware_of_another_generation_is_an_error():
    e = raises(tn.NkiError, tn.simulate_kernel, copy_trn3, X, hardware="trn2")
    assert str(e) == (
        "test_nki_platform.py:%d: kernel _copy is written for nki.jit(platform_target='trn3'), a trn3 NeuronCore, "
        "but the run's hardware is a trn2 config: run it on a trn3 config (simulate_kernel / benchmark: "
        "hardware='trn3', or leave hardware= out; a workload: \"hardware\": \"trn3\") or change its platform_target"
        % line_of(HERE, "def _copy(x):")), str(e)


def test_platform_target_override_env():
    with env(NEURON_PLATFORM_TARGET_OVERRIDE="trn3"):
        assert hardware_of(copy_any) == "trn3"
        assert hardware_of(copy_trn3) == "trn3"
        assert hardware_of(copy_any, hardware="trn2") == "trn2"  # trnsim's hardware= wins over the variable
    with env(NEURON_PLATFORM_TARGET_OVERRIDE="gen3"):
        assert hardware_of(copy_any) == "trn2"
        e = raises(ValueError, tn.simulate_kernel, copy_trn3, X)
        assert str(e) == ("NEURON_PLATFORM_TARGET_OVERRIDE='gen3' conflicts with the kernel's "
                          "nki.jit(platform_target='trn3'), a trn3 NeuronCore: unset the variable or name trn3 in it"), e
    with env(NEURON_PLATFORM_TARGET_OVERRIDE="trn9"):
        e = raises(ValueError, tn.simulate_kernel, copy_any, X)
        assert str(e) == ("NEURON_PLATFORM_TARGET_OVERRIDE='trn9' is not a platform target NKI accepts "
                          "(trn1|inf2|gen2, trn2|gen3, trn3|gen4)"), e
    with env(NEURON_PLATFORM_TARGET_OVERRIDE=""):  # empty: unset
        assert hardware_of(copy_any) == "trn2"


def test_bad_platform_target():
    e = raises_at(ValueError, "nki.jit: platform_target='trn4' is not a platform target NKI accepts "
                  "(trn1|inf2|gen2, trn2|gen3, trn3|gen4)", HERE, "# the unknown " "target",
                  lambda: nki.jit(platform_target="trn4"))  # the unknown target
    assert str(e).startswith("test_nki_platform.py:"), e


def test_lnc_env():
    with env(NEURON_LOGICAL_NC_CONFIG=None):
        assert tn.simulate_kernel(programs, X).tolist() == [[1, -1]]
    with env(NEURON_LOGICAL_NC_CONFIG="2"):
        # Two cores, each seeing num_programs 2 (it was [[1, -1]]: one program).
        assert tn.simulate_kernel(programs, X).tolist() == [[2, 2]]
        assert programs(X).tolist() == [[2, 2]]
        assert tn.benchmark(programs, X).stats["cores"] == 2
        assert tn.simulate_kernel(programs, X, lnc=1).tolist() == [[1, -1]]  # lnc= wins over the variable
        assert tn.simulate_kernel(programs[2], X).tolist() == [[2, 2]]
    with env(NEURON_LOGICAL_NC_CONFIG="1"):
        assert tn.simulate_kernel(programs, X).tolist() == [[1, -1]]
        e = raises(ValueError, tn.simulate_kernel, programs[2], X)
        assert str(e) == ("NEURON_LOGICAL_NC_CONFIG=1 conflicts with the kernel's launch grid programs[2], which "
                          "runs it on 2 cores (one program per core): unset the variable or drop the [...] (NKI's "
                          "runtime refuses the mismatch too)"), e
    with env(NEURON_LOGICAL_NC_CONFIG="4"):
        e = raises(ValueError, tn.simulate_kernel, programs, X)
        assert str(e) == ("NEURON_LOGICAL_NC_CONFIG='4': NKI's LNC degree is 1 or 2 (trnsim runs 1 core or the "
                          "LNC2 pair)"), e


def test_lnc2_on_trn1_is_an_error():
    # tester23v F3: each form ran a two-core "Trn1 LNC2 pair"; Neuron's compiler refuses lnc=2 on trn1
    # (NCC_EARG001). The rule: sim/config/lnc.h, asked by every entry point.
    why = ("LNC 2 on trn1: a trn1 logical NeuronCore is 1 physical core (LNC2 pairs are Trainium2 and later; "
           "Neuron's compiler refuses lnc=2 on trn1: NCC_EARG001)")
    e = raises(ValueError, lambda: tn.simulate_kernel(programs[2], X, hardware="trn1"))  # the trn1 launch
    assert str(e) == "%s:%d: programs[2] with hardware='trn1': %s" % (
        os.path.basename(HERE), line_of(HERE, "# the trn1 " "launch"), why), e
    e = raises(ValueError, tn.benchmark, programs, X, hardware="trn1", lnc=2)
    assert str(e) == "lnc=2 with hardware='trn1': " + why, e
    copy_t1 = nki.jit(platform_target="trn1")(_copy)
    e = raises(ValueError, lambda: copy_t1[2](X))  # the platform_target launch
    assert str(e) == "%s:%d: _copy[2] with the kernel's nki.jit(platform_target='trn1'): %s" % (
        os.path.basename(HERE), line_of(HERE, "# the platform_target " "launch"), why), e
    with env(NEURON_LOGICAL_NC_CONFIG="2", NEURON_PLATFORM_TARGET_OVERRIDE="trn1"):
        e = raises(ValueError, tn.simulate_kernel, programs, X)
        assert str(e) == "NEURON_LOGICAL_NC_CONFIG=2 with NEURON_PLATFORM_TARGET_OVERRIDE='trn1': " + why, e
        assert tn.simulate_kernel(programs, X, lnc=1).tolist() == [[1, -1]]  # one core: runs
    # LNC 1 on trn1 and LNC 2 on trn2 / trn3 run as before.
    assert tn.simulate_kernel(copy_t1, X).tolist() == X.tolist()
    assert tn.simulate_kernel(programs[1], X, hardware="trn1").tolist() == [[1, -1]]
    for hw in ("trn2", "trn3"):
        assert tn.simulate_kernel(programs[2], X, hardware=hw).tolist() == [[2, 2]], hw


def test_compile_config():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        k = nki.jit(compile_config=CompileConfig(non_ssa_legalization=True))(_copy)  # the nki.jit page's example
    assert [(str(m.message), m.category, m.lineno) for m in w] == [
        ("nki.compiler.CompileConfig: non_ssa_legalization=True is ignored: trnsim runs the traced instructions "
         "as written (no backend pass runs)", RuntimeWarning, line_of(HERE, "the nki.jit page's example"))]
    assert np.array_equal(tn.simulate_kernel(k, X), X)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        # Values trnsim honours as it is: no warning.
        CompileConfig(barrier_check=True, dead_code_elim=False, prefetch_auto=False, nki_alloc_fallback=False)
        SpecializationConfig()
    assert not w, [str(m.message) for m in w]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        c = CompileConfig(address_rotation=AddressRotation.DISABLE, barrier_check=False)
        s = SpecializationConfig(allow_nested_config_override=True)
    assert [str(m.message) for m in w] == [
        "nki.compiler.CompileConfig: address_rotation=<AddressRotation.DISABLE: 'disable'> is ignored: trnsim "
        "places tensors by its own allocation model (docs/nki.md, Allocation)",
        "nki.compiler.CompileConfig: barrier_check=False is ignored: trnsim always checks that the two LNC2 cores "
        "make the same core_barrier and sendrecv calls",
        "nki.compiler.SpecializationConfig: allow_nested_config_override=True is ignored: trnsim compares no "
        "nested kernel's config: a nested @nki.jit kernel runs inline under its caller's"], [str(m.message) for m in w]
    k = nki.jit(compile_config=c, specialization_config=s)(_copy)
    assert np.array_equal(tn.simulate_kernel(k, X), X)


def test_bad_configs():
    e = raises_at(TypeError, "nki.compiler.CompileConfig() got an unexpected keyword argument 'opt_level' (NKI "
                  "2.33's fields: address_rotation, non_ssa_legalization, dead_code_elim, barrier_check, "
                  "prefetch_auto, nki_alloc_fallback)", HERE, "# the unknown " "field",
                  lambda: CompileConfig(opt_level=2))  # the unknown field
    e = raises(TypeError, CompileConfig, barrier_check=1)
    assert str(e).endswith("nki.compiler.CompileConfig: barrier_check=1: expected True or False"), e
    e = raises(TypeError, CompileConfig, address_rotation="auto")
    assert str(e).endswith("nki.compiler.CompileConfig: address_rotation='auto': expected an "
                           "nki.compiler.AddressRotation"), e
    e = raises(TypeError, CompileConfig, True)
    assert str(e).endswith("nki.compiler.CompileConfig() takes keyword arguments only (address_rotation, "
                           "non_ssa_legalization, dead_code_elim, barrier_check, prefetch_auto, "
                           "nki_alloc_fallback), got 1 positional"), e
    e = raises(TypeError, nki.jit, compile_config=SpecializationConfig())
    assert str(e).endswith("nki.jit: compile_config=SpecializationConfig(): expected a "
                           "nki.compiler.CompileConfig(...)"), e


def test_unknown_jit_keyword():
    raises_at(TypeError, "nki.jit() got an unexpected keyword argument 'platfrom_target' (it takes mode, "
              "platform_target, compile_config, specialization_config, additional_compile_opt, debug_kernel, "
              "show_compiler_tb, experimental_flags; docs/nki.md, \"Target platform and LNC\")", HERE,
              "# the misspelt " "keyword", lambda: nki.jit(platfrom_target="trn3"))  # the misspelt keyword
    # NKI's earlier keywords are taken (no counterpart in the simulator).
    k = nki.jit(debug_kernel=True, show_compiler_tb=True, experimental_flags="x", mode="torchxla")(_copy)
    assert np.array_equal(tn.simulate_kernel(k, X), X)


@nki.jit
def _blocks_copy(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
    return out


def test_disable_dge_compile_option():
    # tester23ab F1: the Neuron compiler's --disable-dge (the CS149 harness compiles its profiled runs so) had
    # no counterpart: the calibration twins of those rows were 1.6-2.2 % off their C++ ports (disable_dge).
    # On trn2 it gives the DMAs precomputed descriptors instead of the hardware DGE, as set_disable_dge does for
    # a C++ kernel, the same from @nki.jit and from benchmark / baremetal / profile's additional_compile_opt.
    import tempfile

    x = np.arange(512 * 64, dtype=np.float32).reshape(512, 64)
    dge = tn.benchmark(_blocks_copy, x, hardware="trn2")
    off = tn.benchmark(_blocks_copy, x, hardware="trn2", additional_compile_opt="--disable-dge")
    assert off.latency_ns != dge.latency_ns and off.outputs[0].tobytes() == x.tobytes()
    jitted = nki.jit(additional_compile_opt="-O1  --disable-dge")(_blocks_copy.fn)
    assert tn.benchmark(jitted, x, hardware="trn2").latency_ns == off.latency_ns
    bench = nki.benchmark(additional_compile_opt="--disable-dge", hardware="trn2")(_blocks_copy)
    bench(x)
    assert bench.benchmark_result.latency_ns == off.latency_ns
    with tempfile.TemporaryDirectory() as d:
        assert nki.profile(working_directory=d, additional_compile_opt="--disable-dge", hardware="trn2")(
            _blocks_copy)(x).tobytes() == x.tobytes()
        import json

        with open(os.path.join(d, "stats.json")) as f:
            assert json.load(f)["total_time_ns"] == off.latency_ns
    e = raises(TypeError, tn.benchmark, _blocks_copy, x, additional_compile_opt=["--disable-dge"])
    assert str(e) == "benchmark: additional_compile_opt=['--disable-dge']: expected a string of compiler options"


def test_jit_mode():
    # tester23v F5: mode="bogus" ran as "auto" without a word. NKI's six modes (nki.jit page) all run on the
    # simulator; None (the default) too.
    for mode in (None, "auto", "jax", "torchxla", "baremetal", "benchmark", "simulation", "trace"):
        assert np.array_equal(tn.simulate_kernel(nki.jit(mode=mode)(_copy), X), X), mode
        assert np.array_equal(nki.jit(_copy, mode=mode)(X), X), mode
    valid = "(auto, jax, torchxla, baremetal, benchmark, simulation, trace)"
    e = raises(ValueError, lambda: nki.jit(mode="bogus"))  # the unknown mode
    assert str(e) == ("test_nki_platform.py:%d: nki.jit: mode='bogus' is not a mode NKI accepts %s"
                      % (line_of(HERE, "# the unknown " "mode"), valid)), e
    e = raises(ValueError, lambda: nki.jit(_copy, mode="Auto"))  # the capitalised mode
    assert str(e) == ("test_nki_platform.py:%d: nki.jit: mode='Auto' is not a mode NKI accepts %s"
                      % (line_of(HERE, "# the capitalised " "mode"), valid)), e
    e = raises(ValueError, nki.jit, mode=2)
    assert str(e).endswith("nki.jit: mode=2 is not a mode NKI accepts %s" % valid), e


@nki.jit(mode="trace")
def _scaled_sum(a_tile, b_tile, out_tile, scale):
    # A helper kernel as nki-samples' reference kernels write theirs: it computes into a tile its caller made.
    out_tile[...] = nl.multiply(nl.add(a_tile, b_tile), scale)


@nki.jit
def _calls_a_trace_helper(a, b):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    a_t, b_t = nl.load(a), nl.load(b)
    s = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
    _scaled_sum(a_t, b_t, s, 3.0)
    _scaled_sum(s, a_t, s, 0.5)
    nl.store(out, s)
    return out


def test_jit_mode_trace_helper():
    # tester23aa F3: @nki.jit(mode='trace'), the decorator of the helper kernels nki-samples' reference attention
    # and nki-library's MoE kernels call from their kernels, was a ValueError at the decorator line; the helper
    # now runs inline in its caller's trace.
    b = np.full_like(X, 2.0)
    assert np.array_equal(tn.simulate_kernel(_calls_a_trace_helper, X, b), ((X + b) * 3.0 + X) * 0.5)


if __name__ == "__main__":
    main(globals())
