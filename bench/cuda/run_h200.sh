#!/usr/bin/env bash
# The CUDA backend on the GPU machine (an H200 lent through the device tool): builds the benchmark
# as a project of its own (bench/cuda: the machine has CUDA, cmake and ninja but not the CPU
# library's dependencies), runs the parity test, times the vector-quantization kernels against
# plain implementations (OUT_DIR/cuda_vq.{json,md}), the GPU sampler against the host's
# (OUT_DIR/cuda_sampler.{json,md}), then our decode kernels and PyTorch SDPA.
#
#   bench/cuda/run_h200.sh OUT_DIR [--quick | --parity-only]
#
# Parity: the test links the CPU library, so it is built on a development machine
# (bench/cuda/carry_parity.sh puts it and the shared libraries it needs into .cuda-carry/, which
# travels with the call) and only run here; without it the step is skipped with a note.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: run_h200.sh OUT_DIR [--quick | --parity-only]}
quick=${2:-}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$out/gpu.txt"
if [[ $quick != --parity-only ]]; then
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  cmake -S bench/cuda -B build-h200 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" >/dev/null
  cmake --build build-h200 -j "$(nproc)"
fi
status=0
source bench/cuda/carried.sh
if parity=$(carried veloxquant_cuda_parity); then
  echo "run_h200: parity"
  # GoogleTest's log whole, and its tables (the rows each case prints) as the report.
  VELOXQUANT_REQUIRE_GPU=1 "$parity" > "$out/parity.log" 2>&1 || status=1
  gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)
  # GoogleTest's counts, e.g. "74 passed, 42 skipped".
  summary=$(grep -E '^\[ +(PASSED|SKIPPED|FAILED) +\] [0-9]+ tests?' "$out/parity.log" |
            sed -E 's/^\[ +([A-Z]+) +\] ([0-9]+) tests?.*/\2 \L\1/' | paste -sd, - | sed 's/,/, /g')
  {
    echo "# CUDA parity with the CPU reference ($gpu, $(date -u +%F))"
    echo
    echo "Command: \`bench/cuda/carry_parity.sh\` on a development machine, then \`bench/cuda/run_h200.sh"
    echo "OUT_DIR\` on the GPU machine (the program is \`tests/cuda/cuda_parity.cu\`): $summary."
    echo "Cache cases:"
    echo "batch 2, 2 KV heads, a 300-token prefill then 41 single-token appends, RoPE on; outputs"
    echo "NaN-poisoned before each run. Their columns: code bytes compared, bytes that differ (codes,"
    echo "headers, norms), residual-window bytes that differ, sign bits that differ (turboquant_prod and"
    echo "qjl keys, counted apart, bound 1 in 10^4), the normalized attention error against the CPU cache"
    echo "and against a CPU cache restored from the GPU's own streams, the same error of a prompt's causal"
    echo "attention (the newest 70 of 300 tokens' queries in one call, against \`KVCache::attend\`), the"
    echo "bound, whether every output element was written; a configuration the backend refuses is"
    echo "skipped with its reason. Windowed layers whose codes are bounded (\`tests/cuda/window_parity.cu\`):"
    echo "causal attention after every append of a 1928-token sequence against the CPU cache, and the bytes"
    echo "each holds at the end. The other tables: the vector-quantization kernels and CommVQ's fused"
    echo "centroid gather + RoPE (\`tests/cuda/vq_parity.cu\`), and the GPU sampler against the host's"
    echo "\`Sampler::pick\` (\`tests/cuda/sampler_parity.cu\`). GPU sessions (\`tests/cuda/session_parity.cpp\`,"
    echo "no table): a session file saved on either device restores on the other and decodes as it does."
    echo "What the bounds rest on: docs/cuda.md."
    echo
    grep -E '^\||^$' "$out/parity.log" | cat -s
  } > "$out/parity.md"
  tail -n 3 "$out/parity.log"
else
  echo "run_h200: parity skipped"
fi
[[ $quick == --parity-only ]] && exit $status
echo "run_h200: vector-quantization benchmark"
build-h200/veloxquant_cuda_vq_bench --out "$out" || status=1
echo "run_h200: sampler benchmark"
build-h200/veloxquant_cuda_sampler_bench --out "$out" || status=1
echo "run_h200: benchmark"
build-h200/veloxquant_cuda_bench --out "$out/ours.jsonl" $quick
python3 bench/cuda/sdpa_report.py --ours "$out/ours.jsonl" --out "$out" \
  --command "bench/cuda/run_h200.sh OUT_DIR $quick"
exit $status
