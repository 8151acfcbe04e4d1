#!/usr/bin/env python3
"""Side-by-side speed of the VeloxQuant runtime and llama.cpp's llama-bench on one GGUF.

Runs, interleaved in a random order fixed by a seed, for each thread count and context depth:
  ours:      build/bench/veloxquant_bench_runtime --kv fp16 | kivi
  llama.cpp: .llamacpp/build/bin/llama-bench  -ctk/-ctv f16 (-fa 0 and -fa 1), q8_0, q4_0 (-fa 1)
each call measuring pp<P> and tg<N> with -r repetitions; the whole matrix is repeated --rounds
times. Medians are taken over all kept repetitions of all rounds. Writes
bench/results/runtime_speed.json (every raw number, command lines, machine, load averages) and
bench/results/runtime_speed.md.

Build llama-bench first with bench/llamacpp/build_llama_bench.sh. Python 3 stdlib only.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OURS = ROOT / "build" / "bench" / "veloxquant_bench_runtime"
LLAMA = ROOT / ".llamacpp" / "build" / "bin" / "llama-bench"
DEFAULT_MODEL = ROOT.parent / "shared" / "models" / "stories260K.gguf"

# name -> (engine, settings). Column order of the markdown table.
CONFIGS = {
    "ours fp16": ("ours", {"kv": "fp16"}),
    "ours kivi": ("ours", {"kv": "kivi"}),
    "llama.cpp f16 fa0": ("llama", {"ctk": "f16", "ctv": "f16", "fa": 0}),
    "llama.cpp f16 fa1": ("llama", {"ctk": "f16", "ctv": "f16", "fa": 1}),
    "llama.cpp q8_0 fa1": ("llama", {"ctk": "q8_0", "ctv": "q8_0", "fa": 1}),
    "llama.cpp q4_0 fa1": ("llama", {"ctk": "q4_0", "ctv": "q4_0", "fa": 1}),
}


def load_avg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def machine() -> dict:
    info = {"cpu_model": None, "cpu_flags_simd": [], "logical_cpus": os.cpu_count()}
    try:
        text = Path("/proc/cpuinfo").read_text()
        for line in text.splitlines():
            if line.startswith("model name") and info["cpu_model"] is None:
                info["cpu_model"] = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags = line.split(":", 1)[1].split()
                info["cpu_flags_simd"] = sorted(
                    f for f in flags if f.startswith(("avx", "amx", "fma", "f16c", "sse4")))
                break
    except OSError:
        pass
    try:
        mem = Path("/proc/meminfo").read_text().splitlines()[0]
        info["mem_total"] = mem.split(":", 1)[1].strip()
    except OSError:
        pass
    info["kernel"] = platform.release()
    info["hostname"] = platform.node()
    return info


def wait_for_quiet(threshold: float, max_wait_s: float, poll_s: float = 30.0) -> tuple[list[float], float]:
    """Waits until the 1-minute load average is <= threshold or max_wait_s passes."""
    t0 = time.monotonic()
    while True:
        la = load_avg()
        waited = time.monotonic() - t0
        if la[0] <= threshold or waited >= max_wait_s:
            return la, waited
        print(f"load average {la[0]:.2f} > {threshold}: waiting ({waited:.0f}/{max_wait_s:.0f} s)",
              file=sys.stderr, flush=True)
        time.sleep(poll_s)


def add_run_options(ap: argparse.ArgumentParser, *, gen: int, reps: int, seed: int, max_wait: float,
                    out: Path) -> None:
    """The options every side-by-side speed report shares."""
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=gen)
    ap.add_argument("--reps", type=int, default=reps, help="repetitions per call (-r)")
    ap.add_argument("--rounds", type=int, default=3, help="times the whole matrix is repeated")
    ap.add_argument("--seed", type=int, default=seed)
    ap.add_argument("--max-load", type=float, default=1.5, help="wait until the 1-min load is at most this")
    ap.add_argument("--max-wait", type=float, default=max_wait, help="seconds to wait for a quiet machine")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per call")
    ap.add_argument("--out", type=Path, default=out)
    ap.add_argument("--render-only", action="store_true",
                    help="rewrite the markdown from an existing JSON result; run nothing")


def run_call(cmd: list[str], timeout: float) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of cmd; 124 and what it printed if it ran out of time."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        so = e.stdout or ""
        return 124, so.decode() if isinstance(so, bytes) else so, f"timed out after {timeout} s"


def write_result(out: Path, result: dict, render) -> None:
    """out.json (the result) and out.md (render(result))."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    out.with_suffix(".md").write_text(render(result))
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.md')}", file=sys.stderr)


