"""The NKI Python examples (examples/nki: fused softmax, RMSNorm, tiled matmul) run with `trnsim run`, pass
their NumPy references, and stats.json reports the front end's allocation and schedule."""

import json
import os
import subprocess

from runner import main, tmpdir, trnsim_exe

EX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "nki")


def run(name):
    d = tmpdir()
    p = subprocess.run([trnsim_exe(), "run", os.path.join(EX, name + ".json"), "--out", d], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    stats = json.load(open(os.path.join(d, "stats.json")))
    checks = stats["numerics"]
    assert checks and all(c["pass"] for c in checks.values()), checks
    return stats


def test_softmax():
    s = run("softmax")
    nki = json.loads(s["nki"]) if isinstance(s["nki"], str) else s["nki"]
    (core,) = nki["allocation"]
    assert core["schedule"] == "pipelined"
    # Every tile of the loop body is double-buffered (the allocation rule), each site named by its line.
    assert all(site["bufs"] == 2 and site["line"].startswith("softmax.py:") for site in core["sites"]), core


def test_rmsnorm():
    s = run("rmsnorm")
    nki = json.loads(s["nki"]) if isinstance(s["nki"], str) else s["nki"]
    sites = {site["line"]: site for site in nki["allocation"][0]["sites"]}
    gamma = [v for k, v in sites.items() if v["tensors"] == 1]
    assert gamma and all(v["bufs"] == 1 for v in gamma), sites  # the gain, loaded once: one buffer


def test_matmul_earlier_style():
    run("matmul")


main(globals())
