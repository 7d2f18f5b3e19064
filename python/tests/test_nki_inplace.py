"""In-place outputs: a kernel that writes into an input HBM tensor and returns it (nki-library's router_topk,
`out: nt.mutable_tensor`). NKI's simulator converts the returned tensors to NumPy arrays and updates each input
array the kernel modified in place (NKI CPU Simulator, "How It Works"); trnsim.nki.simulate_kernel returns the
caller's own array, written, and writes an input it does not return back into its array too; `trnsim run` writes
a returned one as OUT/<parameter>.npy and the reference checks it."""

import json
import os
import subprocess

import numpy as np

from runner import KERNELS, main, raises, tmpdir, trnsim_exe

import trnsim.nki as tnki

import nki_inplace as k

ACC = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
X = np.full((128, 64), 0.5, dtype=np.float32)


def test_simulate_kernel_returns_the_callers_array_written():
    acc = ACC.copy()
    got = tnki.simulate_kernel(k.add_into, acc, X)
    assert got is acc  # the returned tensor is the input's buffer
    assert np.array_equal(acc, ACC + 0.5)  # i, i + 0.5 for i = 0 .. 8191: exact in FP32


def test_a_write_into_an_unannotated_input_is_allowed():
    buf = np.zeros((128, 64), dtype=np.float32)
    o, b = tnki.simulate_kernel(k.copy_into_unannotated, buf, ACC)
    assert np.array_equal(o, ACC * 2.0)
    assert b is buf and np.array_equal(buf, ACC)


def test_benchmark_gives_the_written_input_as_an_output():
    acc = ACC.copy()
    r = tnki.benchmark(k.add_into, acc, X, reference=k.ref_add_into)
    assert len(r.outputs) == 1 and r.outputs[0] is acc
    assert np.array_equal(acc, ACC + 0.5)
    assert [c["pass"] for c in r.checks] == [True], r.checks
    assert r.checks[0]["metrics"]["max_abs_err"] == 0.0, r.checks


def test_lnc2_cores_each_write_their_rows():
    acc = ACC.copy()
    got = tnki.simulate_kernel(k.halves_into[2], acc, X)
    assert got is acc and np.array_equal(acc, ACC + 0.5)


def test_an_unwritten_mutable_input_returns_the_callers_values():
    acc = ACC.copy()
    a, o = tnki.simulate_kernel(k.returns_unwritten, acc, X)
    assert a is acc and np.array_equal(acc, ACC)
    assert np.array_equal(o, X)


def test_an_input_written_without_being_returned_is_written_back():
    # NKI's simulator updates every input array the kernel modified; the outputs are what it returns.
    for kernel in (k.writes_without_returning, k.writes_without_returning[2]):
        buf = np.zeros((128, 64), dtype=np.float32)
        o = tnki.simulate_kernel(kernel, buf, ACC)
        assert np.array_equal(o, ACC + 1.0) and np.array_equal(buf, ACC * 2.0), kernel
    buf = np.zeros((128, 64), dtype=np.float32)
    r = tnki.benchmark(k.writes_without_returning, buf, ACC, reference=k.ref_writes_without_returning)
    assert len(r.outputs) == 1 and np.array_equal(r.outputs[0], ACC + 1.0)
    assert [c["output"] for c in r.checks] == ["o"], r.checks  # buf is no output its reference gives
    assert np.array_equal(buf, ACC * 2.0)


def test_one_array_given_for_two_inputs_is_refused_when_the_kernel_writes_it():
    # tester23t F3: each input is an HBM tensor of its own, so with one array passed twice a write through one
    # was not seen through the other, and the last write-back won (the kernel's write vanished from the array).
    acc = ACC.copy()
    e = raises(ValueError, tnki.simulate_kernel, k.add_into, acc, acc)
    assert str(e) == ("add_into: inputs 'acc' and 'x' are the same array (or overlapping views of one) and the "
                      "kernel writes 'acc': each input is simulated as an HBM tensor of its own, so the write would "
                      "not be seen through the other; pass a copy of the array for one of them"), e
    assert np.array_equal(acc, ACC)  # nothing written back
    big = np.zeros((192, 64), dtype=np.float32)
    e = raises(ValueError, tnki.simulate_kernel, k.writes_without_returning, big[0:128], big[64:192])
    assert str(e).startswith("writes_without_returning: inputs 'buf' and 'x' are the same array (or overlapping "
                             "views of one) and the kernel writes 'buf'"), e
    assert not big.any()
    # Read only, one array may be both inputs; disjoint views of one array may be written.
    assert np.array_equal(tnki.simulate_kernel(k.adds, acc, acc), ACC * 2.0)
    big = np.concatenate([np.zeros((128, 64), np.float32), ACC])
    o = tnki.simulate_kernel(k.writes_without_returning, big[0:128], big[128:256])
    assert np.array_equal(o, ACC + 1.0) and np.array_equal(big[0:128], ACC * 2.0)


def test_a_typed_input_is_returned_as_a_new_array():
    # A bfloat16 tensor given as float32 values: its values come back as a new float32 array (NumPy has no
    # bfloat16 to write the caller's array in); the caller's array is left as it was.
    acc = ACC[:, :8] % 128  # integers 0 .. 127, and their sums with 1: exact in bfloat16
    x = np.ones((128, 8), dtype=np.float32)
    got = tnki.simulate_kernel(k.add_into, tnki.typed(acc, "bfloat16"), tnki.typed(x, "bfloat16"))
    assert got is not acc and got.dtype == np.float32
    assert np.array_equal(got, acc + 1.0)
    assert np.array_equal(acc, ACC[:, :8] % 128)


