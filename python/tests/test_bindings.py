"""trnsim._core: the builder, ISA calls, hardware configs and sessions from Python, and the Python source
lines the builder records."""

import os

import numpy as np

from runner import line_of as _line_of, main, raises

import trnsim
from trnsim import _core
from trnsim._core import nki as isa

THIS = os.path.abspath(__file__)


def line_of(marker):
    return _line_of(THIS, marker)


def test_enums_and_names():
    assert _core.dtype_name(_core.DType.BF16) == "bfloat16"
    assert _core.parse_dtype("float8_e4m3fn") == _core.DType.FP8_E4M3FN
    assert _core.parse_dtype("nope") is None
    assert _core.dtype_size(_core.DType.FP8_E4M3FN_X4) == 4
    assert _core.alu_name(_core.AluOp.Max) == "maximum"
    assert _core.parse_act("exp") == _core.ActFunc.Exp
    assert _core.engine_name(_core.Engine.DVE) == "DVE"


def test_engine_start_rule_has_one_home():
    # The compute engines' start-partition rule (sim/isa/partition_start.h): isa::check applies it, and the
    # front end asks it while tracing, so that its error names the mask (no second copy in Python).
    assert _core.engine_start_partitions(128) == [0] and _core.engine_start_partitions(65) == [0]
    assert _core.engine_start_partitions(64) == [0, 64] and _core.engine_start_partitions(33) == [0, 64]
    assert _core.engine_start_partitions(32) == _core.engine_start_partitions(1) == [0, 32, 64, 96]
    assert _core.engine_start_rule(40) == "33-64 must start at 0 or 64"
    from trnsim.nki import _lower
    from trnsim.nki._errors import NkiError

    e = raises(NkiError, _lower._engine_start, 16, 40)
    assert "starts at partition 0 or 64" in str(e), e
    _lower._engine_start(64, 40)


def test_hw_configs():
    trn2 = trnsim.load_hw("trn2")
    assert trn2.name == "trn2" and trn2.generation == _core.Generation.Trn2
    l2 = trn2.limits()
    assert (l2.partitions, l2.sbuf_bytes_per_partition, l2.psum_bytes_per_partition) == (128, 224 * 1024, 16 * 1024)
    assert trnsim.load_hw("trn3").limits().sbuf_bytes_per_partition == 256 * 1024
    e = raises(trnsim.InputError, trnsim.load_hw, "trn2", {"pe.clock_GHz": -1})
    assert "pe.clock_GHz" in str(e), e
    raises(trnsim.InputError, trnsim.load_hw, "trn9")


def copy_program(num_programs=1):
    def kernel(k):
        x = k.input("x", _core.DType.F32, [128, 64])
        out = k.output("out", _core.DType.F32, [128, 64])
        t = k.sbuf([128, 64], _core.DType.F32, "t")
        isa.dma_copy(t, x)  # MARK-dma-in
        isa.dma_copy(out, t, loc=("my_kernel.py", 7))
    return _core.build_program(kernel, limits=_core.default_limits(_core.Generation.Trn2), num_programs=num_programs)


def test_build_program_records_python_lines():
    b = copy_program()
    assert b.inputs == ["x"] and b.outputs == ["out"]
    assert b.program.num_cores == 1
    assert b.program.instruction_count() == 2
    locs = sorted((os.path.basename(f), l) for _, _, f, l in b.program.instructions(0))
    # the load from this file's line, the store from the explicit loc
    assert locs == [("my_kernel.py", 7), ("test_bindings.py", line_of("MARK-dma-in"))], locs
    assert THIS in b.program.files


def test_output_names_are_plain_file_stems():
    # An output is written as OUT/<name>.npy: the builder's k.output refuses a path or one of trnsim's own
    # stems at the kernel line, by the rule the NKI front end and every OUT/<name>.npy use (output_name_problem).
    for bad in ["../victim", "/tmp/x/victim", "stats", "HOST", "chain_stats", "a.b", "-x", "", "a/b", "x\u00e9",
                "a" * 252]:
        assert _core.output_name_problem(bad), bad
    for good in ["y", "out_1", "a-b", "_x", "X9", "9", "a" * 251]:
        assert _core.output_name_problem(good) == "", good

    def kernel(k):
        k.output("../victim", _core.DType.F32, [128, 64])  # MARK-bad-output

    e = raises(trnsim.InputError, _core.build_program, kernel, limits=_core.default_limits(_core.Generation.Trn2))
    where = "test_bindings.py:%d" % line_of("MARK-bad-output")
    assert where + ": output '../victim' is written as OUT/<name>.npy" in str(e), str(e)


