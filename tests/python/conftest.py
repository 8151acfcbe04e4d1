"""Paths handed over by CTest (tests/CMakeLists.txt) and the fixture models, written once per run.

A missing path is a test failure, never a skip: CTest always sets them, and a test that silently
does not run checks nothing."""

from __future__ import annotations

import os

# One BLAS thread: the reference's matrices are tiny, and on a loaded two-core machine (CTest runs
# two tests at once) a second OpenBLAS thread makes numpy several times slower. Set before any
# test module imports numpy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

import fixture_models  # noqa: E402


def _env_path(name: str) -> Path:
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"environment variable {name} is not set (CTest sets it; see tests/CMakeLists.txt)")
    path = Path(value)
    if not path.exists():
        pytest.fail(f"{name}={value} does not exist")
    return path


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return _env_path("VELOXQUANT_SHARED_DIR")


@pytest.fixture(scope="session")
def stories_path(shared_dir) -> Path:
    path = shared_dir / "models" / "stories260K.gguf"
    if not path.is_file():
        pytest.fail(f"{path} is missing (see shared/models/SOURCES.md)")
    return path


@pytest.fixture(scope="session")
def make_fixture_tool() -> str:
    return str(_env_path("VELOXQUANT_MAKE_FIXTURE"))


@pytest.fixture(scope="session")
def dump_logits_tool() -> str:
    return str(_env_path("VELOXQUANT_DUMP_LOGITS"))


@pytest.fixture(scope="session")
def dump_tensors_tool() -> str:
    return str(_env_path("VELOXQUANT_DUMP_TENSORS"))


@pytest.fixture(scope="session")
def fixture_files(make_fixture_tool, tmp_path_factory):
    """variant -> (gguf path, manifest path), each written on first use."""
    out_dir = tmp_path_factory.mktemp("fixtures")
    cache: dict = {}

    def get(variant: fixture_models.Variant):
        if variant not in cache:
            cache[variant] = fixture_models.write(make_fixture_tool, out_dir, variant)
        return cache[variant]

    return get
