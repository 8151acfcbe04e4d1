#!/usr/bin/env python3
"""Batched decode on the CPU: aggregate tokens/s of B sequences in lockstep (SessionOptions::batch)
against one sequence, per KV-cache spec, through build/bench/veloxquant_bench_runtime.

Each (spec, batch) runs `--gen` single-token steps of every sequence after `--depth` tokens are in
each sequence's caches, `--reps` timed repetitions per call; the calls are interleaved in a random
order fixed by the seed and the whole matrix is repeated `--rounds` times, so a busy moment of the
machine falls on all of them alike. Medians over every repetition of every round. Writes
bench/results/NAME.json (every raw number, the commands, machine and date) and NAME.md.

    python3 bench/cpu_batch.py [--model models/vq-hd128.gguf] [--specs "fp16 kivi"]
        [--batches 1,2,4,8] [--depth 512] [--gen 64] [--threads 2] [--reps 3] [--rounds 3]
        [--name cpu_batch]
"""
import argparse
import datetime
import json
import os
import random
import statistics
import subprocess

from perplexity_report import ROOT, cpu_model

BENCH = os.path.join(ROOT, "build", "bench", "veloxquant_bench_runtime")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="models/vq-hd128.gguf")
    p.add_argument("--specs", default="fp16 kivi")
    p.add_argument("--batches", default="1,2,4,8")
    p.add_argument("--depth", type=int, default=512)
    p.add_argument("--gen", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--name", default="cpu_batch")
    a = p.parse_args()
    specs, batches = a.specs.split(), [int(b) for b in a.batches.split(",")]
    cells = [(s, b) for s in specs for b in batches]
    rates = {cell: [] for cell in cells}
    commands = {}
    rng = random.Random(a.seed)
    for _ in range(a.rounds):
        order = cells[:]
        rng.shuffle(order)
        for spec, batch in order:
            cmd = [os.path.relpath(BENCH, ROOT), "-m", a.model, "-p", "0", "-n", str(a.gen),
                   "-d", str(a.depth), "-t", str(a.threads), "-r", str(a.reps), "--kv", spec,
                   "--batch", str(batch)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
            test = next(json.loads(line) for line in out.splitlines() if line.startswith('{"test":"tg'))
            rates[(spec, batch)] += test["tokens_per_s"]
            commands[f"{spec} {batch}"] = " ".join(cmd)
    rows = []
    for spec, batch in cells:
        median = statistics.median(rates[(spec, batch)])
        single = statistics.median(rates[(spec, batches[0])])
        rows.append({"kv": spec, "batch": batch, "tokens_per_s": rates[(spec, batch)],
                     "median_tokens_per_s": median, "vs_first_batch": median / single})
    command = "python3 bench/cpu_batch.py " + " ".join(
        f"--{k} {v}" if " " not in str(v) else f'--{k} "{v}"'
        for k, v in [("model", a.model), ("specs", a.specs), ("batches", a.batches), ("depth", a.depth),
                     ("gen", a.gen), ("threads", a.threads), ("reps", a.reps), ("rounds", a.rounds),
                     ("name", a.name)])
    meta = {"command": command, "machine": f"{cpu_model()}, {os.cpu_count()} cores",
            "date": datetime.date.today().isoformat(), "commands": commands}
    out = os.path.join(ROOT, "bench", "results", a.name)
    with open(out + ".json", "w") as f:
        json.dump({**meta, "rows": rows}, f, indent=2)
    lines = [f"# Batched decode on the CPU: {a.model}", "",
             f"`{command}` — {meta['machine']}, {meta['date']}. {a.gen} single-token steps of every sequence "
             f"after {a.depth} tokens in each, {a.threads} threads; tokens/s count every sequence's tokens "
             f"(median of {a.reps} repetitions x {a.rounds} interleaved rounds).", "",
             f"| kv | sequences | decode tokens/s | vs {batches[0]} |", "| --- | ---: | ---: | ---: |"]
    for r in rows:
        tps, ratio = r["median_tokens_per_s"], r["vs_first_batch"]
        lines.append(f"| `{r['kv']}` | {r['batch']} | {tps:.1f} | {ratio:.2f}x |")
    with open(out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
