#!/usr/bin/env python3
"""The long-context tasks of `veloxquant eval --tasks` (RULER's multi-key and multi-value needles,
variable tracking, common words) at 8192 tokens on vq-gqa, the evaluation model trained at that
length, for the fp16 cache and the methods a long-context user would pick: the quantizers at their
defaults and at the bits of llama.cpp's q4_0, and the eviction policies at a quarter of the prompt.
The text is the Gutenberg validation split (held out from training; the model knows its prose).
Writes bench/results/long_tasks_MODEL.{json,md}; eval's own files go to a temporary folder.

    .venv/bin/python bench/long_tasks.py [--model vq-gqa] [--samples 4] [--threads 1]
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
GUTENBERG = "../shared/corpus/train/gutenberg-valid.txt.xz"
TASKS = "niah_multikey,niah_multivalue,variable_tracking,common_words"
LENGTH = 8192
BUDGET = LENGTH // 4
SPECS = [
    "kivi", "kivi_sink", "cachegen", "turboquant_mse", "turboquant_mse:bits=2,vbits=2", "zipcache", "xquant",
    f"snapkv:budget={BUDGET}", f"h2o:budget={BUDGET}", f"streaming_llm:budget={BUDGET}",
    f"expected_attention:budget={BUDGET}", f"snapkv:budget={BUDGET}+kivi",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="vq-gqa")
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--build", default="build")
    args = ap.parse_args()
    model = f"models/{args.model}.gguf"
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "gutenberg-valid.txt")
        with lzma.open(os.path.join(ROOT, GUTENBERG)) as src, open(text, "wb") as dst:
            dst.write(src.read())
        out = os.path.join(tmp, "eval")
        cmd = [os.path.join(args.build, "veloxquant"), "eval", "-m", model, "--text", text, "--kv", *SPECS,
               "--ctx", str(LENGTH), "--chunks", "1", "--retrieval", str(LENGTH), "--trials", "1",
               "--tasks", TASKS, "--task-lengths", str(LENGTH), "--task-samples", str(args.samples),
               "-t", str(args.threads), "--no-plots", "--out", out]
        print("+", " ".join(cmd), file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True, cwd=ROOT)
        # eval names the text by its path, here a temporary one: name it by the file instead.
        with open(os.path.join(out, "results.json")) as f:
            results = json.loads(f.read().replace(json.dumps(text)[1:-1], "gutenberg-valid.txt"))
        with open(os.path.join(out, "results.md")) as f:
            table = f.read().replace(text, "gutenberg-valid.txt")
    command = " ".join(["bench/long_tasks.py", *sys.argv[1:]])
    shown = " ".join(c if c != text else "gutenberg-valid.txt" for c in cmd).replace(out, "OUT")
    date = datetime.date.today().isoformat()
    machine = f"{cpu_name()}, {os.cpu_count()} cores, {args.threads} thread(s)"
    base = os.path.join(ROOT, "bench", "results", f"long_tasks_{args.model}")
    with open(base + ".json", "w") as f:
        json.dump({"date": date, "machine": machine, "command": command, "eval": shown,
                   "gutenberg-valid.txt": f"xz -dc {GUTENBERG}", "results": results}, f, indent=1)
        f.write("\n")
    with open(base + ".md", "w") as f:
        f.write(f"# Long-context tasks at {LENGTH} tokens on {args.model}\n\n"
                f"Command: `{command}`  \nMachine: {machine}  \nDate: {date}  \n"
                f"eval: `{shown}` (`gutenberg-valid.txt` is `xz -dc {GUTENBERG}`)\n\n{table}")
    print(f"wrote {base}.json and {base}.md")


if __name__ == "__main__":
    main()
