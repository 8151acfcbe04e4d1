#!/usr/bin/env python3
"""Weight-product speed of the VeloxQuant CPU runtime against llama.cpp's llama-bench, on the same
quantized files, in one run.

    .venv/bin/python bench/llamacpp/weights_vs_llama_bench.py [--layers 6] [--rounds 3] [--reps 3]

1. Builds llama-bench and llama-quantize (bench/llamacpp/build_llama_bench.sh, from PyPI's
   llama-cpp-python sdist) and our veloxquant_bench_runtime (cmake --build build).
2. Writes a random-weight llama GGUF in f16 with PyPI's `gguf` (dim 2048, ffn 5632, 32 query
   heads and 8 KV heads of 64, vocabulary 32000: the 4096 tokens and merges of
   models/tokenizer-4096.gguf followed by unused filler tokens), big enough that the weight
   products are nearly all of the time, and quantizes it with llama-quantize to each --types
   preset (default Q4_K_M and Q8_0). Files go to .llamacpp/models/ and are reused when present.
3. Runs llama-bench (-p/-n, -t, -r, f16 KV cache, --repack 0,1: both of its weight layouts,
   plain blocks and the repacked interleaved ones, its defaults otherwise) and
   veloxquant_bench_runtime (same tests and threads, fp16 KV cache) on every file, the calls of
   each round in a random order fixed by --seed.
4. Writes bench/results/<name>.json (every repetition, command lines, machine, load averages,
   tensor types of each file) and <name>.md (medians, and ours over the faster of llama.cpp's two
   layouts per test and file).
"""
from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import random
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import gguf
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from runtime_report import (  # noqa: E402
    add_run_options,
    key_line,
    load_avg,
    machine,
    parse,
    run_call,
    wait_for_quiet,
    write_result,
)

LLAMA_BIN = ROOT / ".llamacpp" / "build" / "bin"
OURS = ROOT / "build" / "bench" / "veloxquant_bench_runtime"
MODELS = ROOT / ".llamacpp" / "models"
TOKENIZER = ROOT / "models" / "tokenizer-4096.gguf"

# The shape: a 1B-class llama with fewer layers, so each file stays a few hundred MB.
DIM, FFN, HEADS, KV_HEADS, VOCAB = 2048, 5632, 32, 8, 32000
TOKEN_UNUSED = 5  # llama.cpp's LLAMA_TOKEN_TYPE_UNUSED
SIMD_SHOWN = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")  # the CPU flags the table names


def tokenizer_fields() -> dict:
    """tokenizer-4096.gguf's vocabulary, padded with unused tokens to VOCAB."""
    r = gguf.GGUFReader(TOKENIZER)
    f = r.fields
    tokens = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode() for i in f["tokenizer.ggml.tokens"].data]
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    merges = [bytes(f["tokenizer.ggml.merges"].parts[i]).decode() for i in f["tokenizer.ggml.merges"].data]
    pad = VOCAB - len(tokens)
    return {
        "model": f["tokenizer.ggml.model"].contents(),
        "pre": f["tokenizer.ggml.pre"].contents(),
        "tokens": tokens + [f"<unused_{i}>" for i in range(pad)],
        "types": types + [TOKEN_UNUSED] * pad,
        "merges": merges,
        "bos": f["tokenizer.ggml.bos_token_id"].contents(),
        "eos": f["tokenizer.ggml.eos_token_id"].contents(),
    }


