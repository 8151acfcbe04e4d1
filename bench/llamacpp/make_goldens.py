#!/usr/bin/env python3
"""The runtime against llama.cpp itself, per architecture and weight type, and the goldens CI
compares against without building llama.cpp.

For each architecture the runtime supports, a random-weight fixture with the head layout of a
production model of its family (two layers; the width cut where the architecture reads its head
size from attention.key_length) and that family's real vocabulary from llama.cpp's
ggml-vocab-*.gguf files (scripts/setup.sh extracts them into .cache/llama-vocab) is written in
f16 by veloxquant_make_fixture, then quantized by llama.cpp's llama-quantize to Q4_K_M, Q5_K_M,
Q6_K, Q8_0, Q4_0 and IQ4_NL. On every file, with a fixed 64-token prompt:
  - logits: llama.cpp's (bench/llamacpp/llama_logits.cpp, f16 KV cache) against ours
    (veloxquant_dump_logits, fp16 cache): max |ours - llama.cpp| / max |llama.cpp| and the share
    of positions whose argmax agrees;
  - greedy: llama.cpp decodes 16 tokens; ours must pick the same ones on the same prefix;
  - llama.cpp against itself: the same logits, greedy tokens and perplexity with its flash attention off
    (fp16 probabilities) against on (its CPU default: fp16 queries and an fp16 accumulator), how
    far the reference moves between its own two attention paths;
  - perplexity: llama-perplexity against `veloxquant perplexity`, 4 chunks of 128 tokens of
    WikiText-2;
  - speed: llama-bench and veloxquant_bench_runtime on the same file, same threads (2), f16 KV
    cache: pp64 (one 64-token batch) and tg32 (32 single-token steps), medians of 3 repetitions,
    each engine's calls one after the other.
Writes bench/results/llamacpp_models.{json,md}.

Then the goldens: the small fixtures CI writes itself (the fixture writer's own vocabulary; f32,
and Q8_0 / Q4_0, which it encodes byte for byte as ggml does), with llama.cpp's top logits per
position, into tests/data/llamacpp_goldens.json; tests/python/test_llamacpp_goldens.py checks the
runtime against them.

Needs build/ (scripts/setup.sh) and llama.cpp built by bench/llamacpp/build_llama_bench.sh (WORK
as there, default .llamacpp). Run: .venv/bin/python bench/llamacpp/make_goldens.py
"""
from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from runtime_report import parse  # noqa: E402

TOOLS = ROOT / "build" / "tools" / "dev"
BENCH = ROOT / "build" / "bench" / "veloxquant_bench_runtime"
CLI = ROOT / "build" / "veloxquant"
VOCAB = ROOT / ".cache" / "llama-vocab"
WIKI = ROOT.parent / "shared" / "corpus" / "wikitext-2-raw" / "wiki.test.raw"

