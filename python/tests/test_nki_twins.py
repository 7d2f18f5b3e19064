"""The NKI Python twins of the calibration kernels (examples/nki/) against their C++ kernels
(kernels/calibration/*): for each calibration workload (at a reduced shape where the shipped one is slow),
the twin run on the same inputs must give the same output bytes and a simulated time within 1 %.

`python3 test_nki_twins.py --full` runs the shipped shapes (the heavy tier) and prints each ratio."""

import json
import os
import sys

import numpy as np

from runner import main, tmpdir

from trnsim import _core

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CAL = os.path.join(ROOT, "configs", "workloads", "calibration")
EX = os.path.join(ROOT, "examples", "nki")
FULL = "--full" in sys.argv
if FULL:
    sys.argv.remove("--full")


def _bf16_or_f32(p):
    return p.get("dtype", "float32")


# C++ kernel -> (twin file, function, params kept, input shapes/dtypes from the params)
TWINS = {
    "cs149_vector_add": ("cs149_vector_add.py", "vector_add", ("variant", "row_chunk", "free_dim", "edition"),
                         lambda p: {"a": ([p["n"]], "float32"), "b": ([p["n"]], "float32")}),
    "transpose_2d": ("transpose_2d.py", "transpose_2d", (),
                     lambda p: {"in_": ([p["M"], p["N"]], "float32")}),
    "nki_tutorial_matmul": ("nki_tutorial_matmul.py", "nki_tutorial_matmul",
                            ("variant", "block_m", "block_n", "block_k"),
                            lambda p: {"lhsT": ([p["K"], p["M"]], _bf16_or_f32(p)),
                                       "rhs": ([p["K"], p["N"]], _bf16_or_f32(p))}),
    "matmul_lhsT_blocked": ("matmul_lhsT_blocked.py", "matmul_lhsT_blocked",
                            ("block_m", "block_n", "block_k", "psum_bufs"),
                            lambda p: {"lhsT": ([p["K"], p["M"]], "bfloat16"), "rhs": ([p["K"], p["N"]], "bfloat16")}),
    "matmul_lhs_dma_transpose": ("matmul_lhs_dma_transpose.py", "matmul_lhs_dma_transpose",
                                 ("m_tiles", "k_tiles", "rhs_sets", "psum_bufs"),
                                 lambda p: {"lhs": ([p["M"], p["K"]], "bfloat16"),
                                            "rhs": ([p["K"], p["N"]], "bfloat16")}),
    "metagemm": ("metagemm.py", "metagemm",
                 ("loop_order", "tiles_per_block_m", "tiles_per_block_n", "tiles_per_block_k", "lhs_position",
                  "rhs_position"),
                 lambda p: {"lhsT": ([p["K"], p["M"]], "bfloat16"), "rhs": ([p["K"], p["N"]], "bfloat16")}),
}

# Calibration kernels without a twin yet, and why; a kernel in neither table fails the test.
NO_TWIN = {}


def _no_twin_row(cpp):
    """Why a calibration workload of a kernel with a twin has none itself (None: it has one)."""
    if cpp["kernel"] == "metagemm" and cpp["params"].get("layout", "lhs") == "lhs":
        return ("MetaGEMM's lhs layout transposes lhs through PSUM tiles that the port gives half the banks "
                "each, a split the front end's allocation does not make; its twin is open work (issue 23)")
    return None

# Reduced shapes for the default tier (the shipped FP32 tutorial rows take minutes); None: as shipped.
REDUCED = {
    "tutorial_matmul_fp32_tiled.json": {"M": 512, "N": 1024, "K": 1024},
    "tutorial_matmul_fp32_hoisted.json": {"M": 512, "N": 1024, "K": 2048},
    "tutorial_matmul_fp32_free_dim_blocked_k4096.json": {"M": 512, "N": 2048, "K": 1024},
    "tutorial_matmul_fp32_fully_optimized.json": {"M": 2048, "N": 2048, "K": 2048},
    "vector_add_tiled_row_chunk_1.json": {"n": 2560},
    # MetaGEMM from 2560 up: a few blocks per axis of the shipped block sizes and loop order.
    "metagemm_lhsT_rhs_2560.json": {"M": 1280, "N": 1024, "K": 1024},
    "metagemm_lhsT_rhs_3072.json": {"M": 512, "N": 2048, "K": 3072},
    "metagemm_lhsT_rhs_3584.json": {"M": 1792, "N": 1024, "K": 1792},
    "metagemm_lhsT_rhs_4096.json": {"M": 1024, "N": 2048, "K": 1024},
    "metagemm_lhsT_rhs_4608.json": {"M": 1024, "N": 3072, "K": 1536},
    "metagemm_lhsT_rhs_5120.json": {"M": 1280, "N": 2048, "K": 2560},
}


