#!/usr/bin/env bash
# Builds the programs the GPU machine runs but cannot build (they link the CPU library, whose
# dependencies it lacks) on a development machine, for any x86-64-v3 CPU: the CUDA parity test,
# the `veloxquant` CLI and the runtime benchmark with the CUDA backend (--device cuda), and the
# fixture writer, logit dumper and dequantizing copier (random-weight models for the benchmark and
# the logits check, and their CPU reference), and the sampler benchmark (it needs only the CUDA
# library, but carried it costs no GPU time). OpenBLAS is linked statically (its shared library
# alone would pass the device tool's 64 MiB limit); cpp-httplib and brotli (the CLI's `serve`)
# travel as shared libraries, the GPU machine has neither; each program is copied, stripped and
# xz-compressed into .cuda-carry/ with the shared libraries it needs, for bench/cuda/run_h200.sh
# and bench/cuda/runtime_h200.sh (the working tree and the carry share one transfer limit).
# -ffp-contract=off keeps the CPU codecs' arithmetic unfused, like the kernels' (docs/cuda.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build-cuda -G Ninja -DVELOXQUANT_CUDA=ON -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
  -DVELOXQUANT_NATIVE=OFF "-DCMAKE_CXX_FLAGS=-march=x86-64-v3 -ffp-contract=off" \
  -DVELOXQUANT_BUILD_TESTS=ON -DVELOXQUANT_BUILD_BENCH=ON >/dev/null
targets=(veloxquant_cuda_parity veloxquant_cli veloxquant_bench_runtime veloxquant_make_fixture veloxquant_dump_logits
         veloxquant_dequantize_gguf veloxquant_cuda_sampler_bench)
cmake --build build-cuda -j "$(nproc)" --target "${targets[@]}"
blas=$(pkg-config --variable=libdir openblas)
blas=${blas%/}
rm -rf .cuda-carry && mkdir .cuda-carry
for target in "${targets[@]}"; do
  link=$(cd build-cuda && ninja -t commands "$target" | tail -1)
  out=$(sed -E 's/.* -o ([^ ]+) .*/\1/' <<<"$link")
  link=${link//"$blas/libopenblas.so"/"$blas/libopenblas.a"}
  link=${link//" -o $out "/" -o $out.carry "}
  (cd build-cuda && eval "$link")
  name=$(basename "$out")
  cp "build-cuda/$out.carry" ".cuda-carry/$name"
  strip ".cuda-carry/$name"  # symbols would pass the travel limit
  for lib in $(ldd ".cuda-carry/$name" | awk '/libfmt|libhwy|libgomp|libgfortran|libquadmath|libopenblas|libcpp-httplib|libbrotli/ {print $3}'); do
    cp -L "$lib" .cuda-carry/
  done
  xz -f -T0 ".cuda-carry/$name"
done
# The evaluation text of bench/cuda/runtime_h200.sh's perplexity checks.
cp ../shared/corpus/wikitext-2-raw/wiki.test.raw .cuda-carry/
# Its calibrated specs' artifacts, fitted on WikiText-2's validation text to the f32 copy of each
# model that runtime_h200.sh makes with the same tool (so the copy's identity is the same there).
source bench/cuda/parity_runs.sh
for model in "${parity_models[@]}"; do
  name=${model%%:*}
  f32=$(mktemp --suffix=.gguf)
  build-cuda/tools/dev/veloxquant_dequantize_gguf "models/$name.gguf" "$f32"
  for spec in "${parity_specs[@]}"; do
    [[ $spec == *@CALIBRATION@* ]] || continue
    build-cuda/veloxquant calibrate -m "$f32" -f ../shared/corpus/wikitext-2/wiki.valid.tokens \
      --kv "${spec%%,artifacts=*}" -o ".cuda-carry/calibration/$name" -t "$(nproc)"
  done
  rm -f "$f32"
done
ls -la .cuda-carry