def run_workload(d, inputs, out, function="add_into"):
    w = {"name": "inplace", "hardware": "trn2",
         "kernel": {"nki": os.path.join(KERNELS, "nki_inplace.py"), "function": function},
         "reference": {"nki": os.path.join(KERNELS, "nki_inplace.py"), "function": "ref_" + function},
         "inputs": inputs}
    path = os.path.join(d, "w.json")
    with open(path, "w") as f:
        json.dump(w, f)
    return subprocess.run([trnsim_exe(), "run", path, "--out", out], capture_output=True, text=True)


def test_trnsim_run_writes_the_in_place_output_as_its_parameter():
    d = tmpdir()
    np.save(os.path.join(d, "acc_in.npy"), ACC)
    np.save(os.path.join(d, "x_in.npy"), X)
    p = run_workload(d, {"acc": {"npy": "acc_in.npy"}, "x": {"npy": "x_in.npy"}}, os.path.join(d, "out"))
    assert p.returncode == 0, p.stderr
    assert np.array_equal(np.load(os.path.join(d, "out", "acc.npy")), ACC + 0.5)
    assert np.array_equal(np.load(os.path.join(d, "acc_in.npy")), ACC)  # the user's input is untouched
    with open(os.path.join(d, "out", "stats.json")) as f:
        checks = json.load(f)["numerics"]
    assert [(n, c["pass"], c["max_abs_err"]) for n, c in checks.items()] == [("acc", True, 0.0)], checks


def test_trnsim_run_writes_only_what_the_kernel_returns():
    # buf, written but not returned, is no output of the run (no OUT/buf.npy; the CLI has no caller's array).
    d = tmpdir()
    np.save(os.path.join(d, "x_in.npy"), X)
    p = run_workload(d, {"buf": {"generator": "zeros", "shape": [128, 64], "dtype": "float32"},
                         "x": {"npy": "x_in.npy"}}, os.path.join(d, "out"), "writes_without_returning")
    assert p.returncode == 0, p.stderr
    assert sorted(f for f in os.listdir(os.path.join(d, "out")) if f.endswith(".npy")) == ["o.npy"]
    assert np.array_equal(np.load(os.path.join(d, "out", "o.npy")), X + 1.0)


def test_trnsim_run_never_writes_over_the_users_input():
    # The input acc.npy lies in the output folder, where the in-place output acc.npy would go.
    d = tmpdir()
    out = os.path.join(d, "out")
    os.makedirs(out)
    np.save(os.path.join(out, "acc.npy"), ACC)
    np.save(os.path.join(d, "x_in.npy"), X)
    p = run_workload(d, {"acc": {"npy": "out/acc.npy"}, "x": {"npy": "x_in.npy"}}, out)
    assert p.returncode == 1, p.stderr
    assert ("output 'acc' and input 'acc' (inputs.acc.npy) are the same file (%s): an input is never "
            "overwritten" % os.path.join(out, "acc.npy")) in p.stderr, p.stderr
    assert np.array_equal(np.load(os.path.join(out, "acc.npy")), ACC)


def test_an_input_no_instruction_moves_is_no_compulsory_byte():
    # tester23ab F4: `return acc` ran in 0 ns, under a roofline lower bound of 90.4 ns that counted acc as read
    # and written: trnsim run exited 4, "a simulator bug"; so did a kernel ignoring a large input. The
    # compulsory bytes are now the inputs the instructions touch and the outputs they write (32 KiB each here).
    acc = ACC.copy()
    r = tnki.benchmark(k.returns_its_input, acc)
    assert r.outputs[0] is acc and np.array_equal(acc, ACC)
    got = (r.stats["compulsory_hbm_bytes"], r.stats["roofline_lower_bound_ns"], r.stats["total_time_ns"])
    assert got == (0, 0, 0), got
    for kernel, args, moved in ((k.ignores_acc, (ACC.copy(), X), 2),  # x read, o written
                                (k.returns_unwritten, (ACC.copy(), X), 2),  # the same: acc untouched
                                (k.add_into, (ACC.copy(), X), 3),  # acc read and written, x read
                                (k.halves_into[2], (ACC.copy(), X), 3)):  # each core its half of each
        r = tnki.benchmark(kernel, *args)
        assert r.stats["compulsory_hbm_bytes"] == moved * 32768, (kernel, r.stats["compulsory_hbm_bytes"])
        assert r.stats["total_time_ns"] >= r.stats["roofline_lower_bound_ns"] > 0, (kernel, r.stats["total_time_ns"])
    d = tmpdir()
    np.save(os.path.join(d, "acc_in.npy"), ACC)
    p = run_workload(d, {"acc": {"npy": "acc_in.npy"}}, os.path.join(d, "out"), "returns_its_input")
    assert p.returncode == 0 and "simulator bug" not in p.stderr, p.stderr
    assert np.array_equal(np.load(os.path.join(d, "out", "acc.npy")), ACC)  # the input as it was


if __name__ == "__main__":
    main(globals())