# arch -> (production model whose head layout it takes, heads, kv_heads, head_dim, width, vocab
# file). Width equals heads x head_dim where llama.cpp requires it (qwen2, phi3); phi3 keeps
# Phi-3's head size (96) with 8 heads, its 32 x 96 would make a 3072-wide fixture.
MODELS = {
    "llama": ("Llama 3.2 1B", 32, 8, 64, 256, "llama-bpe"),
    "mistral3": ("Ministral 3 3B", 32, 8, 128, 256, "llama-spm"),
    "qwen2": ("Qwen2.5 0.5B", 14, 2, 64, 896, "qwen2"),
    "qwen3": ("Qwen3 0.6B", 16, 8, 128, 256, "qwen2"),
    "phi3": ("Phi-3 mini (8 of its 32 heads)", 8, 8, 96, 768, "phi-3"),
    "gemma2": ("Gemma 2 2B", 8, 4, 256, 256, "llama-spm"),
    "gemma3": ("Gemma 3 1B", 4, 1, 256, 256, "llama-spm"),
    # The fixture's global layers have heads of 2 x head_dim: E2B's 256 windowed / 512 global.
    "gemma4": ("Gemma 4 E2B", 8, 1, 256, 1536, "gemma-4"),
}
QUANT_TYPES = ["Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "Q4_0", "IQ4_NL"]
PROMPT = [(i * 7919 + 13) % 30000 + 300 for i in range(64)]
GREEDY = 16
# The goldens' fixtures: the writer's small default shape, every architecture, the types it
# writes as ggml does. Their prompt stays inside the smallest vocabulary (279 tokens).
GOLDEN_TYPES = ["f32", "q8_0", "q4_0"]
GOLDEN_PROMPT = [(i * 37 + 11) % 279 for i in range(24)]
GOLDEN_TOP = 8


def run(cmd, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return r


def build_llama(work: Path, build: str) -> dict[str, Path]:
    if build == "build":
        run(["bash", ROOT / "bench" / "llamacpp" / "build_llama_bench.sh"],
            env={**os.environ, "WORK": str(work)})
    out = work / build
    run(["cmake", "--build", out, "--target", "llama-quantize", "llama-perplexity", "llama-bench", "-j", "2"])
    src = next(work.glob("llama_cpp_python-*/vendor/llama.cpp"))
    tool = out / "bin" / "llama_logits"
    libs = [out / "src" / "libllama.a"] + [out / "ggml" / "src" / f"lib{n}.a"
                                           for n in ("ggml", "ggml-cpu", "ggml-base")]
    run(["c++", "-O2", "-std=c++17", "-I", src / "include", "-I", src / "ggml" / "include",
         ROOT / "bench" / "llamacpp" / "llama_logits.cpp", *libs, "-fopenmp", "-lpthread", "-ldl", "-o",
         tool])
    bins = out / "bin"
    return {"logits": tool, "quantize": bins / "llama-quantize", "perplexity": bins / "llama-perplexity",
            "bench": bins / "llama-bench"}


def write_fixture(path: Path, arch: str, type_: str, shape: tuple | None = None, vocab: str | None = None):
    cmd = [TOOLS / "veloxquant_make_fixture", "--arch", arch, "--type", type_, "--seed", "7"]
    if shape:
        flags = ("--heads", "--kv-heads", "--head-dim", "--width", "--ffn", "--layers")
        for flag, v in zip(flags, shape, strict=True):
            cmd += [flag, v]
    if vocab:
        cmd += ["--vocab", VOCAB / f"ggml-vocab-{vocab}.gguf"]
    run(cmd + [path])


def llama_logits(llama, path: Path, tokens, out: Path, greedy: int = 0,
                 flash: str = "on") -> tuple[np.ndarray, list[int]]:
    r = run([llama["logits"], path, ",".join(map(str, tokens)), out, greedy, flash])
    cont = [int(t) for t in r.stdout.strip().split(",")] if greedy else []
    return np.load(out), cont


def our_logits(path: Path, tokens, out: Path) -> np.ndarray:
    run([TOOLS / "veloxquant_dump_logits", path, "--tokens", ",".join(map(str, tokens)), "--out", out])
    return np.load(out)


def perplexities(llama, path: Path) -> tuple[float, float, float]:
    """Ours, llama.cpp's (flash attention on, its default) and llama.cpp's with it off."""
    ours = json.loads(run([CLI, "perplexity", "-m", path, "-f", WIKI, "--ctx", 128, "--chunks", 4,
                           "--json"]).stdout)
    theirs = []
    for flash in ("on", "off"):
        r = run([llama["perplexity"], "-m", path, "-f", WIKI, "-c", 128, "--chunks", 4, "-t", 2, "-b", 128,
                 "-fa", flash])
        theirs.append(float(re.search(r"Final estimate: PPL = ([0-9.]+)", r.stdout + r.stderr).group(1)))
    return ours["perplexity"], *theirs


def speeds(llama, path: Path) -> dict:
    """Tokens/s of both engines on the file, pp64 and tg32: medians, and ours over llama.cpp's."""
    common = ["-m", path, "-p", 64, "-n", 32, "-t", 2, "-r", 3]
    runs = {"ours": (BENCH, ["--kv", "fp16"]),
            "llama": (llama["bench"], ["-ctk", "f16", "-ctv", "f16", "-o", "jsonl"])}
    out = {}
    for engine, (tool, extra) in runs.items():
        for rec in parse(engine, run([tool, *common, *extra]).stdout):
            out[f"{rec['test']}_{engine}"] = float(np.median(rec["samples_ts"]))
    for test in ("pp64", "tg32"):
        out[f"{test}_ratio"] = out[f"{test}_ours"] / out[f"{test}_llama"]
    return out


def compare(theirs: np.ndarray, ours: np.ndarray) -> dict:
    return {"max_rel_diff": float(np.abs(ours - theirs).max() / np.abs(theirs).max()),
            "argmax_agree": float((ours.argmax(1) == theirs.argmax(1)).mean())}


def model_rows(llama, tmp: Path) -> list[dict]:
    rows = []
    for arch, (production, heads, kv, hd, width, vocab) in MODELS.items():
        base = tmp / f"{arch}-f16.gguf"
        write_fixture(base, arch, "f16", (heads, kv, hd, width, 512, 2), vocab)
        files = {"F16": base}
        for q in QUANT_TYPES:
            files[q] = tmp / f"{arch}-{q}.gguf"
            run([llama["quantize"], base, files[q], q])
        for type_, path in files.items():
            theirs, cont = llama_logits(llama, path, PROMPT, tmp / "ll.npy", GREEDY)
            ours = our_logits(path, PROMPT + cont, tmp / "vq.npy")
            off, cont_off = llama_logits(llama, path, PROMPT, tmp / "off.npy", GREEDY, "off")
            itself = compare(theirs, off)
            row = {"arch": arch, "layout_of": production, "heads": heads, "kv_heads": kv, "head_dim": hd,
                   "width": width, "vocab": vocab, "type": type_, "file_bytes": path.stat().st_size,
                   **compare(theirs, ours[: len(PROMPT)]),
                   "greedy_equal": bool(list(ours[len(PROMPT) - 1 : -1].argmax(1)) == cont),
                   "llama_fa_off_max_rel_diff": itself["max_rel_diff"],
                   "llama_fa_off_argmax_agree": itself["argmax_agree"],
                   "llama_fa_off_greedy_equal": cont_off == cont}
            row.update(speeds(llama, path))
            row["ppl_ours"], row["ppl_llama"], row["ppl_llama_fa_off"] = perplexities(llama, path)
            rows.append(row)
            print(json.dumps(row), flush=True)
            if path != base:
                path.unlink()
        base.unlink()
    return rows


def goldens(llama, tmp: Path) -> list[dict]:
    out = []
    for arch in MODELS:
        for type_ in GOLDEN_TYPES:
            path = tmp / f"golden-{arch}-{type_}.gguf"
            write_fixture(path, arch, type_)
            logits, _ = llama_logits(llama, path, GOLDEN_PROMPT, tmp / "ll.npy")
            top = np.argsort(-logits, axis=1)[:, :GOLDEN_TOP]
            out.append({"arch": arch, "type": type_, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                        "scale": float(np.abs(logits).max()), "top_ids": top.tolist(),
                        "top_logits": np.take_along_axis(logits, top, 1).round(5).tolist()})
            path.unlink()
    return out


def summary(rows: list[dict]) -> list[str]:
    """Ours against llama.cpp beside llama.cpp against itself, per weight kind."""
    out = ["| weights | files | max rel. diff, ours | greedy equal, ours | max rel. diff, llama.cpp itself "
           "| greedy equal, llama.cpp itself | largest perplexity gap, ours | largest perplexity gap, "
           "llama.cpp itself |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for kind, keep in (("F16", lambda t: t == "F16"), ("quantized", lambda t: t != "F16")):
        rs = [r for r in rows if keep(r["type"])]
        out.append(f"| {kind} | {len(rs)} | {max(r['max_rel_diff'] for r in rs):.2e} "
                   f"| {sum(r['greedy_equal'] for r in rs)} "
                   f"| {max(r['llama_fa_off_max_rel_diff'] for r in rs):.2e} "
                   f"| {sum(r['llama_fa_off_greedy_equal'] for r in rs)} "
                   f"| {100 * max(abs(r['ppl_ours'] / r['ppl_llama'] - 1) for r in rs):.3f} % "
                   f"| {100 * max(abs(r['ppl_llama_fa_off'] / r['ppl_llama'] - 1) for r in rs):.3f} % |")
    return out


def markdown(rows: list[dict], meta: dict) -> str:
    lines = ["# The runtime against llama.cpp on real layouts and vocabularies", "",
             f"Command: `{meta['command']}`  ", f"Machine: {meta['machine']}  ", f"Date: {meta['date']}  ",
             f"llama.cpp: {meta['llama']}", "",
             "Logits of a fixed 64-token prompt (llama.cpp with its f16 KV cache, ours with the fp16 "
             f"cache); greedy: the same {GREEDY} tokens after it; perplexity: 4 chunks of 128 tokens of "
             "WikiText-2.", "",
             "llama.cpp itself: its logits, greedy tokens and perplexity with flash attention off against on "
             "(its default), both its own; the two paths round attention differently.", "",
             "Tokens/s: both engines on the file, 2 threads, f16 KV cache, medians of 3; ours / llama.cpp's "
             "(llama-bench) for a 64-token prompt batch (pp64) and 32 single-token steps (tg32).", "",
             *summary(rows), "",
             "| arch | layout of | heads / kv / head_dim, width | vocab | type | max rel. logit diff | "
             "argmax agree | greedy equal | llama.cpp itself: diff, greedy | ppl ours / llama.cpp "
             "| pp64 ours / llama.cpp | tg32 ours / llama.cpp |",
             "| --- | --- | --- | --- | --- | ---: | ---: | --- | --- | --- | ---: | ---: |"]
    for r in rows:
        gap = 100 * (r['ppl_ours'] / r['ppl_llama'] - 1)
        ppl = f"{r['ppl_ours']:.4f} / {r['ppl_llama']:.4f} ({gap:+.3f} %)"
        lines.append(f"| {r['arch']} | {r['layout_of']} | "
                     f"{r['heads']} / {r['kv_heads']} / {r['head_dim']}, {r['width']} "
                     f"| {r['vocab']} | {r['type']} | {r['max_rel_diff']:.2e} | "
                     f"{100 * r['argmax_agree']:.0f} % "
                     f"| {'yes' if r['greedy_equal'] else 'NO'} "
                     f"| {r['llama_fa_off_max_rel_diff']:.2e}, "
                     f"{'yes' if r['llama_fa_off_greedy_equal'] else 'NO'} "
                     f"| {ppl} "
                     f"| {r['pp64_ours']:,.0f} / {r['pp64_llama']:,.0f} = {r['pp64_ratio']:.2f} "
                     f"| {r['tg32_ours']:,.0f} / {r['tg32_llama']:,.0f} = {r['tg32_ratio']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=Path, default=Path(os.environ.get("WORK", ROOT / ".llamacpp")),
                    help="llama.cpp's build folder (build_llama_bench.sh's WORK)")
    ap.add_argument("--build", default="build",
                    help="llama.cpp's build folder inside --work; other than 'build', one configured already")
    ap.add_argument("--goldens-only", action="store_true", help="skip the per-architecture table")
    args = ap.parse_args()
    llama = build_llama(args.work, args.build)
    sdist = next(args.work.glob("llama_cpp_python-*")).name
    # The command as anyone reruns it: the llama.cpp folder is the reader's own.
    flags = [f"--build {args.build}"] * (args.build != "build") + ["--goldens-only"] * args.goldens_only
    meta = {"command": " ".join(["bench/llamacpp/make_goldens.py", *flags]),
            "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cores",
            "date": dt.date.today().isoformat(), "llama": f"{sdist} (vendored llama.cpp)"}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        golden = {"about": "llama.cpp's logits on the fixture writer's small models "
                           "(bench/llamacpp/make_goldens.py)", **meta, "prompt": GOLDEN_PROMPT,
                  "fixtures": goldens(llama, tmp)}
        # One fixture per line: diffs of a regenerated file stay readable.
        head = json.dumps({k: v for k, v in golden.items() if k != "fixtures"}, indent=1)[:-2]
        body = ",\n".join("  " + json.dumps(f) for f in golden["fixtures"])
        (ROOT / "tests" / "data" / "llamacpp_goldens.json").write_text(
            f'{head},\n "fixtures": [\n{body}\n ]\n}}\n')
        if args.goldens_only:
            return
        rows = model_rows(llama, tmp)
    results = ROOT / "bench" / "results"
    (results / "llamacpp_models.json").write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
    (results / "llamacpp_models.md").write_text(markdown(rows, meta))


if __name__ == "__main__":
    main()
