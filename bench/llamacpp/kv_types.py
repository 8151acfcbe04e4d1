#!/usr/bin/env python3
"""Our KV caches beside llama.cpp's KV types on one of the project's models: bits per element,
perplexity change, mean KL divergence and top-1 agreement against each engine's own fp16 cache,
on the same text, context and chunks.

    .venv/bin/python bench/llamacpp/kv_types.py vq-hd128 [--threads 2]

1. Builds llama-perplexity (bench/llamacpp/build_llama_bench.sh, from PyPI's llama-cpp-python
   sdist) unless present.
2. llama.cpp: `llama-perplexity -fa on` with its f16 cache saves the base logits
   (--kl-divergence-base), then scores each KV type against them (--kl-divergence): f16, q8_0,
   q5_1, q5_0, q4_1, iq4_nl, q4_0 and q8_0 keys with q4_0 values.
3. Ours: every method at its defaults from the model's docs/results page (results.json, written by
   bench/results_pages.sh), plus FRONTIER, the low-bit settings the page's defaults do not cover,
   measured here with `veloxquant eval` on the same text, context and chunks.
4. Writes bench/results/kv_types_<model>.json and .md (both tables and the issue's goals, each
   met or missed with the numbers) and docs/results/<model>/kv_types.png (KL against bits, both
   engines, each front drawn).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from runtime_report import machine, write_result  # noqa: E402

# Relative to ROOT, where every command runs, so the recorded commands name no machine's paths.
LLAMA_PERPLEXITY = ".llamacpp/build/bin/llama-perplexity"
OURS = "build/veloxquant"
TEXT = "../shared/corpus/wikitext-2-raw/wiki.test.raw"
MODELS = {  # the settings of bench/results_pages.sh
    "vq-hd128": ("models/vq-hd128.gguf", 2048, 8),
    "vq-hd64": ("models/vq-hd64.gguf", 2048, 4),
    "vq-gqa": ("models/vq-gqa.gguf", 2048, 8),
}
# llama.cpp's KV types: (name, -ctk, -ctv, bits per element). A q*_0/q*_1/iq4_nl block holds 32
# values and a 16-bit scale (and a 16-bit minimum for q*_1).
LLAMA_TYPES = [
    ("f16", "f16", "f16", 16.0),
    ("q8_0", "q8_0", "q8_0", 8.5),
    ("q5_1", "q5_1", "q5_1", 6.0),
    ("q5_0", "q5_0", "q5_0", 5.5),
    ("q4_1", "q4_1", "q4_1", 5.0),
    ("iq4_nl", "iq4_nl", "iq4_nl", 4.5),
    ("q4_0", "q4_0", "q4_0", 4.5),
    ("q8_0 K + q4_0 V", "q8_0", "q4_0", 6.5),
]
# Settings below the defaults' bit widths, so the front reaches 2-3 bits per element.
FRONTIER = [
    "turboquant_mse:bits=3,vbits=3",
    "turboquant_mse:bits=3,vbits=2",
    "turboquant_mse:bits=2,vbits=2",
    "cachegen:bits=3",
    "cachegen:bits=2",
    "kivi_sink:kbits=2,vbits=2,residual=32",
    "zipcache:hi_fraction=0.2",
    "polar:bits1=3,bits=2,residual=32",
]
# llama.cpp's types keep every token, so only quantizers stand beside them: a perplexity chunk is
# one prompt, and a policy that selects after the prompt (snapkv) shows no loss there while its
# bytes halve.
POLICIES = ("snapkv", "pyramidkv", "adakv", "streaming_llm", "h2o", "tova", "squeeze", "expected_attention")
# The goals: (most bits per element, metric, the llama.cpp type whose value bounds it or a
# fixed bound).
GOALS = [
    (3.1, "kl_mean", "q4_0"),
    (4.5, "kl_mean", "q5_0"),
    (2.3, "perplexity_delta_pct", 3.0),
]


def run(cmd: list[str]) -> str:
    """The command's stdout and stderr, through a file: llama.cpp's logger loses its last lines
    at exit far more often when its output is a pipe."""
    print("$", shlex.join(cmd), file=sys.stderr, flush=True)
    with tempfile.TemporaryFile("w+") as log:
        p = subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True)
        log.seek(0)
        out = log.read()
    if p.returncode != 0:
        sys.exit(f"command failed ({p.returncode}): {shlex.join(cmd)}\n{out[-3000:]}")
    return out


def recorded(cmd: list[str], work: Path) -> str:
    """The command as the results record it: the run's temporary folder written as $TMP."""
    return shlex.join(cmd).replace(str(work), "$TMP")


