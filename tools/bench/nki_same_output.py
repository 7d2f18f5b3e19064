"""Checks that two trnsim builds run every NKI Python workload byte for byte alike: the examples
(examples/nki/*.json), the Python tests' workloads (python/tests/data/*.json with an "nki" kernel) and the
NKI twins of the calibration workloads (python/tests/test_nki_twins.py's twin_workload, at the default
tier's reduced shapes). For each, `trnsim run W --out D --trace D/trace.json` with each build, then the
sha256 of stats.json (without its "path" field, which names the output folder, and with the hardware
config's path relative to its source tree; where two differ, whether their total_time_ns does too), of
every output .npy and of the trace JSON are compared. stats.json's hardware_config* keys (the config file
and its text's sha256) are compared apart: where only they differ (a config's `source` note edited) the
line says "same ... (config text changed: stats.json)" and does not count as a difference. A change to the
front end's speed must leave all of them unchanged.

Usage: tools/bench/nki_same_output.py BUILD_A BUILD_B [NAME_SUBSTRING]
Prints one line per workload (same / DIFFERENT and what), then the count; exit 1 if any differs."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def workloads(scratch):
    """(name, workload path) of every NKI workload checked; the twins are written into `scratch`."""
    out = []
    ex = os.path.join(ROOT, "examples", "nki")
    out += [(f, os.path.join(ex, f)) for f in sorted(os.listdir(ex)) if f.endswith(".json")]
    data = os.path.join(ROOT, "python", "tests", "data")
    for f in sorted(os.listdir(data)):
        if f.endswith(".json"):
            with open(os.path.join(data, f)) as fh:
                w = json.load(fh)
            if isinstance(w.get("kernel"), dict) and "nki" in w["kernel"]:
                # Its relative paths are the data folder's: run it from a copy there, in place.
                out.append((f, os.path.join(data, f)))
    sys.path.insert(0, os.path.join(ROOT, "python", "tests"))
    import runner  # noqa: E402  (the tests' runner: its main() would run the module's tests on import)

    runner.main = lambda namespace: None
    import test_nki_twins as tw  # noqa: E402

    for name in tw._cases():
        with open(os.path.join(tw.CAL, name)) as fh:
            cpp = json.load(fh)
        cpp["params"].update(tw.REDUCED.get(name) or {})
        w = tw.twin_workload(cpp)
        path = os.path.join(scratch, "twin_" + name)
        with open(path, "w") as fh:
            json.dump(w, fh)
        out.append(("twin " + name, path))
    return out


def _no_tree(x):
    """x with each path into a source tree's configs/ (stats' "hardware_config") relative to the tree, and
    kernel source names as builds before 6b488bf recorded them (as the compiler named them: absolute, or
    "../kernels/..." under ccache's CCACHE_BASEDIR) relative to the tree, as builds since record them."""
    if isinstance(x, dict):
        return {k: _no_tree(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_no_tree(v) for v in x]
    if isinstance(x, str) and x.startswith("/") and "/configs/" in x:
        return x[x.rindex("/configs/") + 1:]
    if isinstance(x, str) and x.startswith(("/", "../")):
        for tree in ("/kernels/", "/tests/"):
            if tree in x:
                return x[x.rindex(tree) + 1:]
    return x


# stats.json's keys naming the hardware config file and its text's sha256: an edit of a `source` note changes
# them and nothing simulated, so they are compared apart ("config text changed").
CONFIG_KEYS = "hardware_config"


def sha(path, stats=False):
    """sha256 of a file; of stats.json without its "path" field and its hardware_config* keys, and with its
    config paths relative to the build's source tree (two worktrees' builds name their own)."""
    with open(path, "rb") as fh:
        data = fh.read()
    if stats:
        j = json.loads(data)
        j.pop("path", None)
        j = {k: v for k, v in j.items() if not k.startswith(CONFIG_KEYS)}
        data = json.dumps(_no_tree(j), sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()


def config_text(path):
    """The hardware_config* keys of a stats.json (config path relative to its tree), as one string."""
    with open(path) as fh:
        j = json.load(fh)
    return json.dumps(_no_tree({k: v for k, v in j.items() if k.startswith(CONFIG_KEYS)}), sort_keys=True)


def digest(build, workload, out, args=(), trace=True):
    """{file: sha256} of one run's stats.json files (no path), output .npy files and trace (`trace` false:
    none), `args` passed to trnsim run."""
    trace_file = os.path.join(out, "trace.json")
    os.makedirs(out)
    r = subprocess.run([os.path.join(build, "trnsim"), "run", workload, "--out", out, *args] +
                       (["--trace", trace_file] if trace else []), capture_output=True, text=True)
    if r.returncode != 0:
        return {"exit": "%d: %s" % (r.returncode, r.stderr.strip()[-300:])}
    d = {}
    if trace:
        # A chain writes one trace per stage, trace.<stage>.json beside trace.json's path (trnsim's stage_trace).
        traces = sorted(f for f in os.listdir(out) if f == "trace.json" or
                        (f.startswith("trace.") and f.endswith(".json")))
        if not traces:
            return {"exit": "0 but no trace.json (or trace.<stage>.json of a chain) in %s" % out}
        for f in traces:
            d[f] = sha(os.path.join(out, f))
    # stats.json and the .npy outputs, in the run folder and below it (a chain writes one folder per step).
    for folder, _, files in sorted(os.walk(out)):
        for f in sorted(files):
            rel = os.path.relpath(os.path.join(folder, f), out)
            if f == "stats.json" or f.endswith(".npy"):
                d[rel] = sha(os.path.join(folder, f), stats=f == "stats.json")
            if f == "stats.json":
                with open(os.path.join(folder, f)) as fh:
                    d[rel + " total_time_ns"] = repr(json.load(fh).get("total_time_ns"))
                d[rel + " " + CONFIG_KEYS] = config_text(os.path.join(folder, f))
    return d


def compare(a, b, named, scratch, args=(), trace=True):
    """Runs each (name, workload) of `named` with builds `a` and `b` (digest's `args`, `trace`) in `scratch`;
    prints one line per workload (same / DIFFERENT and what, with both runs' wall seconds) and the count.
    Returns 1 if any differs, else 0."""
    bad = n = 0
    for name, w in named:
        n += 1
        # One folder for both runs (stats.json names the trace file): each run's files hashed, then removed.
        out = os.path.join(scratch, "run")
        t0 = time.time()
        da = digest(a, w, out, args, trace)
        shutil.rmtree(out)
        t1 = time.time()
        db = digest(b, w, out, args, trace)
        shutil.rmtree(out)
        t2 = time.time()
        # The config file's text alone differing (a note edited) is reported, not counted.
        config = sorted(k for k in da if k.endswith(" " + CONFIG_KEYS) and da[k] != db.get(k, da[k]))
        ra, rb = ({k: v for k, v in d.items() if k not in config} for d in (da, db))
        if ra == rb and "exit" not in da:
            files = sum(1 for k in da if not k.endswith(" " + CONFIG_KEYS))
            note = ("  (config text changed: %s)" % ", ".join(k[:-len(CONFIG_KEYS) - 1] for k in config)
                    if config else "")
            print("same       %-60s %d files  %.1f s / %.1f s%s" % (name, files, t1 - t0, t2 - t1, note), flush=True)
        else:
            bad += 1
            diff = sorted(k for k in set(da) | set(db) if da.get(k) != db.get(k))
            # A stats.json that differs says whether the simulated time does too (a config or source-line
            # change leaves it alone).
            diff = [k[:-len(CONFIG_KEYS)] + "config text changed" if k in config else
                    k if not k.endswith(" total_time_ns") else "%s %s -> %s" % (k, da.get(k), db.get(k))
                    for k in diff]
            diff += ["%s same (%s)" % (k, da[k]) for k in sorted(da) if k.endswith(" total_time_ns") and
                     da.get(k) == db.get(k) and k[:-len(" total_time_ns")] in diff]
            print("DIFFERENT  %-60s %s (%s / %s)" % (name, ", ".join(diff), da.get("exit", ""), db.get("exit", "")),
                  flush=True)
    print("%d workloads, %d differ" % (n, bad))
    return 1 if bad else 0


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    a, b = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    only = sys.argv[3] if len(sys.argv) > 3 else ""
    # The twins' module imports trnsim._core: build A's package.
    sys.path.insert(0, os.path.join(a, "python"))
    with tempfile.TemporaryDirectory(prefix="nki_same_output_") as scratch:
        return compare(a, b, [(name, w) for name, w in workloads(scratch) if only in name], scratch)


if __name__ == "__main__":
    sys.exit(main())
