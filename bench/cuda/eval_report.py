"""`veloxquant eval --device cuda` beside the CPU's results page of the same model: per spec the
perplexity on both (and their relative difference), KL and top-1 agreement against each device's
own fp16, retrieval, bytes, and decode tokens/s. Specs the GPU left out are listed with the reason
eval gave. Writes NAME.json and NAME.md to --out; a report, it fails only on missing inputs or
unequal cache bytes (the GPU stores the CPU codecs' bytes)."""
import argparse
import datetime
import json
import pathlib
import sys

from gpu_name import gpu_name


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gpu", required=True, help="results.json of eval --device cuda")
    ap.add_argument("--cpu", required=True, help="results.json of the CPU eval of the same model")
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--command", required=True)
    a = ap.parse_args()
    gpu = json.loads(pathlib.Path(a.gpu).read_text())
    cpu = json.loads(pathlib.Path(a.cpu).read_text())
    cpu_rows = {m["spec"]: m for m in cpu["methods"]}
    rows, ok = [], True
    for g in gpu["methods"]:
        c = cpu_rows.get(g["spec"])
        row = {"spec": g["spec"], "kv_bytes_gpu": g["kv_bytes"], "ppl_gpu": g["perplexity"],
               "kl_gpu": g["kl_mean"], "top1_gpu": g["top1_agreement"], "retrieval_gpu": g["retrieval_mean"],
               "decode_tok_s_gpu": g["decode_tokens_per_s"], "prefill_tok_s_gpu": g["prefill_tokens_per_s"]}
        if c is not None:
            row.update({"kv_bytes_cpu": c["kv_bytes"], "ppl_cpu": c["perplexity"], "kl_cpu": c["kl_mean"],
                        "top1_cpu": c["top1_agreement"], "retrieval_cpu": c["retrieval_mean"],
                        "decode_tok_s_cpu": c["decode_tokens_per_s"],
                        "ppl_rel_diff": abs(g["perplexity"] - c["perplexity"]) / c["perplexity"]})
            row["bytes_equal"] = g["kv_bytes"] == c["kv_bytes"]
            ok &= row["bytes_equal"]
        rows.append(row)
    setup = gpu["setup"]
    report = {"command": a.command, "gpu": gpu_name(), "date": datetime.date.today().isoformat(),
              "cpu_results": a.cpu, "device": setup.get("device"), "context": setup["context"],
              "chunks": setup["chunks"], "rows": rows, "not_on_device": setup.get("not_on_device", [])}
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{a.name}.json").write_text(json.dumps(report, indent=1) + "\n")

    def num(v, fmt):
        return "-" if v is None else format(v, fmt)

    lines = [f"# `veloxquant eval` on the GPU beside the CPU ({report['gpu']}, {report['date']})", "",
             f"Command: `{a.command}` (eval {setup.get('device')}, {setup['chunks']} chunks of "
             f"{setup['context']} tokens, retrieval at {setup['retrieval_lengths']}); the CPU columns are "
             f"`{a.cpu}`, measured on the development machine's CPU. KL and top-1 are against each "
             "device's own fp16 run. Bytes must be equal: the GPU stores the CPU codecs' bytes.", "",
             "| spec | bytes equal | PPL CPU | PPL GPU | rel. diff | KL CPU | KL GPU | top-1 CPU | top-1 GPU "
             "| retrieval CPU | retrieval GPU | decode tok/s CPU | decode tok/s GPU |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(
            f"| `{r['spec']}` | {'yes' if r.get('bytes_equal') else 'NO'} | {num(r.get('ppl_cpu'), '.4f')} "
            f"| {r['ppl_gpu']:.4f} | {num(r.get('ppl_rel_diff'), '.1e')} | {num(r.get('kl_cpu'), '.4f')} "
            f"| {r['kl_gpu']:.4f} | {num(r.get('top1_cpu'), '.3f')} | {r['top1_gpu']:.3f} "
            f"| {num(r.get('retrieval_cpu'), '.3f')} | {r['retrieval_gpu']:.3f} "
            f"| {num(r.get('decode_tok_s_cpu'), '.1f')} | {r['decode_tok_s_gpu']:.1f} |")
    if report["not_on_device"]:
        lines += ["", f"Not run on the GPU ({len(report['not_on_device'])}), with eval's reason:", ""]
        lines += [f"- `{k['spec']}`: {k['reason']}" for k in report["not_on_device"]]
    (out / f"{a.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[6:]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
