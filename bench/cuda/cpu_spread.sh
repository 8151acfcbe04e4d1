#!/usr/bin/env bash
# The CPU runtime's perplexity with this machine's build (build/, -march=native by default) for
# the specs and chunks of bench/cuda/runtime_h200.sh, whose CPU runs use the x86-64-v3 build
# without FMA contraction. How far two builds of the same source lie apart is the yardstick for
# the GPU's distance from the CPU on quantized caches (bench/cuda/cpu_spread_report.py).
#
#   bench/cuda/cpu_spread.sh OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: cpu_spread.sh OUT_DIR}
mkdir -p "$out"
source bench/cuda/parity_runs.sh
for model in "${parity_models[@]}"; do
  name=${model%%:*} chunks=${model##*:}
  for spec in "${parity_specs[@]}"; do
    # A calibrated spec's artifact belongs to the GPU machine's f32 copy of the model.
    [[ $spec == *@CALIBRATION@* ]] && continue
    build/veloxquant perplexity -m "models/$name.gguf" -f ../shared/corpus/wikitext-2-raw/wiki.test.raw -c 2048 \
      --chunks "$chunks" --kv "$spec" -t "$(nproc)" --json > "$out/ppl_${name}_${spec//[:=,]/_}.json"
  done
done
