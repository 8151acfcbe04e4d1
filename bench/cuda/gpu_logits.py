"""Logits of the runtime on the GPU (`--device cuda`) against the CPU runtime's, on the project's
models (models/vq-hd128.gguf, models/vq-hd64.gguf) and on random-weight fixture models of every
architecture the runtime reads (FIXTURES: f16 and Q8_0 weights, grouped-query, head_dim 64 to 256,
each architecture's block features), for a prompt evaluated as one batch (prefill) and one token at
a time (decode), with the fp16 cache; and for a batched session of BATCH sequences (the prompt
rotated, so each differs) against the CPU's logits of each sequence alone. The CPU runs on a copy
of the model with its quantized tensors decoded to F32 (veloxquant_dequantize_gguf): on the
original it rounds the inputs of quantized products to int8, which the GPU does not, and a value
near a rounding boundary then moves the logits by 1e-2 or more. The CPU runtime is itself checked
against the numpy reference on such fixtures (tests/python/test_runtime_logits.py). Error:
max |gpu - cpu| / max |cpu| over all [n, vocab] logits. Bounds: f32 weights 2e-3 (the GPU's kernels
round the query to fp16, 2^-11 relative, which the CPU's attention does not), f16 weights 2e-2
(weights and every projection's input rounded to fp16 as well). Writes gpu_logits.json and
gpu_logits.md into OUT and exits 1 when a bound is passed.

    python3 bench/cuda/gpu_logits.py --fixture-tool T --dump-tool D --dequantize-tool Q --out OUT"""
import argparse
import datetime
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

from gpu_name import gpu_name

BOUNDS = {"f32": 2e-3, "f16": 2e-2}
N_TOKENS = 96
BATCH = 4
PROJECT_MODELS = ["vq-hd128", "vq-hd64"]
# (name, arch, weight type, width, heads, kv_heads, head_dim, ffn, layers, extra fixture options):
# every architecture the runtime reads, with its block's features (q/k norms, post-norms, GeGLU,
# embedding scaling, sliding windows of 8 tokens, soft caps, mistral3's query temperature, YaRN)
# and the head sizes of its production models (Phi-3's 96 and 80, Gemma's 256).
FIXTURES = [
    ("llama-f16-hd64", "llama", "f16", 256, 4, 2, 64, 384, 2, []),
    ("llama-q8_0-hd128", "llama", "q8_0", 512, 8, 2, 128, 768, 2, []),
    ("qwen2-q8_0-hd128", "qwen2", "q8_0", 256, 4, 1, 128, 512, 2, []),
    ("qwen2-yarn-f16-hd128", "qwen2", "f16", 256, 4, 1, 128, 512, 2,
     ["--rope-scale", "4", "--rope-scaling", "yarn"]),
    ("qwen3-f16-hd128", "qwen3", "f16", 256, 4, 2, 128, 512, 2, []),
    ("mistral3-q8_0-hd128", "mistral3", "q8_0", 256, 4, 2, 128, 512, 2, []),
    ("phi3-f16-hd96", "phi3", "f16", 384, 4, 4, 96, 512, 2, []),
    ("phi3-q8_0-hd80", "phi3", "q8_0", 320, 4, 4, 80, 512, 2, []),
    ("gemma2-f16-hd256", "gemma2", "f16", 256, 4, 2, 256, 512, 2, []),
    ("gemma3-q8_0-hd256", "gemma3", "q8_0", 256, 4, 1, 256, 512, 2, []),
]


def run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--fixture-tool", required=True)
    ap.add_argument("--dump-tool", required=True)
    ap.add_argument("--dequantize-tool", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rows, ok = [], True
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        models = [(name, pathlib.Path("models") / f"{name}.gguf") for name in PROJECT_MODELS]
        for name, arch, wtype, width, heads, kv, hd, ffn, layers, extra in FIXTURES:
            gguf = tmp / f"{name}.gguf"
            run([a.fixture_tool, "--arch", arch, "--type", wtype, "--seed", "7", "--width", str(width),
                 "--heads", str(heads), "--kv-heads", str(kv), "--head-dim", str(hd), "--ffn", str(ffn),
                 "--layers", str(layers), *extra, str(gguf)])
            models.append((name, gguf))
        for name, gguf in models:
            tokens = np.random.default_rng(sum(map(ord, name))).integers(3, 256, N_TOKENS)
            sequences = [np.roll(tokens, 7 * b) for b in range(BATCH)]

            # name and gguf bound now: the loop variables of this iteration.
            def dump(tag, seqs, *options, name=name, gguf=gguf):
                out = tmp / f"{name}-{tag}.npy"
                text = ";".join(",".join(map(str, seq)) for seq in seqs)
                run([a.dump_tool, str(gguf), "--tokens", text, "--out", str(out), *options])
                return np.load(out).astype(np.float64)

            dequantized = tmp / f"{name}-f32.gguf"
            run([a.dequantize_tool, str(gguf), str(dequantized)])
            cpu = [dump(f"cpu{b}", [seq], gguf=dequantized) for b, seq in enumerate(sequences)]
            for weights in ("f32", "f16"):
                for mode in ("prefill", "decode"):
                    extra = ["--decode"] if mode == "decode" else []
                    for batch in (1, BATCH):
                        gpu = dump(f"{weights}-{mode}-{batch}", sequences[:batch], "--device", "cuda",
                                   "--gpu-weights", weights, *extra)
                        gpu = gpu.reshape(batch, N_TOKENS, -1)
                        err = max(float(np.abs(gpu[b] - cpu[b]).max() / np.abs(cpu[b]).max())
                                  for b in range(batch))
                        top1 = float(np.mean([gpu[b].argmax(axis=1) == cpu[b].argmax(axis=1)
                                              for b in range(batch)]))
                        passed = err <= BOUNDS[weights]
                        ok &= passed
                        rows.append({"model": name, "weights": weights, "mode": mode, "batch": batch,
                                     "tokens": N_TOKENS, "rel_error": err, "top1_agreement": top1,
                                     "bound": BOUNDS[weights], "pass": passed})
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)  # run on its own, --out may not exist yet
    meta = {"command": "python3 bench/cuda/gpu_logits.py (a step of bench/cuda/runtime_h200.sh)",
            "gpu": gpu_name(), "date": datetime.date.today().isoformat()}
    (out / "gpu_logits.json").write_text(json.dumps({**meta, "rows": rows}, indent=2))
    lines = ["# Logits on the GPU against the CPU runtime (the project's models, random-weight fixtures)", "",
             f"`{meta['command']}`, {meta['gpu']}, {meta['date']}. {N_TOKENS} tokens, fp16 cache; the CPU "
             "on the weights decoded to f32; "
             "error = max |gpu - cpu| / max |cpu| "
             f"(batch {BATCH}: the largest over the sequences, each against the CPU's run of it alone).", "",
             "| model | weights | mode | batch | rel. error | top-1 agreement | bound | pass |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['weights']} | {r['mode']} | {r['batch']} | {r['rel_error']:.2e} | "
                     f"{r['top1_agreement']:.3f} | {r['bound']:.0e} | {'yes' if r['pass'] else 'NO'} |")
    (out / "gpu_logits.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
