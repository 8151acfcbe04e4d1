#!/usr/bin/env bash
# Trains both evaluation models side by side on one GPU (run on the GPU machine from the
# repository root, with $TRAIN_DATA (default .train-data/) holding train.u16.xz and valid.u16 or
# valid.u16.xz as written by tools/train/prepare_data.sh). Results go to $OUT (or ./train-out):
# per model, the f16 weight shards, NAME.json and NAME.log.
#   tools/train/device_train.sh STEPS_HD128 STEPS_HD64 [extra train_llama.py arguments]
set -euo pipefail
steps128=${1:?steps for vq-hd128}
steps64=${2:?steps for vq-hd64}
shift 2
out=${OUT:-train-out}
mkdir -p "$out"
data=$(mktemp -d)
source_dir=${TRAIN_DATA:-.train-data}
xz -dc "$source_dir/train.u16.xz" >"$data/train.u16"
if [[ -f $source_dir/valid.u16.xz ]]; then xz -dc "$source_dir/valid.u16.xz" >"$data/valid.u16"; else cp "$source_dir/valid.u16" "$data/"; fi
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
export PYTHONUNBUFFERED=1
extra=("$@")
pids=()
for run in "vq-hd128:$steps128" "vq-hd64:$steps64"; do
  name=${run%%:*} steps=${run##*:}
  python3 tools/train/train_llama.py --config "$name" --steps "$steps" --train "$data/train.u16" \
    --valid "$data/valid.u16" --out "$out" "${extra[@]}" >"$out/$name.log" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
tail -n 14 "$out"/*.log
exit $status
