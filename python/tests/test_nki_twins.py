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
    "cs149_vector_add": ("cs149_vector_add.py", "vector_add",
                         ("variant", "row_chunk", "free_dim", "edition", "schedule"),
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
    # MetaGEMM's lhs layout (the port's default layout): the same file, its lhs[M, K] kernel.
    "metagemm_lhs": ("metagemm.py", "metagemm_lhs",
                     ("loop_order", "tiles_per_block_m", "tiles_per_block_n", "tiles_per_block_k", "lhs_position",
                      "rhs_position"),
                     lambda p: {"lhs": ([p["M"], p["K"]], "bfloat16"), "rhs": ([p["K"], p["N"]], "bfloat16")}),
}

# Calibration kernels without a twin yet, and why; a kernel in neither table fails the test.
NO_TWIN = {}


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
    "metagemm_lhs_rhs_2560.json": {"M": 1024, "N": 1024, "K": 256},
    "metagemm_lhs_rhs_3072.json": {"M": 1024, "N": 2048, "K": 3072},
    "metagemm_lhs_rhs_3584.json": {"M": 1024, "N": 1024, "K": 3584},
    "metagemm_lhs_rhs_4096.json": {"M": 1024, "N": 2048, "K": 1024},
    "metagemm_lhs_rhs_4608.json": {"M": 768, "N": 3072, "K": 3072},
    "metagemm_lhs_rhs_5120.json": {"M": 1280, "N": 2048, "K": 2560},
}


# Rows where the twin and the port differ by design, pinned (ratio NKI / C++) until they agree: none. (The
# matmul guide's fully_optimized rows were here until both sides placed their pools by the one scoped rule,
# kernels/api/alloc_rule.h; the two profiled CS149 rows until the twin could be compiled with --disable-dge,
# @nki.jit(additional_compile_opt="--disable-dge"), as the port's disable_dge: tester23ab F1.)
KNOWN = {}


# Shipped shapes at which the twin does not fit while the port does: none (the scoped rule fits the guide's
# FP32 fully_optimized size on both sides).
TOO_BIG = {}


def twin_workload(cpp):
    """The Python twin's workload for a C++ calibration workload (a dict)."""
    kernel = cpp["kernel"]
    p = dict(cpp["params"])
    if kernel == "metagemm" and p.get("layout", "lhs") == "lhs":
        kernel = "metagemm_lhs"
    f, fn, keep, shapes = TWINS[kernel]
    inputs = {}
    cpp_names = list(cpp["inputs"])
    for (name, (shape, dtype)), cname in zip(shapes(p).items(), cpp_names):
        gen = dict(cpp["inputs"][cname])
        gen.update(shape=shape, dtype=dtype)
        inputs[name] = gen
    w = {"name": cpp["name"] + "_nki", "hardware": cpp["hardware"], "lnc": cpp.get("lnc", 1),
         "kernel": {"nki": os.path.join(EX, f), "function": fn + ("_disable_dge" if p.get("disable_dge") else "")},
         "params": {k: v for k, v in p.items() if k in keep}, "inputs": inputs,
         "numerics": True}
    return w


def run_workload(w, numerics):
    """Runs workload dict w from a file in a scratch folder; returns the finished WorkloadRun."""
    d = tmpdir()
    path = os.path.join(d, "w.json")
    with open(path, "w") as fh:
        json.dump(w, fh)
    r = _core.WorkloadRun.from_file(path, [], numerics=numerics)
    r.run()
    return r


def run(w):
    r = run_workload(w, True)
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
        if w["kernel"] not in NO_TWIN:
            out.append(n)
    return out


def test_every_calibration_kernel_has_a_twin_or_a_reason():
    kernels = {_kernel_of(f) for f in os.listdir(CAL) if f.endswith(".json")}
    missing = sorted(k for k in kernels if k not in TWINS and k not in NO_TWIN)
    assert not missing, "calibration kernels with no NKI twin and no reason in NO_TWIN: %s" % missing


