#!/usr/bin/env bash
# The runtime on the GPU (`--device cuda`) against the CPU runtime, on the GPU machine:
#  - perplexity of every method with CUDA kernels on the CPU and on the GPU, with f32 weights (the
#    CPU's arithmetic: must agree within 0.1 %) and with f16 weights (the default: reported); the
#    CPU runs on a copy with the quantized tensors decoded to F32 (veloxquant_dequantize_gguf), as
#    the GPU's f32 weights are, so that it does not round the products' inputs to int8;
#  - greedy continuations with the fp16 cache, which must be the same tokens (both precisions);
#  - logits on the project's models and random-weight fixtures, batch 1 and batched (bench/cuda/gpu_logits.py:
#    OUT_DIR/gpu_logits.{json,md}).
# Needs the CLI that bench/cuda/carry_parity.sh puts into .cuda-carry/.
#
#   bench/cuda/runtime_h200.sh OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: runtime_h200.sh OUT_DIR}
mkdir -p "$out"
raw=$(mktemp -d)  # one JSON per run; OUT_DIR gets the report (runtime_parity.{json,md})
mkdir "$raw/f32"  # the CPU's copies of the models (the same names: the report goes by them)
source bench/cuda/carried.sh
vq=$(carried veloxquant)
dequantize=$(carried veloxquant_dequantize_gguf)
text=.cuda-carry/wiki.test.raw
threads=$(nproc)
source bench/cuda/parity_runs.sh
status=0
# cpu, cuda-f32 or cuda-f16 as the CLI's options, the model included: the GPU reads the model as
# it is, except for a calibrated spec, whose artifact carry_parity.sh fitted to the f32 copy (an
# artifact holds only for the model it was fitted to).
options() {
  local gpu_model=models/$name.gguf
  [[ $spec == *artifacts=* ]] && gpu_model=$raw/f32/$name.gguf
  case $1 in
    cpu) echo "-m $raw/f32/$name.gguf --device cpu" ;;
    cuda-*) echo "-m $gpu_model --device cuda --gpu-weights ${1#cuda-}" ;;
  esac
}
for model in "${parity_models[@]}"; do
  name=${model%%:*} chunks=${model##*:}
  "$dequantize" "models/$name.gguf" "$raw/f32/$name.gguf"
  for spec in "${parity_specs[@]}"; do
    spec=${spec//@CALIBRATION@/.cuda-carry/calibration/$name}
    file=${spec%%,artifacts=*}
    for run in cpu cuda-f32 cuda-f16; do
      "$vq" perplexity -f "$text" -c 2048 --chunks "$chunks" --kv "$spec" -t "$threads" \
        $(options "$run") --json > "$raw/ppl_${name}_${file//[:=,]/_}_$run.json" || status=1
    done
  done
  for run in cpu cuda-f32 cuda-f16; do
    "$vq" generate -p "The old house on the hill had been empty for years, until" -n 200 \
      --temp 0 --kv fp16 -t "$threads" $(options "$run") --json > "$raw/gen_${name}_$run.json" || status=1
  done
done
python3 bench/cuda/runtime_report.py --dir "$raw" --out "$out" --command "bench/cuda/runtime_h200.sh OUT_DIR" || status=1
python3 bench/cuda/gpu_logits.py --fixture-tool "$(carried veloxquant_make_fixture)" \
  --dump-tool "$(carried veloxquant_dump_logits)" --dequantize-tool "$dequantize" --out "$out" || status=1
exit $status
