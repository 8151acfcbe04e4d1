#!/usr/bin/env python3
"""Needle recall of several cache specs on one model and text, through `veloxquant recall`:
per spec and cell (length x depth), the share of a repeated random needle the model copies back.

    python3 bench/recall_report.py --model M --text T --specs "fp16 snapkv:budget=256 ..." \\
        [--lengths 1024,2048] [--depths 0.1,0.5,0.9] [--trials 2] --name NAME

The text may be .xz-compressed. Writes bench/results/NAME.json and .md.
"""
import argparse
import datetime
import json
import lzma
import os
import subprocess
import tempfile

from cpu_name import cpu_name
from perplexity_report import CLI, ROOT


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--text", required=True)
    p.add_argument("--specs", required=True, help="space-separated specs")
    p.add_argument("--lengths", default="1024,2048")
    p.add_argument("--depths", default="0.1,0.5,0.9")
    p.add_argument("--trials", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--name", required=True)
    args = p.parse_args()
    args.model, args.text = (os.path.relpath(os.path.abspath(x), ROOT) for x in (args.model, args.text))
    text = args.text
    with tempfile.TemporaryDirectory() as tmp:
        if text.endswith(".xz"):
            text = os.path.join(tmp, "text.txt")
            with lzma.open(os.path.join(ROOT, args.text)) as src, open(text, "wb") as dst:
                dst.write(src.read())
        rows = []
        for spec in args.specs.split():
            cmd = [os.path.relpath(CLI, ROOT), "recall", "-m", args.model, "-f", text, "--kv", spec,
                   "--lengths", args.lengths, "--depths", args.depths, "--trials", str(args.trials),
                   "-t", str(args.threads), "--json"]
            r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout)
            r["text"] = args.text
            rows.append(r)
            print(f"{r['kv']}: mean recall {100 * r['mean_recall']:.1f}%", flush=True)
    command = (f"python3 bench/recall_report.py --model {args.model} --text {args.text} "
               f"--specs \"{args.specs}\" --lengths {args.lengths} --depths {args.depths} "
               f"--trials {args.trials} --name {args.name}")
    meta = {"date": datetime.date.today().isoformat(), "machine": f"{cpu_name()}, {os.cpu_count()} cores",
            "model": os.path.basename(args.model), "text": os.path.basename(args.text), "command": command}
    out = os.path.join(ROOT, "bench", "results", args.name)
    with open(out + ".json", "w") as f:
        json.dump({"meta": meta, "results": rows}, f, indent=2)
    cells = [(c["length"], c["depth"]) for c in rows[0]["cells"]]
    with open(out + ".md", "w") as f:
        f.write(f"# Needle recall of {meta['model']} on {meta['text']}: {args.name}\n\n")
        f.write(f"`{command}` — {meta['machine']}, {meta['date']}. A {rows[0]['needle_tokens']}-token random "
                f"needle planted at the depth and repeated at the end; recall is the share of the repeat's "
                f"tokens after the first that the model predicts exactly, {args.trials} trials per cell. "
                "KV bytes after the longest sequence.\n\n")
        f.write("| kv spec | " + " | ".join(f"{n} @ {d:g}" for n, d in cells)
                + " | mean | KV bytes | compression |\n")
        f.write("| --- |" + " ---: |" * (len(cells) + 3) + "\n")
        for r in rows:
            last = r["cells"][-1]
            f.write(f"| `{r['kv']}` | " + " | ".join(f"{100 * c['recall']:.1f}%" for c in r["cells"]) +
                    f" | {100 * r['mean_recall']:.1f}% | {last['kv_bytes']:,} | "
                    f"{last['kv_fp16_bytes'] / last['kv_bytes']:.2f}x |\n")
    print(f"wrote {out}.json and {out}.md")


if __name__ == "__main__":
    main()
