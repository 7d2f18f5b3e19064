"""The HTML report of one run (trnsim run ... --report FILE, trnsim stats OUT/stats.json --html [FILE]): a
self-contained page drawn from the run's stats.json (and the host time in host.json beside it).

usage: run_report.py STATS.json OUT.html

Sections: the headline figures; where each engine's time went, per core (busy, throttled, launch, the
waits by the resource that released them, finished); the critical path (time per resource and link, and
its first segments with their kernel lines); the run on the roofline; the busiest kernel source lines; the
numerics table (or why there is none); the phases."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_page as rp  # noqa: E402  (exits 3 without matplotlib)
from report_page import plt  # noqa: E402

# Colours of the engine time parts, the same on every core (waits grouped by what released them).
PART_ORDER = ["busy", "throttled", "launch", "wait_PE", "wait_DVE", "wait_ACT", "wait_POOL", "wait_SP",
              "wait_dma_queue", "wait_peer_core", "wait_dge", "wait_pe_pipeline", "other", "finished"]
PART_COLOR = {"busy": "#2a7ab9", "throttled": "#6baed6", "launch": "#999999", "wait_PE": "#e6550d",
              "wait_DVE": "#fd8d3c", "wait_ACT": "#fdae6b", "wait_POOL": "#fdd0a2", "wait_SP": "#a63603",
              "wait_dma_queue": "#31a354", "wait_peer_core": "#756bb1", "wait_dge": "#9e9ac8",
              "wait_pe_pipeline": "#bcbddc", "other": "#d9d9d9", "finished": "#f0f0f0"}


def part_of(key):
    return "wait_dma_queue" if key.startswith("wait_dma_queue_") else key


def host_seconds(stats_path, stats):
    """The run's host time from host.json beside its stats.json (stats.json holds no host time: it is the
    same bytes on every run); an older stats.json's own "wall_seconds"; else None."""
    try:
        with open(os.path.join(os.path.dirname(stats_path), "host.json")) as f:
            host = json.load(f)
        return host.get("wall_seconds") if isinstance(host, dict) else None
    except (OSError, ValueError):
        return stats.get("wall_seconds")


def engine_bars(page, stats):
    engines = stats.get("engines") or {}
    for core in sorted(engines):
        names = list(engines[core].keys())
        fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(names) + 1.2))
        used = set()
        for row, eng in enumerate(names):
            split = engines[core][eng].get("time_ns") or {}
            grouped = {}
            for k, v in split.items():
                grouped[part_of(k)] = grouped.get(part_of(k), 0.0) + v
            left = 0.0
            for part in PART_ORDER + sorted(set(grouped) - set(PART_ORDER)):
                v = grouped.get(part, 0.0)
                if v <= 0:
                    continue
                ax.barh(row, v / 1e3, left=left / 1e3, color=PART_COLOR.get(part, "#cccccc"),
                        edgecolor="white", linewidth=0.3, label=None if part in used else part)
                used.add(part)
                left += v
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names)
        ax.invert_yaxis()
        ax.set_xlabel("time (us)")
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        page.figure(fig, "engines_" + core, "%s: where each engine's time went, from the launch to the end "
                    "(busy; waits by the engine, DMA queue or resource whose semaphore released it last)" % core)
        rows = []
        for eng in names:
            e = engines[core][eng]
            rows.append([eng, rp.fmt_num(e.get("busy_percent")), rp.fmt_num(e.get("busy_ns")),
                         rp.fmt_num(e.get("semaphore_wait_ns")), e.get("instructions", "")])
        page.table(["engine", "busy %", "busy ns", "semaphore wait ns", "instructions"], rows, left={0})


