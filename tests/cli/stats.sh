#!/usr/bin/env bash
# End-to-end test of stats.json and `trnsim stats`: usage stats.sh <trnsim-binary> <source-dir>.
# A hand-written program (one DMA, three matmuls on two source lines) run with --out writes stats.json with
# the profile summary, opcode times, source-line attribution and SBUF/PSUM peaks (values derived below);
# `trnsim stats` prints a workload run's table again, identical; `--compare` shows ratios; bad files fail
# with exact messages and exit 1.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
# has FILE TEXT: FILE holds TEXT verbatim on some line (stats.json is written with 2-space indents).
has() { grep -qF -- "$2" "$1"; }

# 1. The program. Constants pinned with --set (the shipped config is calibrated elsewhere): PE 2.4 GHz, MM
# floor 64 cycles, 4 LoadStationary columns per cycle, DMA trigger 50 ns (no precomputed-descriptor issue
# cost), no launch delay, no PE throttle.
cat >"$T/prog.json" <<'JSON'
{"generation": "trn2", "num_cores": 1,
 "tensors": [{"name": "x", "dtype": "bfloat16", "shape": [128, 1024],
              "init": {"generator": "normal", "seed": 1}}],
 "cores": [{
  "SP": [{"op": "dma_copy", "queue": 0, "line": 10, "file": "k.cpp", "update": [[0, 1]],
          "dst": {"mem": "sbuf", "partition": [0, 128], "dtype": "bfloat16", "pattern": [[1, 1024]]},
          "src": {"tensor": "x", "pattern": [[1024, 128], [1, 1024]]}}],
  "PE": [{"op": "nc_matmul", "line": 20, "file": "k.cpp", "wait": [[0, 1]],
          "dst": {"mem": "psum", "partition": [0, 128], "dtype": "float32", "pattern": [[1, 128]]},
          "stationary": {"mem": "sbuf", "partition": [0, 128], "dtype": "bfloat16", "pattern": [[1, 128]]},
          "moving": {"mem": "sbuf", "partition": [0, 128], "offset": 256, "dtype": "bfloat16", "pattern": [[1, 128]]}},
         {"op": "nc_matmul", "line": 20, "file": "k.cpp",
          "dst": {"mem": "psum", "partition": [0, 128], "dtype": "float32", "pattern": [[1, 128]]},
          "stationary": {"mem": "sbuf", "partition": [0, 128], "dtype": "bfloat16", "pattern": [[1, 128]]},
          "moving": {"mem": "sbuf", "partition": [0, 128], "offset": 256, "dtype": "bfloat16", "pattern": [[1, 128]]}},
         {"op": "nc_matmul", "line": 21, "file": "k.cpp",
          "dst": {"mem": "psum", "partition": [0, 128], "offset": 2048, "dtype": "float32", "pattern": [[1, 128]]},
          "stationary": {"mem": "sbuf", "partition": [0, 128], "dtype": "bfloat16", "pattern": [[1, 128]]},
          "moving": {"mem": "sbuf", "partition": [0, 128], "offset": 256, "dtype": "bfloat16", "pattern": [[1, 128]]}}]
 }]}
JSON
PIN=(--set pe.throttle.enabled=false --set sync.kernel_launch_ns=0 --set dma.trigger_ns=50
  --set dma.precomputed_issue_ns=0 --set pe.clock_GHz=2.4
  --set pe.mm_init_latency_cycles=64 --set pe.ls_columns_per_cycle=4 --set pe.ls_overlap=true)
"$TRNSIM" run "$T/prog.json" --out "$T/a" "${PIN[@]}" >"$T/run.txt" 2>&1
rc=$?
S=$T/a/stats.json
check "program run exit $rc: $(cat "$T/run.txt")" '[[ $rc == 0 && -f $S ]]'
check "a program run writes host.json as a workload run does" \
  '/usr/bin/python3 -c "import json, sys; h = json.load(open(sys.argv[1])); assert h[\"trnsim_host\"] == 1 and h[\"wall_seconds\"] > 0" "$T/a/host.json"'
check "run says where stats.json went" 'grep -qF "wrote $T/a/stats.json" "$T/run.txt"'
for key in total_time_ns roofline_lower_bound_ns hbm_bytes engines definitions summary opcodes source_lines \
  '"program"' mfu_estimated_percent tensor_engine_active_time_percent dma_transfer_average_bytes \
  sbuf_peak_usage_bytes_per_partition psum_peak_usage_bytes_per_partition pe_throttled_time_ns; do
  check "stats.json has $key" 'grep -q "${key//\"/}\"" "$S"'
