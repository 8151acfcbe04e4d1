#!/usr/bin/env bash
# llama.cpp's CUDA build beside the GPU runtime (bench/llamacpp/cuda_vs_llama.py), in three steps:
#   bench/llamacpp/cuda_h200.sh pack      here: llama.cpp's source from the llama-cpp-python sdist
#                                         (bench/llamacpp/build_llama_bench.sh extracts it), without
#                                         the other GPU backends, into .llamacpp-carry/ (about 6 MB)
#   bench/llamacpp/cuda_h200.sh build     on the GPU machine: llama-bench and llama-quantize with
#                                         the CUDA backend for sm_90, into build-llama-cuda/
#   bench/llamacpp/cuda_h200.sh run OUT   on the GPU machine: the comparison, into OUT
# build and run may be one call or two back to back (a warm machine keeps build-llama-cuda/); run
# needs the programs bench/cuda/carry_parity.sh puts into .cuda-carry/.
set -euo pipefail
cd "$(dirname "$0")/../.."
version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
case ${1:-} in
  pack)
    src=.llamacpp/llama_cpp_python-$version/vendor/llama.cpp
    [ -f "$src/CMakeLists.txt" ] || { echo "no $src: run bench/llamacpp/build_llama_bench.sh first" >&2; exit 1; }
    mkdir -p .llamacpp-carry
    excluded=()
    for backend in vulkan sycl opencl hexagon metal cann musa et; do
      excluded+=(--exclude="ggml/src/ggml-$backend")
    done
    tar -cJf .llamacpp-carry/llama-src.tar.xz -C "$src" "${excluded[@]}" \
      CMakeLists.txt app cmake common ggml include src tools vendor
    echo "llama_cpp_python-$version (vendored llama.cpp)" >.llamacpp-carry/version
    ls -la .llamacpp-carry
    ;;
  build)
    # Unpacked afresh each time (tar keeps the files' times, so a kept build redoes nothing).
    src=build-llama-cuda/src
    rm -rf "$src" && mkdir -p "$src" && tar -xJf .llamacpp-carry/llama-src.tar.xz -C "$src"
    nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    start=$SECONDS
    cmake -S "$src" -B build-llama-cuda/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
      -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON \
      -DBUILD_SHARED_LIBS=OFF >/dev/null
    cmake --build build-llama-cuda/build --target llama-bench llama-quantize -j "$(nproc)" >build-llama-cuda/build.log \
      || { tail -20 build-llama-cuda/build.log; exit 1; }
    echo "llama.cpp CUDA build: $((SECONDS - start)) s"
    ;;
  run)
    out=${2:?usage: cuda_h200.sh run OUT}
    source bench/cuda/carried.sh
    python3 bench/llamacpp/cuda_vs_llama.py --llama-bin build-llama-cuda/build/bin \
      --fixture-tool "$(carried veloxquant_make_fixture)" --bench-tool "$(carried veloxquant_bench_runtime)" \
      --llama-version "$(cat .llamacpp-carry/version)" --out "$out"
    ;;
  *)
    echo "usage: bench/llamacpp/cuda_h200.sh pack | build | run OUT" >&2
    exit 2
    ;;
esac