def critical_path(page, stats):
    cp = stats.get("critical_path")
    if not cp:
        page.p("This stats.json has no critical path (an older trnsim).", "note")
        return
    items = sorted(cp.get("time_ns", {}).items(), key=lambda kv: -kv[1])
    total = cp.get("length_ns") or sum(v for _, v in items) or 1
    fig, ax = plt.subplots(figsize=(7.5, 0.32 * len(items) + 1.0))
    ax.barh(range(len(items)), [v / 1e3 for _, v in items],
            color=["#31a354" if k.startswith("link:") else "#2a7ab9" for k, _ in items])
    ax.set_yticks(range(len(items)))
    ax.set_yticklabels([k for k, _ in items], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time on the critical path (us)")
    for i, (_, v) in enumerate(items):
        ax.text(v / 1e3, i, " %.1f %%" % (100.0 * v / total), va="center", fontsize=6)
    page.figure(fig, "critical_path", "The critical path (%s steps, %s ns = the simulated time): time charged "
                "to each resource (blue) and link (green)" % (cp.get("steps", "?"), rp.fmt_num(cp.get("length_ns"))))
    segs = cp.get("segments", [])[:40]
    page.table(["start ns", "end ns", "resource", "opcode", "source", "steps", "active ns", "link ns", "via"],
               [[rp.fmt_num(s.get("start_ns")), rp.fmt_num(s.get("end_ns")), s.get("resource", ""),
                 s.get("opcode", ""), s.get("source", ""), s.get("steps", ""), rp.fmt_num(s.get("active_ns")),
                 rp.fmt_num(s.get("link_ns")), s.get("via", "")] for s in segs], left={2, 3, 4, 8})
    page.p("The first %d of %s segments (trnsim stats --critical-path prints more)."
           % (len(segs), cp.get("segments_total", "?")), "note")


def roofline(page, stats):
    flops, hbm = stats.get("useful_flops"), stats.get("hbm_bytes")
    pk, bw = stats.get("peak_tflops"), stats.get("hbm_bandwidth_GBps")
    if not (flops and hbm and pk and bw):
        page.p("No roofline point: the run moved no HBM bytes or did no useful FLOPs.", "note")
        return
    x = flops / hbm
    comp = stats.get("compulsory_hbm_bytes")
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    xs = [x] + ([flops / comp] if comp else [])
    rp.roofline_axes(ax, [pk], [bw], min(xs) / 8, max(xs) * 8)
    ax.scatter([x], [stats.get("achieved_tflops", 0)], s=70, marker="*", color="C3", zorder=4,
               label="this run (%s TFLOP/s)" % rp.fmt_num(stats.get("achieved_tflops")))
    if comp:
        ax.axvline(flops / comp, color="gray", ls=":", lw=1, label="intensity of the compulsory bytes")
    ax.legend(fontsize=7, loc="lower right")
    page.figure(fig, "roofline", "The run on the roofline: useful FLOPs per HBM byte moved, achieved TFLOP/s; "
                "roofline ratio %s (simulated time / lower bound)" % rp.fmt_num(stats.get("roofline_ratio")))


def source_lines(page, stats):
    lines = (stats.get("source_lines") or [])[:15]
    if not lines:
        page.p("No source lines.", "note")
        return
    fig, ax = plt.subplots(figsize=(7.5, 0.3 * len(lines) + 1.0))
    ax.barh(range(len(lines)), [l["busy_ns"] / 1e3 for l in lines],
            color=["C%d" % (["PE", "DVE", "ACT", "POOL", "SP"].index(l["engine"]) if l["engine"] in
                            ["PE", "DVE", "ACT", "POOL", "SP"] else 7) for l in lines])
    ax.set_yticks(range(len(lines)))
    ax.set_yticklabels(["%s (%s)" % (l["source"].replace("../", ""), l["engine"]) for l in lines], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("busy time (us, both cores)")
    page.figure(fig, "source_lines", "The busiest kernel source lines by engine busy time")
    page.table(["source", "engine", "instructions", "busy ns", "% of engine", "semaphore wait ns"],
               [[l["source"], l["engine"], l["instructions"], rp.fmt_num(l["busy_ns"]),
                 rp.fmt_num(l["engine_busy_percent"]), rp.fmt_num(l["semaphore_wait_ns"])] for l in lines],
               left={0, 1})


def numerics(page, stats):
    num = stats.get("numerics")
    if not num:
        page.p("No numerics: %s" % rp.esc(stats.get("numerics_note", "")), "note")
        return
    keys = []
    for out in num.values():
        for k in out:
            if k not in keys and k not in ("notes", "failures"):
                keys.append(k)
    page.table(["output"] + keys,
               [[name] + [rp.fmt_num(o.get(k)) if not isinstance(o.get(k), str) else o.get(k) for k in keys]
                for name, o in sorted(num.items())], left={0})
    for name, o in sorted(num.items()):
        for n in (o.get("failures") or []) + (o.get("notes") or []):
            page.p("%s: %s" % (rp.esc(name), rp.esc(n)), "note")


def main():
    if len(sys.argv) != 3:
        print("usage: run_report.py STATS.json OUT.html", file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        stats = json.load(f)
    title = stats.get("workload") or stats.get("program") or os.path.basename(os.path.dirname(sys.argv[1]))
    page = rp.Page("trnsim run: %s" % title)
    head = [("kernel", stats.get("kernel", "")), ("hardware", stats.get("hardware", "")),
            ("cores", stats.get("cores", "")), ("simulated time ns", rp.fmt_num(stats.get("total_time_ns"))),
            ("roofline lower bound ns", rp.fmt_num(stats.get("roofline_lower_bound_ns"))),
            ("roofline ratio", rp.fmt_num(stats.get("roofline_ratio"))),
            ("achieved TFLOP/s", rp.fmt_num(stats.get("achieved_tflops"))),
            ("peak TFLOP/s", "%s (%s)" % (rp.fmt_num(stats.get("peak_tflops")), stats.get("peak_dtype", ""))),
            ("MFU %", rp.fmt_num(stats.get("mfu_percent"))), ("HBM bytes", rp.fmt_num(stats.get("hbm_bytes"))),
            ("HBM GB/s used", rp.fmt_num(stats.get("hbm_GBps"))),
            ("SBUF peak B/partition", rp.fmt_num((stats.get("summary") or {}).get("sbuf_peak_usage_bytes_per_partition"))),
            ("PSUM peak B/partition", rp.fmt_num((stats.get("summary") or {}).get("psum_peak_usage_bytes_per_partition"))),
            ("instructions", rp.fmt_num(stats.get("instructions"))), ("host s", rp.fmt_num(host_seconds(sys.argv[1], stats)))]
    page.table(["figure", "value"], head, left={0}, sortable=False)
    if stats.get("params"):
        page.p("Parameters: <code>%s</code>" % rp.esc(json.dumps(stats["params"], separators=(",", ":"))), "note")
    page.h(2, "Engine time per core")
    engine_bars(page, stats)
    page.h(2, "Critical path")
    critical_path(page, stats)
    page.h(2, "Roofline")
    roofline(page, stats)
    page.h(2, "Busiest source lines")
    source_lines(page, stats)
    page.h(2, "Numerics")
    numerics(page, stats)
    if stats.get("phases"):
        page.h(2, "Phases")
        page.table(["phase", "start ns", "end ns", "span ns", "instructions", "DMA bytes"],
                   [[n, rp.fmt_num(p.get("start_ns")), rp.fmt_num(p.get("end_ns")), rp.fmt_num(p.get("span_ns")),
                     p.get("instructions", ""), rp.fmt_num(p.get("dma_bytes"))] for n, p in stats["phases"].items()],
                   left={0})
    rp.write_atomic(sys.argv[2], page.html())
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (KeyError, AttributeError, TypeError, ValueError, IndexError) as e:
        # A stats.json edited by hand or from another tool: say which key, not a traceback.
        what = ("key %s is missing" % e) if isinstance(e, KeyError) else "%s" % e
        print("run_report.py: the stats cannot be drawn: %s" % what, file=sys.stderr)
        sys.exit(1)
