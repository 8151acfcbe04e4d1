#!/usr/bin/env bash
# Trains one evaluation model on the GPU machine (run from the repository root, with $TRAIN_DATA
# (default .train-data/) holding train.u16.xz and valid.u16 or valid.u16.xz as written by
# tools/train/prepare_data.sh, and tasks.jsonl.xz when the model learns the long-context tasks).
# Results go to $OUT (or ./train-out): the f16 weight shards, NAME.json and NAME.log.
#   tools/train/device_train.sh NAME STEPS [extra train_llama.py arguments]
# With tasks.jsonl.xz present the model is given it as --task-templates; --task-share sets how
# many windows hold a task.
set -euo pipefail
name=${1:?model name (a train_llama.py --config)}
steps=${2:?steps}
shift 2
out=${OUT:-train-out}
mkdir -p "$out"
data=$(mktemp -d)
source_dir=${TRAIN_DATA:-.train-data}
xz -dc "$source_dir/train.u16.xz" >"$data/train.u16"
if [[ -f $source_dir/valid.u16.xz ]]; then xz -dc "$source_dir/valid.u16.xz" >"$data/valid.u16"; else cp "$source_dir/valid.u16" "$data/"; fi
extra=("$@")
if [[ -f $source_dir/tasks.jsonl.xz ]]; then
  xz -dc "$source_dir/tasks.jsonl.xz" >"$data/tasks.jsonl"
  extra+=(--task-templates "$data/tasks.jsonl")
fi
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
export PYTHONUNBUFFERED=1
status=0
python3 tools/train/train_llama.py --config "$name" --steps "$steps" --train "$data/train.u16" \
  --valid "$data/valid.u16" --out "$out" "${extra[@]}" >"$out/$name.log" 2>&1 || status=1
tail -n 14 "$out/$name.log"
exit $status
