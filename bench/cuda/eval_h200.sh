#!/usr/bin/env bash
# `veloxquant eval --device cuda --kv all` on the GPU machine: every method the CUDA backend holds,
# measured as the CPU results page measures it (vq-hd128, WikiText-2's test split, 8 chunks of
# 2048 tokens, retrieval at 1024 and 2048), then set beside that page's CPU rows
# (bench/cuda/eval_report.py: OUT_DIR/cuda_eval_vq-hd128.{json,md}). Needs the CLI that
# bench/cuda/carry_parity.sh puts into .cuda-carry/.
#
#   bench/cuda/eval_h200.sh OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: eval_h200.sh OUT_DIR}
mkdir -p "$out"
source bench/cuda/carried.sh
vq=$(carried veloxquant)
"$vq" eval -m models/vq-hd128.gguf --text .cuda-carry/wiki.test.raw --device cuda --kv all \
  --no-plots --out "$out/eval_cuda" -t "$(nproc)" 2> "$out/eval_cuda.log"
python3 bench/cuda/eval_report.py --gpu "$out/eval_cuda/results.json" --cpu docs/results/vq-hd128/results.json \
  --out "$out" --name cuda_eval_vq-hd128 --command "bench/cuda/eval_h200.sh OUT_DIR"
