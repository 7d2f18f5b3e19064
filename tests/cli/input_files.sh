#!/usr/bin/env bash
# What trnsim reads: usage input_files.sh <trnsim-binary> <source-dir>. Issue 22's findings, each a case: the
# hardware-config search path (6, and the report scripts'), JSON documents with 10^6 objects (7), a program of half a million
# instructions (8), a NUL byte in a document (12), recipe arguments validate passed and run refused (15),
# integers at or above 2^63 (16), the MoE backward below one token tile (17), messages that hid their reason
# (19).
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
SMALL=$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json

# 6. A config planted next to a copy of the binary, or in any folder above it, is never read: names are
# looked up in $TRNSIM_CONFIG_DIR, then in the source tree trnsim was built from; stats.json records the
# file read and its SHA-256.
mkdir -p "$T/shared/bin" "$T/shared/configs/hw" "$T/shared/bin/configs/hw"
cp "$TRNSIM" "$T/shared/bin/trnsim"
for d in "$T/shared/configs/hw" "$T/shared/bin/configs/hw"; do
  sed 's/"name": "trn3"/"name": "planted"/' "$SRC/configs/hw/trn3.json" >"$d/trn3.json"
done
msg=$("$T/shared/bin/trnsim" validate "$SMALL" 2>&1)
check "a planted configs/hw/trn3.json beside the binary is not read: $msg" '[[ $msg == *"on trn3, 1 core"* ]]'
"$T/shared/bin/trnsim" run "$SMALL" --no-numerics --out "$T/cfg" >/dev/null 2>&1
sum=$(sha256sum "$SRC/configs/hw/trn3.json" | cut -d' ' -f1)
check "stats.json names the config read and its SHA-256" \
  'grep -q "\"hardware_config\": \"$SRC/configs/hw/trn3.json\"" "$T/cfg/stats.json" && grep -q "\"hardware_config_sha256\": \"$sum\"" "$T/cfg/stats.json"'
msg=$(TRNSIM_CONFIG_DIR=$T/shared/configs/hw "$T/shared/bin/trnsim" validate "$SMALL" 2>&1)
check "TRNSIM_CONFIG_DIR is read when given: $msg" '[[ $msg == *"on planted, 1 core"* ]]'
# A TRNSIM_CONFIG_DIR that names no folder is an error naming the variable and the path, never a silent
# fall back to the source tree's config.
msg=$(TRNSIM_CONFIG_DIR=$T/nonexistent "$TRNSIM" validate "$SMALL" 2>&1)
rc=$?
check "TRNSIM_CONFIG_DIR naming a missing folder is refused (rc $rc): $msg" \
  '[[ $rc == 1 && $msg == *"TRNSIM_CONFIG_DIR=$T/nonexistent: no such directory"* && $msg != *"on trn3"* ]]'
touch "$T/not_a_dir"
msg=$(TRNSIM_CONFIG_DIR=$T/not_a_dir "$TRNSIM" run "$SMALL" --no-numerics --out "$T/cfg_nodir" 2>&1)
rc=$?
check "TRNSIM_CONFIG_DIR naming a file is refused, nothing written (rc $rc): $msg" \
  '[[ $rc == 1 && $msg == *"TRNSIM_CONFIG_DIR=$T/not_a_dir: not a directory"* && ! -e $T/cfg_nodir ]]'
# An entry of TRNSIM_CONFIG_DIR that is there but not a file (a directory, a dangling symlink) is an error
# naming the variable and the path, never a silent fall back to the source tree's config.
# A FIFO or a link to /dev/zero there is never opened for reading (no hang, no endless read).
mkdir -p "$T/cfgdir1/trn3.json" "$T/cfgdir2" "$T/cfgdir3" "$T/cfgdir4"
ln -s "$T/gone.json" "$T/cfgdir2/trn3.json"
mkfifo "$T/cfgdir3/trn3.json"
ln -s /dev/zero "$T/cfgdir4/trn3.json"
for d in cfgdir1 cfgdir2 cfgdir3 cfgdir4; do
  msg=$(TRNSIM_CONFIG_DIR=$T/$d timeout 60 "$TRNSIM" validate "$SMALL" 2>&1)
  rc=$?
  case $d in
    cfgdir1) want="is a directory" ;;
    cfgdir2) want="is a symlink to $T/gone.json, which does not exist" ;;
    *) want="not a regular file (a FIFO, device or socket)" ;;
  esac
  check "TRNSIM_CONFIG_DIR entry $d/trn3.json refused (rc $rc): $msg" \
    '[[ $rc == 1 && $msg == *"TRNSIM_CONFIG_DIR=$T/$d: $T/$d/trn3.json: $want, expected the hardware config '"'"'trn3'"'"'"* ]]'
