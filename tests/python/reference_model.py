"""An independent float64 forward pass for Llama-family GGUF models, the oracle the C++ runtime
is tested against.

Written from the architectures' definitions (Llama: Touvron et al. 2023 and llama.cpp's GGUF
conventions; Qwen2/3, Phi-3, Gemma 2/3 and Mistral 3: their Hugging Face modelling code's
structure), not from this project's C++.
The file is read with the PyPI `gguf` package (llama.cpp's own reader); tensor bytes are decoded
by ggml_blocks.

  x = token_embd[tokens]
  per layer:  h = RMSNorm(x) * attn_norm
              q, k, v = h Wq^T (+ bq), h Wk^T (+ bk), h Wv^T (+ bv)      (biases: qwen2)
              RoPE on q and k; causal grouped-query attention, scale 1/sqrt(head_dim),
              query head i reads KV head i // (heads / kv_heads)
              x += attn Wo^T
              h = RMSNorm(x) * ffn_norm
              x += (silu(h Wgate^T) * (h Wup^T)) Wdown^T
  logits = (RMSNorm(x) * output_norm) Wout^T, Wout = token_embd when output.weight is absent.

A product with quantized weights (Q8_0, Q4_0) first rounds its input to int8 the way llama.cpp
and the C++ runtime do (docs/runtime.md): per token and group of 32 values, a float32 scale
d = max |h| / 127 and codes rint(h / d); the product then uses d * codes. That rounding is part of
what is being computed, not an error the runtime makes.

RoPE rotates pairs of a head's first n_rot dimensions by pos * freq_scale * base^(-2i / n_rot):
GGUF llama files use adjacent pairs (2i, 2i+1) (their converter permutes Wq and Wk to match), qwen2
uses the NeoX pairs (i, i + n_rot/2). Linear RoPE scaling divides positions by its factor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from gguf import GGUFReader
from gguf import quants as gguf_quants

import ggml_blocks

# RoPE pair layout by architecture.
ROPE_LAYOUT = {
    "llama": "adjacent",
    "mistral3": "adjacent",
    "qwen2": "neox",
    "qwen3": "neox",
    "phi3": "neox",
    "gemma2": "neox",
    "gemma3": "neox",
}
GEMMA = ("gemma2", "gemma3")


@dataclass
class Config:
    arch: str
    layers: int
    width: int
    ffn: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    eps: float
    rope_dims: int
    rope_base: float
    rope_scale: float  # multiplies positions: 1 / the linear scaling factor
    rope_layout: str
    # Beyond llama's block (Qwen3, Gemma 2/3, Mistral 3); the defaults are llama's.
    qk_norm: bool = False  # RMSNorm over each head of q and k before RoPE
    post_norms: bool = False  # RMSNorm of the attention and MLP outputs before each residual add
    gelu: bool = False  # GeGLU (tanh-approximated GELU) instead of SwiGLU
    embed_scale: float = 1.0
    attn_scale: float = 0.0  # 0: 1/sqrt(head_dim)
    attn_softcap: float = 0.0
    final_softcap: float = 0.0
    window: int = 0  # sliding-window layers see keys at positions > p - window
    sliding: tuple = ()  # per layer: windowed or not
    rope_base_swa: float = 0.0  # the windowed layers' unscaled RoPE base (gemma3); 0: the global one
    temperature_scale: float = 0.0  # queries *= 1 + scale * log(1 + floor(pos / floor))
    temperature_floor: int = 0


# Quantized weight types -> the group of input values rounded with one scale.
ACTIVATION_GROUP = {"q8_0": 32, "q4_0": 32}


def round_activations(h: np.ndarray, group: int) -> np.ndarray:
    """h [n, k] (k a multiple of group) rounded as the runtime rounds a product's input: in float32,
    per group a scale d = max |h| / 127 and codes rint(h * (1 / d)) (0 where d is 0); returns
    d * codes in float64."""
    x = h.astype(np.float32).reshape(h.shape[0], -1, group)
    d = np.abs(x).max(axis=-1, keepdims=True) / np.float32(127)
    inv = np.float32(1) / np.where(d == 0, np.float32(1), d)
    q = np.rint(x * np.where(d == 0, np.float32(0), inv))
    return (q.astype(np.float64) * d.astype(np.float64)).reshape(h.shape)


@dataclass
class Linear:
    """A weight matrix [out, in], and the group its input is rounded in (None for float weights)."""

    w: np.ndarray
    group: int | None = None

    def __call__(self, h: np.ndarray) -> np.ndarray:
        return (h if self.group is None else round_activations(h, self.group)) @ self.w.T


@dataclass
class Layer:
    attn_norm: np.ndarray
    wq: Linear
    wk: Linear
    wv: Linear
    wo: Linear
    bq: np.ndarray | None
    bk: np.ndarray | None
    bv: np.ndarray | None
    ffn_norm: np.ndarray
    w_gate: Linear
    w_up: Linear
    w_down: Linear
    q_norm: np.ndarray | None = None
    k_norm: np.ndarray | None = None
    post_attn_norm: np.ndarray | None = None
    post_ffn_norm: np.ndarray | None = None


@dataclass
class Model:
    config: Config
    token_embd: np.ndarray  # [vocab, width]
    output_norm: np.ndarray
    output: Linear  # [vocab, width]
    layers: list[Layer]
    tokens: list[str] = field(default_factory=list)
    token_types: list[int] = field(default_factory=list)
    bos: int | None = None
    eos: int | None = None

    def rounds_activations(self) -> bool:
        """Whether any product rounds its input (some weights are quantized)."""
        linears = [self.output] + [getattr(layer, n) for layer in self.layers
                                   for n in ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down")]
        return any(w.group is not None for w in linears)


def metadata(reader: GGUFReader) -> dict:
    """Every metadata value as a Python value (arrays as lists), without the reader's GGUF.*
    pseudo-fields."""
    return {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}


def tensors(reader: GGUFReader) -> dict[str, np.ndarray]:
    """Every tensor decoded to float64, shaped as numpy sees it (ggml dims reversed: a weight
    matrix is [out, in])."""
    out = {}
    for t in reader.tensors:
        n = int(t.n_elements)
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))
        if int(t.tensor_type) not in ggml_blocks.TYPES:
            # K-quants and the other types decoded only by llama.cpp's own numpy reference (PyPI gguf).
            out[t.name] = gguf_quants.dequantize(t.data, t.tensor_type).astype(np.float64).reshape(shape)
            continue
        start = int(t.data_offset)
        raw = reader.data[start : start + ggml_blocks.nbytes(int(t.tensor_type), n)]
        out[t.name] = ggml_blocks.dequantize(raw, int(t.tensor_type), n).reshape(shape)
    return out


def load(path: str) -> Model:
    reader = GGUFReader(path)
    meta = metadata(reader)
    w = tensors(reader)
    # Types ggml_blocks does not decode (the K-quants) keep their inputs in float64 here, unrounded.
    types = {t.name: ggml_blocks.TYPES.get(int(t.tensor_type), (t.tensor_type.name.lower(),))[0]
             for t in reader.tensors}

    def linear(name: str, rows: slice = slice(None)) -> Linear:
        """Rows of a stored matrix (a part of a fused one), with its type's activation rounding."""
        return Linear(w[name][rows], ACTIVATION_GROUP.get(types[name]))

    arch = meta["general.architecture"]
    if arch not in ROPE_LAYOUT:
        raise ValueError(f"{path}: architecture {arch!r} not modelled; expected {sorted(ROPE_LAYOUT)}")

    def key(name, default=None):
        value = meta.get(f"{arch}.{name}", default)
        if value is None:
            raise KeyError(f"{path}: metadata {arch}.{name} missing")
        return value

    width, heads = int(key("embedding_length")), int(key("attention.head_count"))
    head_dim = int(key("attention.key_length", width // heads))
    layers_n = int(key("block_count"))
    scale = 1.0
    if key("rope.scaling.type", "none") == "linear":
        scale = 1.0 / float(key("rope.scaling.factor"))
    # Gemma: sliding windows on all but the last layer of every `pattern` (Gemma 2's window
    # defaults to 4096 and its caps to 50 and 30, as its configuration has them).
    window = int(key("attention.sliding_window", 4096 if arch == "gemma2" else 0)) if arch in GEMMA else 0
    pattern = int(key("attention.sliding_window_pattern", 2 if arch == "gemma2" else 6))
    sliding = tuple(window > 0 and (pattern == 0 or i % pattern < pattern - 1) for i in range(layers_n))
    config = Config(
        arch=arch,
        layers=int(key("block_count")),
        width=width,
        ffn=int(key("feed_forward_length")),
        heads=heads,
        kv_heads=int(key("attention.head_count_kv", heads)),
        head_dim=head_dim,
        vocab=w["token_embd.weight"].shape[0],
        eps=float(key("attention.layer_norm_rms_epsilon")),
        rope_dims=int(key("rope.dimension_count", head_dim)),
        rope_base=float(key("rope.freq_base", 10000.0)),
        rope_scale=scale,
        rope_layout=ROPE_LAYOUT[arch],
        qk_norm=arch in ("qwen3", "gemma3"),
        post_norms=arch in GEMMA,
        gelu=arch in GEMMA,
        embed_scale=float(np.sqrt(width)) if arch in GEMMA else 1.0,
        # Gemma's 27B models scale queries by 1/sqrt(width / heads) (query_pre_attn_scalar).
        attn_scale=(1.0 / np.sqrt(width // heads) if (arch, layers_n) in (("gemma2", 46), ("gemma3", 62))
                    else 0.0),
        attn_softcap=float(key("attn_logit_softcapping", 50.0)) if arch == "gemma2" else 0.0,
        final_softcap=(float(key("final_logit_softcapping", 30.0 if arch == "gemma2" else 0.0))
                       if arch in GEMMA else 0.0),
        window=window,
        sliding=sliding,
        rope_base_swa=float(key("rope.freq_base_swa", 10000.0)) if arch == "gemma3" else 0.0,
        temperature_scale=float(key("attention.temperature_scale", 0.0)) if arch == "mistral3" else 0.0,
        temperature_floor=int(key("rope.scaling.original_context_length", key("context_length"))),
    )
    kv_width = config.kv_heads * head_dim
    layers = []
    for i in range(config.layers):
        p = f"blk.{i}."
        if p + "attn_qkv.weight" in w:  # fused (Phi-3): the q rows, then k, then v
            qkv, q_width = p + "attn_qkv.weight", heads * head_dim
            wq, wk = linear(qkv, slice(0, q_width)), linear(qkv, slice(q_width, q_width + kv_width))
            wv = linear(qkv, slice(q_width + kv_width, None))
        else:
            wq, wk, wv = linear(p + "attn_q.weight"), linear(p + "attn_k.weight"), linear(p + "attn_v.weight")
        if p + "ffn_gate.weight" in w:
            w_gate, w_up = linear(p + "ffn_gate.weight"), linear(p + "ffn_up.weight")
        else:  # fused (Phi-3): gate rows first
            up, ffn = p + "ffn_up.weight", config.ffn
            w_gate, w_up = linear(up, slice(0, ffn)), linear(up, slice(ffn, None))
        layers.append(
            Layer(
                attn_norm=w[p + "attn_norm.weight"],
                wq=wq,
                wk=wk,
                wv=wv,
                wo=linear(p + "attn_output.weight"),
                bq=w.get(p + "attn_q.bias"),
                bk=w.get(p + "attn_k.bias"),
                bv=w.get(p + "attn_v.bias"),
                ffn_norm=w[p + "ffn_norm.weight"],
                w_gate=w_gate,
                w_up=w_up,
                w_down=linear(p + "ffn_down.weight"),
                q_norm=w.get(p + "attn_q_norm.weight"),
                k_norm=w.get(p + "attn_k_norm.weight"),
                post_attn_norm=w.get(p + "post_attention_norm.weight"),
                post_ffn_norm=w.get(p + "post_ffw_norm.weight"),
            )
        )
    bos, eos = meta.get("tokenizer.ggml.bos_token_id"), meta.get("tokenizer.ggml.eos_token_id")
    return Model(
        config=config,
        token_embd=w["token_embd.weight"],
        output_norm=w["output_norm.weight"],
        output=linear("output.weight" if "output.weight" in w and arch != "gemma2" else "token_embd.weight"),
        layers=layers,
        tokens=meta.get("tokenizer.ggml.tokens", []),
        token_types=meta.get("tokenizer.ggml.token_type", []),
        bos=None if bos is None else int(bos),
        eos=None if eos is None else int(eos),
    )


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def rope(x: np.ndarray, positions: np.ndarray, c: Config, sliding: bool = False) -> np.ndarray:
    """x: [n, heads, head_dim]; rotates the first c.rope_dims dimensions of every head (a Gemma 3
    windowed layer with its own base, unscaled)."""
    half = c.rope_dims // 2
    base, pos_scale = (c.rope_base_swa, 1.0) if sliding and c.rope_base_swa else (c.rope_base, c.rope_scale)
    freqs = base ** (-2.0 * np.arange(half) / c.rope_dims)
    angles = (positions.astype(np.float64) * pos_scale)[:, None] * freqs[None, :]  # [n, half]
    cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]
    out = x.copy()
    if c.rope_layout == "adjacent":
        a, b = x[..., 0 : c.rope_dims : 2], x[..., 1 : c.rope_dims : 2]
        out[..., 0 : c.rope_dims : 2] = a * cos - b * sin
        out[..., 1 : c.rope_dims : 2] = a * sin + b * cos
    else:
        a, b = x[..., :half], x[..., half : c.rope_dims]
        out[..., :half] = a * cos - b * sin
        out[..., half : c.rope_dims] = a * sin + b * cos
    return out


def forward(model: Model, tokens, kv_dtype=None, observe=None) -> np.ndarray:
    """Logits [n, vocab] (float64) for `tokens` at positions 0..n-1.

    kv_dtype: when given (np.float16), keys after RoPE and values are rounded to it before
    attention, as a cache storing them in that type does.
    observe: when given, called per layer as observe(layer, keys_before_rope, keys_after_rope,
    probs) with keys [n, kv_heads, head_dim] and attention probabilities [heads, n, n]."""
    c = model.config
    tokens = np.asarray(tokens, dtype=np.int64)
    n = tokens.size
    positions = np.arange(n)
    group = c.heads // c.kv_heads
    causal = np.triu(np.ones((n, n), dtype=bool), k=1)  # True where a key lies in the future
    # True where a key lies outside a windowed layer's window: at a position <= p - window.
    outside = np.tril(np.ones((n, n), dtype=bool), k=-c.window) if c.window else causal
    x = model.token_embd[tokens] * c.embed_scale
    for index, layer in enumerate(model.layers):
        sliding = bool(c.sliding) and c.sliding[index]
        h = rms_norm(x, layer.attn_norm, c.eps)
        q, k, v = layer.wq(h), layer.wk(h), layer.wv(h)
        if layer.bq is not None:
            q, k, v = q + layer.bq, k + layer.bk, v + layer.bv
        q = q.reshape(n, c.heads, c.head_dim)
        k = k.reshape(n, c.kv_heads, c.head_dim)
        if c.qk_norm:
            q, k = rms_norm(q, layer.q_norm, c.eps), rms_norm(k, layer.k_norm, c.eps)
        q = rope(q, positions, c, sliding)
        if c.temperature_scale:
            q = q * (1.0 + c.temperature_scale
                     * np.log1p(np.floor(positions / c.temperature_floor)))[:, None, None]
        k_pre = k
        k = rope(k_pre, positions, c, sliding)
        v = v.reshape(n, c.kv_heads, c.head_dim)
        if kv_dtype is not None:
            k = k.astype(kv_dtype).astype(np.float64)
            v = v.astype(kv_dtype).astype(np.float64)
        k_post = k
        k = np.repeat(k, group, axis=1)  # query head i reads KV head i // group
        v = np.repeat(v, group, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) * (c.attn_scale or 1.0 / np.sqrt(c.head_dim))
        if c.attn_softcap:
            scores = c.attn_softcap * np.tanh(scores / c.attn_softcap)
        scores[:, causal] = -np.inf
        if sliding:
            scores[:, outside] = -np.inf
        scores -= scores.max(axis=-1, keepdims=True)
        p = np.exp(scores)
        p /= p.sum(axis=-1, keepdims=True)
        if observe is not None:
            observe(index, k_pre, k_post, p)
        attn = np.einsum("hqk,khd->qhd", p, v).reshape(n, c.heads * c.head_dim)
        out = layer.wo(attn)
        x = x + (rms_norm(out, layer.post_attn_norm, c.eps) if c.post_norms else out)
        h = rms_norm(x, layer.ffn_norm, c.eps)
        gate = layer.w_gate(h)
        if c.gelu:
            act = 0.5 * gate * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (gate + 0.044715 * gate**3)))
        else:
            act = gate / (1.0 + np.exp(-gate))
        out = layer.w_down(act * layer.w_up(h))
        x = x + (rms_norm(out, layer.post_ffn_norm, c.eps) if c.post_norms else out)
    logits = model.output(rms_norm(x, model.output_norm, c.eps))
    if c.final_softcap:
        logits = c.final_softcap * np.tanh(logits / c.final_softcap)
    return logits


def greedy(model: Model, prompt, steps: int) -> list[int]:
    """prompt followed by `steps` argmax tokens (fewer if EOS comes first)."""
    tokens = list(prompt)
    for _ in range(steps):
        nxt = int(np.argmax(forward(model, tokens)[-1]))
        if nxt == model.eos:
            break
        tokens.append(nxt)
    return tokens


def decode_spm(model: Model, ids) -> str:
    """SentencePiece ids -> text: U+2581 becomes a space, <0xXX> byte tokens their byte, control
    tokens nothing; the leading space the encoder adds to the first word is dropped."""
    out = bytearray()
    for i in ids:
        piece, kind = model.tokens[i], model.token_types[i]
        if kind == 6:  # byte
            out.append(int(piece[3:5], 16))
        elif kind in (1, 4):  # normal, user-defined
            out += piece.replace("\u2581", " ").encode("utf-8")
    text = out.decode("utf-8", errors="replace")
    return text[1:] if text.startswith(" ") else text
