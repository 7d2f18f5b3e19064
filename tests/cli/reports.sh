#!/usr/bin/env bash
# The HTML reports in a real browser: usage reports.sh <trnsim-binary> <source-dir>.
# trnsim run --report, trnsim stats --html and a sweep's report.html are loaded by headless Chromium
# (Debian's chromium; .ci/run installs it); each page's own script counts the drawn marks of every plot once
# the page has loaded and records any JavaScript error on <body>. A page fails on a JavaScript error (or a
# console error), a plot with fewer than 5 marks, or a missing plot. A broken page (a script error, an empty
# plot) is checked to fail. Without chromium the test is skipped (exit 77) with a message saying so.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
CHROMIUM=${CHROMIUM:-$(command -v chromium || true)}
if [[ -z $CHROMIUM ]]; then
  echo "SKIPPED: reports.sh needs Debian's chromium (apt-get install chromium; .ci/run installs it)" >&2
  exit 77
fi
W=$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json

# load PAGE: the DOM after the load event (chromium --dump-dom) in $T/dom.html, the browser's log in $T/log.
load() {
  rm -rf "$T/profile"
  timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$T/profile" \
    --enable-logging=stderr --v=0 --dump-dom "file://$1" >"$T/dom.html" 2>"$T/log"
}
# page_ok PAGE PLOTS: the page loads, its script ran to the end with no error, it has PLOTS plots, each drawn.
page_ok() {
  load "$1"
  /usr/bin/python3 - "$T/dom.html" "$2" "$T/log" <<'PY'
import re, sys
dom, want, log = open(sys.argv[1]).read(), int(sys.argv[2]), open(sys.argv[3]).read()
body = re.search(r"<body([^>]*)>", dom)
attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', body.group(1))) if body else {}
errors = []
if attrs.get("data-js-errors"):
    errors.append("JavaScript errors: " + attrs["data-js-errors"])
console = [l for l in log.splitlines() if "CONSOLE" in l]
if console:
    errors.append("console: " + " | ".join(console))
if attrs.get("data-report-ok") != "yes":
    errors.append("the page's check did not pass (data-report-ok=%r, empty plots %r)"
                  % (attrs.get("data-report-ok"), attrs.get("data-empty-plots")))
if attrs.get("data-plots") != str(want):
    errors.append("%s plots, expected %d" % (attrs.get("data-plots"), want))
marks = [int(m) for m in re.findall(r'<figure class="plot"[^>]*data-marks="(\d+)"', dom)]
if len(marks) != want or any(m < 5 for m in marks):
    errors.append("marks per plot %r" % marks)
print("; ".join(errors))
sys.exit(1 if errors else 0)
PY
}
self_contained() {  # no resource fetched from the network (SVG namespace URIs are names, not fetches)
  ! grep -qE '(src|href)="(https?:)?//' "$1" && ! grep -qE '@import|url\((https?:)?//' "$1"
}

# 1. A run's report: run --report, then stats --html (next to stats.json) and --html=FILE.
"$TRNSIM" run "$W" --out "$T/run" --report "$T/run.html" >"$T/run.txt" 2>&1
rc=$?
check "run --report exit 0 ($rc): $(tail -2 "$T/run.txt")" '[[ $rc == 0 && -s $T/run.html ]]'
# 5 plots: engine time of the one core, critical path, roofline, source lines ... and the second core
# when there is one (this workload runs on one core: 4).
msg=$(page_ok "$T/run.html" 4)
check "run report loads in chromium with 4 plots drawn: $msg" '[[ $? == 0 ]]'
check "run report is self-contained" 'self_contained "$T/run.html"'
check "run report has the numerics table" 'grep -q "rel_l2_vs_exact" "$T/run.html" && grep -q "weight_grad" "$T/run.html"'
"$TRNSIM" stats "$T/run/stats.json" --html >"$T/stats.txt" 2>&1
check "stats --html writes report.html next to stats.json" '[[ $? == 0 && -s $T/run/report.html ]]'
"$TRNSIM" run "$SRC/configs/workloads/llama3_8b_mlp_down_bwd_mxfp8.json" --no-numerics --out "$T/main" >/dev/null 2>&1
"$TRNSIM" stats "$T/main/stats.json" --html="$T/main.html" >"$T/stats2.txt" 2>&1
rc=$?
check "stats --html=FILE: $(cat "$T/stats2.txt")" '[[ $rc == 0 && -s $T/main.html ]]'
# A hand-damaged stats.json: the key the report missed, no Python traceback, exit 1.
/usr/bin/python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); s["source_lines"] = [{}]; json.dump(s, open(sys.argv[2], "w"))' \
  "$T/run/stats.json" "$T/damaged.json"
msg=$("$TRNSIM" stats "$T/damaged.json" --html="$T/damaged.html" 2>&1)
check "a damaged stats.json: $msg" \
  '[[ $? == 1 && $msg == *"the stats cannot be drawn: key '"'"'busy_ns'"'"' is missing"* && $msg == *"$T/damaged.json: run_report.py failed"* && $msg != *Traceback* && ! -e $T/damaged.html ]]'
