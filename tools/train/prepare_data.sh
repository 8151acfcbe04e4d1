#!/usr/bin/env bash
# Builds the evaluation models' tokenizer and training data from the shared corpus:
#   1. trains the 4096-token byte-level BPE vocabulary on all of corpus/train,
#   2. encodes the train shards and the validation text with it (16-bit ids),
#   3. writes what the GPU machine needs into .train-data/ (ignored by git; carried by the device
#      run): train.u16.xz and valid.u16. The tokenizer goes to models/tokenizer-4096.gguf.
# Usage: tools/train/prepare_data.sh [BUILD_DIR]   (run from the repository root after a build)
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
"$tool" encode -t models/tokenizer-4096.gguf -o .train-data/valid.u16 "$work/gutenberg-valid.txt"
xz -T2 -6 -c "$work/train.u16" >.train-data/train.u16.xz
sha256sum models/tokenizer-4096.gguf .train-data/valid.u16 .train-data/train.u16.xz
