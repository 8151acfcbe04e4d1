#!/usr/bin/env bash
# Fills .hf-carry/ (git-ignored) with what bench/python/hf_gpu.sh needs on the GPU machine and
# its image lacks: Highway's Debian packages and the pinned scikit-build-core wheel.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .hf-carry
(cd .hf-carry && apt-get download libhwy-dev libhwy1)
.venv/bin/python -m pip download -q --no-deps --only-binary=:all: -d .hf-carry \
  "$(grep -o 'scikit-build-core==[0-9.]*' pyproject.toml)"
ls -l .hf-carry
