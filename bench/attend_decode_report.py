#!/usr/bin/env python3
"""Runs the decode-attention benchmark and records it in bench/results/.

Every method is measured in one run, single-threaded; repetitions of all methods are interleaved
in random order so that drifts of the machine hit every method alike, and the table reports
medians and the speedup of each method over the fp16 cache from the same run.

    python3 bench/attend_decode_report.py [--build build] [--repetitions 9] [--tokens 32768]
        [--spec SPEC ... --name NAME]

With --spec, only fp16 and the given specs run, and the results go to bench/results/NAME.*
(attend_decode.* is the whole registry's run).
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys

from cpu_name import cpu_name


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--repetitions", type=int, default=9)
    ap.add_argument("--tokens", type=int, default=32768)
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--spec", action="append", default=[], help="a spec to time beside fp16 (repeatable)")
    ap.add_argument("--name", default="attend_decode", help="the results' file name, without extension")
    args = ap.parse_args()
    if args.spec and args.name == "attend_decode":
        ap.error("--spec times a subset: give it a --name of its own")

    exe = os.path.join(args.build, "bench", "veloxquant_bench_attend")
    cmd = [exe, f"--tokens={args.tokens}", f"--benchmark_repetitions={args.repetitions}",
           "--benchmark_enable_random_interleaving=true", "--benchmark_min_time=0.2",
           "--benchmark_report_aggregates_only=true", "--benchmark_format=json"]
    cmd += [f"--spec={spec}" for spec in (["fp16"] + args.spec if args.spec else [])]
    print("running:", " ".join(cmd), file=sys.stderr)
    run = subprocess.run(cmd, check=True, capture_output=True, text=True)
    raw = json.loads(run.stdout)

    rows = {}
    for b in raw["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        kind, spec = b["run_name"].split("/", 1)
        r = rows.setdefault(spec, {"spec": spec})
        if kind == "attend":
            r["attend_us"] = b["real_time"]
            r["stored_bytes"] = int(b["bytes"])
        else:
            r["encode_ms_4096_tokens"] = b["real_time"]
            r["encode_tokens_per_s"] = b["tokens_per_s"]
    # The benchmark's own order (fp16, KIVI 2- and 4-bit, then the registry), not the random one.
    attend = sorted((b for b in raw["benchmarks"] if b["run_name"].startswith("attend/")),
                    key=lambda b: b["family_index"])
    rows = {spec: rows[spec] for spec in dict.fromkeys(b["run_name"].split("/", 1)[1] for b in attend)}
    base = rows["fp16"]["attend_us"]
    fp16_bytes = rows["fp16"]["stored_bytes"]
    for r in rows.values():
        r["speedup_vs_fp16"] = base / r["attend_us"]
        r["compression_ratio"] = fp16_bytes / r["stored_bytes"]

    date = datetime.date.today().isoformat()
    machine = f"{cpu_name()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"
    command = "python3 bench/attend_decode_report.py " + " ".join(sys.argv[1:])
    workload = (f"decode attention, 1 query token, 4 query heads on 1 KV head, head_dim 128, "
                f"{args.tokens} cached synthetic tokens, one thread; median of {args.repetitions}")
    os.makedirs(args.out, exist_ok=True)
    result = {"command": command.strip(), "benchmark_command": " ".join(cmd), "date": date,
              "machine": machine, "workload": workload, "results": list(rows.values())}
    with open(os.path.join(args.out, args.name + ".json"), "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    lines = [
        "# Decode attention on the compressed cache vs fp16",
        "",
        f"- command: `{command.strip()}`",
        f"- machine: {machine}",
        f"- date: {date}",
        f"- workload: {workload}",
        "",
        "| spec | stored bytes | compression | attend (us, median) | speedup vs fp16 | encode tokens/s |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows.values():
        lines.append(f"| `{r['spec']}` | {r['stored_bytes']} | {r['compression_ratio']:.2f}x | "
                     f"{r['attend_us']:.0f} | {r['speedup_vs_fp16']:.2f}x | {r['encode_tokens_per_s']:.3g} |")
    with open(os.path.join(args.out, args.name + ".md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
