#!/usr/bin/env bash
# How far the CPU runtime's perplexity moves when only OpenBLAS's sgemm kernel changes: one binary,
# one machine, the prefill projections run by the kernels OpenBLAS would pick on other CPUs
# (OPENBLAS_CORETYPE). The kernels sum in different orders, so the keys differ in their last bits;
# an fp16 cache barely notices, a quantized cache flips the codes of keys within rounding of a
# boundary. This bounds what "the CPU's perplexity" means for a quantized cache, against which the
# GPU's is compared (docs/cuda.md, "Parity with the CPU runtime").
#
#   bench/cuda/cpu_blas_spread.sh OUT_DIR [CORETYPES [SPECS]]
# CORETYPES: default "SkylakeX Haswell Prescott"; SPECS: default fp16 and KIVI 2-bit. vq-hd128, WikiText-2,
# 8 chunks of 2048 tokens, one thread. Writes OUT_DIR/cpu_blas_spread.{jsonl,json,md}.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: cpu_blas_spread.sh OUT_DIR [CORETYPES [SPECS]]}
coretypes=${2:-SkylakeX Haswell Prescott}
specs=${3:-fp16 kivi:kbits=2,vbits=2,group=32,residual=128}
mkdir -p "$out"
: > "$out/cpu_blas_spread.jsonl"
for spec in $specs; do
  for core in $coretypes; do
    echo "cpu_blas_spread: $spec with OpenBLAS $core" >&2
    OPENBLAS_CORETYPE=$core build/veloxquant perplexity -m models/vq-hd128.gguf \
      -f ../shared/corpus/wikitext-2-raw/wiki.test.raw -c 2048 --chunks 8 --kv "$spec" -t 1 --json 2>/dev/null |
      python3 -c 'import json,sys; j=json.load(sys.stdin); j["openblas_coretype"]=sys.argv[1]; print(json.dumps(j))' "$core" \
      >> "$out/cpu_blas_spread.jsonl"
  done
done
python3 - "$out" "$coretypes" "$specs" <<'EOF'
import datetime, json, platform, sys
out, coretypes, specs = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [json.loads(l) for l in open(f"{out}/cpu_blas_spread.jsonl")]
cores = coretypes.split()
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
lines = ["# The CPU runtime's perplexity under other OpenBLAS kernels", "",
         f"Command: `bench/cuda/cpu_blas_spread.sh OUT_DIR '{coretypes}' '{specs}'`; {cpu}; "
         f"{datetime.date.today().isoformat()}. One binary and one machine; only OPENBLAS_CORETYPE, the sgemm kernel of the "
         "prefill projections, changes. vq-hd128, WikiText-2, 8 chunks of 2048 tokens, one thread.", "",
         "| kv | " + " | ".join(f"PPL {c}" for c in cores) + " | largest relative difference |",
         "| --- | " + " | ".join("---:" for _ in cores) + " | ---: |"]
for spec in specs.split():
    ppl = [next(r["perplexity"] for r in rows if r["kv"] == spec and r["openblas_coretype"] == c) for c in cores]
    spread = (max(ppl) - min(ppl)) / min(ppl)
    lines.append(f"| `{spec}` | " + " | ".join(f"{p:.4f}" for p in ppl) + f" | {spread:.1e} |")
open(f"{out}/cpu_blas_spread.md", "w").write("\n".join(lines) + "\n")
json.dump({"command": f"bench/cuda/cpu_blas_spread.sh OUT_DIR '{coretypes}' '{specs}'", "cpu": cpu,
           "date": datetime.date.today().isoformat(), "rows": rows}, open(f"{out}/cpu_blas_spread.json", "w"), indent=1)
print("\n".join(lines))
EOF