msg=$(page_ok "$T/main.html" 5)
check "main job's report (two cores: 5 plots) loads: $msg" '[[ $? == 0 ]]'
check "main job's report says there are no numerics" 'grep -qF "No numerics: off (--no-numerics" "$T/main.html"'

# 2. A sweep's report: 2 axes, so 2 axis plots, the roofline, time against the bound, the Pareto front.
cat >"$T/s.json" <<JSON
{"name": "rep", "workload": "$W", "set": {"numerics": false},
 "axes": [{"name": "order", "path": "params.tile_loop_order", "values": ["mnk", "nmk"]},
          {"name": "bm", "path": "params.input_grad_config.TILES_IN_BLOCK_M", "values": [1, 2, 16]}]}
JSON
"$TRNSIM" sweep "$T/s.json" --out "$T/sw" -j 2 >"$T/sw.txt" 2>&1
rc=$?
check "sweep with report exit 0: $(tail -2 "$T/sw.txt")" '[[ $rc == 0 && -s $T/sw/report.html ]]'
msg=$(page_ok "$T/sw/report.html" 5)
check "sweep report loads in chromium with 5 plots drawn: $msg" '[[ $? == 0 ]]'
check "sweep report is self-contained" 'self_contained "$T/sw/report.html"'
check "sweep report lists the invalid points" 'grep -q "is less than half a block" "$T/sw/report.html"'
nsvg=$(ls "$T/sw/plots/"*.svg | wc -l)
npng=$(ls "$T/sw/plots/"*.png | wc -l)
check "each plot exported as SVG and PNG ($nsvg, $npng)" '[[ $nsvg == 5 && $npng == 5 ]]'
check "PNG files are PNG" '[[ $(head -c 4 "$T/sw/plots/roofline.png" | od -An -c | tr -d " ") == "211PNG" ]]'

# 3. The check fails on a broken page: a script error, then an empty plot.
sed 's|</body>|<script>no_such_function();</script></body>|' "$T/sw/report.html" >"$T/broken1.html"
msg=$(page_ok "$T/broken1.html" 5)
check "a JavaScript error fails the page: $msg" '[[ $? != 0 && $msg == *"JavaScript errors"* ]]'
/usr/bin/python3 - "$T/sw/report.html" "$T/broken2.html" <<'PY'
import re, sys
page = open(sys.argv[1]).read()
# Empty the first plot's SVG: its drawing replaced by nothing.
i = page.index('<figure class="plot"')
j = page.index("<svg", i)
k = page.index("</svg>", j)
open(sys.argv[2], "w").write(page[:j] + '<svg xmlns="http://www.w3.org/2000/svg"></svg>' + page[k + 6:])
PY
msg=$(page_ok "$T/broken2.html" 5)
check "an empty plot fails the page: $msg" '[[ $? != 0 && $msg == *"did not pass"* ]]'
msg=$(page_ok "$T/sw/report.html" 6)
check "a missing plot fails the page: $msg" '[[ $? != 0 && $msg == *"5 plots, expected 6"* ]]'

# Axes whose names make the same file name ("o/x" and "o_x" are both axis_o_x) get a plot file each.
cat >"$T/same.json" <<JSON
{"name": "same", "workload": "$W", "set": {"numerics": false},
 "axes": [{"name": "o/x", "path": "params.tile_loop_order", "values": ["mnk", "nmk"]},
          {"name": "o_x", "path": "params.input_grad_config.TILES_IN_BLOCK_M", "values": [1, 2]}]}
JSON
"$TRNSIM" sweep "$T/same.json" --out "$T/same" -j 2 >"$T/same.txt" 2>&1
check "axes with one file name: two plot files each: $(ls "$T/same/plots" | tr '\n' ' ')" \
  '[[ -s $T/same/plots/axis_o_x.svg && -s $T/same/plots/axis_o_x_2.svg && -s $T/same/plots/axis_o_x_2.png ]]'
check "axes with one file name: distinct plot ids" '[[ $(grep -o "<figure class=\"plot\" id=\"[^\"]*\"" "$T/same/report.html" | sort | uniq -d) == "" ]]'
msg=$(page_ok "$T/same/report.html" 5)
check "axes with one file name: the page loads with 5 plots drawn: $msg" '[[ $? == 0 ]]'

# 4. Without matplotlib's Python the sweep still writes its results and says why there is no report.
TRNSIM_PYTHON=/nonexistent "$TRNSIM" sweep collect "$T/sw" >"$T/c.txt" 2>&1
check "collect without Python: exit 0 and a warning" '[[ $? == 0 ]] && grep -qF "warning: no HTML report: /nonexistent is missing" "$T/c.txt"'
msg=$(TRNSIM_PYTHON=/nonexistent "$TRNSIM" stats "$T/run/stats.json" --html 2>&1)
check "stats --html without Python: exit 1: $msg" '[[ $? == 1 && $msg == *"/nonexistent is missing"* ]]'
finish
