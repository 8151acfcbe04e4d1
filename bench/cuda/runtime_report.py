"""The GPU runtime's parity with the CPU runtime, from bench/cuda/runtime_h200.sh's outputs:
perplexity per model and method on both devices (must agree within 0.1 %, with equal cache
bytes) and the fp16 cache's greedy continuations (must be the same text). Writes
runtime_parity.json and runtime_parity.md and exits 1 on any failure."""
import argparse
import datetime
import json
import pathlib
import re
import sys

from gpu_name import gpu_name

BOUND = 1e-3  # relative perplexity difference allowed


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dir", required=True, help="the runs' JSON files")
    ap.add_argument("--out", required=True, help="where runtime_parity.{json,md} go")
    ap.add_argument("--command", required=True)
    a = ap.parse_args()
    d = pathlib.Path(a.dir)
    rows, ok = [], True

    def load(path):
        try:
            return json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return None

    for cpu_file in sorted(d.glob("ppl_*_cpu.json")):
        cpu = load(cpu_file)
        f32 = load(cpu_file.with_name(cpu_file.name.replace("_cpu.json", "_cuda-f32.json")))
        f16 = load(cpu_file.with_name(cpu_file.name.replace("_cpu.json", "_cuda-f16.json")))
        # A calibrated spec names its artifact's folder, which is the run's, not the method's.
        kv = re.sub(r",artifacts=[^,]*", "", cpu["kv"])
        row = {"model": pathlib.Path(cpu["model"]).stem, "kv": kv, "chunks": cpu["chunks"],
               "ppl_cpu": cpu["perplexity"], "kv_bytes_cpu": cpu["kv_bytes"],
               "tok_s_cpu": cpu["tokens_per_s"], "threads_cpu": cpu["threads"]}
        for name, run in (("f32", f32), ("f16", f16)):
            if run is None:
                row[f"error_{name}"] = "no result"
                continue
            row[f"ppl_cuda_{name}"] = run["perplexity"]
            row[f"rel_diff_{name}"] = abs(run["perplexity"] - cpu["perplexity"]) / cpu["perplexity"]
            row[f"kv_bytes_cuda_{name}"] = run["kv_bytes"]
            row[f"tok_s_cuda_{name}"] = run["tokens_per_s"]
        # The CPU's arithmetic (f32) must reproduce the CPU's perplexity; f16 is reported.
        row["pass"] = ("rel_diff_f32" in row and row["rel_diff_f32"] <= BOUND and
                       row.get("kv_bytes_cuda_f32") == cpu["kv_bytes"] == row.get("kv_bytes_cuda_f16"))
        ok &= row["pass"]
        rows.append(row)
    generations = []
    for cpu_file in sorted(d.glob("gen_*_cpu.json")):
        cpu = load(cpu_file)
        g = {"model": pathlib.Path(cpu["model"]).stem, "kv": cpu["kv"], "tokens": cpu["generated_tokens"],
             "tok_s_cpu": cpu["generated_tokens_per_s"]}
        for name in ("f32", "f16"):
            run = load(cpu_file.with_name(cpu_file.name.replace("_cpu.json", f"_cuda-{name}.json"))) or {}
            g[f"same_text_{name}"] = run.get("text") == cpu["text"]
            g[f"tok_s_cuda_{name}"] = run.get("generated_tokens_per_s")
            ok &= g[f"same_text_{name}"]
        generations.append(g)
    meta = {"command": a.command, "gpu": gpu_name(), "date": datetime.date.today().isoformat(),
            "bound_rel_perplexity": BOUND}
    out = pathlib.Path(a.out)
    (out / "runtime_parity.json").write_text(json.dumps({**meta, "perplexity": rows, "greedy": generations},
                                                        indent=2))
    lines = ["# `--device cuda` against the CPU runtime", "",
             f"Command: `{a.command}`; GPU: {meta['gpu']}; date: {meta['date']}. Perplexity: WikiText-2 "
             f"test, context 2048, llama.cpp's chunking. Pass: with f32 weights (the CPU's arithmetic) the "
             f"perplexity is within {BOUND:.1%} of the CPU's, and both precisions store the CPU's bytes. "
             "f16 weights (the default) are reported beside it.", "",
             "| model | kv | chunks | PPL cpu | PPL cuda f32 (rel. diff) | PPL cuda f16 (rel. diff) | "
             "kv bytes | tok/s cpu | tok/s cuda f32 / f16 | pass |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]

    def ppl(r, name):
        if f"ppl_cuda_{name}" not in r:
            return "no result"
        return f"{r[f'ppl_cuda_{name}']:.4f} ({r[f'rel_diff_{name}']:.1e})"

    for r in rows:
        lines.append(f"| {r['model']} | `{r['kv']}` | {r['chunks']} | {r['ppl_cpu']:.4f} | {ppl(r, 'f32')} | "
                     f"{ppl(r, 'f16')} | {r['kv_bytes_cpu']:,} | "
                     f"{r['tok_s_cpu']:.0f} ({r['threads_cpu']} threads) | "
                     f"{r.get('tok_s_cuda_f32', 0):.0f} / {r.get('tok_s_cuda_f16', 0):.0f} | "
                     f"{'yes' if r['pass'] else 'NO'} |")
    lines += ["", "Greedy continuation (200 tokens, fp16 cache), CPU against GPU:", "",
              "| model | tokens | same text f32 / f16 | tok/s cpu | tok/s cuda f32 / f16 |",
              "| --- | ---: | --- | ---: | ---: |"]
    yes = {True: "yes", False: "NO"}
    for g in generations:
        lines.append(f"| {g['model']} | {g['tokens']} | "
                     f"{yes[g['same_text_f32']]} / {yes[g['same_text_f16']]} | {g['tok_s_cpu']:.1f} | "
                     f"{g['tok_s_cuda_f32'] or 0:.1f} / {g['tok_s_cuda_f16'] or 0:.1f} |")
    (out / "runtime_parity.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
