"""PyTorch SDPA on the CUDA benchmark's shapes, then the combined report.

Times torch.nn.functional.scaled_dot_product_attention in fp16 (one decode query per sequence,
grouped-query heads through enable_gqa) with CUDA events, the median of >= 50 calls after warm-up,
rotating over several caches when one would fit in L2. Reads our kernels' records (JSON lines
written by veloxquant_cuda_bench), and writes cuda_decode.json and cuda_decode.md to --out.

    python3 bench/cuda/sdpa_report.py --ours ours.jsonl --out DIR [--iters N] [--command CMD]
"""
import argparse
import datetime
import json
import os
import statistics

import torch
import torch.nn.functional as F

L2_BYTES = 60 << 20


def time_sdpa(batch, seq, q_heads, kv_heads, dim, iters):
    cache_bytes = 2 * batch * kv_heads * seq * dim * 2
    copies = min(8, -(-3 * L2_BYTES // cache_bytes))
    gen = torch.Generator(device="cuda").manual_seed(0)
    kv = [(torch.randn(batch, kv_heads, seq, dim, device="cuda", dtype=torch.float16, generator=gen),
           torch.randn(batch, kv_heads, seq, dim, device="cuda", dtype=torch.float16, generator=gen))
          for _ in range(copies)]
    q = torch.randn(batch, q_heads, 1, dim, device="cuda", dtype=torch.float16, generator=gen)
    for i in range(10):
        k, v = kv[i % copies]
        F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    times = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for i in range(iters):
        k, v = kv[i % copies]
        start.record()
        F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    del kv
    torch.cuda.empty_cache()
    return statistics.median(times), cache_bytes, copies


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--command", default="bench/cuda/run_h200.sh")
    args = ap.parse_args()
    ours = [json.loads(line) for line in open(args.ours) if line.strip()]
    attend = [r for r in ours if r["kind"] == "attend"]
    append = {(r["method"], r["batch"], r["seq"]): r["us"] for r in ours if r["kind"] == "append"}
    shapes = sorted({(r["batch"], r["seq"], r["q_heads"], r["kv_heads"], r["head_dim"]) for r in attend})
    sdpa = {}
    for b, s, qh, kh, d in shapes:
        us, nbytes, copies = time_sdpa(b, s, qh, kh, d, max(50, args.iters))
        sdpa[(b, s)] = {"us": us, "read_bytes": nbytes, "gbps": nbytes / us / 1e3, "caches": copies}
        print(f"sdpa     B={b} S={s:<6} attend {us:9.1f} us {nbytes / us / 1e3:7.0f} GB/s", flush=True)
    rows = []
    for r in attend:
        key = (r["batch"], r["seq"])
        row = dict(r)
        row["sdpa_us"] = sdpa[key]["us"]
        row["speedup_vs_sdpa"] = sdpa[key]["us"] / r["us"]
        row["append_us"] = append.get((r["method"], r["batch"], r["seq"]))
        row["fp16_store_us"] = append.get(("fp16", r["batch"], r["seq"]))
        rows.append(row)
    report = {
        "command": args.command,
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "date": datetime.date.today().isoformat(),
        "sdpa": [{"batch": b, "seq": s, **v} for (b, s), v in sdpa.items()],
        "ours": rows,
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "cuda_decode.json"), "w") as f:
        json.dump(report, f, indent=1)
    lines = [f"# CUDA decode attention ({report['gpu']}, torch {report['torch']}, {report['date']})", "",
             f"Command: `{args.command}`. Median of >= 50 launches (CUDA events); GB/s on the bytes the "
             "kernel reads from the cache. Append: one decode token per sequence (B x 8 KV heads), "
             "quantize-on-append vs our plain fp16 store of the same token.", "",
             "| method | B | S | ours (us) | SDPA fp16 (us) | speed-up | GB/s | append (us) | "
             "fp16 store (us) | append ratio |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in sorted(rows, key=lambda r: (r["batch"], r["seq"], r["method"])):
        ratio = r["append_us"] / r["fp16_store_us"] if r["append_us"] and r["fp16_store_us"] else float("nan")
        lines.append(f"| {r['method']} | {r['batch']} | {r['seq']} | {r['us']:.1f} | {r['sdpa_us']:.1f} | "
                     f"{r['speedup_vs_sdpa']:.2f}x | {r['gbps']:.0f} | {r['append_us']:.1f} | "
                     f"{r['fp16_store_us']:.1f} | {ratio:.2f} |")
    lines += ["", "| SDPA fp16 B | S | us | GB/s |", "| ---: | ---: | ---: | ---: |"]
    for (b, s), v in sorted(sdpa.items()):
        lines.append(f"| {b} | {s} | {v['us']:.1f} | {v['gbps']:.0f} |")
    with open(os.path.join(args.out, "cuda_decode.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
