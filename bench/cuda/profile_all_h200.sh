#!/usr/bin/env bash
# Nsight Compute profiles of every decode-attention kernel at one shape (default batch 8, 131,072
# tokens), on the GPU machine: bench/cuda/profile_h200.sh per method, then
# bench/cuda/profile_report.py's summary table (OUT_DIR/cuda_profiles.{json,md}); the raw reports
# stay in OUT_DIR/profile-METHOD-BATCH-SEQ.txt.
#
#   bench/cuda/profile_all_h200.sh OUT_DIR [BATCH SEQ]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: profile_all_h200.sh OUT_DIR [BATCH SEQ]}
batch=${2:-8} seq=${3:-131072}
methods=(fp16 kivi2 kivi4 tq_mse2 tq_mse4 tq_prod2 qjl2)
for m in "${methods[@]}"; do
  echo "profile_all_h200: $m"
  bash bench/cuda/profile_h200.sh "$out" "$m" "$batch" "$seq" >/dev/null
done
python3 bench/cuda/profile_report.py --dir "$out" --batch "$batch" --seq "$seq" --out "$out/cuda_profiles" \
  --command "bench/cuda/profile_all_h200.sh OUT_DIR $batch $seq" "${methods[@]}"
