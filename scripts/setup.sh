#!/usr/bin/env bash
# Installs what VeloxQuant needs on a fresh Debian machine and builds it into build/.
# Idempotent: packages already present are skipped, and the build is incremental.
#   BUILD_DIR   where to build (default: build)
#   CI          when set, compiler warnings are errors
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config libgtest-dev libbenchmark-dev
          libeigen3-dev libhwy-dev libopenblas-dev libcli11-dev libfmt-dev nlohmann-json3-dev
          python3 python3-venv
          # CI's fuzzing and ThreadSanitizer builds (docs/reliability.md): clang, its sanitizer
          # runtimes with libFuzzer, and LLVM's libomp with the Archer TSan tool.
          clang libclang-rt-dev libomp-dev)
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

werror=OFF; [ -n "${CI:-}" ] && werror=ON

# One build of the library serves the CLI, the tests and the Python package: build/ also builds
# the extension module (VELOXQUANT_PYTHON) with the .venv interpreter.
build_dir=${BUILD_DIR:-build}
defines=(-DCMAKE_BUILD_TYPE=Release -DVELOXQUANT_WERROR="$werror" -DVELOXQUANT_PYTHON=ON
         -DVELOXQUANT_BUILD_TESTS=ON -DVELOXQUANT_BUILD_BENCH=ON -DPython_EXECUTABLE="$PWD/.venv/bin/python")
cmake -S . -B "$build_dir" -G Ninja "${defines[@]}" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"

# The Python package (pyproject.toml, python/) in .venv, for its tests (python/tests, run by
# CTest). pip packs it from the same build folder, configured with the same definitions, so it
# compiles nothing; it runs only when a file the package is built from changed since the last
# install (a stamp inside .venv records their hash).
package_sources=(CMakeLists.txt pyproject.toml python/requirements.txt python/CMakeLists.txt
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
