#!/usr/bin/env bash
# Runs clang-tidy 14 with .clang-tidy over C++ sources of build/compile_commands.json and exits 1
# when it reports anything (WarningsAsErrors).
#   scripts/check_tidy.sh [--all | BASE]   --all: every source; BASE (default HEAD~1): the .cpp
#                                          files changed since BASE (CI checks the last commit)
#   BUILD_DIR (default build): a configured build folder, for compile_commands.json
# CUDA sources (.cu) are not checked: clang-tidy would need a CUDA-capable clang set up for them.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
tidy=$(command -v clang-tidy-14 || command -v clang-tidy || true)
[ -n "$tidy" ] || { echo "tidy: clang-tidy not found (install clang-tidy 14)" >&2; exit 2; }
[ -f "$build/compile_commands.json" ] || {
  echo "tidy: no $build/compile_commands.json; configure the build first (scripts/setup.sh)" >&2; exit 2; }

files=()
if [ "${1:-}" = --all ]; then
  mapfile -t files < <(git ls-files 'src/*.cpp' 'tools/*.cpp' 'tests/*.cpp' 'python/src/*.cpp' | grep -v '^tests/consumer/')
else
  base=${1:-HEAD~1}
  if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
    echo "tidy: no base revision '$base' (a shallow or one-commit clone?); nothing checked"
    exit 0
  fi
  mapfile -t files < <(git diff --name-only --diff-filter=d "$base" -- 'src/*.cpp' 'tools/*.cpp' 'tests/*.cpp' \
    'python/src/*.cpp' | grep -v '^tests/consumer/' || true)
fi
# Only files the build compiles (a file of a target not configured here has no command).
checked=()
for f in "${files[@]}"; do
  grep -q "\"file\": \"$PWD/$f\"" "$build/compile_commands.json" && checked+=("$f")
done
if [ ${#checked[@]} -eq 0 ]; then
  echo "tidy: no compiled C++ file to check"
  exit 0
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! printf '%s\n' "${checked[@]}" | xargs -P "$(nproc)" -n 4 "$tidy" -p "$build" --quiet \
    --extra-arg=-Wno-unknown-warning-option >"$log" 2>&1; then
  grep -E 'warning:|error:' "$log" | sort -u
  echo "tidy: clang-tidy reports the above in ${#checked[@]} files (.clang-tidy)" >&2
  exit 1
fi
echo "tidy: ${#checked[@]} files pass .clang-tidy"
