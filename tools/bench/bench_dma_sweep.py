#!/usr/bin/env python3
"""DMA sweep: the simulated throughput of one DMA queue over transfer shapes, next to the published curve.

For each shape it writes a one-core program (docs/program-format.md) whose SP issues the same DMA `count`
times on one queue (precomputed descriptors, dge_mode none) and one whose SP issues it once, runs both with
`trnsim run --no-numerics`, and takes the steady-state time of one transfer as their difference over
count - 1 (the fixed costs, trigger, setup and completion, overlap in the queue and cancel). Throughput =
bytes / that time, and the share of the peak of the engines the transfer spans (ceil(rows / 8) x the
engine bandwidth of the hardware config).

Shapes: rows (partitions of the on-chip side) x contiguous bytes per row (4 B to 64 KiB), for
  hbm->sbuf  a row slice of an HBM tensor into a tile (each row one contiguous run)
  sbuf->hbm  the reverse
  sbuf->sbuf tile to tile
  transposing the tile is read from HBM through a transposed access pattern (element (p, f) at
             f x rows + p): the model costs it as its rows (element size is not modelled, docs/timing.md)
  dma_transpose: the hardware DMA transpose HBM -> SBUF of a [rows, cols] BF16 block (rows <= 128 = the
             tile's free size, cols = the tile's partitions), where the shape allows it
With dma.queue_sets (configs/hw/*.json) the transfers of one queue pipeline (sim/timing/dma_queue_policy.h):
the steady state is then how long a transfer holds its queue (its bytes, or its descriptors x
dma.descriptor_ns), not its own latency. The 128-row HBM -> SBUF column is therefore also run one transfer at a
time (the same programs with dma.queue_sets=false, where a queue moves one transfer at a time: the steady state
is one transfer's packet latency) and both are printed against the published curve.
The published curve (NKI DMA overview, "DMA Throughput varying Bytes per Partition for p_dim = 128",
aws-neuron-sdk nki/get-started/about/nki-dma-overview.rst, figure nki-dma-intro-1) has no absolute axis; its
points are printed as the share of its 32 KiB point, read off the figure, beside the simulated share of the
simulated 32 KiB point (docs/timing.md).

  tools/bench/bench_dma_sweep.py [--trnsim build/trnsim] [--hardware trn2] [--count 9] [--json out.json]
                                 [--set dma.packet_ns=80 ...]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Read off the published figure (pixels of the 1200 x 900 image: y of each point against the axis at y 700
# and the 32 KiB point at y 283): throughput relative to the 32 KiB point.
PUBLISHED = {32: 0.014, 64: 0.026, 128: 0.050, 256: 0.103, 512: 0.209, 1024: 0.424, 2048: 0.813,
             4096: 0.966, 8192: 0.983, 16384: 0.990, 32768: 1.0}

ROWS = [1, 8, 32, 128]
SETS = []  # --set overrides of hardware parameters, passed to every run
BYTES = [4, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536]


def hw_engine_bandwidth(hardware):
    path = hardware if hardware.endswith(".json") else os.path.join(ROOT, "configs", "hw", hardware + ".json")
    with open(path) as f:
        d = json.load(f)
    return d["dma"]["engine_bandwidth_GBps"]["value"], d["dma"]["partitions_per_engine"]["value"], \
        d["dma"]["engines_per_core"]["value"], d.get("generation", "trn2")


def program(kind, rows, nbytes, count, generation):
    """One core, SP issues `count` DMAs of the shape on queue 0."""
    dt, esize = ("bfloat16", 2) if kind in ("transposing", "dma_transpose") else ("uint8", 1)
    elems = nbytes // esize
    tensors = [{"name": "h", "dtype": dt, "shape": [rows, elems]}]
    sb = {"mem": "sbuf", "partition": [0, rows], "dtype": dt, "pattern": [[1, elems]]}
    sb2 = {"mem": "sbuf", "partition": [0, rows], "offset": elems * esize, "dtype": dt, "pattern": [[1, elems]]}
    hbm = {"tensor": "h", "dtype": dt, "pattern": [[elems, rows], [1, elems]]}
    op = "dma_copy"
    if kind == "hbm->sbuf":
        dst, src = sb, hbm
    elif kind == "sbuf->hbm":
        dst, src = hbm, sb
    elif kind == "sbuf->sbuf":
        dst, src = sb2, sb
    elif kind == "transposing":  # tile [rows, elems] read from HBM [elems, rows] transposed
        tensors = [{"name": "h", "dtype": dt, "shape": [elems, rows]}]
        dst, src = sb, {"tensor": "h", "dtype": dt, "pattern": [[1, rows], [rows, elems]]}
    else:  # dma_transpose: HBM [elems, rows] -> SBUF [rows, elems]
        tensors = [{"name": "h", "dtype": dt, "shape": [elems, rows]}]
        dst, src = sb, {"tensor": "h", "dtype": dt, "pattern": [[rows, elems], [1, rows]]}
        op = "dma_transpose"
    insts = [{"op": op, "dst": dst, "src": src, "queue": 0} for _ in range(count)]
    return {"generation": generation, "num_cores": 1, "tensors": tensors, "cores": [{"SP": insts}]}


def run(trnsim, prog, hardware, tmp, tag, extra=()):
    p = os.path.join(tmp, tag + ".json")
    with open(p, "w") as f:
        json.dump(prog, f)
    out = os.path.join(tmp, tag)
    cmd = [trnsim, "run", p, "--no-numerics", "--out", out, "--hw", hardware] + \
        [x for s in list(SETS) + list(extra) for x in ("--set", s)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
    with open(os.path.join(out, "stats.json")) as f:
        return float(json.load(f)["total_time_ns"]), None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trnsim", default=os.path.join(ROOT, "build", "trnsim"))
    ap.add_argument("--hardware", default="trn2", help="hardware config name or path (default trn2)")
    ap.add_argument("--count", type=int, default=9, help="DMAs in the long program (default 9)")
    ap.add_argument("--json", help="also write the sweep as JSON")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="PATH=VALUE",
                    help="override a hardware parameter in every run, e.g. dma.packet_ns=80")
    a = ap.parse_args()
    SETS.extend(a.sets)
    bw, ppe, nengines, gen = hw_engine_bandwidth(a.hardware)
    hardware = a.hardware if a.hardware.endswith(".json") else os.path.join(ROOT, "configs", "hw",
                                                                               a.hardware + ".json")
    rows_out = []
    with tempfile.TemporaryDirectory(prefix="trnsim-dma-sweep-") as tmp:
        for kind in ("hbm->sbuf", "sbuf->hbm", "sbuf->sbuf", "transposing", "dma_transpose"):
            for rows in ROWS:
                for nbytes in BYTES:
                    esize = 2 if kind in ("transposing", "dma_transpose") else 1
                    if nbytes < esize:
                        continue
                    if kind == "dma_transpose" and (rows > 128 or nbytes // esize > 128):
                        continue  # the tile's partitions are the HBM block's columns: at most 128
                    if kind in ("sbuf->sbuf",) and 2 * nbytes > 200 * 1024:
                        continue
                    tag = f"{kind.replace('>', '').replace('-', '_')}_{rows}_{nbytes}"
                    t1, err = run(a.trnsim, program(kind, rows, nbytes, 1, gen), hardware, tmp, tag + "_1")
                    tn, err2 = run(a.trnsim, program(kind, rows, nbytes, a.count, gen), hardware, tmp,
                                   tag + "_n")
                    if t1 is None or tn is None:
                        rows_out.append({"kind": kind, "rows": rows, "bytes_per_row": nbytes, "error": err or err2})
                        continue
                    per = (tn - t1) / (a.count - 1)
                    total = rows * nbytes
                    part = rows if kind != "dma_transpose" else nbytes // esize
                    engines = min(nengines, -(-part // ppe))
                    row = {"kind": kind, "rows": rows, "bytes_per_row": nbytes, "transfer_ns": per,
                           "GBps": total / per, "peak_share": total / per / (engines * bw), "single_ns": t1}
                    if kind == "hbm->sbuf" and rows == 128 and nbytes in PUBLISHED:
                        one = ("dma.queue_sets=false",)
                        a1, _ = run(a.trnsim, program(kind, rows, nbytes, 1, gen), hardware, tmp, tag + "_a1", one)
                        an, _ = run(a.trnsim, program(kind, rows, nbytes, a.count, gen), hardware, tmp,
                                    tag + "_an", one)
                        if a1 is not None and an is not None:
                            row["alone_GBps"] = total / ((an - a1) / (a.count - 1))
                    rows_out.append(row)
    print(f"DMA sweep, {os.path.basename(hardware)}: steady-state time of one transfer in one queue "
          f"({a.count} back to back minus one), throughput, share of its engines' peak "
          f"(ceil(rows / {ppe}) x {bw:g} B/ns)")
    for kind in ("hbm->sbuf", "sbuf->hbm", "sbuf->sbuf", "transposing", "dma_transpose"):
        sel = [r for r in rows_out if r["kind"] == kind]
        if not sel:
            continue
        print(f"\n{kind}: GB/s (share of peak) by rows x bytes per row")
        print(f"{'bytes/row':>10}" + "".join(f"{'rows ' + str(r):>18}" for r in ROWS))
        for nbytes in BYTES:
            cells = []
            for rows in ROWS:
                m = [r for r in sel if r["rows"] == rows and r["bytes_per_row"] == nbytes]
                if not m:
                    cells.append(f"{'-':>18}")
                elif "error" in m[0]:
                    cells.append(f"{'error':>18}")
                else:
                    cells.append(f"{m[0]['GBps']:9.2f} ({100 * m[0]['peak_share']:5.1f}%)")
            if any(c.strip() != "-" for c in cells):
                print(f"{nbytes:>10}" + "".join(cells))
    ref = [r for r in rows_out if r["kind"] == "hbm->sbuf" and r["rows"] == 128 and "error" not in r]
    base = next((r["GBps"] for r in ref if r["bytes_per_row"] == 32768), None)
    alone = {r["bytes_per_row"]: r["alone_GBps"] for r in ref if "alone_GBps" in r}
    if base and alone.get(32768):
        print("\nhbm->sbuf, 128 rows, against the published curve (throughput / its 32 KiB point): back to back "
              "in one queue, and one transfer at a time (dma.queue_sets=false: a transfer's own latency)")
        print(f"{'bytes/row':>10}{'published':>11}{'queue':>9}{'diff':>8}{'alone':>9}{'diff':>8}")
        for nbytes, pub in PUBLISHED.items():
            m = [r for r in ref if r["bytes_per_row"] == nbytes]
            if m and nbytes in alone:
                s = m[0]["GBps"] / base
                s1 = alone[nbytes] / alone[32768]
                print(f"{nbytes:>10}{pub:>11.3f}{s:>9.3f}{s - pub:>+8.3f}{s1:>9.3f}{s1 - pub:>+8.3f}")
    errors = [r for r in rows_out if "error" in r]
    for r in errors:
        print(f"error: {r['kind']} {r['rows']} x {r['bytes_per_row']} B: {r['error']}", file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"hardware": hardware, "count": a.count, "rows": rows_out, "published": PUBLISHED}, f,
                      indent=2)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
