#!/usr/bin/env bash
# Regenerates one model's page under docs/results/: fits every calibrated method on WikiText-2's
# validation split, then runs `veloxquant eval` on the test split with every registered method
# (`all`) plus the calibrated ones. One thread, so two models can run side by side on two cores.
#   bench/results_pages.sh vq-hd128|vq-hd64|vq-gqa|stories260K   # -> docs/results/MODEL/
# Environment: BUILD (default build), CALIB (default build/calib).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="${BUILD:-build}"
CALIB="${CALIB:-build/calib}"
VQ="$BUILD/veloxquant"
VALID=../shared/corpus/wikitext-2/wiki.valid.tokens
TEST=../shared/corpus/wikitext-2-raw/wiki.test.raw

name="${1:?usage: $0 vq-hd128|vq-hd64|vq-gqa|stories260K}"
case "$name" in
  vq-hd128) model=models/vq-hd128.gguf ctx=2048 chunks=8 ;;
  vq-hd64) model=models/vq-hd64.gguf ctx=2048 chunks=4 ;;
  vq-gqa) model=models/vq-gqa.gguf ctx=2048 chunks=8 ;;
  stories260K) model=../shared/models/stories260K.gguf ctx=512 chunks=8 ;;
  *) echo "unknown model '$name': expected vq-hd128, vq-hd64, vq-gqa or stories260K" >&2; exit 2 ;;
esac
[[ -x "$VQ" ]] || { echo "$VQ is not built: run scripts/setup.sh first" >&2; exit 1; }

dir="$CALIB/$name"
mkdir -p "$dir"
start=$(date +%s)
for m in kvquant_nuq vecinfer ratequant comm_vq; do
  echo "== calibrate $m"
  "$VQ" calibrate -m "$model" -f "$VALID" --kv "$m" -o "$dir" -t 1
done
# spectral's fit depends on the context it is evaluated at (docs/methods/spectral.md).
echo "== calibrate spectral"
"$VQ" calibrate -m "$model" -f "$VALID" --kv spectral -c "$ctx" -o "$dir" -t 1
calibrated=$(date +%s)

"$VQ" eval -m "$model" --text "$TEST" \
  --kv all "kvquant_nuq:artifacts=$dir" "spectral:artifacts=$dir" "vecinfer:artifacts=$dir" \
  "ratequant:artifacts=$dir" "comm_vq:artifacts=$dir" \
  --ctx "$ctx" --chunks "$chunks" -t 1 --recommend 1 --observe --out "docs/results/$name"
done_at=$(date +%s)
echo "calibration $((calibrated - start)) s, eval $((done_at - calibrated)) s"
