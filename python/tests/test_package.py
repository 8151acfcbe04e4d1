"""The installed package: typed stubs that match the module, exported names."""

import ast
from pathlib import Path

import pytest

import veloxquant as vq
from veloxquant import _veloxquant


def test_stubs_are_installed_and_cover_the_module():
    package = Path(vq.__file__).parent
    assert (package / "py.typed").is_file()
    stub = ast.parse((package / "_veloxquant.pyi").read_text())
    stubbed = {node.name for node in stub.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    stubbed |= {node.target.id for node in stub.body if isinstance(node, ast.AnnAssign)}
    defined = {name for name in dir(_veloxquant) if not name.startswith("_")}
    exceptions = {"Error", "SpecError", "ShapeError"}  # stubgen imports these from the package
    assert stubbed == defined - exceptions
    assert set(vq.__all__) == defined


def test_exception_hierarchy():
    assert issubclass(vq.Error, RuntimeError)
    for error in (vq.SpecError, vq.ShapeError):
        assert issubclass(error, vq.Error) and issubclass(error, ValueError)


def test_set_threads():
    vq.set_threads(1)
    with pytest.raises(vq.Error, match="threads=0; expected 1 to 1024"):
        vq.set_threads(0)
    vq.set_threads(2)
