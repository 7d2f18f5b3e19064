#!/usr/bin/env bash
# Python kernels with non-ASCII text under trnsim run / validate: usage nki_unicode.sh <trnsim-binary> <source-dir>.
# The embedded interpreter runs in UTF-8 mode, as `python3` does in a UTF-8 locale (tester23ab F8, F9): a kernel
# in a folder or file named with non-ASCII letters runs (it was exit 2 "internal error: Unable to cast Python
# instance to C++ type", or a UnicodeEncodeError), a kernel that prints "läuft ✓" or reads a UTF-8 text file
# beside it runs (UnicodeEncodeError / UnicodeDecodeError: 'ascii' codec), whatever the locale, and
# sys.executable is the Python trnsim was built with, not the first python3 on PATH.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
export TRNSIM_PYTHON=/nonexistent  # no HTML report
if [[ $("$TRNSIM" validate "$SRC/examples/nki/rmsnorm.json" 2>&1) == *"built without Python support"* ]]; then
  echo "SKIPPED: this trnsim was built without Python support"
  exit 77
fi

kernel() {  # kernel FILE: a copy kernel that reads größe.txt beside it at import and prints non-ASCII text
  cat >"$1" <<'PY'
import os
import sys

import nki
import nki.language as nl

SIZE = open(os.path.join(os.path.dirname(__file__), "größe.txt"), encoding=None).read().strip()


@nki.jit
def copy_kernel(b):
    print("kernel läuft ✓", SIZE, sys.executable)
    out = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(b))
    return out
PY
  printf 'größe=1 µs\n' >"$(dirname "$1")/größe.txt"
}
workload() {  # workload FILE KERNEL
  printf '{"name": "uni", "hardware": "trn2", "kernel": {"nki": "%s", "function": "copy_kernel"},
  "inputs": {"b": {"generator": "normal", "seed": 1, "shape": [128, 64], "dtype": "float32"}}}\n' "$2" >"$1"
}

mkdir -p "$T/josé" "$T/plain"
kernel "$T/josé/k.py"
workload "$T/josé/w.json" k.py
kernel "$T/plain/kü.py"
workload "$T/plain/w.json" kü.py
for locale in C.UTF-8 C; do
  for w in "$T/josé/w.json" "$T/plain/w.json"; do
    LC_ALL=$locale "$TRNSIM" validate "$w" >"$T/v.txt" 2>&1
    rc=$?
    check "LC_ALL=$locale validate $w: exit 0 ($rc): $(cat "$T/v.txt")" '[[ $rc == 0 ]]'
    rm -rf "$T/out"
    LC_ALL=$locale "$TRNSIM" run "$w" --out "$T/out" >"$T/r.txt" 2>&1
    rc=$?
    check "LC_ALL=$locale run $w: exit 0 ($rc): $(grep -v '^ ' "$T/r.txt" | head -5)" '[[ $rc == 0 ]]'
    check "LC_ALL=$locale run $w: the kernel's print in UTF-8, with the file it read" \
      'grep -qF "kernel läuft ✓ größe=1 µs" "$T/r.txt"'
    check "LC_ALL=$locale run $w: the output, a copy of the input" \
      '/usr/bin/python3 -c "
import json, sys, numpy as np
out = np.load(sys.argv[1] + \"/out.npy\")
srcs = json.load(open(sys.argv[1] + \"/stats.json\"))[\"nki\"][\"sources\"]
assert out.shape == (128, 64) and out.dtype == np.float32, out
assert sorted(srcs) == [sys.argv[2]], srcs
" "$T/out" "$(dirname "$w")/$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[\"kernel\"][\"nki\"])" "$w")"'
  done
done
# sys.executable: the Python trnsim embeds (the build's), which has NumPy, not a python3 found on PATH.
exe=$(grep -oE "µs /[^ ]+" "$T/r.txt" | cut -d' ' -f2)
check "sys.executable $exe is a Python with NumPy" '[[ -x $exe ]] && "$exe" -c "import numpy" 2>/dev/null'
mkdir -p "$T/bin"
printf '#!/bin/sh\nexit 3\n' >"$T/bin/python3"
chmod +x "$T/bin/python3"
PATH="$T/bin:$PATH" "$TRNSIM" run "$T/plain/w.json" --out "$T/out2" >"$T/r2.txt" 2>&1
check "sys.executable is not the first python3 on PATH" '! grep -qF "$T/bin/python3" "$T/r2.txt"'
finish
