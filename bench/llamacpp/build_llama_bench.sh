#!/usr/bin/env bash
# Builds llama.cpp's `llama-bench`, `llama-perplexity`, `llama-quantize` and `llama-server` from
# the llama.cpp source vendored in PyPI's llama-cpp-python sdist, for side-by-side comparisons
# (bench/runtime_report.py and bench/llamacpp/weights_vs_llama_bench.py for speed, the latter
# quantizing its model with llama-quantize; docs/runtime.md for perplexity; bench/serve/ for
# serving). Nothing in the project's build or tests depends on them. Idempotent: does nothing if
# all four are built with the CPU_FLAGS below.
#   bench/llamacpp/build_llama_bench.sh   # -> .llamacpp/build/bin/llama-{bench,perplexity,quantize,server}
# Environment: LLAMA_CPP_PYTHON_VERSION (default 0.3.36), PIP (default: python3 -m pip),
#              JOBS (default 2), WORK (default <repo>/.llamacpp).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
WORK="${WORK:-$ROOT/.llamacpp}"
JOBS="${JOBS:-2}"
PIP="${PIP:-python3 -m pip}"
BIN="$WORK/build/bin/llama-bench"
TARGETS=(llama-bench llama-perplexity llama-quantize llama-server)
# Without ggml's AMX kernels: on a Sapphire Rapids-class CPU GGML_NATIVE enables them, and
# llama-bench's default (weight repacking on) then crashes in prompt processing (a segmentation
# fault in ggml_backend_amx_mul_mat, as ggml-org/llama.cpp#20824 reports). Its other CPU paths,
# AVX-512 VNNI included, stay. The flags are recorded beside the build, which is redone when
# they change.
CPU_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
STAMP="$WORK/build/cpu_flags"

missing=0
for t in "${TARGETS[@]}"; do [[ -x "$WORK/build/bin/$t" ]] || missing=1; done
[[ "$(cat "$STAMP" 2>/dev/null)" == "$CPU_FLAGS" ]] || missing=1
if [[ $missing == 0 ]]; then
  echo "${TARGETS[*]} already built in $WORK/build/bin"
  exit 0
fi

mkdir -p "$WORK/sdist"
SDIST="$(ls "$WORK"/sdist/llama_cpp_python-"$VERSION".tar.gz 2>/dev/null || true)"
if [[ -z "$SDIST" ]]; then
  $PIP download --no-binary :all: --no-deps \
    -d "$WORK/sdist" "llama-cpp-python==$VERSION"
  SDIST="$(ls "$WORK"/sdist/llama_cpp_python-"$VERSION".tar.gz)"
fi

SRC="$WORK/llama_cpp_python-$VERSION"
if [[ ! -f "$SRC/vendor/llama.cpp/CMakeLists.txt" ]]; then
  tar -xzf "$SDIST" -C "$WORK"
fi
LLAMA="$SRC/vendor/llama.cpp"
[[ -f "$LLAMA/CMakeLists.txt" ]] || { echo "no vendored llama.cpp in $SDIST" >&2; exit 1; }

GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
start=$(date +%s)
cmake -S "$LLAMA" -B "$WORK/build" "${GEN[@]}" \
  -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=ON \
  -DCMAKE_C_FLAGS="$CPU_FLAGS" \
  -DCMAKE_CXX_FLAGS="$CPU_FLAGS" \
  -DGGML_CUDA=OFF \
  -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_TOOLS=ON \
  -DBUILD_SHARED_LIBS=OFF
cmake --build "$WORK/build" --target "${TARGETS[@]}" -j "$JOBS"
end=$(date +%s)
echo "built $BIN in $((end - start)) s"
echo "$((end - start))" > "$WORK/build/llama-bench.build_seconds"
echo "$CPU_FLAGS" > "$STAMP"
"$BIN" --help >/dev/null 2>&1 || true