done
# Every summary counter has a definition: count "summary.<name>" definitions against summary keys.
nsum=$(sed -n '/^  "summary": {/,/^  }/p' "$S" | grep -cE '^    "[a-z0-9_]+":')
ndef=$(grep -cE '^    "summary\.[a-z0-9_]+":' "$S")
check "every summary key defined ($nsum keys, $ndef definitions)" '[[ $nsum -gt 30 && $nsum == "$ndef" ]]'
# One transfer of 128 x 1024 BF16 = 262144 bytes read from HBM; 1 DMA and 3 PE instructions.
check "dma_transfer_count 1" 'has "$S" "\"dma_transfer_count\": 1,"'
check "dma_transfer_average_bytes 262144" 'has "$S" "\"dma_transfer_average_bytes\": 262144.0,"'
check "hbm_read_bytes 262144" 'has "$S" "\"hbm_read_bytes\": 262144,"'
check "hbm_write_bytes 0" 'has "$S" "\"hbm_write_bytes\": 0,"'
check "tensor_engine_instruction_count 3" 'has "$S" "\"tensor_engine_instruction_count\": 3,"'
check "sync_engine_instruction_count 1" 'has "$S" "\"sync_engine_instruction_count\": 1,"'
# 3 matmuls x 2 x 128^3 FLOP, BF16: the equivalent FLOPs equal the FLOPs.
check "pe_flops 12582912" 'has "$S" "\"pe_flops\": 12582912,"'
check "pe_flops_bf16_equivalent 12582912" 'has "$S" "\"pe_flops_bf16_equivalent\": 12582912.0,"'
# Opcodes: MultiplyMoving max(64, 128) = 128 cycles at 2.4 GHz = 53.334 ns each (ps rounded up), 3 of them;
# LoadStationary 128 / 4 = 32 cycles = 13.334 ns each; the DMA trigger 50 ns on SP.
ops=$(sed -n '/^  "opcodes": \[/,/^  \]/p' "$S" | tr -d ' \n')
check "opcodes: PE nc_matmul 3, 160.002 ns: $ops" \
  '[[ $ops == *"{\"count\":3,\"engine\":\"PE\",\"mean_ns\":53.334,\"opcode\":\"nc_matmul\",\"total_ns\":160.002}"* ]]'
check "opcodes: PE load_stationary 3, 40.002 ns" \
  '[[ $ops == *"{\"count\":3,\"engine\":\"PE\",\"mean_ns\":13.334,\"opcode\":\"load_stationary\",\"total_ns\":40.002}"* ]]'
check "opcodes: SP dma_copy 1, 50 ns" \
  '[[ $ops == *"{\"count\":1,\"engine\":\"SP\",\"mean_ns\":50.0,\"opcode\":\"dma_copy\",\"total_ns\":50.0}"* ]]'
# Lines: k.cpp:20 PE 2 matmuls 106.668 ns = 2/3 of the PE's 160.002; k.cpp:21 PE 53.334 ns; k.cpp:10 SP 50 ns.
lines=$(sed -n '/^  "source_lines": \[/,/^  \]/p' "$S" | tr -d ' \n')
# Line 20's semaphore wait is the DMA's latency (config-dependent): equal to the PE's wait in "engines".
pe_wait=$(grep -A6 '"PE": {' "$S" | grep -m1 semaphore_wait_ns | sed -E 's/.*: ([0-9.]+).*/\1/')
check "line k.cpp:20 first: $lines" \
  '[[ $lines == "\"source_lines\":[{\"busy_ns\":106.668,\"engine\":\"PE\",\"engine_busy_percent\":66.666666666666"*",\"instructions\":2,\"semaphore_wait_ns\":$pe_wait,\"source\":\"k.cpp:20\"},"* ]]'
check "line k.cpp:21 second, k.cpp:10 third" \
  '[[ $lines == *"},{\"busy_ns\":53.334,\"engine\":\"PE\",\"engine_busy_percent\":33.33333333333"*",\"instructions\":1,\"semaphore_wait_ns\":0.0,\"source\":\"k.cpp:21\"},{\"busy_ns\":50.0,\"engine\":\"SP\",\"engine_busy_percent\":100.0,\"instructions\":1,\"semaphore_wait_ns\":0.0,\"source\":\"k.cpp:10\"}]," ]]'
