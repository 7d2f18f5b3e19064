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


main(globals())