done

# The same rule for the report scripts the binary runs: one planted in tools/report beside a copy of the
# binary, or above it, is never run (the report comes from the source tree's script).
mkdir -p "$T/shared/tools/report" "$T/shared/bin/tools/report"
for d in "$T/shared/tools/report" "$T/shared/bin/tools/report"; do
  printf 'open("%s/planted_ran", "w").write("x")\n' "$T" >"$d/run_report.py"
done
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  "$T/shared/bin/trnsim" stats "$T/cfg/stats.json" --html="$T/cfg.html" >/dev/null 2>&1
  check "a planted tools/report/run_report.py beside the binary is not run" \
    '[[ ! -e $T/planted_ran && -s $T/cfg.html ]] && grep -q "<html" "$T/cfg.html"'
else
  "$T/shared/bin/trnsim" stats "$T/cfg/stats.json" --html="$T/cfg.html" >/dev/null 2>&1
  check "a planted tools/report/run_report.py beside the binary is not run (no matplotlib here)" '[[ ! -e $T/planted_ran ]]'
fi
msg=$("$TRNSIM" stats "$T/cfg/stats.json" --html="$T/cfg/stats.json" 2>&1)
check "stats --html onto the stats file it reads is refused: $msg" \
  '[[ $? != 0 && $msg == *"same file"* ]] && grep -q "hardware_config_sha256" "$T/cfg/stats.json"'

# 7. Documents of a million objects parse in one pass (the reader once rescanned the array after each
# object: minutes, then hours). A hang guard, not a speed test: the time allowed is 20 times what it takes.
{
  printf '{"total_time_ns": 1.0, "engines": {}, "source_lines": ['
  yes '{"file": "k.cpp", "line": 1, "busy_ns": 2.5},' | head -n 999999 | tr -d '\n'
  printf '{"file": "k.cpp", "line": 1, "busy_ns": 2.5}]}\n'
} >"$T/big_stats.json"
timeout 120 "$TRNSIM" stats "$T/big_stats.json" >"$T/out" 2>&1
rc=$?
check "a stats.json of 10^6 objects is read (exit $rc: $(tail -1 "$T/out"))" \
  '[[ $rc == 1 ]] && grep -q "cores: missing or not a finite number" "$T/out"'
# Duplicate keys are still found among them.
sed 's/"line": 1, "busy_ns": 2.5}]}/"line": 1, "line": 2}]}/' "$T/big_stats.json" >"$T/dup_stats.json"
timeout 120 "$TRNSIM" stats "$T/dup_stats.json" >"$T/out" 2>&1
check "a duplicate key in the last of 10^6 objects: named" \
  'grep -q "source_lines\[999999\].line: key appears twice in one object" "$T/out"'

# 8. A program of half a million instructions builds in time linear in its length: the vector add of 2^25
# elements in column blocks of 2 (the dependency tracker once scanned every earlier store of the output's
# rows for each new one). A hang guard at 20 times the time it takes.
CS=$SRC/configs/workloads/calibration/vector_add_stream_free_dim_2.json
if [[ -f $CS ]]; then
  msg=$(timeout 60 "$TRNSIM" validate "$CS" --set params.n=33554432 2>&1)
  rc=$?
  check "cs149_vector_add n = 2^25 validates (exit $rc: $msg)" '[[ $rc == 0 && $msg == *"ok: kernel cs149_vector_add"* ]]'
else
  bad "missing $CS"
fi

# 12. A NUL byte ends no document: the rest is not ignored.
printf '{"name": "w"}\0{"garbage": ' >"$T/nul.json"
msg=$("$TRNSIM" validate "$T/nul.json" 2>&1)
check "a NUL byte: refused with its offset: $msg" \
  '[[ $msg == "trnsim: error: $T/nul.json: not valid JSON: a NUL byte at byte offset 13 (line 1)" ]]'
sed 's/"numerics": true/"numerics": true}\x00{/' "$SMALL" >"$T/nul2.json"
msg=$("$TRNSIM" run "$T/nul2.json" --out "$T/nul2" 2>&1)
check "a NUL byte in a workload: run refuses it too" '[[ $? == 1 && $msg == *"a NUL byte at byte offset"* && ! -e $T/nul2 ]]'