check "source_lines_total 3" 'has "$S" "\"source_lines_total\": 3,"'
# SBUF: [0, 2048) of every partition from the transfer to the last matmul; PSUM: [0, 512) and [2048, 2560) in
# use together while the third matmul's LoadStationary runs under the second's MultiplyMoving.
check "sbuf peak 2048" 'has "$S" "\"sbuf_peak_usage_bytes_per_partition\": 2048,"'
check "psum peak 1024" 'has "$S" "\"psum_peak_usage_bytes_per_partition\": 1024,"'
check "psum peak 6.25 % of 16 KiB" 'has "$S" "\"psum_peak_usage_percent\": 6.25,"'

# 2. trnsim stats on it: the table with the opcode and source-line sections.
"$TRNSIM" stats "$S" >"$T/stats.txt" 2>&1
rc=$?
check "stats exit $rc: $(cat "$T/stats.txt")" '[[ $rc == 0 ]]'
check "stats: program header" 'grep -qF "program $T/prog.json on trn2 (1 core)" "$T/stats.txt"'
check "stats: opcode row" 'grep -qE "^  PE +nc_matmul +3 +0\.160 +53\.3$" "$T/stats.txt"'
check "stats: top line" 'grep -qE "^  k\.cpp:20 +PE +2 +0\.107 +66\.7%" "$T/stats.txt"'
check "stats: SBUF peak" 'grep -qE "^  SBUF peak +2\.048 kB per partition$" "$T/stats.txt"'
"$TRNSIM" summary "$S" --lines 1 >"$T/summary.txt" 2>&1
check "summary alias, --lines 1" '[[ $? == 0 && $(grep -c "k\.cpp:" "$T/summary.txt") == 1 ]]'

# 3. A workload run's table is printed again identically from its stats.json.
"$TRNSIM" run "$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json" --no-numerics --out "$T/w" >"$T/w.txt" 2>/dev/null
rc=$?
check "workload run exit $rc" '[[ $rc == 0 ]]'
"$TRNSIM" stats "$T/w/stats.json" >"$T/w_stats.txt" 2>&1
check "stats reprints the run's table" 'diff <(grep -v "^wrote " "$T/w.txt") "$T/w_stats.txt" >&2'
check "workload table has MFU and lines" 'grep -q "MFU estimated" "$T/w_stats.txt" && grep -q "busiest source lines" "$T/w_stats.txt"'

# 4. --compare: B halves the DMA engine bandwidth; same bytes and transfers, longer time.
"$TRNSIM" run "$T/prog.json" --out "$T/b" "${PIN[@]}" --set dma.engine_bandwidth_GBps=11.5 --no-numerics >/dev/null 2>&1
# A path set twice takes the later value, as in a workload (before, a program run kept the first).
"$TRNSIM" run "$T/prog.json" --out "$T/b2" "${PIN[@]}" --set dma.engine_bandwidth_GBps=46 \
  --set dma.engine_bandwidth_GBps=11.5 --no-numerics >/dev/null 2>&1
total() { grep -m1 -oE '"total_time_ns": [0-9.]+' "$1/stats.json"; }
check "the later --set wins: $(total "$T/b2") as $(total "$T/b")" '[[ $(total "$T/b2") == "$(total "$T/b")" ]]'
"$TRNSIM" stats --compare "$S" "$T/b/stats.json" >"$T/cmp.txt" 2>&1
rc=$?
check "compare exit $rc: $(cat "$T/cmp.txt")" '[[ $rc == 0 ]]'
row() { grep -E "^  $1 " "$T/cmp.txt"; }
check "compare: DMA transfers 1 1 1.000" '[[ $(row "DMA transfers") =~ \ 1\ +1\ +1\.000$ ]]'
check "compare: HBM traffic ratio 1" '[[ $(row "HBM traffic") =~ \ 262144\ +262144\ +1\.000$ ]]'
ratio=$(row "simulated time \(ns\)" | awk '{print $NF}')
check "compare: total time ratio $ratio > 1" 'awk -v r="$ratio" "BEGIN { exit !(r > 1.05) }"'
check "compare: per-engine busy and waits" 'row "PE busy \(%\)" >/dev/null && row "PE semaphore wait per core \(ns\)" >/dev/null'
"$TRNSIM" stats --compare "$S" "$S" >"$T/same.txt" 2>&1
check "compare with itself: every ratio 1.000 or -" \
  '[[ $(tail -n +4 "$T/same.txt" | awk "{print \$NF}" | grep -cvE "^(1\.000|-)$") == 0 ]]'

