"""The numpy reference model on a real trained model: greedy decoding of stories260K from BOS must
reproduce the continuation documented in shared/models/SOURCES.md (Karpathy's temperature-0
sample). This is what makes the reference an oracle for the C++ runtime."""

import dataclasses
import re

import numpy as np
import pytest

import reference_model

MIN_TOKENS = 40


@pytest.fixture(scope="module")
def stories(stories_path):
    return reference_model.load(str(stories_path))


@pytest.fixture(scope="module")
def documented_text(shared_dir):
    sources = (shared_dir / "models" / "SOURCES.md").read_text(encoding="utf-8")
    match = re.search(r"It produced\s*`([^`]+)`", sources)
    assert match, "SOURCES.md no longer documents the greedy continuation ('It produced `...`')"
    return match.group(1)


def greedy_text(model, n_chars: int, max_steps: int = 120) -> tuple[str, int]:
    """Greedy text from BOS until it is at least n_chars long; the text and the tokens made."""
    tokens = [model.bos]
    text = ""
    while len(text) < n_chars and len(tokens) <= max_steps:
        tokens.append(int(np.argmax(reference_model.forward(model, tokens)[-1])))
        if tokens[-1] == model.eos:
            break
        text = reference_model.decode_spm(model, tokens[1:])
    return text, len(tokens) - 1


def test_config_read_from_metadata(stories):
    c = stories.config
    assert (c.arch, c.layers, c.width, c.ffn, c.heads, c.kv_heads, c.head_dim, c.vocab) == (
        "llama", 5, 64, 172, 8, 4, 8, 512)
    assert (c.rope_dims, c.rope_base, c.rope_scale, c.rope_layout) == (8, 10000.0, 1.0, "adjacent")
    assert stories.bos == 1 and stories.eos == 2


def test_greedy_continuation_matches_documented_sample(stories, documented_text):
    text, n_tokens = greedy_text(stories, len(documented_text))
    assert text[: len(documented_text)] == documented_text
    assert n_tokens >= MIN_TOKENS


def test_wrong_rope_layout_breaks_the_sample(stories, documented_text):
    """The sample pins the RoPE convention: the NeoX pairing gives another text."""
    neox = dataclasses.replace(stories, config=dataclasses.replace(stories.config, rope_layout="neox"))
    text, _ = greedy_text(neox, len(documented_text), max_steps=60)
    assert text[: len(documented_text)] != documented_text


def test_fp16_kv_rounding_keeps_the_sample(stories, documented_text):
    """The comparison with the runtime rounds keys and values to fp16 as its cache does; the
    rounded model must still be the same model."""
    tokens = [stories.bos]
    for _ in range(60):
        logits = reference_model.forward(stories, tokens, kv_dtype=np.float16)
        tokens.append(int(np.argmax(logits[-1])))
    text = reference_model.decode_spm(stories, tokens[1:])
    assert text[: len(documented_text)] == documented_text[: len(text)]
