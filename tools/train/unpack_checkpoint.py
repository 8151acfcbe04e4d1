#!/usr/bin/env python3
"""Unpacks the weight shards train_llama.py returns (NAME-0.npz, NAME-1.npz, ...) into one .npy
per tensor, named by its GGUF name, for veloxquant_export_model; the reference logits and their
tokens go beside them as ref_logits.npy and ref_tokens.npy.

    python tools/train/unpack_checkpoint.py OUT_DIR SHARD.npz [SHARD.npz ...]
"""

import os
import sys

import numpy as np


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seen = set()
    for shard in sys.argv[2:]:
        with np.load(shard) as z:
            for name in z.files:
                if name in seen:
                    print(f"error: {shard}: tensor {name} appears in two shards", file=sys.stderr)
                    return 1
                seen.add(name)
                np.save(os.path.join(out, name + ".npy"), z[name])
    print(f"unpacked {len(seen)} arrays into {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
