#!/usr/bin/env bash
# An output's name becomes the file OUT/<name>.npy: usage output_names.sh <trnsim-binary> <source-dir>.
# A kernel written on trnsim._core's builder (`k.output(name, ...)`) that names an output `../victim`, an
# absolute path or `stats` is refused before anything is simulated, with the kernel's file:line and the
# name, exit 1; the user's file of that name is untouched and no output folder is left. A program JSON
# tensor whose output takes its name gets the same rule. (NKI kernels: python/tests/test_nki_errors.py.)
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
if [[ $("$TRNSIM" validate "$SRC/examples/nki/rmsnorm.json" 2>&1) == *"built without Python support"* ]]; then
  echo "skipped: trnsim was built without Python support"
  exit 77
fi

cat >k.py <<'PY'
from trnsim import _core
from trnsim._core import nki as isa


def copy(x, name="y"):
    k = _core.Kernel.current()
    out = k.output(name, _core.DType.F32, [128, 64])  # MARK-output
    t = k.sbuf([128, 64], _core.DType.F32, "t")
    isa.dma_copy(t, x)
    isa.dma_copy(out, t)
    return out


def ref(x, name="y"):
    return x
PY
mark=$(grep -n MARK-output k.py | cut -d: -f1)
cat >w.json <<'JSON'
{"name": "names", "hardware": "trn2", "lnc": 1, "kernel": {"nki": "k.py", "function": "copy"},
 "params": {"name": "y"},
 "inputs": {"x": {"generator": "normal", "seed": 1, "std": 1.0, "shape": [128, 64], "dtype": "float32"}},
 "reference": {"nki": "k.py", "function": "ref"}, "numerics": true}
JSON

"$TRNSIM" run w.json --out good >out 2>&1
rc=$?
check "a plain name runs (exit $rc: $(tail -2 out))" '[[ $rc == 0 && -f good/y.npy ]]'

mkdir -p abs
for name in ../victim "$T/abs/victim" stats Host chain_stats .hidden -lead a.b "a b" ""; do
  echo mine >victim.npy
  echo mine >abs/victim.npy
  msg=$("$TRNSIM" run w.json --set "params.name=\"$name\"" --out "$T/run/o" 2>&1)
  rc=$?
  if [[ -z $name ]]; then
    check "empty name refused (exit $rc): $msg" '[[ $rc == 1 && $msg == *"k.py:$mark"* ]]'
  else
    check "name '$name' refused at the kernel line (exit $rc): $msg" \
      '[[ $rc == 1 && $msg == *"k.py:$mark: output '"'"'$name'"'"' is written as OUT/<name>.npy"* ]]'
  fi
  check "name '$name': the user's files untouched" \
    '[[ $(cat victim.npy) == mine && $(cat abs/victim.npy) == mine && ! -e run/victim.npy ]]'
  check "name '$name': no output folder" '[[ ! -e run ]]'
done

# A program's tensor written under its own name: the same rule, before the run.
cat >p.json <<'JSON'
{"generation": "trn2", "num_cores": 1,
 "tensors": [{"name": "stats", "dtype": "float32", "shape": [128, 4], "init": {"generator": "zeros"},
              "output": true}],
 "cores": [{}]}
JSON
msg=$("$TRNSIM" run p.json --out prog 2>&1)
rc=$?
check "program tensor 'stats' written as stats.npy refused (exit $rc): $msg" \
  '[[ $rc == 1 && $msg == *"tensor stats"*"output '"'"'stats'"'"' is written as OUT/<name>.npy"* ]]'

finish
