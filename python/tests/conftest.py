"""Paths the tests read: the repository's evaluation model, the shared corpus and, under CTest,
the CLI built beside the package (tests/CMakeLists.txt sets VELOXQUANT_CLI)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def model_path() -> Path:
    path = REPO / "models" / "vq-hd128.gguf"
    if not path.is_file():
        pytest.fail(f"{path} is missing (it is committed in models/)")
    return path


@pytest.fixture(scope="session")
def model(model_path):
    import veloxquant

    return veloxquant.Model(model_path)


@pytest.fixture(scope="session")
def text_file(tmp_path_factory) -> Path:
    """The first 40 KB of WikiText-2's test split: enough for a few chunks of 128 tokens."""
    shared = Path(os.environ.get("VELOXQUANT_SHARED_DIR", REPO.parent / "shared"))
    corpus = shared / "corpus" / "wikitext-2-raw" / "wiki.test.raw"
    if not corpus.is_file():
        pytest.fail(f"{corpus} is missing (set VELOXQUANT_SHARED_DIR to the shared folder)")
    path = tmp_path_factory.mktemp("text") / "wiki-head.txt"
    path.write_bytes(corpus.read_bytes()[:40_000])
    return path


@pytest.fixture(scope="session")
def cli_path() -> str:
    """The CMake build's CLI. CTest always sets VELOXQUANT_CLI; a plain `pytest` run without a
    CMake build skips the comparisons with the CLI."""
    path = os.environ.get("VELOXQUANT_CLI")
    if not path:
        pytest.skip("VELOXQUANT_CLI is not set (CTest sets it to the CMake build's CLI)")
    if not Path(path).is_file():
        pytest.fail(f"VELOXQUANT_CLI={path} does not exist")
    return path


@pytest.fixture(scope="session")
def cli(cli_path):
    """Runs the CLI with --json and returns the parsed object."""

    def run(*args: str):
        out = subprocess.run([cli_path, *args, "--json"], check=True, capture_output=True, text=True)
        return json.loads(out.stdout)

    return run