def number(pattern: str, text: str) -> float:
    m = re.search(pattern, text)
    if not m:
        sys.exit(f"llama-perplexity printed no '{pattern}': its output format changed?\n{text[-2000:]}")
    return float(m.group(1))


def run_complete(cmd: list[str], last: str) -> str:
    """run(), again (at most twice) when the output lacks `last`: llama.cpp's logger prints from a
    thread of its own and now and then loses the last lines at exit."""
    for _ in range(3):
        out = run(cmd)
        if re.search(last, out):
            return out
    return out


def llama_rows(model: str, ctx: int, chunks: int, threads: int, work: Path) -> tuple[list[dict], str]:
    base = work / "base.kld"
    common = [LLAMA_PERPLEXITY, "-m", model, "-f", TEXT, "-c", str(ctx),
              "--chunks", str(chunks), "-t", str(threads), "-fa", "on"]
    out = run_complete(common + ["--kl-divergence-base", str(base)], r"Final estimate: PPL = [0-9]")
    base_ppl = number(r"Final estimate: PPL = ([0-9.]+)", out)
    rows = []
    for name, ctk, ctv, bits in LLAMA_TYPES:
        cmd = common + ["-ctk", ctk, "-ctv", ctv, "--kl-divergence-base", str(base), "--kl-divergence"]
        out = run_complete(cmd, r"Same top p:\s*[0-9]")
        rows.append({
            "type": name, "ctk": ctk, "ctv": ctv, "bits_per_element": bits,
            "perplexity": number(r"Mean PPL\(Q\)\s*:\s*([0-9.]+)", out),
            "kl_mean": number(r"Mean\s+KLD:\s*(-?[0-9.]+)", out),
            "top1_agreement": number(r"Same top p:\s*([0-9.]+)", out) / 100.0,
            "command": recorded(cmd, work),
        })
    # Against the f16 type's perplexity, computed the same way: the saved base logits are stored
    # rounded, so the PPL(base) llama-perplexity prints from them differs from it (by 1.3 % on vq-hd64).
    for r in rows:
        r["perplexity_delta_pct"] = (r["perplexity"] / rows[0]["perplexity"] - 1.0) * 100.0
    return rows, f"{base_ppl:.4f}"


def ours_rows(
    name: str, model: str, ctx: int, chunks: int, threads: int, work: Path
) -> tuple[list[dict], dict]:
    page = ROOT / "docs" / "results" / name / "results.json"
    if not page.exists():
        sys.exit(f"{page} is missing: run bench/results_pages.sh {name} first")
    rows = json.loads(page.read_text())
    setup = rows["setup"]
    if (setup["model"], setup["text"], setup["context"], setup["chunks"]) != (model, TEXT, ctx, chunks):
        sys.exit(f"{page} measured {setup['model']} on {setup['text']} at context {setup['context']} x "
                 f"{setup['chunks']} chunks; expected {model} on {TEXT} at {ctx} x {chunks}")
    cmd = [OURS, "eval", "-m", model, "--text", TEXT, "--kv", *FRONTIER,
           "--ctx", str(ctx), "--chunks", str(chunks), "-t", str(threads), "--retrieval", str(ctx),
           "--depths", "0.5", "--trials", "1", "--no-plots", "--out", str(work / "frontier")]
    run(cmd)
    frontier = json.loads((work / "frontier" / "results.json").read_text())
    def quantizer(m: dict) -> bool:
        return m["spec"] != "fp16" and m["spec"].split(":")[0].split("+")[0] not in POLICIES

    keep = ("spec", "bits_per_element", "perplexity", "perplexity_delta_pct", "kl_mean", "top1_agreement")
    out = [{k: m[k] for k in keep} | {"source": "page"} for m in rows["methods"] if quantizer(m)]
    seen = {m["spec"] for m in out}
    out += [{k: m[k] for k in keep} | {"source": "frontier"} for m in frontier["methods"]
            if quantizer(m) and m["spec"] not in seen]
    fp16 = next(m for m in rows["methods"] if m["spec"] == "fp16")
    return out, {"page": str(page.relative_to(ROOT)), "fp16_perplexity": fp16["perplexity"],
                 "frontier_command": recorded(cmd, work)}