# 15. validate checks what run checks of a recipe's arguments.
PRE=$SRC/configs/workloads/moe/small_prequantized_weights_bwd_mxfp8.json
CE=$SRC/configs/workloads/cross_entropy/deepseek_v3_ce_bf16_4096.json
expect_both() {  # expect_both FILE SET WANT: validate and run both exit 1 with WANT in the message
  local file=$1 set=$2 want=$3 cmd msg rc
  for cmd in validate run; do
    local extra=()
    [[ $cmd == run ]] && extra=(--no-numerics --out "$T/r15")
    msg=$("$TRNSIM" $cmd "$file" --set "$set" "${extra[@]}" 2>&1)
    rc=$?
    check "$cmd --set $set (exit $rc): ${msg:0:300}" '[[ $rc == 1 && $msg == *"$want"* && ! -e $T/r15 ]]'
  done
}
expect_both "$PRE" inputs.weights.low=0.5 "inputs.weights (recipe 'prequantized_weights'): 'low' = 0.5 must be below 'high' = 0.1"
expect_both "$PRE" inputs.weights.high=1e39 "parameter 'high': expected a number in"
expect_both "$PRE" inputs.weights.gate_up_seed=-1 "parameter 'gate_up_seed': expected an integer >= 0, got -1"
expect_both "$CE" inputs.logits_and_target.masked_columns=129280 \
  "(recipe 'lm_logits'): masked_columns 129280 leaves no column of V = 129280 for targets"

# 16. Integers at or above 2^63 (or below -2^63) are refused as written; they once wrapped (2^64 - 1 ran as -1).
expect_both "$CE" inputs.logits_and_target.masked_columns=18446744073709551615 \
  "inputs.logits_and_target.masked_columns: the integer 18446744073709551615 is out of range"
sed 's/"seed": 2, "std": 1.0}/"generator": "randint", "seed": 2, "low": 0, "high": 18446744073709551611}/; s/"weights": {"generator": "normal", /"weights": {/' \
  "$SMALL" >"$T/randint.json"
msg=$("$TRNSIM" validate "$T/randint.json" 2>&1)
check "randint high = 2^64 - 5: refused as written: $msg" \
  '[[ $? == 1 && $msg == *"inputs.weights.high: the integer 18446744073709551611 is out of range"* ]]'
msg=$("$TRNSIM" validate "$SMALL" --set params.M=-99999999999999999999 2>&1)
check "an integer below -2^63: refused as written: $msg" '[[ $msg == *"the integer -99999999999999999999 is out of range"* ]]'

# 17. The MoE backward below one token tile: a message naming T and its range, not the builder's.
BWD=$SRC/configs/workloads/moe/small_affinity_on_h_bwd_mxfp8.json
msg=$("$TRNSIM" validate "$BWD" --set params.T=100 2>&1)
check "MoE backward T = 100: $msg" \
  '[[ $? == 1 && $msg == *"parameter '"'"'T'"'"': expected an integer in [128, 1048576], got 100" ]]'

# 19. Messages with their reason. A workload and a hardware config that cannot be opened (a symlink loop;
# as another user, no read permission).
ln -s "$T/loop.json" "$T/loop.json"
msg=$("$TRNSIM" validate "$T/loop.json" 2>&1)
check "a symlink loop as the workload: $msg" '[[ $msg == "trnsim: error: $T/loop.json: cannot open: Too many levels of symbolic links" ]]'
msg=$("$TRNSIM" validate "$SMALL" --set hardware=$T/loop.json 2>&1)
check "a symlink loop as the hardware config: $msg" '[[ $msg == *"$T/loop.json: cannot open: Too many levels of symbolic links"* ]]'
if [[ $(id -u) == 0 ]] && command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups "$TRNSIM" --help >/dev/null 2>&1; then
  mkdir -p "$T/perm"
  chmod 755 "$T" "$T/perm"
  cp "$SMALL" "$T/perm/w.json"
  chmod 000 "$T/perm/w.json"
  msg=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$TRNSIM" validate "$T/perm/w.json" 2>&1)
  check "an unreadable workload: $msg" '[[ $msg == "trnsim: error: $T/perm/w.json: cannot open: Permission denied" ]]'
else
  echo "input_files: the unreadable-file case needs root and setpriv (as another user): skipped"
