#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang, ASan + UBSan) into build-fuzz/ and runs each for the
# given seconds over its committed seed corpus, fuzz/corpus/<target>/. New inputs go to a scratch
# corpus under build-fuzz/, so the committed one only changes by hand. Exits non-zero on any
# finding (crash, sanitizer report, leak, timeout, out-of-memory) and leaves the input that caused
# it in build-fuzz/fuzz-artifacts/<target>/; reproduce with build-fuzz/fuzz/fuzz_<target> FILE.
#   scripts/fuzz.sh [seconds-per-target]   (default 30)
#   FUZZ_BUILD_DIR  the build folder (default build-fuzz). One already configured with
#                   VELOXQUANT_FUZZ=ON is used as it is: CI's sanitizer build carries the fuzzing
#                   instrumentation too, so its library serves the tests and the fuzzers.
#   FUZZ_BUILD_ONLY=1  build the targets and stop (fuzz/pack_for_device.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
# libFuzzer takes a limit of 0 or less as "run forever".
if ! [[ $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/fuzz.sh [seconds-per-target], a whole number of seconds >= 1; got '$seconds'" >&2
  exit 2
fi
build=${FUZZ_BUILD_DIR:-build-fuzz}
source fuzz/limits.sh

if ! grep -qs '^VELOXQUANT_FUZZ:BOOL=ON$' "$build/CMakeCache.txt"; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DVELOXQUANT_FUZZ=ON -DVELOXQUANT_BUILD_TESTS=OFF -DVELOXQUANT_BUILD_BENCH=OFF >/dev/null
fi
cmake --build "$build" -j "$(nproc)" --target veloxquant_fuzzers
[ "${FUZZ_BUILD_ONLY:-0}" = 1 ] && exit 0

failed=()
for source in fuzz/*_fuzzer.cpp; do
  target=$(basename "$source" _fuzzer.cpp)
  scratch=$build/fuzz-scratch/$target artifacts=$build/fuzz-artifacts/$target log=$build/fuzz-logs/$target.log
  rm -rf "$scratch"
  mkdir -p "$scratch" "$artifacts" "$(dirname "$log")"
  # The per-input limits: fuzz/limits.sh. The first corpus folder receives new inputs.
  # shellcheck disable=SC2046  # the limits are several words
  if "$build/fuzz/fuzz_$target" -max_total_time="$seconds" $(fuzz_limits "$target") \
      -print_final_stats=1 -artifact_prefix="$artifacts/" "$scratch" "fuzz/corpus/$target" >"$log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "fuzz: $target: ${seconds}s, ${execs:-?} executions, no findings"
  else
    echo "fuzz: $target: FINDING (log: $log, input: $artifacts/)" >&2
    grep -m 5 -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" >&2 || tail -n 20 "$log" >&2
    failed+=("$target")
  fi
done
if ((${#failed[@]})); then
  echo "fuzz: findings in: ${failed[*]}" >&2
  exit 1
fi
