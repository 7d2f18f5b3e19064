"""Checks that two trnsim builds run the C++ workloads alike: for every workload JSON under the given
folders or files (default configs/workloads, recursively), `trnsim run W --out D --no-numerics` with each
build, comparing the sha256 of stats.json (without its "path" field, config paths relative to the source
tree: nki_same_output.sha). Its hardware_config* keys are compared apart: runs that differ only there (a
config file's text changed, e.g. a `source` note) are "same ... (config text changed: stats.json)", not
counted as differing. With NUMERICS=1 the runs compute numerics and the output .npy files are compared
too; with TRACE=1 the Chrome JSON trace as well. A change meant to leave behaviour alone (a refactor) must
leave every line "same".

Usage: python3 tools/bench/same_workloads.py BUILD_A BUILD_B [WORKLOAD.json|FOLDER ...]
       NUMERICS=1 python3 tools/bench/same_workloads.py build_main build configs/workloads/moe/qwen3_30b_a3b_fwd_mxfp8.json
Prints one line per workload (same / DIFFERENT and what, with both runs' wall seconds), then the count; exit
1 if any differs."""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nki_same_output import ROOT, compare  # noqa: E402


def workloads(paths):
    """Workload JSON files (every *.json below a folder, sorted) in argument order."""
    out = []
    for p in paths:
        if os.path.isdir(p):
            for d, _, files in sorted(os.walk(p)):
                out += [os.path.join(d, f) for f in sorted(files) if f.endswith(".json")]
        else:
            out.append(p)
    return out


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    a, b = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    paths = sys.argv[3:] or [os.path.join(ROOT, "configs", "workloads")]
    args = [] if os.environ.get("NUMERICS") == "1" else ["--no-numerics"]
    with tempfile.TemporaryDirectory(prefix="same_workloads_") as scratch:
        named = [(os.path.relpath(w, ROOT), w) for w in workloads(paths)]
        return compare(a, b, named, scratch, args, trace=os.environ.get("TRACE") == "1")


if __name__ == "__main__":
    sys.exit(main())
