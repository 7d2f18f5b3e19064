"""docs/nki.md's table of supported and unsupported calls is the one the implementation generates."""

import os
import subprocess
import sys

from runner import main

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def test_table_matches_the_implementation():
    p = subprocess.run([sys.executable, "-m", "trnsim.nki._doc", "--check", os.path.join(ROOT, "docs", "nki.md")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_every_unsupported_call_raises():
    import trnsim.nki as tnki
    from trnsim.nki import isa, language

    for mod, names in ((isa, isa.UNSUPPORTED), (language, language.UNSUPPORTED)):
        for n in names:
            f = getattr(mod, n)
            try:
                f()
            except tnki.NkiUnsupported as e:
                assert n in str(e), (n, str(e))
            else:
                raise AssertionError(n)


def _stats_paragraph():
    """The backticked names of docs/nki.md's paragraph on stats.json's allocation reports."""
    import re

    with open(os.path.join(ROOT, "docs", "nki.md")) as f:
        text = f.read()
    start = text.index("- `stats.json` reports the choice twice")
    end = text.index("\n- ", start + 1)
    return set(re.findall(r"`([a-z_]+)`", text[start:end].replace("\n  ", " ")))


def test_the_allocation_fields_are_the_stats_json_keys():
    # tester23ak F4: docs/nki.md named the "nki" -> "allocation" fields "tiles, tiles alive at once, ... the bytes
    # per partition" where stats.json has `tensors`, `live`, and a bytes_per_partition over all buffers, while
    # "allocations"' bytes_per_partition is one buffer. The doc's names are a real stats.json's keys, and
    # bytes_per_partition means one buffer in both (pool_bytes_per_partition: all of them).
    import json
    import tempfile

    import numpy as np

    import trnsim.nki as tnki
    from runner import trnsim_exe

    out = tempfile.mkdtemp(prefix="trnsim_doc_")
    p = subprocess.run([trnsim_exe(), "run", os.path.join(ROOT, "examples", "nki", "matmul.json"), "--out", out],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    with open(os.path.join(out, "stats.json")) as f:
        stats = json.load(f)
    import nki_direct  # (python/tests/kernels: a kernel placing its tiles, for "direct")

    x = np.arange(512 * 128, dtype=np.float32).reshape(512, 128) / 64
    direct = tnki.benchmark(nki_direct.through_psum, x, np.identity(128, dtype=np.float32)).stats
    named = _stats_paragraph()
    (core,) = stats["nki"]["allocation"]
    keys = set(core) | set(direct["nki"]["allocation"][0]) | {k for s in core["sites"] for k in s}
    keys |= {k for a in stats["allocations"] + direct["allocations"] for k in a}
    assert stats["allocations"] and core["sites"]
    assert keys <= named, sorted(keys - named)
    by_line = {a["source"]: a for a in stats["allocations"]}
    for s in core["sites"]:
        a = by_line.get(s["line"])
        assert a is None or a["bytes_per_partition"] == s["bytes_per_partition"], (a, s)
        assert s["pool_bytes_per_partition"] == s["bufs"] * s["bytes_per_partition"], s
        assert s["buffers"] == s["bufs"] * s["live"], s
    assert any(s["line"] in by_line for s in core["sites"])


main(globals())