def write_f16_model(path: Path, layers: int, seed: int) -> None:
    """Random normal weights (std 0.02, as a freshly initialised llama), norms at 1."""
    rng = np.random.default_rng(seed)
    head_dim = DIM // HEADS

    def mat(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(f"random-llama-{DIM}x{layers}")
    w.add_context_length(4096)
    w.add_embedding_length(DIM)
    w.add_block_count(layers)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(VOCAB)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    t = tokenizer_fields()
    w.add_tokenizer_model(t["model"])
    w.add_tokenizer_pre(t["pre"])
    w.add_token_list(t["tokens"])
    w.add_token_types(t["types"])
    w.add_token_merges(t["merges"])
    w.add_bos_token_id(t["bos"])
    w.add_eos_token_id(t["eos"])
    w.add_add_bos_token(True)
    ones = np.ones(DIM, dtype=np.float32)
    w.add_tensor("token_embd.weight", mat(VOCAB, DIM))
    for i in range(layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", ones)
        w.add_tensor(p + "attn_q.weight", mat(DIM, DIM))
        w.add_tensor(p + "attn_k.weight", mat(KV_HEADS * head_dim, DIM))
        w.add_tensor(p + "attn_v.weight", mat(KV_HEADS * head_dim, DIM))
        w.add_tensor(p + "attn_output.weight", mat(DIM, DIM))
        w.add_tensor(p + "ffn_norm.weight", ones)
        w.add_tensor(p + "ffn_gate.weight", mat(FFN, DIM))
        w.add_tensor(p + "ffn_up.weight", mat(FFN, DIM))
        w.add_tensor(p + "ffn_down.weight", mat(DIM, FFN))
    w.add_tensor("output_norm.weight", ones)
    w.add_tensor("output.weight", mat(VOCAB, DIM))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tensor_types(path: Path) -> dict:
    """Elements per stored type among the 2-D tensors (the weight products' mix)."""
    counts = collections.Counter()
    for t in gguf.GGUFReader(path).tensors:
        if len(t.shape) == 2:
            counts[t.tensor_type.name] += int(t.n_elements)
    return dict(sorted(counts.items()))


def run(cmd: list[str], **kw) -> None:
    print("+ " + shlex.join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT, **kw)


def prepare(a) -> dict[str, Path]:
    """Builds the tools, writes and quantizes the model; returns type name -> file."""
    # The sdist comes through this interpreter's pip (the project's .venv has one).
    run(["bash", "bench/llamacpp/build_llama_bench.sh"],
        env={**os.environ, "PIP": os.environ.get("PIP", f"{sys.executable} -m pip")})
    run(["cmake", "--build", "build", "--target", "veloxquant_bench_runtime", "-j", str(a.jobs)])
    MODELS.mkdir(parents=True, exist_ok=True)
    base = MODELS / f"random-llama-{DIM}x{a.layers}-seed{a.seed}"
    f16 = base.with_name(base.name + "-f16.gguf")
    if not f16.exists():
        tmp = f16.with_suffix(".tmp")
        write_f16_model(tmp, a.layers, a.seed)
        tmp.rename(f16)
    files = {}
    for q in a.types:
        out = base.with_name(f"{base.name}-{q}.gguf")
        if not out.exists():
            tmp = out.with_suffix(".tmp")
            run([str(LLAMA_BIN / "llama-quantize"), str(f16), str(tmp), q, str(a.jobs)],
                stdout=subprocess.DEVNULL)
            tmp.rename(out)
        files[q] = out
    return files


def command(engine: str, model: Path, a) -> list[str]:
    """The call, with paths relative to the repository root (where it runs)."""
    common = ["-m", str(model), "-p", str(a.prompt), "-n", str(a.gen), "-t", str(a.threads),
              "-r", str(a.reps)]
    if engine == "ours":
        return [os.path.relpath(OURS, ROOT)] + common + ["--kv", "fp16"]
    return [os.path.relpath(LLAMA_BIN / "llama-bench", ROOT)] + common + [
        "-ctk", "f16", "-ctv", "f16", "--repack", "0,1", "-o", "jsonl"]


def config(engine: str, test: dict) -> str:
    """ours, or llama.cpp with its weights as stored (repack 0) or repacked (repack 1)."""
    if engine == "ours":
        return "ours"
    return f"llama repack {int(test['raw']['repack'])}"


def fmt_rate(x) -> str:
    return "error" if x is None else f"{x:,.1f}"


def render_md(r: dict) -> str:
    st, mach, lb = r["settings"], r["machine"], r["llama_cpp"]
    started = dt.datetime.fromisoformat(r["started_utc"])
    finished = dt.datetime.fromisoformat(r["finished_utc"])
    loads = [x["load_avg_before"][0] for x in r["runs"]]
    md = [
        "# Weight products: VeloxQuant CPU runtime vs llama.cpp (llama-bench)",
        "",
        f"A random-weight llama (dim {DIM}, ffn {FFN}, {st['layers']} layers, {HEADS} heads /"
        f" {KV_HEADS} KV heads of {DIM // HEADS}, vocabulary {VOCAB}) written in f16 and quantized"
        " by llama-quantize; both engines run the same files. Tokens/s, median of"
        f" {st['rounds']} rounds x {st['reps']} repetitions (calls interleaved in random order,"
        f" seed {st['seed']}), {st['threads']} threads, f16 KV cache, empty context:"
        f" pp{st['prompt']} = one batch of {st['prompt']} prompt tokens (matrix-matrix products),"
        f" tg{st['gen']} = {st['gen']} single-token steps (matrix-vector products).",
        "",
        f"- Machine: {mach['cpu_model']} ({', '.join(f for f in mach['cpu_flags_simd'] if f in SIMD_SHOWN)}),"
        f" {mach['logical_cpus']} logical CPUs, {mach.get('mem_total')},"
        f" kernel {mach['kernel']} (shared with other jobs).",
        f"- Date: {started:%Y-%m-%d %H:%M} to {finished:%H:%M} UTC; 1-min load before each call"
        f" {min(loads):.2f} to {max(loads):.2f}.",
        f"- llama.cpp: llama-bench build {lb.get('build_number')} commit {lb.get('build_commit')}"
        f" ({lb.get('backends')}, n_ubatch {lb.get('n_ubatch')}, flash attention auto), from the"
        " llama-cpp-python 0.3.36 sdist, built by `bench/llamacpp/build_llama_bench.sh` (Release,"
        " GGML_NATIVE=ON, CPU only, without ggml's AMX kernels: with them llama-bench's default"
        " crashes in prompt processing on this CPU, ggml-org/llama.cpp#20824), with its weights as"
        " stored and repacked (`--repack 0,1`); the ratio is over the faster of the two.",
        "- Ours: `build/bench/veloxquant_bench_runtime --kv fp16`: integer products on the stored"
        " blocks with the activations rounded to int8 per group (docs/runtime.md).",
        "",
        "| file | weight types (elements) | test | ours tok/s | llama.cpp, as stored | llama.cpp,"
        " repacked | ours / faster llama.cpp |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for row in r["summary"]:
        mix = ", ".join(f"{k} {v / 1e6:.0f}M" for k, v in r["files"][row["file"]]["tensor_types"].items())
        ratio = f"**{row['ratio']:.2f}**" if row["ratio"] else "-"
        md.append(f"| {row['file']} | {mix} | {row['test']} | {fmt_rate(row['ours'])} |"
                  f" {fmt_rate(row['llama repack 0'])} | {fmt_rate(row['llama repack 1'])} | {ratio} |")
    errs = sorted({(x["engine"], x["file"], x["error"][:300]) for x in r["runs"] if x["error"]})
    if errs:
        md += ["", "## Errors", ""] + [f"- {e} on {f}: `{m}`" for e, f, m in errs]
    md += ["", "## Regenerate", "", "```", r["regenerate"], "```", "",
           f"Raw numbers and every command line: `{Path(st['out']).name}.json`.", ""]
    return "\n".join(md)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--types", nargs="+", default=["Q4_K_M", "Q8_0"], help="llama-quantize presets")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=2, help="build and quantize jobs")
    add_run_options(ap, gen=64, reps=3, seed=1, max_wait=600.0,
                    out=ROOT / "bench" / "results" / "weights_vs_llama_bench")
    a = ap.parse_args()
    a.out = a.out.resolve()
    if a.render_only:
        a.out.with_suffix(".md").write_text(render_md(json.loads(a.out.with_suffix(".json").read_text())))
        return 0

    regen = " ".join([".venv/bin/python bench/llamacpp/weights_vs_llama_bench.py"] +
                     [shlex.quote(x) for x in sys.argv[1:]])
    files = prepare(a)
    os.chdir(ROOT)
    rel = {q: Path(os.path.relpath(p, ROOT)) for q, p in files.items()}

    la_start, waited = wait_for_quiet(a.max_load, a.max_wait)
    started = dt.datetime.now(dt.UTC)
    rng = random.Random(a.seed)
    calls = []
    for rnd in range(a.rounds):
        matrix = [(engine, q) for q in a.types for engine in ("ours", "llama")]
        rng.shuffle(matrix)
        calls += [(rnd, *m) for m in matrix]

    runs = []
    for i, (rnd, engine, q) in enumerate(calls):
        cmd = command(engine, rel[q], a)
        la = load_avg()
        t0 = time.monotonic()
        rc, so, se = run_call(cmd, a.timeout)
        rec = {"round": rnd, "engine": engine, "file": q, "command": shlex.join(cmd),
               "returncode": rc, "wall_s": round(time.monotonic() - t0, 2), "load_avg_before": la,
               "tests": [], "error": None}
        if rc == 0:
            rec["tests"] = parse(engine, so)
        else:
            rec["error"] = f"exit {rc}: {key_line(se + so)}"
        runs.append(rec)
        print(f"[{i + 1}/{len(calls)}] round {rnd} {engine} {q}: {rec['wall_s']} s"
              f" {rec['error'] or 'ok'}", file=sys.stderr, flush=True)
    finished = dt.datetime.now(dt.UTC)

    summary = []
    for q in a.types:
        for test in (f"tg{a.gen}", f"pp{a.prompt}"):
            med = {}
            for name in ("ours", "llama repack 0", "llama repack 1"):
                s = [v for r in runs if r["file"] == q for x in r["tests"]
                     if x["test"] == test and config(r["engine"], x) == name for v in x["samples_ts"]]
                med[name] = statistics.median(s) if s else None
            llama = max((v for k, v in med.items() if k != "ours" and v), default=None)
            summary.append({"file": q, "test": test, **med,
                            "ratio": med["ours"] / llama if med["ours"] and llama else None})

    raw = next((x["raw"] for r in runs if r["engine"] == "llama" for x in r["tests"]), {})
    result = {
        "benchmark": "weights_vs_llama_bench",
        "regenerate": regen,
        "started_utc": started.isoformat(timespec="seconds"),
        "finished_utc": finished.isoformat(timespec="seconds"),
        "load_avg_start": la_start,
        "load_avg_end": load_avg(),
        "waited_for_quiet_s": round(waited, 1),
        "machine": machine(),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
        "files": {q: {"path": str(rel[q]), "bytes": files[q].stat().st_size,
                      "tensor_types": tensor_types(files[q])} for q in a.types},
        "llama_cpp": {k: raw.get(k) for k in ("build_commit", "build_number", "cpu_info", "backends",
                                              "n_batch", "n_ubatch", "flash_attn", "type_k", "type_v")},
        "summary": summary,
        "runs": runs,
    }
    result["settings"]["out"] = os.path.relpath(a.out, ROOT)
    write_result(a.out, result, render_md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