def front(rows: list[dict], metric: str = "kl_mean") -> list[dict]:
    """Rows no other row beats on both bits and the metric, by bits."""
    rows = sorted(rows, key=lambda r: (r["bits_per_element"], r[metric]))
    best, out = float("inf"), []
    for r in rows:
        if r[metric] < best:
            best = r[metric]
            out.append(r)
    return out


def goals(ours: list[dict], llama: list[dict]) -> list[dict]:
    by_type = {r["type"]: r for r in llama}
    out = []
    for bits, metric, bound in GOALS:
        limit = by_type[bound][metric] if isinstance(bound, str) else bound
        fits = [r for r in ours if r["bits_per_element"] <= bits]
        best = min(fits, key=lambda r: r[metric]) if fits else None
        out.append({"max_bits": bits, "metric": metric, "bound": bound, "limit": limit,
                    "best_spec": best and best["spec"], "best_bits": best and best["bits_per_element"],
                    "best_value": best and best[metric], "met": bool(best and best[metric] <= limit)})
    return out


def render(r: dict) -> str:
    s = r["setup"]
    md = [f"# {s['name']}: our KV caches beside llama.cpp's KV types", "",
          f"Command: `{r['command']}`  ",
          f"Machine: {r['machine'].get('cpu_model')}, {r['machine']['logical_cpus']} logical CPUs  ",
          f"Date: {r['date']}  ",
          "llama.cpp: llama-perplexity from the llama-cpp-python sdist "
          "(bench/llamacpp/build_llama_bench.sh)", "",
          f"Model `{s['model']}`, text `{s['text']}`, {s['chunks']} chunks of {s['context']} tokens; "
          "each engine "
          f"against its own fp16 cache's logits (perplexity: llama.cpp {s['llama_fp16_perplexity']}, ours "
          f"{s['ours_fp16_perplexity']:.4f}). Our rows: the defaults from `{s['ours_page']}`, and settings "
          "below them measured here (`frontier`). Bits per element count every stored byte, scales, "
          "fp16 windows and sinks included. Eviction policies are left out: llama.cpp's types keep every "
          "token, and a perplexity chunk is one prompt, after which a policy such as snapkv selects, so it "
          "would show no loss at half the bytes.", "",
          "## Goals", "",
          "| at most | metric | must be at most | our best | bits | value | met |",
          "| ---: | --- | ---: | --- | ---: | ---: | --- |"]
    for g in r["goals"]:
        bound = (f"llama.cpp {g['bound']}'s {g['limit']:.4f}" if isinstance(g["bound"], str)
                 else f"{g['limit']:.1f} %")
        metric = "mean KL" if g["metric"] == "kl_mean" else "ΔPPL %"
        best = f"`{g['best_spec']}`" if g["best_spec"] else "none"
        bits = f"{g['best_bits']:.2f}" if g["best_spec"] else ""
        value = f"{g['best_value']:.4f}" if g["best_spec"] else ""
        md.append(f"| {g['max_bits']} bits | {metric} | {bound} | {best} | {bits} | {value} | "
                  f"{'yes' if g['met'] else '**no**'} |")
    md += ["", "## llama.cpp", "", "| KV type | bits/elem | perplexity | ΔPPL | mean KL | top-1 |",
           "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for x in r["llama"]:
        md.append(f"| {x['type']} | {x['bits_per_element']:.2f} | {x['perplexity']:.3f} | "
                  f"{x['perplexity_delta_pct']:+.2f} % | {x['kl_mean']:.4f} | "
                  f"{x['top1_agreement'] * 100:.1f} % |")
    on_front = {x["spec"] for x in front(r["ours"])}
    md += ["", "## Ours (front in bold)", "",
           "| spec | from | bits/elem | perplexity | ΔPPL | mean KL | top-1 |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for x in sorted(r["ours"], key=lambda x: x["bits_per_element"]):
        spec = f"**`{x['spec']}`**" if x["spec"] in on_front else f"`{x['spec']}`"
        md.append(f"| {spec} | {x['source']} | {x['bits_per_element']:.2f} | {x['perplexity']:.3f} | "
                  f"{x['perplexity_delta_pct']:+.2f} % | {x['kl_mean']:.4f} | "
                  f"{x['top1_agreement'] * 100:.1f} % |")
    md += ["", f"Plot: [{s['plot']}](../../{s['plot']})", ""]
    return "\n".join(md)


def plot(r: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    llama = [x for x in r["llama"] if x["type"] != "f16"]
    ours = [x for x in r["ours"] if x["kl_mean"] > 0]
    ax.scatter([x["bits_per_element"] for x in ours], [x["kl_mean"] for x in ours], s=14, c="tab:blue",
               alpha=0.5, label="VeloxQuant (every spec)")
    f = front(ours)
    ax.plot([x["bits_per_element"] for x in f], [x["kl_mean"] for x in f], "o-", c="tab:blue",
            label="VeloxQuant front")
    ax.scatter([x["bits_per_element"] for x in llama], [x["kl_mean"] for x in llama], s=30, c="tab:red",
               marker="s", label="llama.cpp KV types")
    f = front(llama)
    ax.plot([x["bits_per_element"] for x in f], [x["kl_mean"] for x in f], "s--", c="tab:red",
            label="llama.cpp front")
    for x in llama:
        ax.annotate(x["type"], (x["bits_per_element"], x["kl_mean"]), fontsize=7, xytext=(3, 3),
                    textcoords="offset points")
    for x in front(ours):
        ax.annotate(x["spec"].split(":")[0], (x["bits_per_element"], x["kl_mean"]), fontsize=7,
                    xytext=(3, -9), textcoords="offset points", color="tab:blue")
    ax.set_yscale("log")
    ax.set_xlabel("bits per element (all stored bytes)")
    ax.set_ylabel("mean KL divergence from fp16 (nats/token)")
    ax.set_title(f"{r['setup']['name']}: quality per bit, VeloxQuant and llama.cpp")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    model, ctx, chunks = MODELS[a.model]
    subprocess.run(["bash", str(ROOT / "bench" / "llamacpp" / "build_llama_bench.sh")], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        llama, llama_fp16 = llama_rows(model, ctx, chunks, a.threads, Path(tmp))
        ours, info = ours_rows(a.model, model, ctx, chunks, a.threads, Path(tmp))
    plot_path = Path("docs") / "results" / a.model / "kv_types.png"
    result = {
        "command": "bench/llamacpp/kv_types.py " + " ".join(sys.argv[1:]),
        "date": dt.date.today().isoformat(), "machine": machine(),
        "setup": {"name": a.model, "model": model, "text": TEXT, "context": ctx, "chunks": chunks,
                  "threads": a.threads, "llama_fp16_perplexity": llama_fp16,
                  "ours_fp16_perplexity": info["fp16_perplexity"], "ours_page": info["page"],
                  "frontier_command": info["frontier_command"], "plot": str(plot_path)},
        "llama": llama, "ours": ours, "goals": goals(ours, llama),
    }
    plot(result, ROOT / plot_path)
    write_result(ROOT / "bench" / "results" / f"kv_types_{a.model}", result, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