def test_session_runs_and_reads():
    b = copy_program(num_programs=2)
    assert b.program.num_cores == 2 and b.program.instruction_count() == 4
    hw = trnsim.load_hw("trn2")
    s = _core.Session(b.program, hw)
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64) / 7
    s.set_input("x", x)
    seen = []
    stats = s.run(progress=lambda ns, done, total: seen.append((done, total)), progress_every=1)
    assert stats["total_time_ns"] > 0
    assert seen and seen[-1][1] == 4 and all(0 < d <= 4 for d, _ in seen), seen
    assert np.array_equal(s.read("out"), x)
    raises(trnsim.InputError, s.set_input, "nope", x)


def test_views():
    seen = {}

    def kernel(k):
        t = k.sbuf([128, 4, 32], _core.DType.BF16, "t")
        seen["shape"] = t.shape
        seen["slice"] = t[0:64, 1].shape  # an int on a free dim drops it
        seen["step"] = t[:, :, 0:32:2].shape
        seen["reshape"] = t.reshape([128, 128]).shape
        seen["bitcast"] = t.bitcast(_core.DType.F32).shape
        seen["pstart"] = t[32:64].partition_start
        seen["neg"] = raises(IndexError, t.__getitem__, (slice(None), -1))
        seen["desc"] = t.describe()
        p = k.sbuf([128, 1024], _core.DType.F32, "p")
        seen["pattern"] = p.pattern(_core.DType.F32, 160, [(0, 64), (1, 8), (8, 16)], 32)
        seen["p_offset"] = p.offset_bytes  # pattern offsets count from the view's start
        seen["pattern_bf16"] = p.pattern(_core.DType.BF16, 0, [(0, 128), (0, 4), (1, 2048)]).shape
        seen["pattern_oob"] = raises(trnsim.InputError, p.pattern, _core.DType.F32, 4, [(0, 128), (1, 1024)])
        seen["handle"] = k
        seen["pid"] = (k.program_id(), k.num_programs(), _core.Kernel.current().serial() == k.serial())

    _core.build_program(kernel, limits=_core.default_limits(_core.Generation.Trn3))
    assert seen["shape"] == (128, 4, 32)
    assert seen["slice"] == (64, 32)
    assert seen["step"] == (128, 4, 16)
    assert seen["reshape"] == (128, 128)
    assert seen["bitcast"] == (128, 4, 16)
    assert seen["pstart"] == 32
    assert "'t'" in seen["desc"] and "bfloat16" in seen["desc"], seen["desc"]
    assert seen["pid"] == (0, 1, True)
    pv = seen["pattern"]
    assert (pv.shape, pv.partition_start, pv.offset_bytes, pv.dtype) == (
        (64, 8, 16), 32, seen["p_offset"] + 160, _core.DType.F32)
    assert seen["pattern_bf16"] == (128, 4, 2048)
    assert "p" in str(seen["pattern_oob"]), seen["pattern_oob"]
    # the kernel context is gone once its core's call returned
    raises(ValueError, seen["handle"].program_id)
    assert _core.Kernel.current() is None


def test_tensor_shape():
    """View.tensor_shape: an HBM view gives its tensor's declared shape (a 1-D input stays 1-D while its view
    has a free dim of 1); SBUF/PSUM views give None."""
    seen = {}

    def kernel(k):
        v = k.input("v", _core.DType.F32, [1000])
        x = k.input("x", _core.DType.BF16, [4, 256, 64])
        y = k.output("y", _core.DType.F32, [512, 96])
        t = k.sbuf([128, 64], _core.DType.F32, "t")
        seen["v"] = (v.shape, v.tensor_shape)
        seen["x"] = (x[1, 0:128].shape, x[1, 0:128].tensor_shape)  # the view's tensor: the whole tensor
        seen["y"] = (y.reshape([256, 192]).shape, y.reshape([256, 192]).tensor_shape)
        seen["t"] = (t.shape, t.tensor_shape, k.psum([128, 512], _core.DType.F32, "p").tensor_shape)

    _core.build_program(kernel, limits=_core.default_limits(_core.Generation.Trn2))
    assert seen["v"] == ((1000, 1), (1000,)), seen["v"]
    assert seen["x"] == ((1, 128, 64), (4, 256, 64)), seen["x"]  # (an int keeps dim 0, the row dim)
    assert seen["y"] == ((256, 192), (512, 96)), seen["y"]
    assert seen["t"] == ((128, 64), None, None), seen["t"]
    assert _core.View().tensor_shape is None  # an absent operand


