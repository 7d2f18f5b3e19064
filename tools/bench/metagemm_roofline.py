"""The MetaGEMM calibration rows (configs/workloads/calibration/metagemm_*) against one Trn2 NeuronCore's BF16
peak and against each row's own roofline: runs every row timing-only and prints the simulated time, the
achieved TFLOP/s and its share of the PE peak, and the bounds the row's own schedule sets:
  PE     its FLOPs at the PE peak (stats.json peak_tflops: 128 x 128 MACs at pe.clock_GHz);
  bytes  the bytes its DMAs move (what the schedule reloads, not the compulsory 3 x size^2 x 2 B) at the DMA
         engines' bandwidth (dma.engines_per_core x dma.engine_bandwidth_GBps, below the HBM share);
  issue  the hardware-DGE DMA instructions of its busiest trigger engine, one at a time on its DGE block
         (dma.hwdge_instruction_ns each; SP and ACT have a block each);
the largest of them is the roofline (plus the launch, sync.kernel_launch_ns), and the ratio of the simulated
time to it; SBUF is the peak use against the capacity. The rows' measurements are held out (docs/timing.md).

Usage: python3 tools/bench/metagemm_roofline.py [BUILD]   (default build; prints the wall time of the 20 runs)"""

import glob
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def hw_values(path):
    """Flat {dotted key: value} of a hardware config."""
    out = {}

    def walk(node, pre):
        for k, v in node.items():
            if isinstance(v, dict) and "value" in v:
                out[pre + k] = v["value"]
            elif isinstance(v, dict):
                walk(v, pre + k + ".")

    with open(path) as fh:
        walk(json.load(fh), "")
    return out


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
    trnsim = os.path.join(build, "trnsim")
    rows = sorted(glob.glob(os.path.join(ROOT, "configs", "workloads", "calibration", "metagemm_*.json")),
                  key=lambda p: (("lhsT" in p), int(p.rsplit("_", 1)[1][:-5])))
    print(f"{'row':24} {'order':5} {'K/M/N':>8} {'simulated':>10} {'TFLOP/s':>7} {'peak':>5} "
          f"{'PE us':>8} {'bytes us':>8} {'issue us':>8} {'bound':>5} {'ratio':>5} {'SBUF':>4}")
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        for path in rows:
            name = os.path.basename(path)[:-5]
            out = os.path.join(tmp, name)
            subprocess.run([trnsim, "run", path, "--no-numerics", "--quiet", "--out", out], check=True,
                           stdout=subprocess.DEVNULL)
            with open(os.path.join(out, "stats.json")) as fh:
                s = json.load(fh)
            with open(path) as fh:
                p = json.load(fh)["params"]
            hw = hw_values(s["hardware_config"])
            t_us = s["total_time_ns"] / 1e3
            pe_us = s["useful_flops"] / (s["peak_tflops"] * 1e12) * 1e6
            bw = hw["dma.engines_per_core"] * hw["dma.engine_bandwidth_GBps"]
            bytes_us = s["dma_bytes"] / bw / 1e3
            dmas = {}
            for o in s["opcodes"]:
                if o["opcode"] == "dma_copy":
                    dmas[o["engine"]] = dmas.get(o["engine"], 0) + o["count"]
            issue_us = max(dmas.values(), default=0) * hw["dma.hwdge_instruction_ns"] / 1e3
            bounds = {"PE": pe_us, "bytes": bytes_us, "issue": issue_us}
            which = max(bounds, key=bounds.get)
            roof = bounds[which] + hw["sync.kernel_launch_ns"] / 1e3
            sbuf = s["summary"]["sbuf_peak_usage_bytes_per_partition"] / s["summary"][
                "sbuf_capacity_bytes_per_partition"]
            tiles = f"{p['tiles_per_block_k']}/{p['tiles_per_block_m']}/{p['tiles_per_block_n']}"
            print(f"{name[9:]:24} {p['loop_order']:5} {tiles:>8} {t_us:10.1f} {s['achieved_tflops']:7.1f} "
                  f"{s['achieved_tflops'] / s['peak_tflops']:5.0%} {pe_us:8.1f} {bytes_us:8.1f} {issue_us:8.1f} "
                  f"{which:>5} {t_us / roof:5.2f} {sbuf:4.0%}")
    print(f"(times in us; peak {s['peak_tflops']:.2f} TFLOP/s BF16; DMA engines {bw:.0f} GB/s; "
          f"{hw['dma.hwdge_instruction_ns']} ns per DGE instruction; 20 runs in {time.monotonic() - start:.1f} s wall)")


if __name__ == "__main__":
    main()
