#!/usr/bin/env python3
"""Perplexity, KL divergence and top-1 agreement of every registered method against the fp16
cache on one model and text, through `veloxquant perplexity` (llama.cpp's recipe).

    python3 bench/perplexity_report.py [--model M] [--text T] [--ctx 512] [--chunks 40]
                                       [--specs "fp16 kivi ..."] [--name NAME]

Writes bench/results/perplexity_<model>.json and .md (or NAME.json and .md). The first spec is
the baseline the others are compared with.
"""
import argparse
import datetime
import json
import os
import subprocess

from cpu_name import cpu_name

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "build", "veloxquant")
SPECS = ["fp16", "kivi", "kivi:residual=32", "kivi:kbits=4,vbits=4,residual=32",
         "turboquant_mse", "turboquant_prod", "turboquant_rvq", "qjl", "polar"]


def run(args, extra):
    cmd = [os.path.relpath(CLI, ROOT), "perplexity", "-m", args.model, "-f", args.text,
           "--ctx", str(args.ctx), "--chunks", str(args.chunks), "-t", str(args.threads), "--json"] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return cmd, json.loads(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=os.path.join(ROOT, "..", "shared", "models", "stories260K.gguf"))
    p.add_argument("--text",
                   default=os.path.join(ROOT, "..", "shared", "corpus", "wikitext-2-raw", "wiki.test.raw"))
    p.add_argument("--ctx", type=int, default=512)
    p.add_argument("--chunks", type=int, default=40)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--specs", default=" ".join(SPECS),
                   help="space-separated specs; the first is the baseline")
    p.add_argument("--name", help="results file name (default perplexity_<model>)")
    args = p.parse_args()
    # Paths relative to the repository root, where the CLI runs: the recorded commands and
    # results read the same on any machine.
    args.model, args.text = (os.path.relpath(os.path.abspath(x), ROOT) for x in (args.model, args.text))
    name = os.path.splitext(os.path.basename(args.model))[0]
    rows = []
    base = os.path.join("build", f"perplexity_base_{name}.bin")  # the fp16 baseline, removed after
    try:
        specs = args.specs.split()
        for spec in specs:
            extra = ["--kv", spec] + (["--save-kl-base", base] if spec == specs[0] else ["--kl-base", base])
            cmd, r = run(args, extra)
            r["command"] = " ".join(cmd)
            rows.append(r)
            print(f"{r['kv']}: ppl {r['perplexity']:.4f}", flush=True)
    finally:
        if os.path.exists(os.path.join(ROOT, base)):
            os.remove(os.path.join(ROOT, base))
    meta = {"date": datetime.date.today().isoformat(), "machine": f"{cpu_name()}, {os.cpu_count()} cores",
            "model": os.path.basename(args.model), "text": os.path.basename(args.text),
            "ctx": args.ctx, "chunks": args.chunks,
            "command": "python3 bench/perplexity_report.py " + f"--model {args.model} --text {args.text} "
                       f"--ctx {args.ctx} --chunks {args.chunks}" +
                       (f" --specs \"{args.specs}\" --name {args.name}" if args.name else "")}
    out = os.path.join(ROOT, "bench", "results", args.name or f"perplexity_{name}")
    with open(out + ".json", "w") as f:
        json.dump({"meta": meta, "results": rows}, f, indent=2)
    with open(out + ".md", "w") as f:
        f.write(f"# Perplexity of {meta['model']} on {meta['text']}, " +
                ("every cache method" if not args.name else args.name) + "\n\n")
        f.write(f"`{meta['command']}` — {meta['machine']}, {meta['date']}. Context {args.ctx}, "
                f"{args.chunks} chunks, {rows[0]['scored_tokens']} scored tokens (llama.cpp's recipe). "
                "KL and top-1 agreement are against the first row's log-probabilities; bytes are "
                "one full chunk's cache.\n\n")
        f.write(f"| kv spec | perplexity | vs {specs[0]} | KL (nats/token) | top-1 agreement | KV bytes | "
                "compression | peak RSS |\n")
        f.write("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
        base_ppl = rows[0]["perplexity"]
        for r in rows:
            kl = f"{r['kl_mean']:.5f} ± {r['kl_error']:.5f}" if "kl_mean" in r else "—"
            agree = f"{100 * r['top1_agreement']:.2f}%" if "top1_agreement" in r else "—"
            f.write(f"| `{r['kv']}` | {r['perplexity']:.4f} ± {r['perplexity_error']:.4f} | "
                    f"{r['perplexity'] / base_ppl:.4f}x | {kl} | {agree} | {r['kv_bytes']:,} | "
                    f"{r['kv_fp16_bytes'] / r['kv_bytes']:.2f}x | {r['peak_rss_mib']:.1f} MiB |\n")
    print(f"wrote {out}.json and {out}.md")


if __name__ == "__main__":
    main()
