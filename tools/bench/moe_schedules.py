"""The MoE layers under both schedules, side by side (issue 25): for each of the ten real layers of
configs/workloads/moe (Qwen3-30B-A3B, Qwen3-235B-A22B, DeepSeek-V3, Mixtral-8x7B, gpt-oss-120b; forward and
backward), `trnsim run W --no-numerics --set params.schedule=S` for S = nki_library (the library-faithful
default) and trnsim_optimized, then one Markdown table: per layer, schedule and kernel phase (the phases the
kernel names in stats.json, plus the whole run) the simulated time (whole run: total_time_ns; a phase: its
span, first start to last end, so phases that overlap add up to more than the run), the engine busy time
(PE / DVE / ACT / POOL, both cores summed, as stats.json's phases.*.busy_ns), and for the whole run where the
critical path spends its time (critical_path.time_ns grouped by engine kind, DMA queues and links; the two
largest, as a share of total_time_ns). A layer the schedule refuses gets one row with the refusal's reason
(nki_library refuses DeepSeek-V3 and gpt-oss-120b: kernels/moe/README.md, expert offsets past 2^24, the
library's own limit); a backward layer refused so runs again on both schedules with its weights pre-quantized
(the kernel's prequantized_weights recipe), which the library addresses exactly.
A script that prints figures, not a test; simulated times are deterministic, host time is not reported.

Usage: python3 tools/bench/moe_schedules.py [BUILD_DIR] [LAYER ...]   (default build; layers as file stems,
       e.g. qwen3_30b_a3b_fwd_mxfp8; default all ten)
"""

import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MOE = os.path.join(ROOT, "configs", "workloads", "moe")
MODELS = ["qwen3_30b_a3b", "qwen3_235b_a22b", "deepseek_v3", "mixtral_8x7b", "gpt_oss_120b"]
LAYERS = [f"{m}_{d}_mxfp8" for m in MODELS for d in ("fwd", "bwd")]
SCHEDULES = ["nki_library", "trnsim_optimized"]
ENGINES = ["PE", "DVE", "ACT", "POOL"]


def prequantized(layer, scratch):
    """The backward layer with its weights pre-quantized (the kernel's prequantized_weights recipe, packed
    scales as the library's default use_scale_packing): a workload file in `scratch`. nki-library moves a
    pre-quantized weight by a uint32 scalar_offset counting x4 rows (_set_expert_offset_on_td), exact at
    every shipped size, so the library's stream runs the layers whose BF16 weights it cannot address."""
    with open(os.path.join(MOE, layer + ".json")) as f:
        w = json.load(f)
    p = w["params"]
    E, H, I = p["E"], p["H"], p["I_TP"]
    packed = lambda k: -(-k // 2048) * 128
    p["gate_up_weight_scales"] = [E, packed(2 * I), H]
    p["down_weight_scales"] = [E, packed(H), I]
    low, high = w["inputs"]["gate_up_proj_weight"]["low"], w["inputs"]["gate_up_proj_weight"]["high"]
    del w["inputs"]["gate_up_proj_weight"], w["inputs"]["down_proj_weight"]
    w["inputs"]["weights"] = {"recipe": "prequantized_weights", "gate_up_seed": 2, "down_seed": 3,
                              "low": low, "high": high}
    path = os.path.join(scratch, layer + "_prequantized.json")
    with open(path, "w") as f:
        json.dump(w, f)
    return path


def run(trnsim, layer, schedule, out, workload=None):
    """stats.json of one run as a dict, or the refusal's first line as a string."""
    cmd = [trnsim, "run", workload or os.path.join(MOE, layer + ".json"), "--no-numerics", "--set",
           "params.schedule=" + schedule, "--out", out]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        lines = [ln for ln in p.stderr.splitlines() if "error" in ln] or p.stderr.splitlines() or ["?"]
        return lines[0]
    with open(os.path.join(out, "stats.json")) as f:
        return json.load(f)


def critical_kinds(stats):
    """The two largest groups of the critical path's time ("DVE 41 %"), engines over both cores."""
    groups = {}
    for name, ns in stats["critical_path"].get("time_ns", {}).items():
        if name.startswith("link: "):
            key = name[len("link: "):]
        else:
            key = re.sub(r"^core\d+ ", "", name)
            key = "DMA queues" if key.startswith("DMA q") else key
        groups[key] = groups.get(key, 0.0) + ns
    total = stats["total_time_ns"]
    top = sorted(groups.items(), key=lambda kv: -kv[1])[:2]
    return ", ".join(f"{k} {100 * v / total:.0f} %" for k, v in top)


def ms(ns):
    return f"{ns / 1e6:.2f}"


def busy(busy_ns):
    return " / ".join(ms(busy_ns.get(e, 0.0)) for e in ENGINES)


def rows(layer, schedule, stats):
    if isinstance(stats, str):
        reason = stats.split("params: ", 1)[-1]
        rows_past = re.search(r"DGT loads of (\w+) index .*? = ([\d]+), past 2\^24", reason)
        if rows_past:  # the expert-offset limit (kernels/moe/README.md)
            reason = (f"{rows_past.group(1)}'s DGT row indices reach {int(rows_past.group(2)):,}, past 2^24: "
                      "the library's own limit, FP32 expert offsets (nki-library common_dataclasses.py "
                      "TileLocation.set_vector_offset; kernels/moe/README.md)")
        elif len(reason) > 160:
            reason = reason[:157] + "..."
        return [f"| {layer} | {schedule} | refused | | | {reason} |"]
    whole = {e: 0.0 for e in ENGINES}
    for core in stats["engines"].values():
        for e in ENGINES:
            whole[e] += core.get(e, {}).get("busy_ns", 0.0)
    out = [f"| {layer} | {schedule} | **run** | {ms(stats['total_time_ns'])} | {busy(whole)} | "
           f"critical path: {critical_kinds(stats)}; {stats['instructions']:,} instructions |"]
    for name, ph in sorted(stats.get("phases", {}).items(), key=lambda kv: kv[1]["start_ns"]):
        out.append(f"| | | {name} | {ms(ph['span_ns'])} | {busy(ph['busy_ns'])} | "
                   f"{ph['instructions']:,} instructions |")
    return out


def main():
    args = sys.argv[1:]
    build = args.pop(0) if args and not args[0].endswith("_mxfp8") else "build"
    trnsim = os.path.join(build, "trnsim")
    if not os.access(trnsim, os.X_OK):
        print(f"moe_schedules: {trnsim} not found; build with: cmake --build {build} --target trnsim",
              file=sys.stderr)
        return 1
    layers = args or LAYERS
    print("| layer | schedule | phase | simulated ms (phase: span) | PE / DVE / ACT / POOL busy ms, both cores "
          "| notes |")
    print("|---|---|---|---:|---|---|")
    with tempfile.TemporaryDirectory(prefix="moe_schedules_") as scratch:
        for layer in layers:
            refused = False
            for schedule in SCHEDULES:
                out = os.path.join(scratch, f"{layer}_{schedule}")
                stats = run(trnsim, layer, schedule, out)
                refused |= isinstance(stats, str)
                for line in rows(layer, schedule, stats):
                    print(line, flush=True)
            if refused and "_bwd_" in layer:  # both schedules on pre-quantized weights, side by side
                w = prequantized(layer, scratch)
                for schedule in SCHEDULES:
                    out = os.path.join(scratch, f"{layer}_{schedule}_prequantized")
                    for line in rows(layer, schedule + ", pre-quantized weights", run(trnsim, layer, schedule,
                                                                                        out, w)):
                        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
