#!/usr/bin/env bash
# Installs what VeloxQuant needs on a fresh Debian machine and builds it into build/.
# Idempotent: packages already present are skipped, and the build is incremental.
#   BUILD_DIR   where to build (default: build)
#   CI          when set, compiler warnings are errors
#   VELOXQUANT_CUDA  auto (default: the CUDA backend is built when nvcc is on the PATH or at
#               /usr/local/cuda/bin/nvcc), ON (nvcc required) or OFF
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config libgtest-dev libbenchmark-dev
          libeigen3-dev libhwy-dev libopenblas-dev libcli11-dev libfmt-dev nlohmann-json3-dev libcpp-httplib-dev
          python3 python3-venv
          # CI's sanitizer and fuzzing builds (docs/reliability.md): clang and its sanitizer
          # runtimes with libFuzzer; its format and lint checks (scripts/check_format.sh,
          # scripts/check_tidy.sh).
          clang libclang-rt-dev clang-format clang-tidy)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The Python test oracles (tests/python, run by CTest) and the package build (python/) use .venv.
# pip runs only when the pinned requirements or the Python version change (a stamp inside .venv
# records them), so a second setup spends no time here.
requirements=(tests/python/requirements.txt python/requirements.txt)
want="$(cat "${requirements[@]}" | sha256sum | cut -d' ' -f1) $(python3 --version)"
if [ ! -x .venv/bin/python ] || [ "$(cat .venv/requirements.stamp 2>/dev/null)" != "$want" ]; then
  echo "setup: installing ${requirements[*]} into .venv" >&2
  python3 -m venv .venv
  for r in "${requirements[@]}"; do
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-input -r "$r"
  done
  echo "$want" >.venv/requirements.stamp
fi

# llama.cpp's tokenizer suite (tests/runtime/llama_vocab_suite_test.cpp): the real vocabularies
# and test strings in vendor/llama.cpp/models of the pinned llama-cpp-python sdist, extracted
# into .cache/llama-vocab (git-ignored; nothing of the sdist is committed). A stamp records the
# version (the one scripts/llamacpp_venv.sh builds) and the sdist's hash, so this runs once. pip
# prepares the sdist's metadata with the scikit-build-core of .venv (--no-build-isolation) rather
# than building its build tools from source.
llama_sdist_version=0.3.36
llama_sdist_sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
vocab_dir=.cache/llama-vocab
want="$llama_sdist_version $llama_sdist_sha256"
if [ "$(cat "$vocab_dir/sdist.stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: llama.cpp's tokenizer suite from llama-cpp-python $llama_sdist_version" >&2
  download=$(mktemp -d)
  .venv/bin/python -m pip download --quiet --disable-pip-version-check --no-input --no-deps \
    --no-binary :all: --no-build-isolation -d "$download" "llama-cpp-python==$llama_sdist_version"
  sdist="$download/llama_cpp_python-$llama_sdist_version.tar.gz"
  echo "$llama_sdist_sha256  $sdist" | sha256sum --check --quiet
  rm -rf "$vocab_dir"
  mkdir -p "$vocab_dir"
  tar -xzf "$sdist" -C "$vocab_dir" --strip-components=4 --wildcards \
    "llama_cpp_python-$llama_sdist_version/vendor/llama.cpp/models/ggml-vocab-*"
  rm -rf "$download"
  echo "$want" >"$vocab_dir/sdist.stamp"
fi

werror=OFF; [ -n "${CI:-}" ] && werror=ON

# The CUDA backend (docs/cuda.md) is part of the one build wherever the toolkit is: its kernels
# and parity test compile on machines without a GPU, which skip the tests that need one.
cuda=${VELOXQUANT_CUDA:-auto}
nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
case "$cuda" in
  auto) cuda=OFF; [ -n "$nvcc" ] && cuda=ON ;;
  ON) [ -n "$nvcc" ] || { echo "setup: VELOXQUANT_CUDA=ON but no nvcc on the PATH or at /usr/local/cuda/bin/nvcc" >&2; exit 1; } ;;
  OFF) ;;
  *) echo "setup: VELOXQUANT_CUDA='$cuda'; expected auto, ON or OFF" >&2; exit 2 ;;
esac
echo "setup: CUDA backend $cuda${nvcc:+ ($nvcc)}" >&2

# One build of the library serves the CLI, the tests and the Python package: build/ also builds
# the extension module (VELOXQUANT_PYTHON) with the .venv interpreter.
build_dir=${BUILD_DIR:-build}
defines=(-DCMAKE_BUILD_TYPE=Release -DVELOXQUANT_WERROR="$werror" -DVELOXQUANT_PYTHON=ON
         -DVELOXQUANT_BUILD_TESTS=ON -DVELOXQUANT_BUILD_BENCH=ON -DPython_EXECUTABLE="$PWD/.venv/bin/python"
         -DVELOXQUANT_CUDA="$cuda")
[ "$cuda" = ON ] && defines+=(-DCMAKE_CUDA_COMPILER="$nvcc")
cmake -S . -B "$build_dir" -G Ninja "${defines[@]}" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"

# The Python package (pyproject.toml, python/) in .venv, for its tests (python/tests, run by
# CTest). pip packs it from the same build folder, configured with the same definitions, so it
# compiles nothing; it runs only when a file the package is built from changed since the last
# install (a stamp inside .venv records their hash).
package_sources=(CMakeLists.txt cmake pyproject.toml python/requirements.txt python/CMakeLists.txt
                 python/src python/veloxquant include src)
want="$(find "${package_sources[@]}" -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)"
if [ "$(cat .venv/package.stamp 2>/dev/null)" != "$want" ]; then
  echo "setup: installing the Python package into .venv from $build_dir" >&2
  settings=(--config-settings=build-dir="$build_dir")
  for d in "${defines[@]}"; do
    d=${d#-D}
    settings+=("--config-settings=cmake.define.${d%%=*}=${d#*=}")
  done
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-input --no-build-isolation \
    "${settings[@]}" ./
  echo "$want" >.venv/package.stamp
fi