def command(engine: str, settings: dict, a, threads: int, depth: int) -> list[str]:
    common = ["-m", str(a.model), "-p", str(a.prompt), "-n", str(a.gen), "-d", str(depth),
              "-t", str(threads), "-r", str(a.reps)]
    if engine == "ours":
        return [str(a.ours)] + common + ["--kv", settings["kv"]]
    return [str(a.llama)] + common + ["-ctk", settings["ctk"], "-ctv", settings["ctv"],
                                      "-fa", str(settings["fa"]), "-o", "jsonl"]


def parse(engine: str, stdout: str) -> list[dict]:
    """One record per test: test name (pp512/tg128), per-repetition tokens/s and raw object."""
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        j = json.loads(line)
        if engine == "ours":
            out.append({"test": j["test"], "samples_ts": j["tokens_per_s"], "raw": j})
        else:
            test = f"pp{j['n_prompt']}" if j["n_prompt"] > 0 else f"tg{j['n_gen']}"
            out.append({"test": test, "samples_ts": j["samples_ts"], "raw": j})
    return out


def key_line(err: str) -> str:
    """The most informative line of an error output (llama.cpp prints its log before the error)."""
    lines = [line.strip() for line in err.splitlines() if line.strip()]
    for pat in ("does not divide", "requires", "not supported", "error"):
        for line in lines:
            if pat in line.lower():
                return line
    return lines[-1] if lines else "(no output)"


