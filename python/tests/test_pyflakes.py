"""The trnsim package passes pyflakes (Debian's python3-pyflakes, tools/setup.sh): no unused imports or
variables, no undefined names. Re-exports are names in __all__ or assignments (pyflakes reads no noqa)."""

import os
import subprocess
import sys

from runner import main

import trnsim


def test_package_is_pyflakes_clean():
    package = os.path.dirname(os.path.realpath(trnsim.__file__))  # the sources the build tree links to
    p = subprocess.run([sys.executable, "-m", "pyflakes", package], capture_output=True, text=True)
    assert p.returncode == 0 and not p.stdout, p.stdout + p.stderr


if __name__ == "__main__":
    main(globals())