# 5. Bad files: exact messages, exit 1.
expect_error() {
  local name=$1 want=$2
  shift 2
  "$TRNSIM" "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [[ $rc == 1 && $(cat "$T/err") == "trnsim: error: $want" ]]; then ok; else
    bad "$name: rc $rc, stderr: $(cat "$T/err")
   expected: trnsim: error: $want"
  fi
}
printf 'hello\n' >"$T/text.json"
printf '{"total_time_ns": 1,' >"$T/cut.json"
NOT="not a trnsim stats.json (expected an object with \"total_time_ns\" and \"engines\", as \`trnsim run ... --out DIR\` writes)"
expect_error "missing" "$T/none.json: no such file" stats "$T/none.json"
expect_error "directory" "$T/a: is a directory, expected a JSON file" stats "$T/a"
expect_error "not JSON" "$T/text.json: not valid JSON: parse error at line 1, column 1: syntax error while parsing value - invalid literal; last read: 'h'" stats "$T/text.json"
expect_error "truncated" "$T/cut.json: not valid JSON: parse error at line 1, column 21: syntax error while parsing object key - unexpected end of input; expected string literal" stats "$T/cut.json"
expect_error "a program" "$T/prog.json: $NOT" stats "$T/prog.json"
expect_error "compare, B bad" "$T/prog.json: $NOT" stats --compare "$S" "$T/prog.json"
expect_error "compare, one file" "--compare takes two stats.json files (A, then B), found 1" stats --compare "$S"
expect_error "two files" "expected one stats.json (or --compare A.json B.json), found 2 files" stats "$S" "$S"
mkfifo "$T/fifo.json"
expect_error "a FIFO" "$T/fifo.json: not a regular file (a FIFO, device or socket), expected a JSON file" \
  stats "$T/fifo.json"
expect_error "a device" "/dev/zero: not a regular file (a FIFO, device or socket), expected a JSON file" \
  stats /dev/zero
# Damaged figures: an error naming the key, never a table of impossible values.
damage() {  # damage NAME PYTHON-EXPR-ON-j
  python3 -c "import json, sys; j = json.load(open(sys.argv[1])); $2; json.dump(j, open(sys.argv[2], 'w'))" \
    "$S" "$T/$1.json"
}
damage neg "j['total_time_ns'] = -1"
expect_error "negative time" "$T/neg.json: total_time_ns: negative (a damaged stats.json?)" stats "$T/neg.json"
damage nocores "del j['cores']"
expect_error "no cores" "$T/nocores.json: cores: missing or not a finite number (a damaged stats.json?)" \
  stats "$T/nocores.json"
damage strbound "j['roofline_lower_bound_ns'] = 'x'"
expect_error "a string figure" \
  "$T/strbound.json: roofline_lower_bound_ns: missing or not a finite number (a damaged stats.json?)" \
  stats "$T/strbound.json"
damage strsummary "j['summary'] = 'x'"
expect_error "summary not an object" "$T/strsummary.json: summary: expected an object (a damaged stats.json?)" \
  stats "$T/strsummary.json"
expect_error "negative --lines" "--lines: Value -1 not in range 0 to 1000000
Run 'trnsim --help' or 'trnsim COMMAND --help' for the options." stats "$S" --lines -1

# A program run that fails after its --out folder was created for its output (an init .npy that is missing)
# removes the folder.
sed 's/"init": {"generator": "normal", "seed": 1}/"init": {"npy": "missing.npy"}, "output": true/' "$T/prog.json" >"$T/bad_prog.json"
"$TRNSIM" run "$T/bad_prog.json" --out "$T/new_out" >"$T/out.txt" 2>&1
rc=$?
check "failed program run: exit $rc, no --out folder left" \
  '[[ $rc == 1 && ! -e $T/new_out ]] && grep -qF "$T/missing.npy: cannot open" "$T/out.txt"'

# What a program run reads is never written over: its program file, an init .npy.
cp "$T/prog.json" "$T/keep.json"
"$TRNSIM" run "$T/prog.json" --trace "$T/prog.json" >"$T/out.txt" 2>&1
rc=$?
check "--trace onto the program file is refused: exit $rc" \
  '[[ $rc == 1 ]] && grep -q -- "--trace and the program file are the same file" "$T/out.txt" && cmp -s "$T/prog.json" "$T/keep.json"'

finish
