"""Tables of bench/cuda/runtime_speed_h200.sh's measurements: prefill and decode tokens/s per model,
context and method on the GPU, each method's decode speed as a ratio to the fp16 cache's at the
same context, KV bytes and peak GPU memory. Writes runtime_speed.json and runtime_speed.md."""
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
    runs = [json.loads(line) for f in a.jsonl for line in pathlib.Path(f).read_text().splitlines() if line.strip()]
    table = {}
    for r in runs:
        model = pathlib.Path(r["model"]).stem
        if r["test"].startswith("pp"):
            table.setdefault((model, int(r["test"][2:]), r["kv"]), {})["prefill"] = r
        else:
            table.setdefault((model, r["depth"], r["kv"]), {})["decode"] = r
    rows = []
    for (model, ctx, kv), m in sorted(table.items(), key=lambda x: (x[0][0], x[0][1])):
        dec, pre = m.get("decode"), m.get("prefill")
        base = table.get((model, ctx, "fp16"), {}).get("decode")
        rows.append({
            "model": model, "context": ctx, "kv": kv,
            "prefill_tok_s": pre["median_tokens_per_s"] if pre else None,
            "decode_tok_s": dec["median_tokens_per_s"] if dec else None,
            "decode_vs_fp16": dec["median_tokens_per_s"] / base["median_tokens_per_s"] if dec and base else None,
            "kv_bytes": dec["kv_bytes"] if dec else pre["kv_bytes"] if pre else None,
            "kv_fp16_bytes": dec["kv_fp16_bytes"] if dec else pre["kv_fp16_bytes"] if pre else None,
            "peak_gpu_mib": max((x["peak_gpu_mib"] for x in (dec, pre) if x), default=None),
        })
    meta = {"command": a.command, "gpu": a.gpu or gpu_name(), "date": datetime.date.today().isoformat(), "batch": 1}
    out = pathlib.Path(a.out)
    (out / "runtime_speed.json").write_text(json.dumps({**meta, "rows": rows, "runs": runs}, indent=2))

    def f(x, spec):
        return "" if x is None else format(x, spec)

    lines = ["# The runtime on the GPU: prefill and decode speed", "",
             f"Command: `{a.command}`; GPU: {meta['gpu']}; date: {meta['date']}; batch 1. Prefill: a prompt of "
             "S random tokens into an empty cache (tokens/s, one timed run). Decode: 64 "
             "single-token steps with S tokens in the cache (tokens/s over the 64). Peak GPU memory: nvidia-smi memory.used "
             "(includes the CUDA context).", "",
             "| model | S | kv | prefill tok/s | decode tok/s | decode vs fp16 | KV bytes | fp16 KV bytes | peak GPU MiB |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['context']:,} | `{r['kv']}` | {f(r['prefill_tok_s'], ',.0f')} | "
                     f"{f(r['decode_tok_s'], ',.1f')} | {f(r['decode_vs_fp16'], '.2f')} | {f(r['kv_bytes'], ',')} | "
                     f"{f(r['kv_fp16_bytes'], ',')} | {f(r['peak_gpu_mib'], ',')} |")
    (out / "runtime_speed.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
