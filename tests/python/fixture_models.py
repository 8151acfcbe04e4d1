"""The fixture models of veloxquant_make_fixture (tools/dev) that the tests write and check."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

ARCHS = ("llama", "qwen2")
NEW_ARCHS = ("qwen3", "phi3", "mistral3", "gemma2", "gemma3")
TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0")
ROPE_SCALE = 4.0  # the linear-scaling variant's factor
SEED = 7
# The fixture writer's default (width, heads, kv_heads, head_dim, ffn, layers).
DEFAULT_SHAPE = (64, 4, 2, 16, 96, 2)


@dataclass(frozen=True)
class Variant:
    arch: str
    type: str
    tied: bool = False
    rope_scale: float = 0.0  # 0: no rope.scaling metadata
    # (width, heads, kv_heads, head_dim, ffn, layers) for --width ... --layers; () keeps the
    # fixture writer's small default shape.
    shape: tuple = ()

    @property
    def sizes(self) -> tuple:
        """(width, heads, kv_heads, head_dim, ffn, layers) of the written model."""
        return self.shape or DEFAULT_SHAPE

    @property
    def id(self) -> str:
        return "-".join(
            [self.arch, self.type]
            + (["tied"] if self.tied else [])
            + (["linear"] if self.rope_scale else [])
            + ([f"hd{self.shape[3]}"] if self.shape else [])
        )


# Every architecture x weight type, tied and untied, with and without linear RoPE scaling.
VARIANTS = [
    Variant(arch, t, tied, scale)
    for arch in ARCHS
    for t in TYPES
    for tied in (False, True)
    for scale in (0.0, ROPE_SCALE)
] + [
    # The head dimensions real models use (and the CUDA backend's: 64 and 128), grouped-query.
    Variant("llama", "f16", shape=(256, 4, 2, 64, 384, 2)),
    Variant("qwen2", "q8_0", shape=(256, 4, 1, 128, 512, 2)),
] + [
    # The architectures beyond llama's block, each with its converter's layout (fused tensors,
    # q/k norms, post-norms, GeGLU, windows of 8 tokens, soft-caps, query temperature), in a float
    # and a quantized type; qwen3 also with heads wider than width / heads, as its models have.
    Variant(arch, t)
    for arch in NEW_ARCHS
    for t in ("f32", "q8_0")
] + [
    Variant("qwen3", "f16", shape=(64, 4, 2, 32, 96, 2)),
    Variant("gemma3", "q4_0", rope_scale=ROPE_SCALE),
] + [
    # Gemma 4 E2B's heads (8 query heads, 1 KV head of 256 windowed / 512 global, per-layer inputs
    # of 256) in a narrower model of 5 layers: windowed, global and shared-KV ones.
    Variant("gemma4", t, shape=(256, 8, 1, 256, 256, 5))
    for t in ("f32", "q8_0")
]


def write(tool: str, out_dir: Path, v: Variant) -> tuple[Path, Path]:
    """Writes the variant's GGUF and manifest into out_dir; returns their paths."""
    gguf, manifest = out_dir / f"{v.id}.gguf", out_dir / f"{v.id}.json"
    cmd = [tool, "--arch", v.arch, "--type", v.type, "--seed", str(SEED), "--manifest", str(manifest)]
    if v.tied:
        cmd.append("--tied")
    if v.rope_scale:
        cmd += ["--rope-scale", str(v.rope_scale)]
    # An empty shape passes no flags: the writer's default shape.
    flags = ("--width", "--heads", "--kv-heads", "--head-dim", "--ffn", "--layers")
    for flag, size in zip(flags, v.shape, strict=False):
        cmd += [flag, str(size)]
    run = subprocess.run(cmd + [str(gguf)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, f"{' '.join(cmd)} failed ({run.returncode}): {run.stderr}"
    return gguf, manifest
