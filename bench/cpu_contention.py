#!/usr/bin/env python3
"""`veloxquant generate` next to 0, 1 and 2 busy processes, at each thread count and the default.

A busy process is a pure-CPU loop (another build or job on a user's machine). For every load,
each thread setting runs `--reps` times, interleaved so that drifts in the machine hit all
settings alike, and the median tokens/s is reported with the ratio of the best setting to the
default one (the bound: at most 1.5x). `--compare NAME=COMMAND` adds another CLI to the same run:
a build of an earlier commit, or this one under other settings ("env VELOXQUANT_SPIN_US=0
build/veloxquant").

    python3 bench/cpu_contention.py [--build build] [--model models/vq-hd128.gguf]

Writes bench/results/cpu_contention.json and .md.
"""
import argparse
import datetime
import json
import multiprocessing
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from cpu_name import cpu_name

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "The old house on the hill had been empty for years, until"


def spin(stop_at):
    x = 0
    while time.time() < stop_at:
        x += 1


def generate(command, model, kv, tokens, threads):
    cmd = [*command, "generate", "-m", model, "-p", PROMPT, "-n", str(tokens), "--temp", "0",
           "--ignore-eos", "--kv", kv, "--json"]
    if threads is not None:
        cmd += ["-t", str(threads)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    return j["generated_tokens_per_s"], j["threads"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="build folder holding the veloxquant CLI")
    ap.add_argument("--model", default=str(ROOT / "models" / "vq-hd128.gguf"))
    ap.add_argument("--kv", default="fp16")
    ap.add_argument("--tokens", type=int, default=200, help="tokens generated per run")
    ap.add_argument("--reps", type=int, default=5, help="runs per setting and load")
    ap.add_argument("--loads", default="0,1,2", help="busy processes, comma-separated")
    ap.add_argument("--compare", action="append", default=[], metavar="NAME=COMMAND",
                    help="another CLI (a command line) to run beside this build's")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "cpu_contention"))
    args = ap.parse_args()

    builds = [("this build", [str(Path(args.build) / "veloxquant")])]
    for c in args.compare:
        name, _, command = c.partition("=")
        if not name or not command:
            sys.exit(f"--compare '{c}': expected NAME=COMMAND")
        builds.append((name, shlex.split(command)))
    for name, command in builds:
        binary = command[-1]
        if not (os.access(binary, os.X_OK) or shutil.which(binary)):
            sys.exit(f"{name}: '{binary}' is not an executable veloxquant CLI (build it first)")
    cores = len(os.sched_getaffinity(0))
    settings = [None] + list(range(1, cores + 1))  # None: the default (no -t)
    loads = [int(x) for x in args.loads.split(",")]

    rows = []
    for load in loads:
        # Each busy process lives for the whole load's runs; warm-up first so it is running.
        stop_at = time.time() + 24 * 3600
        busy = [multiprocessing.Process(target=spin, args=(stop_at,), daemon=True) for _ in range(load)]
        for p in busy:
            p.start()
        time.sleep(0.5)
        results = {(b, s): [] for b, _ in builds for s in settings}
        used = {}
        try:
            for rep in range(args.reps):
                for b, binary in builds:
                    for s in settings:
                        tps, threads = generate(binary, args.model, args.kv, args.tokens, s)
                        results[(b, s)].append(tps)
                        used[(b, s)] = threads
                        print(f"load {load} {b} threads {s or 'default'} rep {rep}: {tps:.1f} tok/s",
                              file=sys.stderr, flush=True)
        finally:
            for p in busy:
                p.terminate()
                p.join()
        for b, _ in builds:
            med = {s: statistics.median(results[(b, s)]) for s in settings}
            best = max((s for s in settings if s is not None), key=lambda s: med[s])
            rows.append({
                "build": b, "busy_processes": load,
                "default_threads": used[(b, None)],
                "tokens_per_s": {("default" if s is None else str(s)): med[s] for s in settings},
                "runs": {("default" if s is None else str(s)): results[(b, s)] for s in settings},
                "best_threads": best,
                "best_over_default": med[best] / med[None],
            })

    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = shlex.join(["python3", "bench/cpu_contention.py", *sys.argv[1:]])
    machine = f"{cpu_name()}, {cores} CPUs, {os.cpu_count()} online"
    report = {"command": command.strip(), "date": date, "machine": machine, "model": args.model,
              "kv": args.kv, "tokens": args.tokens, "reps": args.reps, "rows": rows}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")

    heads = ["default"] + [str(s) for s in settings[1:]]
    md = ["# `generate` next to busy processes", "",
          f"- Command: `{report['command']}`",
          f"- Machine: {machine}; date {date}",
          f"- `veloxquant generate -m {Path(args.model).name} --kv {args.kv} -n {args.tokens} --temp 0"
          " --ignore-eos`, medians of"
          f" {args.reps} runs per cell, settings interleaved. A busy process is a pure-CPU Python loop.",
          "- best / default: the best fixed thread count's median over the default's (target: at most 1.5).",
          "",
          "| build | busy processes | " + " | ".join(f"{h} threads tok/s" for h in heads) +
          " | default is | best / default |",
          "| --- | ---: | " + " | ".join("---:" for _ in heads) + " | ---: | ---: |"]
    for r in rows:
        md.append(f"| {r['build']} | {r['busy_processes']} | " +
                  " | ".join(f"{r['tokens_per_s'][h]:.1f}" for h in heads) +
                  f" | {r['default_threads']} | {r['best_over_default']:.2f}x |")
    out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
