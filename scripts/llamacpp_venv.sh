#!/usr/bin/env bash
# Creates .venv-llamacpp (git-ignored) holding llama-cpp-python, the oracle that
# tests/data/tokenizer/make_expected.py asks for llama.cpp's tokenizations, plus `tokenizers` and
# `gguf` to build the small BPE fixture files. Only the committed fixtures are used by the build
# and the tests; nothing there needs this environment.
#
# pip builds llama.cpp from the sources bundled in the llama-cpp-python sdist, which takes 10+
# minutes on two cores; only the library is needed, so examples, tests, tools, the server,
# multimodal support and curl are switched off.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv-llamacpp"
jobs="${JOBS:-2}"
# Pinned so that regenerated fixtures come from the same llama.cpp, trainer and writer as the
# committed ones.
llama_cpp_python_version="0.3.36"

python3 -m venv "$venv"
"$venv/bin/pip" install --upgrade pip
"$venv/bin/pip" install "tokenizers==0.23.3" "gguf==0.19.0"

export CMAKE_BUILD_PARALLEL_LEVEL="$jobs"
export CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_OPENMP=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAVA_BUILD=OFF \
-DMTMD_BUILD=OFF"
"$venv/bin/pip" install --no-cache-dir --verbose "llama-cpp-python==$llama_cpp_python_version"
"$venv/bin/python" -c 'import llama_cpp; print("llama_cpp", llama_cpp.__version__)'
