"""ggml tensor encodings, decoded (and, for the cross-checks, encoded) in numpy.

Written from ggml's format definitions (ggml-common.h, ggml-quants.c's *_ref functions), not from
this project's C++. All types are little-endian; a tensor is its rows back to back, and a row of
a block type is whole blocks of 32 consecutive elements:

  F32   4 bytes per element, IEEE binary32.
  F16   2 bytes per element, IEEE binary16.
  BF16  2 bytes per element, the upper half of the binary32 bit pattern.
  Q8_0  34-byte blocks: fp16 scale d, then 32 int8 q; x[i] = d * q[i].
  Q4_0  18-byte blocks: fp16 scale d, then 16 bytes qs; byte j holds element j in its low
        nibble and element j + 16 in its high nibble; x = d * (nibble - 8).
"""

import numpy as np

# ggml type ids (enum ggml_type) -> (name, elements per block, bytes per block).
TYPES = {
    0: ("f32", 1, 4),
    1: ("f16", 1, 2),
    2: ("q4_0", 32, 18),
    8: ("q8_0", 32, 34),
    30: ("bf16", 1, 2),
}
TYPE_IDS = {name: type_id for type_id, (name, _, _) in TYPES.items()}
QK = 32


def type_name(type_id: int) -> str:
    if int(type_id) not in TYPES:
        raise ValueError(f"ggml type {int(type_id)} is not decoded here; expected one of {sorted(TYPES)}")
    return TYPES[int(type_id)][0]


def nbytes(type_id: int, n_elements: int) -> int:
    _, block, size = TYPES[int(type_id)]
    if n_elements % block:
        raise ValueError(f"{n_elements} elements are not whole blocks of {block}")
    return n_elements // block * size


def dequantize(raw: np.ndarray, type_id: int, n_elements: int) -> np.ndarray:
    """The n_elements values stored in `raw` (uint8 bytes), as float64."""
    raw = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1)
    if raw.size != nbytes(type_id, n_elements):
        raise ValueError(f"{raw.size} bytes do not hold {n_elements} {type_name(type_id)} elements")
    name = type_name(type_id)
    if name == "f32":
        return raw.view("<f4").astype(np.float64)
    if name == "f16":
        return raw.view("<f2").astype(np.float64)
    if name == "bf16":
        return (raw.view("<u2").astype(np.uint32) << 16).view("<f4").astype(np.float64)
    if name == "q8_0":
        blocks = raw.reshape(-1, 34)
        d = blocks[:, :2].copy().view("<f2").astype(np.float64)  # [blocks, 1]
        q = blocks[:, 2:].copy().view(np.int8).astype(np.float64)
        return (d * q).reshape(-1)
    blocks = raw.reshape(-1, 18)  # q4_0
    d = blocks[:, :2].copy().view("<f2").astype(np.float64)
    qs = blocks[:, 2:]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float64) - 8.0
    return (d * q).reshape(-1)


# ---- encoders: ggml's reference quantizers, bit for bit -----------------------------------------


def _roundf(v: np.ndarray) -> np.ndarray:
    """C's roundf (halves away from zero) of float32 values; exact, since v +- 0.5 is exact in
    float64 for every float32 v."""
    v = v.astype(np.float64)
    return np.trunc(v + np.copysign(0.5, v))


def encode(x: np.ndarray, type_id: int) -> bytes:
    """float32 values -> the bytes ggml stores for them (round to nearest even for F16/BF16)."""
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    name = type_name(type_id)
    if name == "f32":
        return x.astype("<f4").tobytes()
    if name == "f16":
        return x.astype("<f2").tobytes()
    if name == "bf16":
        u = x.view(np.uint32).astype(np.uint64)
        return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()
    blocks = x.reshape(-1, QK)
    if name == "q8_0":
        # quantize_row_q8_0_ref: d = amax / 127, q = roundf(x / d) computed as x * (1 / d).
        amax = np.abs(blocks).max(axis=1, keepdims=True)
        d = amax / np.float32(127)
        inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
        q = _roundf(blocks * inv).astype(np.int8)
        out = np.concatenate([d.astype("<f2").view(np.uint8), q.view(np.uint8)], axis=1)
        return out.tobytes()
    # quantize_row_q4_0_ref: d = (the first value of largest magnitude) / -8,
    # nibble = min(15, (int8)(x / d + 8.5)).
    rows = np.arange(blocks.shape[0])
    extreme = blocks[rows, np.abs(blocks).argmax(axis=1)][:, None]
    d = extreme / np.float32(-8)
    inv = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
    nib = np.minimum(15, (blocks * inv + np.float32(8.5)).astype(np.int8)).astype(np.uint8)
    qs = nib[:, :16] | (nib[:, 16:] << 4)
    out = np.concatenate([d.astype("<f2").view(np.uint8), qs], axis=1)
    return out.tobytes()
