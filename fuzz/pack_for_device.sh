#!/usr/bin/env bash
# Packs the fuzz targets for a machine with more cores than this one (the device tool's GPU
# machine: 16 cores, no clang, no sanitizer runtimes of its own), where fuzz/run_forked.sh runs
# them: builds them as scripts/fuzz.sh does, then copies each program (sanitizer runtimes and
# libFuzzer are linked in; symbols stripped to fit the transfer) with the shared libraries it
# needs into .fuzz-carry/, xz-compressed, beside stories260K, which the tokenizer and session
# targets read. The programs read their data from the folders they were built in;
# fuzz/run_forked.sh links those paths to the copies when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FUZZ_BUILD_DIR:-build-fuzz}
FUZZ_BUILD_DIR=$build FUZZ_BUILD_ONLY=1 scripts/fuzz.sh
rm -rf .fuzz-carry && mkdir -p .fuzz-carry/lib .fuzz-carry/shared/models
for program in "$build"/fuzz/fuzz_*; do
  name=$(basename "$program")
  cp "$program" ".fuzz-carry/$name"
  strip ".fuzz-carry/$name"
  for lib in $(ldd "$program" | awk '/libfmt|libhwy|libgomp|libgfortran|libquadmath|libopenblas/ {print $3}'); do
    cp -L "$lib" .fuzz-carry/lib/
  done
  xz -f -T0 ".fuzz-carry/$name"
done
xz -f -T0 .fuzz-carry/lib/*.so*  # OpenBLAS alone is 36 MB
cp ../shared/models/stories260K.gguf .fuzz-carry/shared/models/
# Where the programs look for tests/data and ../shared (their compile definitions): the source
# folder of the build.
sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" >.fuzz-carry/source_dir
du -sh .fuzz-carry
