#!/usr/bin/env bash
# End-to-end speed of the runtime on the GPU (`--device cuda`), on the GPU machine: prefill
# tokens/s of a prompt of S tokens and decode tokens/s with S tokens in the cache, S in {4k, 32k,
# 128k}, batch 1, for the fp16 cache and each method with CUDA kernels, on the project's
# head_dim-128 model and on a random-weight model with Llama-3-8B's attention shapes (32 query
# heads, 8 KV heads, head_dim 128, width 4096, FFN 14336; 2 layers). Peak GPU memory is
# nvidia-smi's memory.used sampled every 50 ms during each run. Batch 8 (eight sequences in
# lockstep, each with its own cache of S tokens) runs the fp16 cache and the 2-bit methods after
# every batch-1 run. Needs the programs bench/cuda/carry_parity.sh puts into .cuda-carry/.
#
#   bench/cuda/runtime_speed_h200.sh OUT_DIR [SECONDS [MODELS [BATCHES [CONTEXTS]]]]
# SECONDS: no run starts after that many (default 420); MODELS: "llama3", "vq-hd128" or both
# (default "llama3 vq-hd128"); BATCHES: "1", "8" or both (default "1 8"); CONTEXTS: default
# "4096 32768 131072".
# Writes runtime_speed.{jsonl,json,md} into OUT_DIR.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: runtime_speed_h200.sh OUT_DIR [SECONDS]}
budget=${2:-420}
models=${3:-llama3 vq-hd128}
batches=${4:-1 8}
contexts=${5:-4096 32768 131072}
mkdir -p "$out"
source bench/cuda/carried.sh
bench=$(carried veloxquant_bench_runtime)
fixture=$(carried veloxquant_make_fixture)
llama=build-h200/llama3-8b-attn-2l.gguf
paths=()
if [[ " $models " == *" llama3 "* ]]; then
  "$fixture" --type f16 --width 4096 --heads 32 --kv-heads 8 --head-dim 128 --ffn 14336 --layers 2 \
    --context 131072 "$llama"
  paths+=("$llama")
fi
[[ " $models " == *" vq-hd128 "* ]] && paths+=(models/vq-hd128.gguf)
specs=(fp16 kivi:kbits=2,vbits=2 turboquant_mse:bits=2,vbits=2 turboquant_prod:bits=2,vbits=2 qjl:vbits=2
       kivi:kbits=4,vbits=4 turboquant_mse:bits=4,vbits=4)
batch_specs=(fp16 kivi:kbits=2,vbits=2 turboquant_mse:bits=2,vbits=2)
start=$SECONDS
results="$out/runtime_speed.jsonl"
: > "$results"
# One run of the benchmark with the GPU's memory.used sampled alongside; appends its JSON lines
# with the peak added.
measure() {
  local log
  log=$(mktemp)
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 50 > "$log" &
  local smi=$!
  local lines
  lines=$("$bench" "$@") || { kill $smi; echo "failed: $*" >&2; return 1; }
  kill $smi; wait $smi 2>/dev/null || true
  local peak
  peak=$(sort -n "$log" | tail -1)
  while read -r line; do
    python3 -c 'import json,sys; j=json.loads(sys.argv[1]); j["model"]=sys.argv[2]; j["peak_gpu_mib"]=int(sys.argv[3]); print(json.dumps(j))' \
      "$line" "$model" "$peak" >> "$results"
  done <<< "$lines"
  rm -f "$log"
}
# Kernels load at start, not at their first launch inside a timed run (one run per test: a
# prefill of 128k tokens is the costly part, so no warm-up run repeats it).
export CUDA_MODULE_LOADING=EAGER
for batch in $batches; do
  if (( batch == 1 )); then run_specs=("${specs[@]}"); else run_specs=("${batch_specs[@]}"); fi
  for model in "${paths[@]}"; do
    for ctx in $contexts; do
      for spec in "${run_specs[@]}"; do
        if (( SECONDS - start > budget )); then echo "runtime_speed: time budget spent; skipping $model $ctx $spec B$batch"; continue; fi
        echo "runtime_speed: $model S=$ctx $spec B$batch"
        # The prefill rate is that of the decode test's filling of its caches with S tokens.
        measure -m "$model" --device cuda --kv "$spec" --batch "$batch" -p 0 -n 64 --tg-warmup 8 -d "$ctx" -r 1 \
          --warmup 0 || true
      done
    done
  done
done
python3 bench/cuda/runtime_speed_report.py --jsonl "$results" --out "$out" \
  --command "bench/cuda/runtime_speed_h200.sh OUT_DIR $budget '$models' '$batches' '$contexts'"
