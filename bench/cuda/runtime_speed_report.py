"""Tables of bench/cuda/runtime_speed_h200.sh's measurements: prefill and decode tokens/s per model,
batch, context and method on the GPU, each method's decode speed as a ratio to the fp16 cache's at
the same batch and context, KV bytes, the context that fits in the fp16 cache's bytes at that
context, and peak GPU memory. Writes runtime_speed.json and runtime_speed.md."""
import argparse
import datetime
import json
import pathlib

from gpu_name import gpu_name


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--jsonl", required=True, nargs="+", help="one or more runs' results")
    ap.add_argument("--gpu", help="the GPU's name (default: asked of nvidia-smi)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--command", required=True)
    a = ap.parse_args()
    runs = [json.loads(line) for f in a.jsonl for line in pathlib.Path(f).read_text().splitlines()
            if line.strip()]
    table = {}
    for r in runs:
        model, batch = pathlib.Path(r["model"]).stem, r.get("batch", 1)
        if r["test"].startswith("pp"):
            table.setdefault((model, batch, int(r["test"][2:]), r["kv"]), {})["prefill"] = r
        else:
            table.setdefault((model, batch, r["depth"], r["kv"]), {})["decode"] = r
    rows = []
    for (model, batch, ctx, kv), m in sorted(table.items(), key=lambda x: x[0][:3]):
        dec, pre = m.get("decode"), m.get("prefill")
        base = table.get((model, batch, ctx, "fp16"), {}).get("decode")
        kv_bytes = dec["kv_bytes"] if dec else pre["kv_bytes"] if pre else None
        fp16_bytes = dec["kv_fp16_bytes"] if dec else pre["kv_fp16_bytes"] if pre else None
        rows.append({
            "model": model, "batch": batch, "context": ctx, "kv": kv,
            "prefill_tok_s": (pre["median_tokens_per_s"] if pre
                              else dec.get("median_depth_tokens_per_s") if dec else None),
            "decode_tok_s": dec["median_tokens_per_s"] if dec else None,
            "decode_vs_fp16": (dec["median_tokens_per_s"] / base["median_tokens_per_s"]
                               if dec and base else None),
            "kv_bytes": kv_bytes,
            "kv_fp16_bytes": fp16_bytes,
            # The context the fp16 cache's bytes would hold, at the measured bytes per token (the fp16
            # residual rows and per-stream state are a fixed part, so it is approximate at short S).
            "context_in_fp16_bytes": round(ctx * fp16_bytes / kv_bytes) if kv_bytes and fp16_bytes else None,
            "peak_gpu_mib": max((x["peak_gpu_mib"] for x in (dec, pre) if x), default=None),
        })
    meta = {"command": a.command, "gpu": a.gpu or gpu_name(), "date": datetime.date.today().isoformat()}
    out = pathlib.Path(a.out)
    (out / "runtime_speed.json").write_text(json.dumps({**meta, "rows": rows, "runs": runs}, indent=2))

    def f(x, spec):
        return "" if x is None else format(x, spec)

    lines = ["# The runtime on the GPU: prefill and decode speed", "",
             f"Command: `{a.command}`; GPU: {meta['gpu']}; date: {meta['date']}. B sequences in lockstep, "
             "each with its own cache of S tokens; tokens/s count every sequence's. Prefill: a prompt of S "
             "random tokens per sequence into empty caches (one timed run: the decode test's filling of its "
             "caches). Decode: 64 steps of one token per sequence with S tokens in each cache (tokens/s over "
             "the 64; after the untimed steps the JSON's tg_warmup gives). KV bytes: every sequence's and "
             "layer's, exact. Context in the fp16 bytes: S times the fp16 cache's bytes over the method's, "
             "the context the method holds in the memory the fp16 cache takes for S. Peak GPU memory: "
             "nvidia-smi memory.used (includes the CUDA context).", "",
             "| model | B | S | kv | prefill tok/s | decode tok/s | decode vs fp16 | KV bytes | "
             "fp16 KV bytes | context in the fp16 bytes | peak GPU MiB |",
             "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['batch']} | {r['context']:,} | `{r['kv']}` | "
                     f"{f(r['prefill_tok_s'], ',.0f')} | {f(r['decode_tok_s'], ',.1f')} | "
                     f"{f(r['decode_vs_fp16'], '.2f')} | {f(r['kv_bytes'], ',')} | "
                     f"{f(r['kv_fp16_bytes'], ',')} | {f(r['context_in_fp16_bytes'], ',')} | "
                     f"{f(r['peak_gpu_mib'], ',')} |")
    (out / "runtime_speed.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
