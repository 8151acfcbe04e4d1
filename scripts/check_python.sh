#!/usr/bin/env bash
# Lints every tracked Python file with ruff (rules: [tool.ruff] in pyproject.toml), using the ruff
# that scripts/setup.sh installs into .venv at the version pinned in tests/python/requirements.txt.
# Exits 1 on any finding, 2 when ruff is missing or not the pinned version.
#   scripts/check_python.sh [ruff check options]   e.g. --fix for ruff's safe fixes
set -euo pipefail
cd "$(dirname "$0")/.."

ruff=.venv/bin/ruff
if [ ! -x "$ruff" ]; then
  echo "python: $ruff not found; run scripts/setup.sh to create .venv" >&2
  exit 2
fi
pinned=$(sed -n 's/^ruff==//p' tests/python/requirements.txt)
found=$("$ruff" --version | awk '{print $2}')
if [ "$found" != "$pinned" ]; then
  echo "python: $ruff is version $found; tests/python/requirements.txt pins ${pinned:-nothing};" \
    "run scripts/setup.sh" >&2
  exit 2
fi

files=()
while IFS= read -r -d '' f; do files+=("$f"); done < <(git ls-files -z '*.py')
if [ ${#files[@]} -eq 0 ]; then
  echo "python: no tracked Python files"
  exit 0
fi
if ! "$ruff" check --no-cache "$@" -- "${files[@]}"; then
  echo "python: ruff check FAILED on the tracked Python files (findings above); fix them" \
    "(scripts/check_python.sh --fix applies ruff's safe fixes)" >&2
  exit 1
fi
echo "python: ruff $found: ${#files[@]} files pass"
