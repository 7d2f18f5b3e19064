"""`trnsim validate` says the build's warnings as `trnsim run` does (one list: WorkloadRun::warning_lines):
a value carried across nl.affine_range iterations is a warning of the build, not of the run."""

import json
import os
import subprocess

from runner import KERNELS, line_of, main, tmpdir, trnsim_exe


def warnings_of(*args):
    p = subprocess.run([trnsim_exe(), *args], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return [ln for ln in p.stderr.splitlines() if ": warning: " in ln]


def test_validate_prints_the_warnings_run_prints():
    d = tmpdir()
    w = {"name": "carried", "hardware": "trn2", "lnc": 1,
         "kernel": {"nki": os.path.join(KERNELS, "nki_carried.py"), "function": "swapped_regions"},
         "inputs": {"x": {"generator": "normal", "seed": 1, "shape": [128, 64], "dtype": "float32"}}}
    path = os.path.join(d, "w.json")
    with open(path, "w") as f:
        json.dump(w, f)
    validated = warnings_of("validate", path)
    ran = warnings_of("run", path, "--out", os.path.join(d, "out"))
    at = "trnsim: carried: warning: nki_carried.py:%d: tensor_tensor in iteration 1 of the nl.affine_range loop" \
        % line_of(os.path.join(KERNELS, "nki_carried.py"), "MARK-first")
    assert [w for w in validated if w.startswith(at)], validated
    assert validated == ran, (validated, ran)


if __name__ == "__main__":
    main(globals())
