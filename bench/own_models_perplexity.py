#!/usr/bin/env python3
"""Perplexity of the project's evaluation models with the fp16 cache, on WikiText-2 (context 512,
every chunk) and on the Gutenberg validation text (context 4096, 16 chunks; 8192 and 8 chunks too for
a model trained at 8192 tokens), one thread per run. Writes bench/results/perplexity_own_models.{json,md}.

    .venv/bin/python bench/own_models_perplexity.py [--build build] [MODEL ...]

MODEL names a file in models/ without .gguf (default: every committed model).
"""

from __future__ import annotations

import argparse
import datetime
import json
import lzma
import os
import subprocess
import sys
import tempfile

from cpu_name import cpu_name

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["vq-hd128", "vq-hd64", "vq-gqa"]
WIKI = "../shared/corpus/wikitext-2-raw/wiki.test.raw"
GUTENBERG = "../shared/corpus/train/gutenberg-valid.txt.xz"


def model_context(model: str) -> int:
    import gguf  # PyPI's reader, in the project's .venv

    reader = gguf.GGUFReader(model)
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    return int(reader.fields[f"{arch}.context_length"].parts[-1][0])


def perplexity(vq: str, model: str, text: str, ctx: int, chunks: int | None) -> dict:
    cmd = [vq, "perplexity", "-m", model, "-f", text, "-c", str(ctx), "-t", "1", "--json"]
    if chunks:
        cmd += ["--chunks", str(chunks)]
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    committed = [m for m in MODELS if os.path.exists(os.path.join(ROOT, "models", m + ".gguf"))]
    ap.add_argument("models", nargs="*", default=committed)
    args = ap.parse_args()
    vq = os.path.join(ROOT, args.build, "veloxquant")
    runs, commands = [], []
    with tempfile.TemporaryDirectory() as tmp:
        gutenberg = os.path.join(tmp, "gutenberg-valid.txt")
        with lzma.open(os.path.join(ROOT, GUTENBERG)) as src, open(gutenberg, "wb") as dst:
            dst.write(src.read())
        for name in args.models:
            model = f"models/{name}.gguf"
            cells = [(WIKI, 512, None), (gutenberg, 4096, 16)]
            if model_context(os.path.join(ROOT, model)) >= 8192:
                cells.append((gutenberg, 8192, 8))
            for text, ctx, chunks in cells:
                r = perplexity(vq, model, text, ctx, chunks)
                r["text"] = "gutenberg-valid.txt" if text == gutenberg else text
                runs.append(r)
                command = (f"build/veloxquant perplexity -m {model} -f {r['text']} -c {ctx}"
                           + (f" --chunks {chunks}" if chunks else "") + " -t 1 --json")
                commands.append(command)
    date = datetime.date.today().isoformat()
    machine = f"{cpu_name()}, {os.cpu_count()} cores; one thread per run"
    result = {"date": date, "machine": machine, "script": "bench/own_models_perplexity.py",
              "gutenberg-valid.txt": f"xz -dc {GUTENBERG}", "commands": commands, "runs": runs}
    out = os.path.join(ROOT, "bench", "results", "perplexity_own_models")
    with open(out + ".json", "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    lines = ["# Perplexity of the project's evaluation models (fp16 cache)", "",
             f"Date: {date}. Machine: {machine}. Written by `bench/own_models_perplexity.py`;"
             f" `gutenberg-valid.txt` is `xz -dc {GUTENBERG}`.", "",
             "Commands (from the repository root):", ""]
    lines += [f"    $ {c}" for c in commands]
    lines += ["", "| model | text | context | chunks | scored tokens | perplexity |",
              "|---|---|---:|---:|---:|---:|"]
    for r in runs:
        ppl = f"{r['perplexity']:.2f} ± {r['perplexity_error']:.2f}"
        lines.append(f"| {os.path.basename(r['model'])} | {os.path.basename(r['text'])} | {r['context']} | "
                     f"{r['chunks']} | {r['scored_tokens']} | {ppl} |")
    with open(out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[-len(runs):]))


if __name__ == "__main__":
    main()
