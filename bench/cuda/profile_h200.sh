#!/usr/bin/env bash
# Nsight Compute profile of one decode-attention configuration on the GPU machine: speed of light,
# occupancy, warp stall reasons and memory traffic of the attention kernel, for finding what
# limits a kernel (bench/results/cuda_decode.md gives the times).
#
#   bench/cuda/profile_h200.sh OUT_DIR METHOD BATCH SEQ [KERNEL_REGEX]
#
# METHOD is a name of veloxquant_cuda_bench (fp16, kivi2, kivi4, tq_mse2, ...); KERNEL_REGEX
# defaults to "attend_kernel". Writes OUT_DIR/profile-METHOD-BATCH-SEQ.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: profile_h200.sh OUT_DIR METHOD BATCH SEQ [KERNEL_REGEX]}
method=${2:?method} batch=${3:?batch} seq=${4:?seq} kernel=${5:-attend_kernel}
mkdir -p "$out"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
cmake -S bench/cuda -B build-h200 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" >/dev/null
cmake --build build-h200 -j "$(nproc)" >/dev/null
# Skip the warm-up launches; profile one timed launch.
# The stall reasons as warps stalled per issued instruction (what WarpStateStats' chart shows).
stalls=$(printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' long_scoreboard short_scoreboard \
  mio_throttle math_pipe_throttle wait barrier not_selected lg_throttle no_instruction dispatch_stall)
"$ncu" --kernel-name "regex:$kernel" --launch-skip 12 --launch-count 1 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
  --metrics "${stalls%,}" \
  build-h200/veloxquant_cuda_bench --out /dev/null --method "$method" --batch "$batch" --seq "$seq" \
  >"$out/profile-$method-$batch-$seq.txt" 2>&1
grep -E "Duration|Throughput|Registers|Achieved Occupancy|Theoretical Occupancy|Block Limit|Stall|Issued Ipc|No Eligible|Waves" \
  "$out/profile-$method-$batch-$seq.txt" | head -60