def test_python_kernel_allocations_match_the_port():
    """A Python kernel's in-loop sites are in stats.json "allocations" like a C++ pool's, with the same
    rule's answers: the fully_optimized twin and its port (BF16 2048, 4 x 1 x 8 blocks: 4 N blocks, 2 K
    blocks, 4 m blocks) give the same (space, bytes per partition of one set, tiles, trip count, bufs) per
    site; each twin site's scope is one iteration of the N-block loop, and the rhs and packing sites, whose
    space the other takes in every N block, are made again per N block (4 declarations), the others once."""
    name = "tutorial_matmul_bf16_2048_fully_optimized_4_1_8.json"
    with open(os.path.join(CAL, name)) as fh:
        cpp = json.load(fh)

    def allocs(w):
        return run_workload(w, False).stats()["allocations"]

    def key(a):
        return (a["space"], a["bytes_per_partition"], a["tiles"], a["trip_count"], a["bufs"])

    c, p = allocs(cpp), allocs(twin_workload(cpp))
    # result_tmp: 16 [128, 512] BF16 tiles per N block (1 KiB each), 4 N blocks, 2 sets; rhs_tile: 8 tiles
    # [128, 512] BF16 per K block, 4 x 2 declarations, 2 sets; lhsT_tile: 8 x [128, 512] BF16 per (K, m)
    # block, 32 declarations, 2 sets; PSUM [128, 512] FP32 (one 2 KiB bank), 4 x 2 x 16 = 128 declarations,
    # all 8 banks; the packing tile [128, 512] FP32 (2 KiB), 4 x 16 declarations, 2 buffers.
    want = sorted([("sbuf", 16384, 16, 4, 2), ("sbuf", 8192, 8, 8, 2), ("sbuf", 8192, 8, 32, 2),
                   ("psum", 2048, 1, 128, 8), ("sbuf", 2048, 1, 64, 2)])
    assert sorted(map(key, c)) == want, c
    assert sorted(map(key, p)) == want, p
    with open(os.path.join(EX, "nki_tutorial_matmul.py")) as fh:
        lines = fh.read().splitlines()
    n_loop = 1 + next(i for i, l in enumerate(lines) if "for n in nl.affine_range(N // BN)" in l)
    made = sorted((a["bytes_per_partition"], a["trip_count"], a["declarations"]) for a in p)
    # (bytes of one set, trip count, pools made): packing 2 KiB x 64 and rhs 8 KiB x 8 four times each.
    assert made == [(2048, 64, 4), (2048, 128, 1), (8192, 8, 4), (8192, 32, 1), (16384, 4, 1)], made
    for a in p:
        assert a["source"].startswith("nki_tutorial_matmul.py:"), a
        assert a["scope"] == "loop at nki_tutorial_matmul.py:%d" % n_loop, a
        assert a["chosen_by"] == "rule", a


def test_metagemm_lhs_psum_split_matches_the_port():
    """MetaGEMM's lhs layout: the port keeps half the PSUM banks for its matmul tiles and gives the transposes
    the rest; the twin's two PSUM tensors with a block dim (one bank per block, indexed modulo their blocks)
    make the same split, so the two runs are the same to the nanosecond. Reduced 5120 row (MNK, 5 x 2 x 10
    tiles per block: 2 blocks of each axis): 40 matmul tiles and 200 transposes over 4 banks each, where
    the allocation rule alone (nl.psum tiles declared in the loops) gives each site all 8 banks, made again
    per M block (344428 vs 345307 ns)."""
    name = "metagemm_lhs_rhs_5120.json"
    with open(os.path.join(CAL, name)) as fh:
        cpp = json.load(fh)
    cpp["params"].update(REDUCED[name])

    def psum(w):
        r = run_workload(w, False)
        st = r.stats()
        return st["total_time_ns"], sorted((a["name"], a["bytes_per_partition"], a["tiles"], a["trip_count"],
                                            a["bufs"], a["declarations"], a["scope"])
                                           for a in st["allocations"] if a["space"] == "psum")

    t_cpp, c = psum(cpp)
    t_py, p = psum(twin_workload(cpp))
    # C++: one bank (2 KiB) per buffer, 4 buffers each (40 and 200 declarations); the twin: one set of 4 banks
    # (8 KiB) per tensor, declared once.
    assert c == [("result_tile", 2048, 1, 40, 4, 1, "kernel"), ("tileT", 2048, 1, 200, 4, 1, "kernel")], c
    assert p == [("result_tile", 8192, 4, 1, 1, 1, "kernel"), ("tileT", 8192, 4, 1, 1, 1, "kernel")], p
    assert round(t_cpp, 3) == round(t_py, 3) == 344427.933, (t_cpp, t_py)


def _make(name):
    def t():
        compare(name, None if FULL else REDUCED.get(name))

    t.__name__ = "test_" + name[:-5]
    return t


for _n in _cases():
    globals()["test_" + _n[:-5]] = _make(_n)

main(globals())
