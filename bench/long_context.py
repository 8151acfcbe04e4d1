#!/usr/bin/env python3
"""Long-context decode on the CPU against the machine's memory bandwidth and llama.cpp, in one run.

    .venv/bin/python bench/long_context.py [--contexts 4096 16384 32768] [--threads 2]

1. Builds veloxquant_bench_runtime, veloxquant_bench_memory and veloxquant_make_fixture
   (cmake --build build), and llama-bench when .llamacpp has none
   (bench/llamacpp/build_llama_bench.sh, from PyPI's llama-cpp-python sdist).
2. Writes a random-weight GGUF whose KV cache dominates decode (width 1024, 8 query and 8 KV
   heads of 128, 4 layers, SwiGLU width 256, f16 weights) to build/bench/long_context.gguf.
3. Measures the memory bandwidth before every call: STREAM's triad and a read-only sum, 1 to
   --threads threads, best of 10 each time. The machine is shared, so the yardstick is the
   median of those measurements over the run.
4. At each context: llama-bench (flash attention on, -ctk/-ctv each of --llama-types) and ours
   (each of --specs) decode --gen single-token steps after the cache holds the context, --reps
   times. Ours fills the context once per call (--fill-once) and records the rate of that fill,
   a prefill of the whole context; llama-bench refills it for every repetition. At the longest
   context, every spec of --bandwidth-specs (the 2-4-bit caches with fused attention) runs too.
   Calls go in a random order fixed by --seed. With --rounds K every call runs K times, each round
   in its own order, and each figure is the median over the rounds (a fill is one sample a call).
5. Bytes read per generated token = what the KV cache stores + the weights a token reads (every
   matrix, one row of the token embedding), from the file's tensor table. Effective bandwidth =
   bytes per token x tokens/s, set against the triad at the same thread count.

Writes bench/results/long_context.json (every repetition, commands, machine) and .md.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from runtime_report import load_avg, machine, run_call, write_result  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = dict(width=1024, heads=8, kv_heads=8, head_dim=128, ffn=256, layers=4)
MAIN_SPECS = ["fp16", "kivi:kbits=4,vbits=4", "kivi:kbits=2,vbits=2"]
# Caches of 2 to 4 bits whose keys and values both attend on the codes (no decode first).
BANDWIDTH_SPECS = ["turboquant_mse:bits=4,vbits=4", "turboquant_mse:bits=2,vbits=2",
                   "turboquant_prod:bits=4,vbits=4", "turboquant_rvq", "qjl", "polar", "palu", "rabitq",
                   "kivi_sink", "svdq"]
# llama.cpp's KV types: bytes per element (ggml block size and bytes).
LLAMA_BYTES = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}


def weight_bytes_per_token(path: Path) -> int:
    """Bytes of every weight a decode step reads: all matrices and norms, one embedding row."""
    import gguf  # the .venv's PyPI gguf (tests/python/requirements.txt)

    reader = gguf.GGUFReader(str(path))
    total = 0
    for t in reader.tensors:
        n = int(t.n_bytes)
        if t.name == "token_embd.weight":
            n //= int(t.shape[-1]) if len(t.shape) > 1 else 1  # one row of [vocab, width]
        total += n
    return total


def build(a) -> None:
    targets = ["veloxquant_bench_runtime", "veloxquant_bench_memory", "veloxquant_make_fixture"]
    subprocess.run(["cmake", "--build", "build", "-j", str(os.cpu_count() or 2), "--target", *targets],
                   check=True)
    if not a.llama.exists():
        subprocess.run(["bash", "bench/llamacpp/build_llama_bench.sh"], check=True)
    if not a.model.exists():
        f = FIXTURE
        subprocess.run(["build/tools/dev/veloxquant_make_fixture", "--type", "f16",
                        "--width", str(f["width"]),
                        "--heads", str(f["heads"]), "--kv-heads", str(f["kv_heads"]), "--head-dim",
                        str(f["head_dim"]), "--ffn", str(f["ffn"]), "--layers", str(f["layers"]),
                        "--context", str(max(a.contexts) + 1024), str(a.model)], check=True)


def memory_bandwidth(threads: int) -> list[dict]:
    out = subprocess.run(["build/bench/veloxquant_bench_memory", "-t", str(threads), "-r", "10"],
                         check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def calls_of(a, seed: int) -> list[dict]:
    calls = []
    common = ["-m", str(a.model), "-p", "0", "-n", str(a.gen), "-t", str(a.threads)]
    for ctx in a.contexts:
        for kind in a.llama_types:
            calls.append({"engine": "llama.cpp", "kv": kind, "context": ctx,
                          "cmd": [str(a.llama), *common, "-r", str(a.llama_reps), "-d", str(ctx), "-fa", "1",
                                  "-ctk", kind, "-ctv", kind,
                                  "-o", "jsonl"]})
        specs = a.specs + (a.bandwidth_specs if ctx == max(a.contexts) else [])
        for spec in specs:
            calls.append({"engine": "ours", "kv": spec, "context": ctx,
                          "cmd": ["build/bench/veloxquant_bench_runtime", *common, "-r", str(a.reps),
                                  "-d", str(ctx), "--kv", spec,
                                  "--fill-once", "--tg-warmup", "2"]})
    random.Random(seed).shuffle(calls)
    return calls


def parse(call: dict, stdout: str) -> dict:
    rows = [json.loads(line) for line in stdout.splitlines() if line.strip().startswith("{")]
    if not rows:
        raise ValueError("no JSON line")
    j = rows[-1]
    if call["engine"] == "ours":
        return {"samples_ts": j["tokens_per_s"], "kv_bytes": j["kv_bytes"],
                "fill_tokens_per_s": j["median_depth_tokens_per_s"], "raw": j}
    return {"samples_ts": j["samples_ts"], "raw": j}


def bandwidth(r: dict) -> dict:
    """threads -> median triad and read-only GB/s over every measurement of the run."""
    out = {}
    for t in sorted({m["threads"] for m in r["memory"]}):
        ms = [m for m in r["memory"] if m["threads"] == t]
        out[t] = {k: statistics.median(m[k] for m in ms) for k in ("triad_gb_per_s", "read_gb_per_s")}
        out[t]["range"] = (min(m["triad_gb_per_s"] for m in ms), max(m["triad_gb_per_s"] for m in ms))
        out[t]["n"] = len(ms)
    return out


def summarize(r: dict) -> list[dict]:
    rows = []
    triad = bandwidth(r)[r["settings"]["threads"]]["triad_gb_per_s"]
    f = FIXTURE
    fp16_per_token = f["layers"] * f["kv_heads"] * f["head_dim"] * 2 * 2
    # One row per engine, cache and context: the medians over its calls (one per round).
    groups: dict[tuple, list[dict]] = {}
    for c in r["calls"]:
        groups.setdefault((c["engine"], c["kv"], c["context"]), []).append(c)
    for (engine, kv_name, context), cs in groups.items():
        ok = [c for c in cs if not c.get("error")]
        if not ok:
            rows.append({"engine": engine, "kv": kv_name, "context": context, "error": cs[0]["error"]})
            continue
        c = ok[0]
        ts = statistics.median(s for x in ok for s in x["samples_ts"])
        fills = [x["fill_tokens_per_s"] for x in ok if x.get("fill_tokens_per_s")]
        if c["engine"] == "ours":
            kv = c["kv_bytes"]
        else:
            kv = round(fp16_per_token * c["context"] * LLAMA_BYTES[c["kv"]] / 2)
        per_token = kv + r["weight_bytes_per_token"]
        gbs = per_token * ts / 1e9
        rows.append({"engine": c["engine"], "kv": c["kv"], "context": c["context"], "tokens_per_s": ts,
                     "kv_bytes": kv, "bytes_per_token": per_token, "gb_per_s": gbs,
                     "of_triad": gbs / triad, "calls": len(ok),
                     "fill_tokens_per_s": statistics.median(fills) if fills else None})
    return rows


def find(rows, engine, kv, ctx):
    for x in rows:
        if x["engine"] == engine and x["kv"] == kv and x["context"] == ctx and "error" not in x:
            return x
    return None


def render_md(r: dict) -> str:
    st, m = r["settings"], r["machine"]
    rows = summarize(r)
    rounds = st.get("rounds", 1)
    of_rounds = f", each median over {rounds} rounds of calls" if rounds > 1 else ""
    triad = bandwidth(r)
    started = dt.datetime.fromisoformat(r["started_utc"])
    finished = dt.datetime.fromisoformat(r["finished_utc"])
    f = FIXTURE
    md = [
        "# Long-context decode on the CPU: memory bandwidth and llama.cpp",
        "",
        f"- Command: `{r['regenerate']}`",
        f"- Machine: {m['cpu_model']}, {m['logical_cpus']} logical CPUs, {m.get('mem_total')}, kernel"
        f" {m['kernel']} (shared with other jobs); {st['threads']} threads.",
        f"- Date: {started:%Y-%m-%d %H:%M} to {finished:%H:%M} UTC; load average at start"
        f" {' / '.join(f'{x:.2f}' for x in r['load_avg_start'])}, at end"
        f" {' / '.join(f'{x:.2f}' for x in r['load_avg_end'])}.",
        f"- Model: random f16 weights, width {f['width']}, {f['heads']} query and {f['kv_heads']} KV heads of"
        f" {f['head_dim']}, {f['layers']} layers, SwiGLU width {f['ffn']}; a decode step reads"
        f" {r['weight_bytes_per_token'] / 1e6:.1f} MB of weights.",
        f"- Decode: {st['gen']} single-token steps after the cache holds the context, median of {st['reps']}"
        f" repetitions (llama.cpp: {st['llama_reps']}){of_rounds}. llama.cpp: `llama-bench`"
        " (flash attention on) from the llama-cpp-python sdist"
        " (`bench/llamacpp/build_llama_bench.sh`), which refills the context before each repetition; ours:"
        " `veloxquant_bench_runtime --fill-once` (the repetitions follow one another after one fill).",
        "- Memory bandwidth (`veloxquant_bench_memory` before every call, best of 10 each time, arrays"
        " of 512 MiB; median of the run's measurements): "
        + "; ".join(f"{t} thread{'s' if t > 1 else ''}: triad {x['triad_gb_per_s']:.1f} GB/s (from"
                    f" {x['range'][0]:.1f} to {x['range'][1]:.1f} over {x['n']} measurements), read-only sum"
                    f" {x['read_gb_per_s']:.1f} GB/s" for t, x in sorted(triad.items())) + ".",
        "- Bytes per token: what the KV cache stores plus the weights read. GB/s = bytes per token x"
        f" tokens/s; % triad: of the {st['threads']}-thread triad.",
        "",
        "## Decode tokens/s by context",
        "",
    ]
    cols = [("llama.cpp", k) for k in st["llama_types"]] + [("ours", s) for s in st["specs"]]
    md += ["| context | " + " | ".join(f"{e} {k}" for e, k in cols) + " | ours fp16 / llama.cpp f16 |",
           "| ---: | " + " | ".join("---:" for _ in cols) + " | ---: |"]
    for ctx in st["contexts"]:
        cells = []
        for e, k in cols:
            x = find(rows, e, k, ctx)
            cells.append(f"{x['tokens_per_s']:.1f}" if x else "error")
        ours, ref = find(rows, "ours", "fp16", ctx), find(rows, "llama.cpp", "f16", ctx)
        ratio = f"{ours['tokens_per_s'] / ref['tokens_per_s']:.2f}x" if ours and ref else "-"
        md.append(f"| {ctx:,} | " + " | ".join(cells) + f" | {ratio} |")
    top = max(st["contexts"])
    md += ["", f"## Bandwidth at {top:,} tokens", "",
           "| engine | kv | KV MB | MB per token | tokens/s | GB/s | % triad | prefill tokens/s"
           " | prefill vs fp16 |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    fp16 = find(rows, "ours", "fp16", top)
    for x in sorted((x for x in rows if x["context"] == top and "error" not in x),
                    key=lambda x: (x["engine"] != "ours", -x["bytes_per_token"])):
        fill = x.get("fill_tokens_per_s")
        vs = f"{fill / fp16['fill_tokens_per_s']:.2f}x" if fill and fp16 else "-"
        md.append(f"| {x['engine']} | `{x['kv']}` | {x['kv_bytes'] / 1e6:.1f} |"
                  f" {x['bytes_per_token'] / 1e6:.1f} |"
                  f" {x['tokens_per_s']:.1f} | {x['gb_per_s']:.1f} | {100 * x['of_triad']:.0f} % |"
                  f" {f'{fill:.0f}' if fill else '-'} | {vs} |")
    fills_of = f"; median of {rounds} fills, one per round" if rounds > 1 else ""
    md += ["", "## Prefill by context (ours: the rate of the fill, one prompt of the whole context"
           f"{fills_of})", "",
           "| context | " + " | ".join(f"`{s}`" for s in st["specs"]) + " | " +
           " | ".join(f"`{s}` vs fp16" for s in st["specs"] if s != "fp16") + " |",
           "| ---: | " + " | ".join("---:" for _ in st["specs"]) + " | " +
           " | ".join("---:" for s in st["specs"] if s != "fp16") + " |"]
    for ctx in st["contexts"]:
        xs = [find(rows, "ours", s, ctx) for s in st["specs"]]
        base = find(rows, "ours", "fp16", ctx)
        fills = [f"{x['fill_tokens_per_s']:.0f}" if x else "error" for x in xs]
        ratios = [f"{x['fill_tokens_per_s'] / base['fill_tokens_per_s']:.2f}x" if x and base else "-"
                  for s, x in zip(st["specs"], xs, strict=True) if s != "fp16"]
        md.append(f"| {ctx:,} | " + " | ".join(fills) + " | " + " | ".join(ratios) + " |")
    errors = [x for x in rows if "error" in x]
    if errors:
        md += ["", "## Errors", ""] + [f"- {x['engine']} `{x['kv']}` at {x['context']}: {x['error']}"
                                       for x in errors]
    md += ["", f"Every repetition and command line: `{r.get('json_name', 'long_context.json')}`.", ""]
    return "\n".join(md)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--contexts", type=int, nargs="+", default=[4096, 16384, 32768])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gen", type=int, default=32, help="single-token steps per repetition")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=1,
                    help="times every call runs, each round in its own random order (fills: one per call)")
    ap.add_argument("--llama-reps", type=int, default=3,
                    help="llama-bench's repetitions (each refills the context)")
    ap.add_argument("--specs", nargs="+", default=MAIN_SPECS, help="our caches at every context")
    ap.add_argument("--bandwidth-specs", nargs="*", default=BANDWIDTH_SPECS,
                    help="more of our caches, at the longest context only")
    ap.add_argument("--llama-types", nargs="*", default=["f16", "q4_0"], choices=sorted(LLAMA_BYTES))
    ap.add_argument("--llama", type=Path, default=ROOT / ".llamacpp" / "build" / "bin" / "llama-bench")
    ap.add_argument("--model", type=Path, default=ROOT / "build" / "bench" / "long_context.gguf")
    ap.add_argument("--seed", type=int, default=20261205)
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per call")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "long_context")
    ap.add_argument("--render-only", action="store_true",
                    help="rewrite the markdown from the JSON; run nothing")
    a = ap.parse_args()
    if a.render_only:
        a.out.with_suffix(".md").write_text(render_md(json.loads(a.out.with_suffix(".json").read_text())))
        return 0
    if "fp16" not in a.specs:
        ap.error("--specs must include fp16, the baseline of the ratios")
    os.chdir(ROOT)
    a.llama, a.model = (Path(os.path.relpath(p.resolve(), ROOT)) for p in (a.llama, a.model))
    build(a)
    regen = " ".join([".venv/bin/python bench/long_context.py"] + [shlex.quote(x) for x in sys.argv[1:]])
    names = ("contexts", "threads", "gen", "reps", "rounds", "llama_reps", "specs", "bandwidth_specs",
             "llama_types", "seed")
    r = {"settings": {k: getattr(a, k) for k in names},
         "fixture": FIXTURE, "model": str(a.model), "machine": machine(), "regenerate": regen,
         "load_avg_start": load_avg(), "started_utc": dt.datetime.now(dt.UTC).isoformat(),
         "json_name": a.out.with_suffix(".json").name}
    r["weight_bytes_per_token"] = weight_bytes_per_token(a.model)
    r["memory"] = []
    r["calls"] = []
    calls = [c | {"round": k} for k in range(a.rounds) for c in calls_of(a, a.seed + k)]
    for i, call in enumerate(calls):
        r["memory"] += memory_bandwidth(a.threads)
        rc, so, se = run_call(call["cmd"], a.timeout)
        rec = {k: call[k] for k in ("engine", "kv", "context", "round")}
        rec["command"] = shlex.join(call["cmd"])
        try:
            if rc != 0:
                raise ValueError(f"exit {rc}: {(se or so).strip().splitlines()[-1:]}")
            rec |= parse(call, so)
        except ValueError as e:
            rec["error"] = str(e)
        r["calls"].append(rec)
        done = rec.get("error") or f"{statistics.median(rec['samples_ts']):.1f} tokens/s"
        print(f"[{i + 1}/{len(calls)}] {call['engine']} {call['kv']} at {call['context']}: {done}",
              file=sys.stderr, flush=True)
    r["load_avg_end"] = load_avg()
    r["finished_utc"] = dt.datetime.now(dt.UTC).isoformat()
    r["summary"] = summarize(r)
    write_result(a.out, r, render_md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