fi
# validate on a program JSON checks the program (it once said "cores: unknown key").
cat >"$T/prog.json" <<'EOF'
{"generation": "trn2", "num_cores": 1,
 "tensors": [{"name": "x", "dtype": "float32", "shape": [128, 4], "init": {"generator": "zeros"}}],
 "cores": [{"SP": [{"op": "dma_copy", "queue": 0,
    "dst": {"mem": "sbuf", "partition": [0, 128], "dtype": "float32", "pattern": [[1, 4]]},
    "src": {"tensor": "x", "pattern": [[4, 128], [1, 4]]}}]}]}
EOF
msg=$("$TRNSIM" validate "$T/prog.json" 2>&1)
check "validate a program: $msg" '[[ $? == 0 && $msg == "$T/prog.json: ok: program on trn2, 1 core, 1 tensor, 1 instructions" ]]'
sed 's/"partition": \[0, 128\], "dtype": "float32", "pattern": \[\[1, 4\]\]/"partition": [0, 129], "dtype": "float32", "pattern": [[1, 4]]/' \
  "$T/prog.json" >"$T/prog_bad.json"
msg=$("$TRNSIM" validate "$T/prog_bad.json" 2>&1)
check "validate a program that breaks a rule: $msg" '[[ $? == 1 && $msg == "trnsim: error: $T/prog_bad.json: "* ]]'
# A workload without its "kernel" key is neither a workload nor a program: the message says both, naming the
# file (it once said "unknown key 'name'" as if the file were a program), for validate and run alike.
/usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); del d["kernel"]; json.dump(d, open(sys.argv[2], "w"))' \
  "$SMALL" "$T/nokernel.json"
for cmd in validate run; do
  msg=$("$TRNSIM" $cmd "$T/nokernel.json" 2>&1)
  rc=$?
  check "$cmd: a workload without \"kernel\" (rc $rc): $msg" \
    '[[ $rc == 1 && $msg == "trnsim: error: $T/nokernel.json: neither a workload (no \"kernel\" key) nor a program"* ]]'
done
# --set hardware.overrides={...} sets every override at once (it once said "hardware is not an object").
msg=$("$TRNSIM" validate "$SMALL" --set 'hardware.overrides={"hbm.bandwidth_GBps": 1e-9}' 2>&1)
check "--set hardware.overrides={...}: applied: $msg" \
  '[[ $msg == *"hbm.bandwidth_GBps.value: expected a number in [0.01, 1e+06], found 1e-09 (from the override hbm.bandwidth_GBps=1e-09)" ]]'
msg=$("$TRNSIM" validate "$SMALL" --set 'hardware.overrides=[1]' 2>&1)
check "--set hardware.overrides=[1]: $msg" \
  '[[ $msg == "trnsim: error: --set hardware.overrides=[1]: expected an object of \"path\": value, found an array of 1 element" ]]'

# A hardware parameter without overrides. names the form that sets it (tester22j: "hardware is not an
# object").
msg=$("$TRNSIM" validate "$SMALL" --set hardware.dma.queue_sets=true 2>&1)
check "--set hardware.dma.queue_sets=true (rc $?): $msg" \
  '[[ $msg == "trnsim: error: --set hardware.dma.queue_sets=true: hardware has no key '"'"'dma'"'"' (it takes name and overrides): a hardware parameter is set as --set hardware.overrides.dma.queue_sets=true" ]]'
# A key under hardware.name (a string): the key and what hardware.name is are named (before: "hardware.name
# is not an object"), with every shipped config (configs/hw/*.json).
shipped=$(cd "$SRC/configs/hw" && ls -- *.json | sed 's/\.json$//' | paste -sd, - | sed 's/,/, /g')
msg=$("$TRNSIM" validate "$SMALL" --set hardware.name.x=1 2>&1)
rc=$?
check "--set hardware.name.x=1 (rc $rc): $msg" \
  '[[ $rc == 1 && $shipped == *trn1* && $msg == "trnsim: error: --set hardware.name.x=1: hardware.name has no key '"'"'x'"'"': it is the hardware config'"'"'s name ($shipped) or a .json file'"'"'s path, set whole (--set hardware.name=trn3); a hardware parameter is set as --set hardware.overrides.PATH=VALUE" ]]'
msg=$("$TRNSIM" validate "$SMALL" --set hardware.overrides.dma.queue_sets=true 2>&1)
check "--set hardware.overrides.dma.queue_sets=true is taken (rc $?): $msg" '[[ $msg != *error* ]]'

finish
