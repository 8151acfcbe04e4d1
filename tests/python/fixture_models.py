"""The fixture models of veloxquant_make_fixture (tools/dev) that the tests write and check."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

ARCHS = ("llama", "qwen2")
TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0")
ROPE_SCALE = 4.0  # the linear-scaling variant's factor
SEED = 7


@dataclass(frozen=True)
class Variant:
    arch: str
    type: str
    tied: bool = False
    rope_scale: float = 0.0  # 0: no rope.scaling metadata

    @property
    def id(self) -> str:
        return "-".join(
            [self.arch, self.type] + (["tied"] if self.tied else []) + (["linear"] if self.rope_scale else [])
        )


# Every architecture x weight type, tied and untied, with and without linear RoPE scaling.
VARIANTS = [
    Variant(arch, t, tied, scale)
    for arch in ARCHS
    for t in TYPES
    for tied in (False, True)
    for scale in (0.0, ROPE_SCALE)
]


def write(tool: str, out_dir: Path, v: Variant) -> tuple[Path, Path]:
    """Writes the variant's GGUF and manifest into out_dir; returns their paths."""
    gguf, manifest = out_dir / f"{v.id}.gguf", out_dir / f"{v.id}.json"
    cmd = [tool, "--arch", v.arch, "--type", v.type, "--seed", str(SEED), "--manifest", str(manifest)]
    if v.tied:
        cmd.append("--tied")
    if v.rope_scale:
        cmd += ["--rope-scale", str(v.rope_scale)]
    run = subprocess.run(cmd + [str(gguf)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, f"{' '.join(cmd)} failed ({run.returncode}): {run.stderr}"
    return gguf, manifest
