"""The project's GGUF writer and quantizers against llama.cpp's own reader (the PyPI gguf package)
and ggml's reference encodings: every fixture written by veloxquant_make_fixture must read back,
through an implementation that is not ours, as exactly what the tool says it wrote (its JSON
manifest), be shaped the way llama.cpp's converters shape these architectures, and hold weights
encoded bit for bit as ggml encodes them."""

import json
import zlib

import gguf
import numpy as np
import pytest
from gguf import GGUFReader, GGUFValueType

import fixture_models
import ggml_blocks
import reference_model
from fixture_models import VARIANTS, Variant


def read(fixture_files, variant):
    gguf_path, manifest_path = fixture_files(variant)
    return GGUFReader(str(gguf_path)), json.loads(manifest_path.read_text())


def field_types(field) -> tuple[str, str | None]:
    """(value type, array element type or None) as the manifest names them."""
    main = field.types[0]
    element = field.types[-1].name.lower() if main == GGUFValueType.ARRAY else None
    return main.name.lower(), element


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.id)
def test_reader_sees_the_manifest(fixture_files, variant):
    reader, manifest = read(fixture_files, variant)
    fields = {k: f for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    assert list(fields) == [e["key"] for e in manifest["metadata"]]
    for entry in manifest["metadata"]:
        field = fields[entry["key"]]
        assert field_types(field) == (entry["type"], entry.get("element_type")), entry["key"]
        assert field.contents() == entry["value"], entry["key"]

    assert [t.name for t in reader.tensors] == [t["name"] for t in manifest["tensors"]]
    assert reader.alignment == 32
    for t, want in zip(reader.tensors, manifest["tensors"], strict=True):
        assert t.shape.tolist() == want["dims"], t.name
        assert t.tensor_type.name.lower() == want["type"], t.name
        assert int(t.n_bytes) == want["bytes"] == ggml_blocks.nbytes(int(t.tensor_type), int(t.n_elements))
        assert int(t.data_offset) % 32 == 0, t.name
        data = bytes(reader.data[t.data_offset : t.data_offset + t.n_bytes])
        assert zlib.crc32(data) == want["crc32"], t.name
    # The data section ends the file: nothing missing, nothing trailing past the last tensor's
    # padding to the alignment (ggml pads every tensor's data, the last one's too).
    last = reader.tensors[-1]
    end = int(last.data_offset) + int(last.n_bytes)
    assert -(-end // 32) * 32 == reader.data.size


def expected_tensors(v: Variant) -> dict[str, tuple[list[int], str]]:
    """llama.cpp's tensor names for the architecture -> (ggml dims, type)."""
    n_vocab = 3 + 256 + 43 if v.arch == "llama" else 256 + 20 + 3
    WIDTH, HEADS, KV_HEADS, HEAD_DIM, FFN, LAYERS = v.sizes
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    out = {"token_embd.weight": ([WIDTH, n_vocab], v.type), "output_norm.weight": ([WIDTH], "f32")}
    if not v.tied:
        out["output.weight"] = ([WIDTH, n_vocab], v.type)
    for i in range(LAYERS):
        p = f"blk.{i}."
        out |= {
            p + "attn_norm.weight": ([WIDTH], "f32"),
            p + "attn_q.weight": ([WIDTH, q], v.type),
            p + "attn_k.weight": ([WIDTH, kv], v.type),
            p + "attn_v.weight": ([WIDTH, kv], v.type),
            p + "attn_output.weight": ([q, WIDTH], v.type),
            p + "ffn_norm.weight": ([WIDTH], "f32"),
            p + "ffn_gate.weight": ([WIDTH, FFN], v.type),
            p + "ffn_up.weight": ([WIDTH, FFN], v.type),
            p + "ffn_down.weight": ([FFN, WIDTH], v.type),
        }
        if v.arch == "qwen2":
            out |= {p + "attn_q.bias": ([q], "f32"), p + "attn_k.bias": ([kv], "f32"),
                    p + "attn_v.bias": ([kv], "f32")}
    return out


def gpt2_byte_alphabet() -> list[str]:
    """GPT-2's bytes_to_unicode, in its vocabulary's order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    rest = [b for b in range(256) if b not in printable]
    return [chr(b) for b in printable] + [chr(256 + i) for i in range(len(rest))]


# The llama and qwen2 layouts, spelled out here; the other architectures' files are checked by
# loading them (test_runtime_logits) against the reference model, which reads llama.cpp's names.
@pytest.mark.parametrize("variant", [v for v in VARIANTS if v.arch in fixture_models.ARCHS],
                         ids=lambda v: v.id)
def test_fixture_is_shaped_like_llamacpp(fixture_files, variant):
    reader, _ = read(fixture_files, variant)
    a = variant.arch
    meta = reference_model.metadata(reader)
    types = {k: field_types(f) for k, f in reader.fields.items()}
    u32, f32, string = ("uint32", None), ("float32", None), ("string", None)
    WIDTH, HEADS, KV_HEADS, HEAD_DIM, FFN, LAYERS = variant.sizes
    want = {
        "general.architecture": (string, a),
        f"{a}.block_count": (u32, LAYERS),
        f"{a}.context_length": (u32, 256),
        f"{a}.embedding_length": (u32, WIDTH),
        f"{a}.feed_forward_length": (u32, FFN),
        f"{a}.attention.head_count": (u32, HEADS),
        f"{a}.attention.head_count_kv": (u32, KV_HEADS),
        f"{a}.rope.dimension_count": (u32, HEAD_DIM),
        f"{a}.rope.freq_base": (f32, 1e6 if a == "qwen2" else 1e4),
        f"{a}.attention.layer_norm_rms_epsilon": (f32, float(np.float32(1e-6 if a == "qwen2" else 1e-5))),
        "tokenizer.ggml.model": (string, "gpt2" if a == "qwen2" else "llama"),
    }
    if HEADS * HEAD_DIM != WIDTH:  # llama.cpp reads the head size from these when heads x head_dim != width
        want[f"{a}.attention.key_length"] = (u32, HEAD_DIM)
        want[f"{a}.attention.value_length"] = (u32, HEAD_DIM)
    else:
        assert f"{a}.attention.key_length" not in meta
    if variant.rope_scale:
        want[f"{a}.rope.scaling.type"] = (string, "linear")
        want[f"{a}.rope.scaling.factor"] = (f32, variant.rope_scale)
    else:
        assert f"{a}.rope.scaling.type" not in meta
    for key, (value_type, value) in want.items():
        assert types.get(key) == value_type, key
        assert meta[key] == value, key
    assert types["general.name"] == string

    got = {t.name: (t.shape.tolist(), t.tensor_type.name.lower()) for t in reader.tensors}
    assert got == expected_tensors(variant)

    tokens, token_types = meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.token_type"]
    assert types["tokenizer.ggml.token_type"] == ("array", "int32")
    assert len(tokens) == len(token_types) == got["token_embd.weight"][0][1]
    assert len(set(tokens)) == len(tokens)
    if a == "llama":
        # SentencePiece: <unk>, <s>, </s>, then the 256 byte-fallback tokens, then scored pieces.
        assert tokens[:3] == ["<unk>", "<s>", "</s>"] and token_types[:3] == [2, 3, 3]
        assert tokens[3:259] == [f"<0x{b:02X}>" for b in range(256)]
        assert token_types[3:259] == [6] * 256
        assert types["tokenizer.ggml.scores"] == ("array", "float32")
        assert len(meta["tokenizer.ggml.scores"]) == len(tokens)
        assert (meta["tokenizer.ggml.bos_token_id"], meta["tokenizer.ggml.eos_token_id"]) == (1, 2)
        # Every piece can be reached by merging two shorter pieces, or is one character.
        normal = {t for t, k in zip(tokens, token_types, strict=True) if k == 1}
        for t in normal:
            assert len(t) == 1 or any(t[:i] in normal and t[i:] in normal for i in range(1, len(t))), t
    else:
        assert meta["tokenizer.ggml.pre"] == "qwen2"
        assert tokens[:256] == gpt2_byte_alphabet()
        assert types["tokenizer.ggml.merges"] == ("array", "string")
        vocab = set(tokens)
        for merge in meta["tokenizer.ggml.merges"]:
            left, right = merge.split(" ")
            assert {left, right, left + right} <= vocab, merge
        assert tokens[meta["tokenizer.ggml.eos_token_id"]] == "<|im_end|>"
        assert meta["tokenizer.ggml.add_bos_token"] is False


def raw_tensors(reader):
    return {t.name: (t, np.array(reader.data[t.data_offset : t.data_offset + t.n_bytes]))
            for t in reader.tensors}


@pytest.mark.parametrize("arch", fixture_models.ARCHS)
@pytest.mark.parametrize("weight_type", [t for t in fixture_models.TYPES if t != "f32"])
def test_weights_are_encoded_as_ggml_encodes_them(fixture_files, arch, weight_type):
    """Same seed, same f32 weights: the typed fixture's bytes must be ggml's encoding (ggml-quants.c
    *_ref, round-to-nearest-even F16/BF16) of the f32 fixture's values, and decode back within
    the format's error."""
    f32_reader, _ = read(fixture_files, Variant(arch, "f32"))
    typed_reader, _ = read(fixture_files, Variant(arch, weight_type))
    type_id = ggml_blocks.TYPE_IDS[weight_type]
    originals = raw_tensors(f32_reader)
    checked = 0
    for name, (t, raw) in raw_tensors(typed_reader).items():
        x = originals[name][1].view("<f4")
        if int(t.tensor_type) != type_id:
            assert len(t.shape) == 1 and raw.tobytes() == x.tobytes(), name  # norms, biases: F32
            continue
        assert raw.tobytes() == ggml_blocks.encode(x, type_id), name
        # llama.cpp's own numpy port of its quantizers and decoders agrees.
        rows = x.reshape(list(reversed(t.shape.tolist())))
        assert gguf.quants.quantize(rows, t.tensor_type).tobytes() == raw.tobytes(), name
        decoded = ggml_blocks.dequantize(raw, type_id, x.size)
        theirs = gguf.quants.dequantize(t.data, t.tensor_type).reshape(-1)
        np.testing.assert_array_equal(decoded, theirs.astype(np.float64), err_msg=name)
        blocks = x.astype(np.float64).reshape(-1, 32)
        err = np.abs(decoded.reshape(-1, 32) - blocks)
        amax = np.abs(blocks).max(axis=1, keepdims=True)
        # Block formats: the rounding error plus the fp16-rounded scale d (relative error up to
        # 2^-11) times the largest code.
        if weight_type == "q8_0":
            bound = amax / 127 * (0.5 + 127 * 2.0**-11)  # half a step
        elif weight_type == "q4_0":
            bound = amax / 8 * (1 + 8 * 2.0**-11)  # a whole step: +8d clamps to +7d
        else:
            bound = amax * 2.0 ** (-11 if weight_type == "f16" else -8)
        assert np.all(err <= bound), f"{name}: error {err.max():.3g} beyond the format's bound"
        checked += 1
    # token_embd, output, 7 matrices per layer
    assert checked == 1 + 1 + 7 * Variant(arch, weight_type).sizes[5]
