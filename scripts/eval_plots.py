#!/usr/bin/env python3
"""Plots of `veloxquant eval`'s results.json.

    python3 scripts/eval_plots.py RESULTS_DIR [OUT_DIR]

Writes into OUT_DIR (default RESULTS_DIR):
  quality_vs_bytes.png  perplexity change, KL divergence and retrieval against bits per element
  pareto.png            perplexity against cache bytes, the Pareto front joined
  retrieval.png         retrieval heat maps (length x depth), one per method
  observations.png      (eval --observe) key, value and attention-output error per method and
                        layer, averaged over KV heads
"""
import json
import math
import sys
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)


def short(spec):
    """The spec without parameters: 'snapkv+kivi' for 'snapkv:budget=1024,...+kivi:kbits=2,...'."""
    return "+".join(part.split(":")[0] for part in spec.split("+"))


def title(setup):
    model = Path(setup["model"]).name
    return f"{model}, context {setup['context']}, {setup['chunks']} chunks"


def quality_vs_bytes(results, out):
    setup, rows = results["setup"], results["methods"]
    fig, axes = plt.subplots(1, 3, figsize=(16, 5.5), constrained_layout=True)
    panels = [("perplexity_delta_pct", "perplexity vs fp16 (%)", 1.0),
              ("kl_mean", "mean KL divergence from fp16 (nats)", 1.0),
              ("retrieval_mean", "retrieval (%)", 100.0)]
    for ax, (key, label, scale) in zip(axes, panels, strict=True):
        for r in rows:
            ax.scatter(r["bits_per_element"], scale * r[key], color="C3" if r["pareto"] else "C0", zorder=3)
            ax.annotate(short(r["spec"]), (r["bits_per_element"], scale * r[key]), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
        ax.set_xlabel("bits per element (K+V)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    # Changes run from a fraction of a percent to several hundred: linear up to 1 %, then log.
    axes[0].set_yscale("symlog", linthresh=1.0)
    axes[0].yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    fig.suptitle(f"Quality against cache size: {title(setup)} (red: Pareto front)")
    fig.savefig(out / "quality_vs_bytes.png", dpi=120)
    plt.close(fig)


def pareto(results, out):
    setup, rows = results["setup"], results["methods"]
    fig, ax = plt.subplots(figsize=(9, 6))
    for r in rows:
        ax.scatter(r["kv_bytes"] / 2**20, r["perplexity"], color="C3" if r["pareto"] else "C7", zorder=3)
        ax.annotate(short(r["spec"]), (r["kv_bytes"] / 2**20, r["perplexity"]), fontsize=7,
                    xytext=(3, 3), textcoords="offset points")
    front = sorted((r for r in rows if r["pareto"]), key=lambda r: r["kv_bytes"])
    ax.plot([r["kv_bytes"] / 2**20 for r in front], [r["perplexity"] for r in front], color="C3",
            drawstyle="steps-post", label="Pareto front")
    ax.set_xlabel("KV cache of one chunk (MiB, all layers)")
    ax.set_ylabel("perplexity")
    ax.set_yscale("log")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    ax.set_title(f"Perplexity against cache bytes: {title(setup)}")
    fig.tight_layout()
    fig.savefig(out / "pareto.png", dpi=120)
    plt.close(fig)


def retrieval(results, out):
    setup, rows = results["setup"], results["methods"]
    lengths, depths = setup["retrieval_lengths"], setup["retrieval_depths"]
    if not lengths or not rows[0]["retrieval"]:
        return
    cols = min(6, len(rows))
    nrows = math.ceil(len(rows) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(2.6 * cols, 2.4 * nrows + 0.6), squeeze=False,
                             constrained_layout=True)
    for ax in axes.flat:
        ax.axis("off")
    image = None
    for ax, r in zip(axes.flat, rows, strict=False):  # the grid's spare axes stay off
        # Cells come length by length, each with every depth.
        grid = [[100.0 * r["retrieval"][i * len(depths) + j]["recall"] for i in range(len(lengths))]
                for j in range(len(depths))]
        ax.axis("on")
        image = ax.imshow(grid, vmin=0, vmax=100, cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(lengths)), [str(n) for n in lengths], fontsize=7)
        ax.set_yticks(range(len(depths)), [f"{d:g}" for d in depths], fontsize=7)
        ax.set_title(short(r["spec"]), fontsize=8)
        for j in range(len(depths)):
            for i in range(len(lengths)):
                ax.text(i, j, f"{grid[j][i]:.0f}", ha="center", va="center", fontsize=7,
                        color="white" if grid[j][i] < 60 else "black")
    fig.colorbar(image, ax=axes.ravel().tolist(), label="needle tokens recalled (%)")
    fig.suptitle(f"Retrieval by length (x) and needle depth (y): {Path(setup['model']).name}")
    fig.savefig(out / "retrieval.png", dpi=120)
    plt.close(fig)


def observations(results, out):
    rows = [r for r in results["methods"] if "observations" in r]
    if not rows:
        return
    layers = len(rows[0]["observations"]["layers"])
    panels = [("key_error", "key reconstruction"), ("value_error", "value reconstruction"),
              ("attention_error", "attention output")]
    fig, axes = plt.subplots(1, 3, figsize=(5 + 0.5 * layers * 3, 1.2 + 0.3 * len(rows)),
                             constrained_layout=True)
    for ax, (key, label) in zip(axes, panels, strict=True):
        grid = []
        for r in rows:
            line = []
            for layer in r["observations"]["layers"]:
                errors = [h[key] for h in layer["heads"] if h[key] is not None]
                line.append(sum(errors) / len(errors) if errors else math.nan)
            grid.append(line)
        image = ax.imshow(grid, vmin=0, vmax=0.5, cmap="magma_r", aspect="auto")
        ax.set_xticks(range(layers), [str(i) for i in range(layers)], fontsize=7)
        ax.set_yticks(range(len(rows)), [short(r["spec"]) for r in rows], fontsize=7)
        ax.set_xlabel("layer")
        ax.set_title(f"{label} (relative L2)", fontsize=9)
    fig.colorbar(image, ax=axes.ravel().tolist(), label="relative L2 error (clipped at 0.5)")
    fig.suptitle(f"What the caches did over {results['setup']['observed_tokens']} tokens: "
                 f"{Path(results['setup']['model']).name}")
    fig.savefig(out / "observations.png", dpi=120)
    plt.close(fig)


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit(f"usage: {argv[0]} RESULTS_DIR [OUT_DIR]")
    source = Path(argv[1])
    out = Path(argv[2]) if len(argv) == 3 else source
    results = json.loads((source / "results.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    quality_vs_bytes(results, out)
    pareto(results, out)
    retrieval(results, out)
    observations(results, out)


if __name__ == "__main__":
    main(sys.argv)
