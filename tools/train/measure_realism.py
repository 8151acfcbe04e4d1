#!/usr/bin/env python3
"""Measures how much a model's KV cache looks like a large LLM's, per layer, on the CPU with the
project's float64 reference forward pass (tests/python/reference_model.py):

  sink   mean attention probability on position 0 (the BOS), over heads and over the queries at
         positions >= --skip (the first queries attend to few tokens and would inflate it);
  key_channel_ratio_pre_rope / _post_rope
         per KV head, the largest channel's mean |k| over the median channel's, averaged over KV
         heads; keys before and after RoPE (the cache stores them after).

Tokens come from a 16-bit token file (`veloxquant_tokenizer encode -t MODEL.gguf ...` writes one);
each window is BOS followed by the next context-1 tokens. Prints a markdown table; --json writes
the numbers. Run with the project's .venv (numpy, gguf):

    .venv/bin/python tools/train/measure_realism.py models/vq-hd128.gguf tokens.u16 --windows 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "python"))
import reference_model  # noqa: E402


def channel_ratio(keys: np.ndarray) -> float:
    mags = np.abs(keys).mean(axis=0)  # [kv_heads, head_dim]
    return float((mags.max(axis=-1) / np.median(mags, axis=-1)).mean())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("tokens", help="16-bit token file")
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--windows", type=int, default=2)
    ap.add_argument("--skip", type=int, default=64)
    ap.add_argument("--json", help="write the per-layer numbers here")
    args = ap.parse_args()

    model = reference_model.load(args.model)
    if model.bos is None:
        print(f"error: {args.model} has no BOS token", file=sys.stderr)
        return 1
    tokens = np.fromfile(args.tokens, dtype=np.uint16).astype(np.int64)
    need = args.windows * (args.context - 1)
    if tokens.size < need:
        print(f"error: {args.tokens} holds {tokens.size} tokens; {args.windows} windows of "
              f"{args.context} need {need}", file=sys.stderr)
        return 1
    layers = model.config.layers
    stats = [dict(sink=0.0, key_channel_ratio_pre_rope=0.0, key_channel_ratio_post_rope=0.0)
             for _ in range(layers)]

    def observe(layer, k_pre, k_post, probs):
        s = stats[layer]
        s["sink"] += float(probs[:, args.skip:, 0].mean()) / args.windows
        s["key_channel_ratio_pre_rope"] += channel_ratio(k_pre) / args.windows
        s["key_channel_ratio_post_rope"] += channel_ratio(k_post) / args.windows

    for w in range(args.windows):
        window = tokens[w * (args.context - 1):(w + 1) * (args.context - 1)]
        reference_model.forward(model, np.concatenate([[model.bos], window]), observe=observe)
        print(f"window {w + 1}/{args.windows} done", file=sys.stderr, flush=True)

    print("| layer | attention on BOS | key channel max/median (pre-RoPE) | (post-RoPE) |")
    print("|---|---|---|---|")
    for i, s in enumerate(stats):
        print(f"| {i} | {100 * s['sink']:.1f} % | {s['key_channel_ratio_pre_rope']:.2f} | "
              f"{s['key_channel_ratio_post_rope']:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(model=os.path.basename(args.model), context=args.context,
                           windows=args.windows, skip=args.skip, layers=stats), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
