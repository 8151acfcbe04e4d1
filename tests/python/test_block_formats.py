"""The library's dequantize() against llama.cpp's numpy reference (gguf.quants.dequantize), bit for
bit, on random blocks of every weight type the runtime decodes: the blocks are written into a
GGUF file with gguf's own writer and read back by veloxquant_dump_tensors."""

import subprocess

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

# Byte offsets of each block's fp16 scales (ggml-common.h), set to finite values; every other
# byte (codes, packed sub-block scales, high bits) is random.
SCALE_OFFSETS = {
    Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q8_0: [0],
    Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208],
    Q.IQ4_NL: [0], Q.IQ4_XS: [0],
}
ROWS, BLOCKS_PER_ROW = 6, 5


def random_blocks(qtype: Q, rng: np.random.Generator) -> np.ndarray:
    """[ROWS, row bytes] of random blocks with finite scales of both signs, zeros and subnormals."""
    block_elements, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(ROWS * BLOCKS_PER_ROW, block_bytes), dtype=np.uint8)
    for offset in SCALE_OFFSETS[qtype]:
        scales = (rng.standard_normal(len(blocks)) * 0.02).astype(np.float16)
        scales[::7] = 0
        scales[3::11] = np.float16(3e-6)  # subnormal in fp16
        blocks[:, offset : offset + 2] = scales.view(np.uint8).reshape(-1, 2)
    return blocks.reshape(ROWS, -1)


def random_plain(qtype: Q, rng: np.random.Generator) -> np.ndarray:
    values = rng.standard_normal((ROWS, 64)).astype(np.float32)
    if qtype == Q.F16:
        return values.astype(np.float16).view(np.uint8)
    bf16 = (values.view(np.uint32) >> 16).astype(np.uint16)  # truncated: finite, any low bits
    return bf16.view(np.uint8)


TYPES = list(SCALE_OFFSETS) + [Q.F16, Q.BF16]


@pytest.fixture(scope="module")
def dumped(tmp_path_factory, dump_tensors_tool):
    """qtype -> (the raw bytes written, what the library decoded)."""
    rng = np.random.default_rng(20261202)
    folder = tmp_path_factory.mktemp("blocks")
    writer = gguf.GGUFWriter(str(folder / "blocks.gguf"), "llama")
    raw = {}
    for qtype in TYPES:
        raw[qtype] = random_blocks(qtype, rng) if qtype in SCALE_OFFSETS else random_plain(qtype, rng)
        writer.add_tensor(qtype.name.lower(), raw[qtype], raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    subprocess.run([dump_tensors_tool, str(folder / "blocks.gguf"), "--out", str(folder / "out")],
                   check=True, capture_output=True, text=True)
    return {q: (raw[q], np.load(folder / "out" / f"{q.name.lower()}.npy")) for q in TYPES}


@pytest.mark.parametrize("qtype", TYPES, ids=lambda q: q.name)
def test_dequantize_is_bit_exact_with_llama_cpp_reference(dumped, qtype):
    raw, ours = dumped[qtype]
    theirs = gguf.quants.dequantize(raw, qtype).astype(np.float32)
    assert ours.shape == theirs.shape == (ROWS, raw.shape[1] // gguf.GGML_QUANT_SIZES[qtype][1]
                                          * gguf.GGML_QUANT_SIZES[qtype][0])
    assert np.isfinite(theirs).all()
    mismatched = np.flatnonzero(ours.view(np.uint32) != theirs.view(np.uint32))
    assert mismatched.size == 0, (
        f"{mismatched.size} of {ours.size} values differ; first at flat index {mismatched[0]}: "
        f"{ours.flat[mismatched[0]]!r} vs {theirs.flat[mismatched[0]]!r}")


def test_an_undecodable_type_is_refused_naming_the_tensor(tmp_path, dump_tensors_tool):
    writer = gguf.GGUFWriter(str(tmp_path / "iq2.gguf"), "llama")
    writer.add_tensor("blk.0.ffn_up.weight", np.zeros((2, 66), dtype=np.uint8), raw_dtype=Q.IQ2_XXS)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    run = subprocess.run([dump_tensors_tool, str(tmp_path / "iq2.gguf"), "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, timeout=10)
    assert run.returncode == 2
    assert "blk.0.ffn_up.weight" in run.stderr and "iq2_xxs" in run.stderr and "q4_K" in run.stderr
    assert run.stderr.count("\n") == 1
