"""Writes fuzz/corpus/gguf/block-types.gguf: one 256-element tensor of every quantized weight type
the runtime decodes, random codes with finite fp16 scales, so that mutations start from valid
blocks of each layout. Run: .venv/bin/python fuzz/make_block_types_seed.py"""

from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFWriter
from gguf.constants import GGML_QUANT_SIZES

# Offsets of each block's fp16 scale fields (ggml's block structs), set to a finite value.
SCALES = {T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0], T.Q2_K: [80, 82],
          T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208], T.IQ4_NL: [0], T.IQ4_XS: [0]}

rng = np.random.default_rng(5)
w = GGUFWriter(str(Path(__file__).parent / "corpus" / "gguf" / "block-types.gguf"), "llama")
for t, offsets in SCALES.items():
    block_elems, block_bytes = GGML_QUANT_SIZES[t]
    blocks = rng.integers(0, 256, (256 // block_elems, block_bytes), dtype=np.uint8)
    for at in offsets:
        blocks[:, at : at + 2] = np.frombuffer(np.float16(0.01).tobytes(), dtype=np.uint8)
    w.add_tensor(f"{t.name.lower()}.weight", blocks.reshape(-1),
                 raw_shape=(256 // block_elems * block_bytes,), raw_dtype=t)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
