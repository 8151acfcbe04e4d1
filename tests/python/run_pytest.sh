#!/bin/sh
# Runs pytest on the given test files with the project's virtual environment (CTest's entry point,
# see tests/CMakeLists.txt). A missing environment fails the test rather than skipping it:
# scripts/setup.sh always creates .venv, so its absence is a broken setup.
#   run_pytest.sh VENV_PYTHON TEST_FILE...
venv_python=$1
shift
if [ ! -x "$venv_python" ]; then
  echo "run_pytest.sh: $venv_python not found; run scripts/setup.sh to create the Python environment" >&2
  exit 1
fi
# No .pytest_cache or __pycache__ in the source tree.
PYTHONDONTWRITEBYTECODE=1 exec "$venv_python" -m pytest -q -p no:cacheprovider "$@"