def fmt_rate(x) -> str:
    if x is None:
        return "error"
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def render_md(r: dict) -> str:
    """The markdown report, from the JSON result alone (so --render-only can redo it)."""
    st, mach, lb = r["settings"], r["machine"], r["llama_cpp"]
    started = dt.datetime.fromisoformat(r["started_utc"])
    finished = dt.datetime.fromisoformat(r["finished_utc"])
    la0, la1 = r["load_avg_start"], r["load_avg_end"]
    loads = [x["load_avg_before"][0] for x in r["runs"]]
    md = [
        "# Runtime speed: VeloxQuant vs llama.cpp (llama-bench)",
        "",
        f"Model `{Path(r['model']).name}`; tokens/s, median of all {st['rounds']} rounds x"
        f" {st['reps']} repetitions (calls interleaved in random order, seed {st['seed']});"
        f" pp = prompt processing of {st['prompt']} tokens in one batch, tg = {st['gen']}"
        " single-token steps; depth = tokens already in the cache (filled untimed).",
        "",
        f"- Machine: {mach['cpu_model']}, {mach['logical_cpus']} logical CPUs, {mach.get('mem_total')},"
        f" kernel {mach['kernel']} (shared with other jobs).",
        f"- Date: {started:%Y-%m-%d %H:%M} to {finished:%H:%M} UTC.",
        f"- Load average (1/5/15 min) at start: {' / '.join(f'{x:.2f}' for x in la0)};"
        f" at end: {' / '.join(f'{x:.2f}' for x in la1)}; 1-min load before each call:"
        f" {min(loads):.2f} to {max(loads):.2f} (waited {r['waited_for_quiet_s']:.0f} s for"
        f" <= {st['max_load']}).",
        f"- llama.cpp: llama-bench build {lb.get('build_number')} commit {lb.get('build_commit')},"
        f" from the {lb['source']}, built by `bench/llamacpp/build_llama_bench.sh` (Release,"
        " GGML_NATIVE=ON, CPU only)" + (f" in {lb['build_seconds']} s." if lb.get("build_seconds") else "."),
        "- Ours: `build/bench/veloxquant_bench_runtime`; `kivi` is the default spec"
        " (2-bit keys/values, group 32, residual 128).",
        "- llama.cpp quantized V caches need flash attention, so q8_0 and q4_0 run with `-fa 1`;"
        " f16 is shown with `-fa 0` and `-fa 1`.",
        "",
    ]
    if max([*loads, la0[0], la1[0]]) > st["max_load"]:
        md += ["**Caveat:** the machine was busy (load above the 2 CPUs) during this run. With"
               " 2 threads, a thread pool that waits at barriers (llama.cpp's) stalls whenever one"
               " of its threads is descheduled, so the 2-thread columns mostly measure contention;"
               " the 1-thread table is the fairer comparison.",
               ""]
    for t in st["threads"]:
        md += [f"## {t} thread{'s' if t > 1 else ''}", "",
               "| test | depth | ours fp16 | ours kivi | llama.cpp f16 (fa off) | llama.cpp f16 (fa on)"
               " | llama.cpp q8_0 | llama.cpp q4_0 | ours fp16 / llama.cpp f16 (fa off) | (fa on) |",
               "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for row in r["summary"]:
            if row["threads"] != t:
                continue
            cells = [fmt_rate(row["configs"][n]["median_ts"]) for n in CONFIGS]
            ratios = [f"{row[k]:.2f}" if row[k] else "-" for k in
                      ("ratio_ours_fp16_over_llama_f16_fa0", "ratio_ours_fp16_over_llama_f16_fa1")]
            label = "short" if row["depth"] == 0 else "long"
            md.append(f"| {row['test']} | {row['depth']} ({label}) | " + " | ".join(cells + ratios) + " |")
        md.append("")
    errs = sorted({(x["config"], x["error"][:300]) for x in r["runs"] if x["error"]})
    if errs:
        md += ["## Errors", ""] + [f"- {c}: `{e}`" for c, e in errs] + [""]
    md += ["## Regenerate", "", "```", "bench/llamacpp/build_llama_bench.sh",
           "cmake --build build -j2 --target veloxquant_bench_runtime", r["regenerate"], "```", "",
           "Raw numbers, every command line and per-round medians: `runtime_speed.json`.", ""]
    return "\n".join(md)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    ap.add_argument("--ours", type=Path, default=OURS)
    ap.add_argument("--llama", type=Path, default=LLAMA)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--depths", type=int, nargs="+", default=[0, 1536])
    add_run_options(ap, gen=128, reps=5, seed=20240601, max_wait=1200.0,
                    out=ROOT / "bench" / "results" / "runtime_speed")
    a = ap.parse_args()

    if a.render_only:
        a.out.with_suffix(".md").write_text(render_md(json.loads(a.out.with_suffix(".json").read_text())))
        print(f"wrote {a.out.with_suffix('.md')}", file=sys.stderr)
        return 0

    # Every path relative to the repository root, where the programs run: commands and results
    # read the same on any machine.
    os.chdir(ROOT)
    a.ours, a.llama, a.model, a.out = (Path(os.path.relpath(p.resolve(), ROOT))
                                       for p in (a.ours, a.llama, a.model, a.out))
    for p in (a.ours, a.llama, a.model):
        if not p.exists():
            print(f"runtime_report: missing {p}", file=sys.stderr)
            return 2

    regen = " ".join(["python3 bench/runtime_report.py"] + [shlex.quote(x) for x in sys.argv[1:]])
    la_start, waited = wait_for_quiet(a.max_load, a.max_wait)
    started = dt.datetime.now(dt.UTC)
    print(f"start: load average {la_start} (waited {waited:.0f} s)", file=sys.stderr, flush=True)

    rng = random.Random(a.seed)
    calls = []
    for rnd in range(a.rounds):
        matrix = [(name, t, d) for t in a.threads for d in a.depths for name in CONFIGS]
        rng.shuffle(matrix)
        calls += [(rnd, *m) for m in matrix]

    runs = []
    for i, (rnd, name, t, d) in enumerate(calls):
        engine, settings = CONFIGS[name]
        cmd = command(engine, settings, a, t, d)
        la = load_avg()
        t0 = time.monotonic()
        rc, so, se = run_call(cmd, a.timeout)
        wall = time.monotonic() - t0
        rec = {"round": rnd, "config": name, "engine": engine, "threads": t, "depth": d,
               "command": shlex.join(cmd), "returncode": rc, "wall_s": round(wall, 3),
               "load_avg_before": la, "tests": [], "error": None}
        if rc == 0:
            try:
                rec["tests"] = parse(engine, so)
            except (ValueError, KeyError) as e:
                rec["error"] = f"unparsable output: {e}: {so[-2000:]}"
        else:
            err = se + "\n" + so
            if engine == "llama":  # llama-bench prints the reason only with -v: ask once more
                try:
                    v = subprocess.run(cmd + ["-v", "-r", "1"], capture_output=True, text=True,
                                       timeout=a.timeout)
                    err = v.stderr + "\n" + v.stdout + "\n" + err
                except subprocess.TimeoutExpired:
                    pass
            rec["error"] = f"exit {rc}: {key_line(err)}"
            rec["stderr_tail"] = se[-4000:]
        runs.append(rec)
        status = "ok" if rec["error"] is None else "ERROR " + rec["error"][:200]
        print(f"[{i + 1}/{len(calls)}] round {rnd} t={t} d={d} {name}: {wall:.1f} s {status}",
              file=sys.stderr, flush=True)

    la_end = load_avg()
    finished = dt.datetime.now(dt.UTC)

    # Medians over all kept repetitions of all rounds, plus per-round medians.
    tests = [f"pp{a.prompt}", f"tg{a.gen}"]
    summary = []
    for t in a.threads:
        for test in tests:
            for d in a.depths:
                row = {"threads": t, "test": test, "depth": d, "configs": {}}
                for name in CONFIGS:
                    samples, per_round, errors = [], [], []
                    for r in runs:
                        if r["config"] != name or r["threads"] != t or r["depth"] != d:
                            continue
                        if r["error"]:
                            errors.append(r["error"])
                        for x in r["tests"]:
                            if x["test"] == test:
                                samples += x["samples_ts"]
                                per_round.append(statistics.median(x["samples_ts"]))
                    row["configs"][name] = {
                        "median_ts": statistics.median(samples) if samples else None,
                        "per_round_median_ts": per_round,
                        "n_samples": len(samples),
                        "errors": sorted(set(errors)),
                    }
                ours = row["configs"]["ours fp16"]["median_ts"]
                for fa in ("fa0", "fa1"):
                    ref = row["configs"][f"llama.cpp f16 {fa}"]["median_ts"]
                    row[f"ratio_ours_fp16_over_llama_f16_{fa}"] = ours / ref if ours and ref else None
                summary.append(row)

    llama_build = None
    for r in runs:
        for x in r["tests"]:
            if r["engine"] == "llama":
                j = x["raw"]
                llama_build = {k: j.get(k) for k in ("build_commit", "build_number", "cpu_info",
                                                     "backends", "model_type", "model_size",
                                                     "model_n_params", "n_batch", "n_ubatch")}
                break
        if llama_build:
            break
    build_s = None
    bs = a.llama.parent.parent / "llama-bench.build_seconds"
    if bs.exists():
        build_s = int(bs.read_text().strip())

    mach = machine()
    result = {
        "benchmark": "runtime_speed",
        "regenerate": regen,
        "started_utc": started.isoformat(timespec="seconds"),
        "finished_utc": finished.isoformat(timespec="seconds"),
        "load_avg_start": la_start,
        "load_avg_end": la_end,
        "waited_for_quiet_s": round(waited, 1),
        "machine": mach,
        "model": str(a.model),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
        "configs": {k: {"engine": e, **s} for k, (e, s) in CONFIGS.items()},
        "llama_cpp": {**(llama_build or {}), "source": "llama-cpp-python 0.3.36 sdist (vendor/llama.cpp)",
                      "build_seconds": build_s},
        "summary": summary,
        "runs": runs,
    }
    write_result(a.out, result, render_md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