# Rows where the twin and the port differ by design, pinned (ratio NKI / C++) until they agree: the C++
# fully_optimized port scopes its operand and packing pools to one N block (the packing tile then reuses their
# space, and no load runs ahead across N blocks); the front end keeps one pool per declaration site for the
# whole kernel and issues the next N block's loads as soon as their buffers are free (docs/nki.md, "What
# differs"). The C++ port cannot take the front end's rule: the guide's FP32 size (its published kernel, which
# runs on hardware) then does not fit in SBUF, so the compiler does reuse an outer iteration's dead operand
# space; the front end has yet to model that (issue 23).
KNOWN = {
    "tutorial_matmul_bf16_2048_fully_optimized_16_2_8.json": 0.8921,
    "tutorial_matmul_bf16_2048_fully_optimized_4_1_8.json": 0.8521,
    "tutorial_matmul_fp32_fully_optimized.json": 0.9123,
}


# Shipped shapes at which the twin does not fit while the port does (docs/nki.md, "What differs").
TOO_BIG = {
    "tutorial_matmul_fp32_fully_optimized.json": "the front end keeps the operand tiles' space for the whole kernel",
}


def twin_workload(cpp):
    """The Python twin's workload for a C++ calibration workload (a dict)."""
    kernel = cpp["kernel"]
    f, fn, keep, shapes = TWINS[kernel]
    p = dict(cpp["params"])
    inputs = {}
    cpp_names = list(cpp["inputs"])
    for (name, (shape, dtype)), cname in zip(shapes(p).items(), cpp_names):
        gen = dict(cpp["inputs"][cname])
        gen.update(shape=shape, dtype=dtype)
        inputs[name] = gen
    w = {"name": cpp["name"] + "_nki", "hardware": cpp["hardware"], "lnc": cpp.get("lnc", 1),
         "kernel": {"nki": os.path.join(EX, f), "function": fn},
         "params": {k: v for k, v in p.items() if k in keep}, "inputs": inputs,
         "numerics": True}
    return w


def run(w):
    d = tmpdir()
    path = os.path.join(d, "w.json")
    with open(path, "w") as fh:
        json.dump(w, fh)
    r = _core.WorkloadRun.from_file(path, [], numerics=True)
    r.run()
    return r.stats()["total_time_ns"], r.outputs(raw=True)


def compare(name, over=None):
    with open(os.path.join(CAL, name)) as fh:
        cpp = json.load(fh)
    if over:
        cpp["params"].update(over)
    t_cpp, out_cpp = run(cpp)
    if name in TOO_BIG and not over:
        try:
            run(twin_workload(cpp))
        except Exception as e:  # the front end's allocation error, naming the kernel line
            assert "alive at once" in str(e), str(e)
            print("  %-55s C++ %12.0f ns  NKI Python: does not fit (%s)" % (name, t_cpp, TOO_BIG[name]))
            return
        raise AssertionError(name + ": the twin was expected not to fit: " + TOO_BIG[name])
    t_py, out_py = run(twin_workload(cpp))
    ratio = t_py / t_cpp
    print("  %-55s C++ %12.0f ns  NKI Python %12.0f ns  ratio %.4f" % (name, t_cpp, t_py, ratio))
    (a,), (b,) = out_cpp.values(), out_py.values()
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), name + ": output bytes differ"
    want = KNOWN.get(name, 1.0)
    tol = 0.005 if name in KNOWN else 0.01
    assert abs(ratio - want) <= tol, "%s: NKI twin time %.0f ns vs C++ %.0f ns (ratio %.4f, expected %.4f)" % (
        name, t_py, t_cpp, ratio, want)


def _kernel_of(name):
    with open(os.path.join(CAL, name)) as fh:
        return json.load(fh)["kernel"]


def _cases():
    names = sorted(f for f in os.listdir(CAL) if f.endswith(".json"))
    out = []
    for n in names:
        with open(os.path.join(CAL, n)) as fh:
            w = json.load(fh)
        if w["kernel"] not in NO_TWIN and _no_twin_row(w) is None:
            out.append(n)
    return out


def test_every_calibration_kernel_has_a_twin_or_a_reason():
    kernels = {_kernel_of(f) for f in os.listdir(CAL) if f.endswith(".json")}
    missing = sorted(k for k in kernels if k not in TWINS and k not in NO_TWIN)
    assert not missing, "calibration kernels with no NKI twin and no reason in NO_TWIN: %s" % missing


def _make(name):
    def t():
        compare(name, None if FULL else REDUCED.get(name))

    t.__name__ = "test_" + name[:-5]
    return t


for _n in _cases():
    globals()["test_" + _n[:-5]] = _make(_n)

main(globals())
