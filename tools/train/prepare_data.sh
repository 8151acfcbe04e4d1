#!/usr/bin/env bash
# Builds the evaluation models' tokenizer and training data from the shared corpus:
#   1. trains the 4096-token byte-level BPE vocabulary on all of corpus/train,
#   2. encodes the train shards and the validation text with it (16-bit ids),
#   3. writes the long-context task templates (veloxquant_task_templates) from one training shard,
#   4. writes what the GPU machine needs into .train-data/ (ignored by git; carried by the device
#      run): train.u16.xz, valid.u16.xz and tasks.jsonl.xz. The tokenizer goes to
#      models/tokenizer-4096.gguf.
# Usage: [TRAIN_TOKENS=N] tools/train/prepare_data.sh [BUILD_DIR]   (from the repository root after a
# build). TRAIN_TOKENS keeps the first N training tokens only, so that the data travels with a
# checkout that has grown (the device call carries 64 MiB in all).
set -euo pipefail
build=${1:-build}
corpus=../shared/corpus
tool=$build/tools/train/veloxquant_tokenizer
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for f in "$corpus"/train/*.txt.xz; do xz -dc "$f" >"$work/$(basename "$f" .xz)"; done
"$tool" train --vocab 4096 -o models/tokenizer-4096.gguf "$work"/gutenberg-train-*.txt
mkdir -p .train-data
"$tool" encode -t models/tokenizer-4096.gguf -o "$work/train.u16" "$work"/gutenberg-train-*.txt
"$tool" encode -t models/tokenizer-4096.gguf -o "$work/valid.u16" "$work/gutenberg-valid.txt"
if [[ -n ${TRAIN_TOKENS:-} ]]; then
  head -c $((2 * TRAIN_TOKENS)) "$work/train.u16" >"$work/train.head" && mv "$work/train.head" "$work/train.u16"
fi
# Any model with the tokenizer gives the templates their ids; the words come from shard 03.
"$build/tools/train/veloxquant_task_templates" -m models/vq-hd128.gguf \
  --text "$work/gutenberg-train-03.txt" --count 6000 -o "$work/tasks.jsonl"
for f in train.u16 valid.u16 tasks.jsonl; do xz -T2 -9e -c "$work/$f" >".train-data/$f.xz"; done
sha256sum models/tokenizer-4096.gguf "$work"/{train.u16,valid.u16,tasks.jsonl}
