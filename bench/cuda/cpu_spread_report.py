"""How far the GPU runtime's perplexity lies from the CPU runtime's, next to how far two builds of
the CPU runtime lie from each other. Inputs: the parity run's JSON (bench/cuda/runtime_h200.sh:
the CPU's x86-64-v3 build without FMA contraction, and the GPU with f32 and f16 weights) and the
JSON files of bench/cuda/cpu_spread.sh (the development machine's -march=native build). A
quantized cache's perplexity moves with any change of f32 rounding (keys within rounding of a
quantization boundary flip their code), so the two CPU builds are the yardstick: the GPU is
'within the CPU's spread' when it is no farther from one of the CPU builds than they are from
each other. Writes cuda_runtime_spread.json and cuda_runtime_spread.md.

    python3 bench/cuda/cpu_spread_report.py --parity PARITY.json --native DIR --out OUT_DIR"""
import argparse
import datetime
import json
import pathlib


def rel(a, b):
    return abs(a - b) / b


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--parity", required=True, help="runtime_parity.json of bench/cuda/runtime_h200.sh")
    ap.add_argument("--native", required=True, help="the directory bench/cuda/cpu_spread.sh wrote")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    parity = json.loads(pathlib.Path(a.parity).read_text())
    native = {}
    for f in pathlib.Path(a.native).glob("ppl_*.json"):
        run = json.loads(f.read_text())
        native[(pathlib.Path(run["model"]).stem, run["kv"], run["chunks"])] = run
    rows = []
    for p in parity["perplexity"]:
        n = native.get((p["model"], p["kv"], p["chunks"]))
        if n is None:
            raise SystemExit(f"no native CPU run for {p['model']} {p['kv']} {p['chunks']} chunks "
                             f"in {a.native}")
        if n["kv_bytes"] != p["kv_bytes_cpu"]:
            raise SystemExit(f"{p['model']} {p['kv']}: the builds store {n['kv_bytes']} and "
                             f"{p['kv_bytes_cpu']} bytes")
        spread = rel(n["perplexity"], p["ppl_cpu"])
        row = {"model": p["model"], "kv": p["kv"], "chunks": p["chunks"], "ppl_cpu_v3": p["ppl_cpu"],
               "ppl_cpu_native": n["perplexity"], "cpu_spread": spread}
        for w in ("f32", "f16"):
            gpu = p[f"ppl_cuda_{w}"]
            row[f"ppl_cuda_{w}"] = gpu
            row[f"gpu_{w}_to_nearest_cpu"] = min(rel(gpu, p["ppl_cpu"]), rel(gpu, n["perplexity"]))
            row[f"within_spread_{w}"] = row[f"gpu_{w}_to_nearest_cpu"] <= max(spread, 1e-3)
        rows.append(row)
    meta = {"parity_run": parity["command"], "gpu": parity["gpu"], "parity_date": parity["date"],
            "native_command": "bench/cuda/cpu_spread.sh OUT_DIR", "date": datetime.date.today().isoformat()}
    out = pathlib.Path(a.out)
    (out / "cuda_runtime_spread.json").write_text(json.dumps({**meta, "rows": rows}, indent=2))
    yes = {True: "yes", False: "NO"}
    lines = ["# Perplexity: the GPU's distance from the CPU against the CPU's distance from itself", "",
             f"GPU and CPU (x86-64-v3, no FMA contraction): `{meta['parity_run']}` ({meta['gpu']}, "
             f"{meta['parity_date']}). CPU native: `{meta['native_command']}` on the development machine "
             f"(-march=native), {meta['date']}. Spread: the two CPU builds' relative difference. GPU: its "
             "relative difference from the nearer CPU build; within the spread when that is at most the "
             "spread (or 0.1 %, the bound for the fp16 cache).", "",
             "| model | kv | PPL cpu v3 | PPL cpu native | CPU spread | PPL cuda f32 | f32 to nearer CPU | "
             "within | PPL cuda f16 | f16 to nearer CPU | within |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |"]
    for r in rows:
        lines.append(f"| {r['model']} | `{r['kv']}` | {r['ppl_cpu_v3']:.4f} | {r['ppl_cpu_native']:.4f} | "
                     f"{r['cpu_spread']:.1e} | {r['ppl_cuda_f32']:.4f} | {r['gpu_f32_to_nearest_cpu']:.1e} | "
                     f"{yes[r['within_spread_f32']]} | {r['ppl_cuda_f16']:.4f} | "
                     f"{r['gpu_f16_to_nearest_cpu']:.1e} | "
                     f"{yes[r['within_spread_f16']]} |")
    within = sum(r["within_spread_f32"] for r in rows)
    lines += ["", f"f32 weights within the CPU's own spread: {within} of {len(rows)}; f16 weights: "
              f"{sum(r['within_spread_f16'] for r in rows)} of {len(rows)}."]
    (out / "cuda_runtime_spread.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
