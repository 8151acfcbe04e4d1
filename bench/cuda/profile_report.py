"""Summary of the Nsight Compute reports bench/cuda/profile_h200.sh writes (one per method): per
kernel its time, DRAM and SM throughput, occupancy, issue rate, cycles per issued instruction,
and the stall the report's rules name first. Writes OUT.json (every metric parsed, per method) and
OUT.md (the table).

    python3 bench/cuda/profile_report.py --dir DIR --batch B --seq S --out OUT --command CMD METHOD..."""
import argparse
import datetime
import json
import pathlib
import re

from gpu_name import gpu_name

# "    Metric Name      Unit      Value" rows of ncu's text sections.
ROW = re.compile(r"^\s+(?P<name>[A-Za-z#][\w .%/()#\-]*?)\s{2,}(?:(?P<unit>[A-Za-z/%]\S*)\s+)?"
                 r"(?P<value>-?[\d,]+(?:\.\d+)?)\s*$")
STALL = "smsp__average_warps_issue_stalled_"
TIME_UNITS = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}
RATE_UNITS = {"Gbyte/s": 1e-3, "Tbyte/s": 1.0, "Gbyte/second": 1e-3, "Tbyte/second": 1.0}


def parse(text: str) -> dict:
    """Every metric row (first occurrence of each name and unit), and the two largest stall
    reasons in warps stalled per issued instruction."""
    metrics = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            metrics.setdefault(f"{m['name'].strip()} [{m['unit'] or ''}]", float(m["value"].replace(",", "")))
    stalls = sorted(((v, k.split(STALL)[1].split("_per_issue")[0]) for k, v in metrics.items() if STALL in k),
                    reverse=True)
    return {"metrics": metrics, "stall": ", ".join(f"{name} {v:.2f}" for v, name in stalls[:2]) or None}


def pick(metrics: dict, name: str, units: dict) -> float | None:
    """Metric `name` in the unit of `units` whose factor is 1, from whichever unit ncu printed."""
    for unit, factor in units.items():
        if f"{name} [{unit}]" in metrics:
            return metrics[f"{name} [{unit}]"] * factor
    return None


def summary(parsed: dict) -> dict:
    m = parsed["metrics"]
    pct = {"%": 1.0}
    return {
        "duration_us": pick(m, "Duration", TIME_UNITS),
        "dram_tb_s": pick(m, "Memory Throughput", RATE_UNITS) or pick(m, "DRAM Bandwidth", RATE_UNITS),
        "dram_pct": pick(m, "DRAM Throughput", pct),
        "sm_pct": pick(m, "Compute (SM) Throughput", pct),
        "occupancy_pct": pick(m, "Achieved Occupancy", pct),
        "theoretical_occupancy_pct": pick(m, "Theoretical Occupancy", pct),
        "registers": pick(m, "Registers Per Thread", {"register/thread": 1.0}),
        "block_limits": {k: pick(m, f"Block Limit {k}", {"block": 1.0}) for k in ("Registers", "Shared Mem")},
        "issued_ipc": pick(m, "Issued Ipc Active", {"inst/cycle": 1.0}),
        "cycles_per_issue": pick(m, "Warp Cycles Per Issued Instruction", {"cycle": 1.0}),
        "no_eligible_pct": pick(m, "No Eligible", pct),
        "stall": parsed["stall"],
    }


def fmt(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--command", required=True)
    ap.add_argument("methods", nargs="+")
    a = ap.parse_args()
    rows = {}
    for method in a.methods:
        path = pathlib.Path(a.dir) / f"profile-{method}-{a.batch}-{a.seq}.txt"
        parsed = parse(path.read_text()) if path.exists() else {"metrics": {}, "stall": None}
        rows[method] = {**summary(parsed), "metrics": parsed["metrics"]}
    meta = {"command": a.command, "gpu": gpu_name(), "date": datetime.date.today().isoformat(),
            "batch": a.batch, "seq": a.seq}
    out = pathlib.Path(a.out)
    out.with_suffix(".json").write_text(json.dumps({**meta, "kernels": rows}, indent=1) + "\n")
    lines = [f"# Nsight Compute: the decode-attention kernels at batch {a.batch}, {a.seq:,} tokens", "",
             f"`{a.command}`, {meta['gpu']}, {meta['date']}. One timed launch of each method's split kernel "
             "(`veloxquant_cuda_bench`, 32 query and 8 KV heads of 128) under `ncu` (its own clocks, so "
             "times run longer than bench/results/cuda_decode.md's). DRAM: achieved bandwidth and its "
             "share of peak; SM: the busiest pipeline's share; blocks per SM the registers and the shared "
             "memory allow; stalls: the two largest, in warps stalled per issued instruction.",
             "", "| method | time (µs) | DRAM (TB/s) | DRAM % | SM % | occupancy % (theoretical) | "
             "registers | blocks/SM by registers, smem | issued IPC | cycles per issue | no eligible % | "
             "largest stalls |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for method, r in rows.items():
        lines.append(f"| {method} | {fmt(r['duration_us'], '.1f')} | {fmt(r['dram_tb_s'], '.2f')} | "
                     f"{fmt(r['dram_pct'], '.1f')} | {fmt(r['sm_pct'], '.1f')} | "
                     f"{fmt(r['occupancy_pct'], '.1f')} ({fmt(r['theoretical_occupancy_pct'], '.0f')}) | "
                     f"{fmt(r['registers'], '.0f')} | {fmt(r['block_limits']['Registers'], '.0f')}, "
                     f"{fmt(r['block_limits']['Shared Mem'], '.0f')} | {fmt(r['issued_ipc'], '.2f')} | "
                     f"{fmt(r['cycles_per_issue'], '.1f')} | {fmt(r['no_eligible_pct'], '.1f')} | "
                     f"{r['stall'] or '-'} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
