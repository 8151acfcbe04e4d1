#!/usr/bin/env bash
# The CUDA backend on the GPU machine (an H200 lent through the device tool): builds the benchmark
# as a project of its own (bench/cuda: the machine has CUDA, cmake and ninja but not the CPU
# library's dependencies), runs the parity test, times the vector-quantization kernels against
# plain implementations (OUT_DIR/cuda_vq.{json,md}), the GPU sampler against the host's
# (OUT_DIR/cuda_sampler.{json,md}), then our decode kernels and PyTorch SDPA.
#
#   bench/cuda/run_h200.sh OUT_DIR [--quick]
#
# Parity: the test links the CPU library, so it is built on a development machine
# (bench/cuda/carry_parity.sh puts it and the shared libraries it needs into .cuda-carry/, which
# travels with the call) and only run here; without it the step is skipped with a note.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: run_h200.sh OUT_DIR [--quick]}
quick=${2:-}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$out/gpu.txt"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
cmake -S bench/cuda -B build-h200 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" >/dev/null
cmake --build build-h200 -j "$(nproc)"
status=0
source bench/cuda/carried.sh
if parity=$(carried veloxquant_cuda_parity); then
  echo "run_h200: parity"
  # GoogleTest's log whole, and its tables (the rows each case prints) as the report.
  VELOXQUANT_REQUIRE_GPU=1 "$parity" > "$out/parity.log" 2>&1 || status=1
  grep -E '^\||^$' "$out/parity.log" | cat -s > "$out/parity.md"
  tail -n 3 "$out/parity.log"
else
  echo "run_h200: parity skipped"
fi
echo "run_h200: vector-quantization benchmark"
build-h200/veloxquant_cuda_vq_bench --out "$out" || status=1
echo "run_h200: sampler benchmark"
build-h200/veloxquant_cuda_sampler_bench --out "$out" || status=1
echo "run_h200: benchmark"
build-h200/veloxquant_cuda_bench --out "$out/ours.jsonl" $quick
python3 bench/cuda/sdpa_report.py --ours "$out/ours.jsonl" --out "$out" \
  --command "bench/cuda/run_h200.sh OUT_DIR $quick"
exit $status
