"""The HTML report of a sweep (trnsim sweep / tune / sweep collect run it): DIR/report.html, one
self-contained page, and each plot as DIR/plots/<name>.svg and .png.

usage: sweep_report.py DIR      (DIR holds plan.json and results.jsonl)

Plots: the objective against each axis (every point, the best per value joined), time against the roofline
(achieved TFLOP/s against arithmetic intensity under the compute and HBM roofs, and simulated time against
the roofline lower bound), the Pareto front of time against SBUF use; tables of the best points (with the
--set assignments that reproduce them) and of the points that were invalid or failed."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_page as rp  # noqa: E402  (exits 3 without matplotlib)
from report_page import plt  # noqa: E402


def load(d):
    with open(os.path.join(d, "plan.json")) as f:
        plan = json.load(f)
    recs = []
    with open(os.path.join(d, "results.jsonl")) as f:
        for line in f:
            if line.strip():
                recs.append(json.loads(line))
    return plan, recs


def axis_plot(page, plan, ok, column, objective):
    values = []
    for r in ok:
        v = rp.fmt_value(r.get(column))
        if v not in values:
            values.append(v)
    # The sweep's order of the axis values where there is one.
    for a in plan.get("axes", []):
        if a["name"] == column:
            order = []
            for p in plan["points"]:
                v = rp.fmt_value(p["values"].get(column))
                if v not in order:
                    order.append(v)
            values = [v for v in order if v in values] + [v for v in values if v not in order]
    pos = {v: i for i, v in enumerate(values)}
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    xs, ys = [], []
    for i, r in enumerate(ok):
        x = pos[rp.fmt_value(r.get(column))]
        xs.append(x + ((i * 0.618) % 1 - 0.5) * 0.35)  # deterministic jitter
        ys.append(r[objective])
    ax.scatter(xs, ys, s=10, alpha=0.55, color="C0", label="points")
    best = {}
    for r in ok:
        v = rp.fmt_value(r.get(column))
        if v not in best or better(r[objective], best[v], plan):
            best[v] = r[objective]
    bx = sorted(pos[v] for v in best)
    ax.plot(bx, [best[values[x]] for x in bx], "o-", color="C3", ms=5, label="best per value")
    ax.set_xticks(range(len(values)))
    ax.set_xticklabels([v if len(v) < 18 else v[:16] + ".." for v in values], rotation=30 if len(values) > 6 else 0)
    ax.set_xlabel(column)
    ax.set_ylabel(label(objective))
    ax.legend(loc="best", fontsize=7)
    safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in column)
    page.figure(fig, "axis_" + safe, "%s against %s: every point (jittered), the best per value joined" % (objective, column))


def better(a, b, plan):
    return a > b if plan.get("maximize") else a < b


def label(col):
    return {"total_time_ns": "simulated time (ns)", "mfu_percent": "MFU (%)"}.get(col, col)


def pareto(points):
    """The points not beaten on both x and y (lower is better on both)."""
    front, best_y = [], float("inf")
    for x, y, r in sorted(points, key=lambda t: (t[0], t[1])):
        if y < best_y:
            front.append((x, y, r))
            best_y = y
    return front


def main():
    if len(sys.argv) not in (2, 3):
        print("usage: sweep_report.py DIR [OUT_DIR]  (OUT_DIR: where report.html and plots/ go, else DIR)",
              file=sys.stderr)
        return 2
    d = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) == 3 else d
    plan, recs = load(d)
    objective = plan.get("objective", "total_time_ns")
    columns = plan.get("columns", [])
    ok = [r for r in recs if r.get("status") == "ok" and isinstance(r.get(objective), (int, float))]
    page = rp.Page("trnsim sweep: %s" % plan.get("name", ""), os.path.join(out, "plots"))
    if plan.get("description"):
        page.p(rp.esc(plan["description"]), "note")
    counts = {}
    for r in recs:
        counts[r.get("status")] = counts.get(r.get("status"), 0) + 1
    page.p(
        "%d points: %s. Base workload <code>%s</code>; objective <b>%s</b> (%s)."
        % (
            len(recs),
            ", ".join("%d %s" % (n, s) for s, n in sorted(counts.items())),
            rp.esc(plan.get("workload", "")),
            rp.esc(objective),
            "highest wins" if plan.get("maximize") else "lowest wins",
        )
    )
    if not ok:
        page.p("No point ran successfully: nothing to plot.", "note")
    else:
        ranked = sorted(ok, key=lambda r: r[objective], reverse=bool(plan.get("maximize")))
        b = ranked[0]
        page.h(2, "Best points")
        page.p(
            "Best: point %d%s, %s = %s; reproduce it with <code>trnsim run %s %s</code>."
            % (
                b["index"],
                (" (" + rp.esc(b["label"]) + ")") if b.get("label") else "",
                rp.esc(objective),
                rp.fmt_num(b[objective]),
                rp.esc(os.path.relpath(plan["workload"], os.environ.get("TRNSIM_CALLER_DIR", "."))),
                rp.esc(" ".join("--set '%s'" % s for s in plan["points"][b["index"]]["sets"])),
            )
        )
        head = ["#", "label"] + columns + [objective, "roofline ratio", "MFU %", "SBUF peak B/part", "host s"]
        rows = []
        for r in ranked[:15]:
            rows.append(
                [r["index"], r.get("label", "")]
                + [rp.fmt_value(r.get(c)) for c in columns]
                + [rp.fmt_num(r[objective]), rp.fmt_num(r.get("roofline_ratio")), rp.fmt_num(r.get("mfu_percent")),
                   rp.fmt_num(r.get("sbuf_peak_bytes_per_partition")), rp.fmt_num(r.get("host_seconds"))]
            )
        page.table(head, rows, left=set(range(1, 2 + len(columns))))

        page.h(2, "%s against each axis" % objective)
        for c in columns:
            axis_plot(page, plan, ok, c, objective)

        page.h(2, "Time against the roofline")
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        pts = [r for r in ok if r.get("hbm_bytes") and r.get("useful_flops") and r.get("achieved_tflops")]
        if pts:
            xs = [r["useful_flops"] / r["hbm_bytes"] for r in pts]
            ys = [r["achieved_tflops"] for r in pts]
            rp.roofline_axes(ax, [r["peak_tflops"] for r in pts], [r["hbm_bandwidth_GBps"] for r in pts],
                             min(xs) / 4, max(xs) * 4)
            ax.scatter(xs, ys, s=12, alpha=0.6, color="C0", label="points", zorder=3)
            bi = pts.index(min(pts, key=lambda r: r["total_time_ns"]))
            ax.scatter([xs[bi]], [ys[bi]], s=60, marker="*", color="C3", label="fastest", zorder=4)
            ax.legend(fontsize=7, loc="lower right")
        page.figure(fig, "roofline", "Roofline: achieved TFLOP/s of useful FLOPs against FLOPs per HBM byte moved, "
                    "under the compute peak and the HBM bandwidth roofs of the points' hardware")
        fig, ax = plt.subplots(figsize=(6.4, 3.4))
        xs = [r["roofline_lower_bound_ns"] for r in ok if r.get("roofline_lower_bound_ns")]
        ys = [r["total_time_ns"] for r in ok if r.get("roofline_lower_bound_ns")]
        ax.scatter(xs, ys, s=12, alpha=0.6, color="C0", label="points")
        if xs:
            lo, hi = min(xs + ys), max(xs + ys)
            ax.plot([lo, hi], [lo, hi], "--", color="gray", lw=1, label="time = roofline bound")
        ax.set_xlabel("roofline lower bound (ns)")
        ax.set_ylabel("simulated time (ns)")
        ax.legend(fontsize=7)
        page.figure(fig, "time_vs_roofline", "Simulated time against the roofline lower bound of each point")

        page.h(2, "Pareto front: time against SBUF use")
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        pts = [(r["sbuf_peak_bytes_per_partition"], r["total_time_ns"], r) for r in ok
               if r.get("sbuf_peak_bytes_per_partition") is not None]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=12, alpha=0.5, color="C0", label="points")
            front = pareto(pts)
            ax.plot([p[0] for p in front], [p[1] for p in front], "o-", color="C3", ms=5, drawstyle="steps-post",
                    label="Pareto front")
            ax.legend(fontsize=7)
            page.figure(fig, "pareto_sbuf", "Simulated time against SBUF peak bytes per partition; the front holds "
                        "the points no other beats on both")
            page.table(["#"] + columns + ["SBUF peak B/part", "time ns"],
                       [[r["index"]] + [rp.fmt_value(r.get(c)) for c in columns] + [rp.fmt_num(x), rp.fmt_num(y)]
                        for x, y, r in front], left=set(range(1, 1 + len(columns))))
        else:
            plt.close(fig)
    bad = [r for r in recs if r.get("status") not in ("ok",)]
    if bad:
        page.h(2, "Points not run or failed (%d)" % len(bad))
        page.table(["#", "status"] + columns + ["reason"],
                   [[r["index"], r["status"]] + [rp.fmt_value(r.get(c)) for c in columns] + [r.get("error", "")]
                    for r in bad[:200]], left=set(range(1, 3 + len(columns))))
        if len(bad) > 200:
            page.p("(the first 200; results.csv has them all)", "note")
    rp.write_atomic(os.path.join(out, "report.html"), page.html())
    return 0


if __name__ == "__main__":
    sys.exit(main())
