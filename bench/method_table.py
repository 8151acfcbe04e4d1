#!/usr/bin/env python3
"""Prints a markdown table of `veloxquant bench --json` for the given specs (single-threaded, so
the throughput columns are comparable), with the command, machine and date above it. The docs'
method pages paste its output.

    python3 bench/method_table.py [--build build] SPEC [SPEC ...]
"""
import argparse
import datetime
import json
import os
import subprocess

from cpu_name import cpu_name


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("specs", nargs="+")
    args = ap.parse_args()
    exe = os.path.join(args.build, "veloxquant")
    env = dict(os.environ, VELOXQUANT_THREADS="1")
    print(f"`python3 bench/method_table.py {' '.join(args.specs)}` — each row is "
          f"`VELOXQUANT_THREADS=1 {args.build}/veloxquant bench --kv SPEC --json` (4096 synthetic tokens, "
          f"4 KV heads, head_dim 128, 4 query heads per KV head, seed 0); "
          f"{cpu_name()}, {os.cpu_count()} cores; {datetime.date.today().isoformat()}.")
    print()
    print("| spec | compression | key_mse | key_cosine | value_mse | attn_rel_err | encode tok/s | "
          "attend tok/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for spec in args.specs:
        out = subprocess.run([exe, "bench", "--kv", spec, "--json"], check=True, capture_output=True,
                             text=True, env=env).stdout
        r = json.loads(out)
        print(f"| `{r['spec']}` | {r['compression_ratio']:.2f}x | {r['key_mse']:.4g} | "
              f"{r['key_cosine']:.4f} | {r['value_mse']:.4g} | {r['attn_rel_err']:.4f} | "
              f"{r['encode_tokens_per_s']:.3g} | {r['attend_tokens_per_s']:.3g} |")


if __name__ == "__main__":
    main()