def test_errors_name_the_python_line():
    def kernel(k):
        k.sbuf([256, 4], _core.DType.F32, "wide")  # MARK-wide

    e = raises(trnsim.InputError, _core.build_program, kernel, limits=_core.default_limits(_core.Generation.Trn2))
    assert str(e).startswith("test_bindings.py:%d: " % line_of("MARK-wide")), e
    assert "256 partitions" in str(e), e

    def bad_matmul(k):
        a = k.sbuf([128, 128], _core.DType.BF16, "a")
        p = k.psum([128, 128], _core.DType.F32, "p")
        isa.nc_matmul(p, a, p)  # MARK-matmul: moving operand in PSUM

    e = raises(trnsim.Error, _core.build_program, bad_matmul, limits=_core.default_limits(_core.Generation.Trn2))
    assert str(e).startswith("test_bindings.py:%d: " % line_of("MARK-matmul")), e


def test_caller_loc():
    f, line = _core.caller_loc()  # MARK-caller
    assert (f, line) == (THIS, line_of("MARK-caller")), (f, line)


def test_python_exception_propagates():
    def kernel(k):
        raise KeyError("mine")

    e = raises(KeyError, _core.build_program, kernel, limits=_core.default_limits(_core.Generation.Trn2))
    assert "mine" in str(e)


def test_ops_take_keywords():
    def kernel(k):
        x = k.input("x", _core.DType.F32, [128, 32])
        out = k.output("out", _core.DType.F32, [128, 32])
        t = k.sbuf([128, 32], _core.DType.F32, "t")
        s = k.sbuf([128, 1], _core.DType.F32, "s")
        with k.phase("load"):
            isa.dma_copy(t, x, engine=_core.Engine.SP, queue=2)
        isa.activation(t, _core.ActFunc.Exp, t, scale=0.5, reduce_res=s)
        isa.tensor_scalar(t, t, _core.AluOp.Add, s, op1=_core.AluOp.Multiply, operand1=3.0)
        isa.dma_copy(out, t)

    b = _core.build_program(kernel, limits=_core.default_limits(_core.Generation.Trn2))
    ops = sorted((e.name, op) for e, op, _, _ in b.program.instructions(0))
    assert ops == [("ACT", "activation"), ("ACT", "dma_copy"), ("DVE", "tensor_scalar"), ("SP", "dma_copy")], ops
    assert b.program.phases == ["", "load"]
    s = _core.Session(b.program, trnsim.load_hw("trn2"))
    x = np.linspace(-1, 1, 128 * 32, dtype=np.float32).reshape(128, 32)
    s.set_input("x", x)
    s.run()
    e = np.exp(x.astype(np.float64) * 0.5)
    want = (e + e.sum(axis=1, keepdims=True)) * 3.0
    assert np.allclose(s.read("out"), want, rtol=1e-5), np.abs(s.read("out") - want).max()


def test_allocation_rule():
    q = _core.LoopTileQuery(space=_core.MemSpace.SBUF, bytes_per_partition=1024,
                            loop=_core.InLoop(trip_count=8), free_bytes_per_partition=200 * 1024)
    c = _core.loop_tile_buffers(q)
    assert c.bufs == _core.kCompilerMultiBuffer == 2, (c.bufs, c.reason)
    assert _core.loop_tile_buffers(_core.LoopTileQuery(
        space=_core.MemSpace.SBUF, bytes_per_partition=1024, loop=_core.InLoop(trip_count=8, dynamic=True),
        free_bytes_per_partition=200 * 1024)).bufs == 1

    def kernel(k):
        pool = k.sbuf_pool([128, 256], _core.DType.BF16, "a", _core.InLoop(trip_count=4))  # MARK-pool
        assert pool.bufs == 2
        k.psum_pool([128, 512], _core.DType.F32, "p", 3)

    b = _core.build_program(kernel, limits=_core.default_limits(_core.Generation.Trn2))
    recs = [(a.name, a.source, a.bufs, a.by_rule, a.trip_count) for a in b.allocations]
    assert recs == [("a", "test_bindings.py:%d" % line_of("MARK-pool"), 2, True, 4),
                    ("p", "test_bindings.py:%d" % line_of('k.psum_pool([128, 512]'), 3, False, 0)], recs


if __name__ == "__main__":
    main(globals())
