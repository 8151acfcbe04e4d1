#!/usr/bin/env python3
"""Long generations through several cache specs, side by side in one run, through
`veloxquant generate --json --ignore-eos`: cache bytes, peak memory and decode speed.

    python3 bench/generate_report.py --model M \
        --runs "4000:fp16 20000:streaming_llm:budget=1024 ..." --name NAME

Each run is TOKENS:SPEC. Writes bench/results/NAME.json and .md.
"""
import argparse
import datetime
import json
import os
import subprocess

from perplexity_report import CLI, ROOT, cpu_model

PROMPT = "The old house on the hill had been empty for years, until"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--runs", required=True, help="space-separated TOKENS:SPEC")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--name", required=True)
    args = p.parse_args()
    args.model = os.path.relpath(os.path.abspath(args.model), ROOT)
    rows = []
    for run in args.runs.split():
        tokens, spec = run.split(":", 1)
        cmd = [os.path.relpath(CLI, ROOT), "generate", "-m", args.model, "-p", PROMPT, "-n", tokens,
               "--kv", spec, "-s", "1", "--ignore-eos", "-t", str(args.threads), "--json"]
        r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout)
        r.pop("text")
        rows.append(r)
        print(f"{tokens} tokens, {r['kv']}: {r['kv_bytes']:,} B, {r['peak_rss_mib']:.1f} MiB, "
              f"{r['generated_tokens_per_s']:.1f} tokens/s", flush=True)
    command = (f"python3 bench/generate_report.py --model {args.model} --runs \"{args.runs}\" "
               f"--threads {args.threads} --name {args.name}")
    meta = {"date": datetime.date.today().isoformat(), "machine": f"{cpu_model()}, {os.cpu_count()} cores",
            "model": os.path.basename(args.model), "prompt": PROMPT, "command": command}
    out = os.path.join(ROOT, "bench", "results", args.name)
    with open(out + ".json", "w") as f:
        json.dump({"meta": meta, "results": rows}, f, indent=2)
    with open(out + ".md", "w") as f:
        f.write(f"# Long generations on {meta['model']}: {args.name}\n\n")
        f.write(f"`{command}` — {meta['machine']}, {meta['date']}, {args.threads} thread(s), "
                f"sampling seed 1, end-of-text ignored, prompt \"{PROMPT}\". One run each, side by side "
                "in one session: compare speeds as ratios.\n\n")
        f.write("| tokens | kv spec | KV bytes at the end | fp16 would hold | peak RSS | tokens/s |\n")
        f.write("| ---: | --- | ---: | ---: | ---: | ---: |\n")
        for r in rows:
            f.write(f"| {r['generated_tokens']:,} | `{r['kv']}` | {r['kv_bytes']:,} | "
                    f"{r['kv_fp16_bytes']:,} | {r['peak_rss_mib']:.1f} MiB | "
                    f"{r['generated_tokens_per_s']:.1f} |\n")
    print(f"wrote {out}.json and {out}.md")


if __name__ == "__main__":
    main()
