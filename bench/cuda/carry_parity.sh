#!/usr/bin/env bash
# Builds the CUDA parity test on a development machine (it links the CPU library, whose
# dependencies the GPU machine lacks) for any x86-64-v3 CPU, links OpenBLAS statically (its shared
# library alone would pass the device tool's 64 MiB limit), and copies it with the shared
# libraries it needs into .cuda-carry/ for bench/cuda/run_h200.sh; the test binary travels
# xz-compressed (the working tree and the carry share one transfer limit). -ffp-contract=off keeps
# the CPU codecs' arithmetic unfused, like the kernels' (docs/cuda.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build-cuda -G Ninja -DVELOXQUANT_CUDA=ON -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
  -DVELOXQUANT_NATIVE=OFF "-DCMAKE_CXX_FLAGS=-march=x86-64-v3 -ffp-contract=off" \
  -DVELOXQUANT_BUILD_TESTS=ON -DVELOXQUANT_BUILD_BENCH=ON >/dev/null
cmake --build build-cuda -j "$(nproc)" --target veloxquant_cuda_parity
link=$(cd build-cuda && ninja -t commands veloxquant_cuda_parity | tail -1)
blas=$(pkg-config --variable=libdir openblas)
blas=${blas%/}
link=${link//"$blas/libopenblas.so"/"$blas/libopenblas.a"}
link=${link//" -o tests/cuda/veloxquant_cuda_parity "/" -o tests/cuda/veloxquant_cuda_parity.carry "}
(cd build-cuda && eval "$link")
rm -rf .cuda-carry && mkdir .cuda-carry
cp build-cuda/tests/cuda/veloxquant_cuda_parity.carry .cuda-carry/veloxquant_cuda_parity
strip .cuda-carry/veloxquant_cuda_parity  # symbols would pass the travel limit
for lib in $(ldd .cuda-carry/veloxquant_cuda_parity | awk '/libfmt|libhwy|libgomp|libgfortran|libquadmath|libopenblas/ {print $3}'); do
  cp -L "$lib" .cuda-carry/
done
xz -f -T0 .cuda-carry/veloxquant_cuda_parity
ls -la .cuda-carry
