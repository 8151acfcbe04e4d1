"""veloxquant.methods() and spec strings: the same catalogue and errors as the CLI."""

import subprocess

import pytest

import veloxquant as vq


def test_catalogue_lists_quantizers_then_policies():
    catalogue = vq.methods()
    kinds = [m.kind for m in catalogue]
    assert kinds == sorted(kinds, key=lambda k: k != "quantizer")  # quantizers first
    names = {m.name for m in catalogue}
    assert {"fp16", "kivi", "turboquant_mse", "cachegen", "xquant"} <= names
    assert {"snapkv", "streaming_llm", "h2o"} <= names
    assert {m.name for m in catalogue if m.cross_layer} == {"minicache", "xquant"}


def test_catalogue_matches_the_cli(cli_path):
    # `veloxquant methods` has no --json; its entries start "name  [family]" at column 0.
    out = subprocess.run([cli_path, "methods"], check=True, capture_output=True, text=True).stdout
    entries = [line for line in out.splitlines() if "  [" in line and not line.startswith(" ")]
    cli_names = [line.split("  [")[0] for line in entries]
    assert cli_names == [m.name for m in vq.methods()]
    for m in vq.methods():
        assert m.help.split("\n", 1)[1] in out  # the parameter lines, verbatim


def test_parameters_describe_defaults_and_ranges():
    kivi = next(m for m in vq.methods() if m.name == "kivi")
    params = {p.name: p for p in kivi.params}
    assert params["kbits"].type == "int"
    assert params["kbits"].default == "2"
    assert params["kbits"].help
    assert params["residual"].min <= 128 <= params["residual"].max
    assert "kbits" in repr(params["kbits"])
    assert kivi.paper and kivi.summary and kivi.family == "kivi"


def test_methods_docstring_is_the_catalogue():
    for m in vq.methods():
        assert m.name in vq.methods.__doc__
        for p in m.params:
            assert p.help in vq.methods.__doc__


def test_canonical_spec_round_trips():
    text = vq.canonical_spec("kivi:kbits=4")
    assert text.startswith("kivi:kbits=4,vbits=2,")
    assert vq.canonical_spec(text) == text
    assert vq.canonical_spec("snapkv:budget=64+kivi").startswith("snapkv:budget=64,")
    with pytest.raises(vq.SpecError, match="budget"):
        vq.canonical_spec("snapkv:budget=-1")


@pytest.mark.parametrize("spec, words", [
    ("kivi:kbits=3", ["kbits=3", "expected 2, 4 or 8"]),
    ("kivi:nope=1", ["nope"]),
    ("no_such_method", ["no_such_method", "kivi"]),
    ("turboquant_mse:bits=x", ["bits", "x"]),
])
def test_bad_spec_names_the_parameter(spec, words):
    # A cache builds the method's codecs, which check what the declared ranges cannot (kbits=3).
    with pytest.raises(vq.SpecError) as e:
        vq.Cache(spec, kv_heads=1, head_dim=128)
    for word in words:
        assert word in str(e.value)
    assert isinstance(e.value, ValueError) and isinstance(e.value, vq.Error)


@pytest.mark.parametrize("spec, head_dim, words", [
    ("kivi:kbits=4,vbits=4", 128, None),
    ("qjl", 64, None),
    ("turboquant_prod:bits=3,vbits=3", 128, None),
    ("kivi:kbits=2,vbits=4", 128, ["kbits=2 and vbits=4", "set them equal"]),
    ("kivi:kbits=4,vbits=4", 96, None),
    ("turboquant_mse:bits=4,vbits=4", 96, None),
    ("turboquant_mse:bits=3,vbits=3", 80, None),
    ("qjl", 80, None),
    ("qjl:outliers=0", 96, ["qjl outliers 0 (at head_dim 96)", "expected 1 to 8"]),
    ("palu", 128, ["palu runs on the CPU cache", "turboquant_prod"]),
    ("snapkv+kivi", 128, ["snapkv"]),
])
def test_cuda_unsupported_is_the_backends_answer(spec, head_dim, words):
    # Answered from the backend's rules whether or not this build has it.
    reason = vq.cuda_unsupported(spec, kv_heads=2, head_dim=head_dim)
    if words is None:
        assert reason is None
    else:
        for word in words:
            assert word in reason
