#!/usr/bin/env python3
"""The runtime on the GPU against llama.cpp's CUDA build, on the same files, on the GPU machine.

For every architecture of make_goldens.py that the GPU runtime runs (gemma4 is refused there by
name), a two-layer random-weight fixture with that family's head layout and the fixture writer's
own vocabulary, in F16 and quantized by llama-quantize to Q4_K_M; and a fixture with Llama-3-8B's
shapes (32 query / 8 KV heads of 128, width 4096, FFN 14336; two layers) in F16, Q8_0 and Q4_K_M.
On each file llama-bench (-ngl 99, flash attention on, f16 KV cache) and veloxquant_bench_runtime
(--device cuda, fp16 cache; quantized weights decoded to f16 once at load) run a 512-token prompt
(pp512) and 128 single-token steps (tg128), medians of 3 repetitions, one engine after the other.
Writes OUT/cuda_vs_llama.{json,md}. Run by bench/llamacpp/cuda_h200.sh run OUT.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "cuda"))
from gpu_name import gpu_name  # noqa: E402
from llamacpp.make_goldens import MODELS  # noqa: E402
from runtime_report import parse  # noqa: E402

GPU_ARCHS = [a for a in MODELS if a != "gemma4"]
LLAMA3 = ("Llama 3 8B (2 of its 32 layers)", 32, 8, 128, 4096, 14336)


def run(cmd) -> str:
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stderr[-1500:]}")
    return r.stdout


def speeds(args, path: Path) -> dict:
    common = ["-m", path, "-p", 512, "-n", 128, "-r", 3]
    engines = {"ours": [args.bench_tool, *common, "--device", "cuda", "--kv", "fp16"],
               "llama": [args.llama_bin / "llama-bench", *common, "-ngl", 99, "-fa", 1, "-ctk", "f16",
                         "-ctv", "f16", "-o", "jsonl"]}
    out = {}
    for engine, cmd in engines.items():
        try:
            for rec in parse(engine, run(cmd)):
                out[f"{rec['test']}_{engine}"] = statistics.median(rec["samples_ts"])
        except RuntimeError as e:
            out[f"error_{engine}"] = str(e).splitlines()[-1][:300]
    for test in ("pp512", "tg128"):
        if f"{test}_ours" in out and f"{test}_llama" in out:
            out[f"{test}_ratio"] = out[f"{test}_ours"] / out[f"{test}_llama"]
    return out


def rows(args, tmp: Path) -> list[dict]:
    shapes = {a: (MODELS[a][0], *MODELS[a][1:5], 512) for a in GPU_ARCHS}
    shapes["llama3-8b"] = LLAMA3
    out = []
    for name, (layout, heads, kv, hd, width, ffn) in shapes.items():
        arch = "llama" if name == "llama3-8b" else name
        base = tmp / f"{name}-F16.gguf"
        run([args.fixture_tool, "--arch", arch, "--type", "f16", "--seed", "7", "--heads", heads,
             "--kv-heads", kv, "--head-dim", hd, "--width", width, "--ffn", ffn, "--layers", 2, base])
        types = ["F16", "Q8_0", "Q4_K_M"] if name == "llama3-8b" else ["F16", "Q4_K_M"]
        for type_ in types:
            path = base if type_ == "F16" else tmp / f"{name}-{type_}.gguf"
            if type_ != "F16":
                run([args.llama_bin / "llama-quantize", base, path, type_])
            row = {"arch": arch, "fixture": name, "layout_of": layout, "heads": heads, "kv_heads": kv,
                   "head_dim": hd, "width": width, "ffn": ffn, "type": type_,
                   "file_bytes": path.stat().st_size, **speeds(args, path)}
            out.append(row)
            print(json.dumps(row), flush=True)
            if path != base:
                path.unlink()
        base.unlink()
    return out


def cell(r: dict, test: str) -> str:
    if f"{test}_ratio" not in r:
        return "error: " + r.get("error_ours", r.get("error_llama", "?"))
    return f"{r[f'{test}_ours']:,.0f} / {r[f'{test}_llama']:,.0f} = {r[f'{test}_ratio']:.2f}"


def markdown(rs: list[dict], meta: dict) -> str:
    lines = ["# The GPU runtime against llama.cpp's CUDA build", "",
             f"Command: `{meta['command']}`  ", f"GPU: {meta['gpu']}  ", f"Date: {meta['date']}  ",
             f"llama.cpp: {meta['llama']}", "",
             "Both engines on the same file, one after the other: llama-bench (`-ngl 99 -fa 1`, f16 KV "
             "cache) and veloxquant_bench_runtime (`--device cuda`, fp16 cache; quantized weights decoded "
             "to f16 once at load). Medians of 3 repetitions; ours / llama.cpp's tokens/s for a "
             "512-token prompt (pp512) and 128 single-token steps (tg128). Two-layer random-weight "
             "fixtures.", "",
             "| arch | layout of | heads / kv / head_dim, width, ffn | type | pp512 ours / llama.cpp "
             "| tg128 ours / llama.cpp |", "| --- | --- | --- | --- | ---: | ---: |"]
    for r in rs:
        lines.append(f"| {r['arch']} | {r['layout_of']} | {r['heads']} / {r['kv_heads']} / {r['head_dim']}, "
                     f"{r['width']}, {r['ffn']} | {r['type']} | {cell(r, 'pp512')} "
                     f"| {cell(r, 'tg128')} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-bin", type=Path, required=True, help="llama.cpp's CUDA build's bin folder")
    ap.add_argument("--fixture-tool", type=Path, required=True, help="veloxquant_make_fixture")
    ap.add_argument("--bench-tool", type=Path, required=True, help="veloxquant_bench_runtime with CUDA")
    ap.add_argument("--llama-version", default="llama_cpp_python-0.3.36 (vendored llama.cpp)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    meta = {"command": "bench/llamacpp/cuda_h200.sh run OUT", "gpu": gpu_name(),
            "date": dt.date.today().isoformat(), "llama": args.llama_version}
    with tempfile.TemporaryDirectory(dir=ROOT / "build-h200") as d:
        rs = rows(args, Path(d))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cuda_vs_llama.json").write_text(json.dumps({**meta, "rows": rs}, indent=1) + "\n")
    (args.out / "cuda_vs_llama.md").write_text(markdown(rs, meta))
    print(markdown(rs, meta))


if __name__ == "__main__":
    main()
