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

Gemma 4 (dense; Hugging Face's Gemma4 text model, as llama.cpp's converter lays it out): windowed
layers have heads of key_length_swa and rotate rope.dimension_count_swa dims with
rope.freq_base_swa; global layers have heads of key_length and divide their frequencies by
rope_freqs (1e30: a pair left unrotated). Scores are q.k unscaled; v is RMS-normalized per head
without a weight and is the k projection's output (before its norm) when attn_v is absent. The
last shared_kv_layers layers reuse the keys and values of the last cache layer of their kind.
After the feed-forward, the per-layer input (E2B/E4B) adds
  post_norm(proj(gelu(inp_gate(x)) * in_l)),
  in = (RMSNorm(per_layer_model_proj(x0) / sqrt(width)) * per_layer_proj_norm
        + per_layer_token_embd[token] * sqrt(per_layer)) / sqrt(2),
x0 being the scaled token embedding; then the layer's output is scaled by layer_output_scale.
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
    "gemma4": "neox",
}
GEMMA = ("gemma2", "gemma3", "gemma4")


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
    # Gemma 4: per-layer head sizes, KV heads and feed-forward widths (empty: the uniform ones),
    # the windowed layers' RoPE dims, the global layers' frequency divisors, value norm, shared-KV
    # layers and the per-layer input width.
    layer_head_dim: tuple = ()
    layer_kv_heads: tuple = ()
    layer_ffn: tuple = ()
    rope_dims_swa: int = 0
    rope_freqs: np.ndarray | None = None
    value_norm: bool = False
    shared_kv: int = 0
    per_layer: int = 0

    def head_dim_of(self, i: int) -> int:
        return self.layer_head_dim[i] if self.layer_head_dim else self.head_dim

    def kv_heads_of(self, i: int) -> int:
        return self.layer_kv_heads[i] if self.layer_kv_heads else self.kv_heads

    def ffn_of(self, i: int) -> int:
        return self.layer_ffn[i] if self.layer_ffn else self.ffn

    def kv_source(self, i: int) -> int:
        """The layer whose keys and values layer i attends over: the last cache layer of its kind."""
        first_shared = self.layers - self.shared_kv
        if i < first_shared:
            return i
        return first_shared - (2 if self.sliding[i] else 1)


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
    out_scale: float = 1.0
    per_layer_gate: Linear | None = None
    per_layer_proj: Linear | None = None
    per_layer_post_norm: np.ndarray | None = None


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
    # Gemma 4's per-layer inputs: [vocab, layers * per_layer], [layers * per_layer, width], [per_layer].
    per_layer_token_embd: np.ndarray | None = None
    per_layer_model_proj: Linear | None = None
    per_layer_proj_norm: np.ndarray | None = None

    def rounds_activations(self) -> bool:
        """Whether any product rounds its input (some weights are quantized)."""
        linears = [self.output] + [getattr(layer, n) for layer in self.layers
                                   for n in ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down")]
        return any(w is not None and w.group is not None for w in linears)


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
    pattern = key("attention.sliding_window_pattern", 2 if arch == "gemma2" else 6)
    if isinstance(pattern, list):  # Gemma 4: one flag per layer
        sliding = tuple(bool(s) for s in pattern)
    else:
        sliding = tuple(window > 0 and (pattern == 0 or i % pattern < pattern - 1) for i in range(layers_n))

    def per_layer(value) -> tuple:
        """A per-layer array as a tuple; () for one value for every layer."""
        return tuple(int(x) for x in value) if isinstance(value, list) else ()

    gemma4 = arch == "gemma4"
    head_dim_swa = int(key("attention.key_length_swa")) if gemma4 else head_dim
    ffn, kv_heads = key("feed_forward_length"), key("attention.head_count_kv", heads)
    config = Config(
        arch=arch,
        layers=int(key("block_count")),
        width=width,
        ffn=int(ffn[0] if isinstance(ffn, list) else ffn),
        heads=heads,
        kv_heads=int(kv_heads[0] if isinstance(kv_heads, list) else kv_heads),
        head_dim=head_dim,
        vocab=w["token_embd.weight"].shape[0],
        eps=float(key("attention.layer_norm_rms_epsilon")),
        rope_dims=int(key("rope.dimension_count", head_dim)),
        rope_base=float(key("rope.freq_base", 10000.0)),
        rope_scale=scale,
        rope_layout=ROPE_LAYOUT[arch],
        qk_norm=arch in ("qwen3", "gemma3", "gemma4"),
        post_norms=arch in GEMMA,
        gelu=arch in GEMMA,
        embed_scale=float(np.sqrt(width)) if arch in GEMMA else 1.0,
        # Gemma's 27B models scale queries by 1/sqrt(width / heads) (query_pre_attn_scalar).
        attn_scale=(1.0 / np.sqrt(width // heads) if (arch, layers_n) in (("gemma2", 46), ("gemma3", 62))
                    else 1.0 if gemma4 else 0.0),
        attn_softcap=float(key("attn_logit_softcapping", 50.0)) if arch == "gemma2" else 0.0,
        final_softcap=(float(key("final_logit_softcapping", 30.0 if arch == "gemma2" else 0.0))
                       if arch in GEMMA else 0.0),
        window=window,
        sliding=sliding,
        rope_base_swa=float(key("rope.freq_base_swa", 10000.0)) if arch in ("gemma3", "gemma4") else 0.0,
        temperature_scale=float(key("attention.temperature_scale", 0.0)) if arch == "mistral3" else 0.0,
        temperature_floor=int(key("rope.scaling.original_context_length", key("context_length"))),
        layer_head_dim=tuple(head_dim_swa if s else head_dim for s in sliding) if gemma4 else (),
        layer_kv_heads=per_layer(kv_heads),
        layer_ffn=per_layer(ffn),
        rope_dims_swa=int(key("rope.dimension_count_swa", head_dim_swa)) if gemma4 else 0,
        rope_freqs=w.get("rope_freqs.weight") if gemma4 else None,
        value_norm=gemma4,
        shared_kv=int(key("attention.shared_kv_layers", 0)) if gemma4 else 0,
        per_layer=int(key("embedding_length_per_layer_input", 0)) if gemma4 else 0,
    )
    layers = []
    for i in range(config.layers):
        p = f"blk.{i}."
        head_dim, kv_width = config.head_dim_of(i), config.kv_heads_of(i) * config.head_dim_of(i)
        if p + "attn_qkv.weight" in w:  # fused (Phi-3): the q rows, then k, then v
            qkv, q_width = p + "attn_qkv.weight", heads * head_dim
            wq, wk = linear(qkv, slice(0, q_width)), linear(qkv, slice(q_width, q_width + kv_width))
            wv = linear(qkv, slice(q_width + kv_width, None))
        else:
            # Gemma 4: shared-KV layers have no k or v, and v may be absent (the k projection's output).
            wq = linear(p + "attn_q.weight")
            wk = linear(p + "attn_k.weight") if p + "attn_k.weight" in w else None
            wv = linear(p + "attn_v.weight") if p + "attn_v.weight" in w else None
        if p + "ffn_gate.weight" in w:
            w_gate, w_up = linear(p + "ffn_gate.weight"), linear(p + "ffn_up.weight")
        else:  # fused (Phi-3): gate rows first
            up, ffn = p + "ffn_up.weight", config.ffn_of(i)
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
                out_scale=float(w.get(p + "layer_output_scale.weight", [1.0])[0]),
                per_layer_gate=linear(p + "inp_gate.weight") if config.per_layer else None,
                per_layer_proj=linear(p + "proj.weight") if config.per_layer else None,
                per_layer_post_norm=w.get(p + "post_norm.weight"),
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
        per_layer_token_embd=w.get("per_layer_token_embd.weight"),
        per_layer_model_proj=linear("per_layer_model_proj.weight") if config.per_layer else None,
        per_layer_proj_norm=w.get("per_layer_proj_norm.weight"),
    )


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU's tanh approximation."""
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def rope(x: np.ndarray, positions: np.ndarray, c: Config, sliding: bool = False) -> np.ndarray:
    """x: [n, heads, head_dim]; rotates the first c.rope_dims dimensions of every head (a Gemma 3/4
    windowed layer with its own base, unscaled, and Gemma 4's its own dims; Gemma 4's global layers
    divide each frequency by rope_freqs)."""
    dims = c.rope_dims_swa if sliding and c.rope_dims_swa else c.rope_dims
    half = dims // 2
    base, pos_scale = (c.rope_base_swa, 1.0) if sliding and c.rope_base_swa else (c.rope_base, c.rope_scale)
    freqs = base ** (-2.0 * np.arange(half) / dims)
    if c.rope_freqs is not None and not sliding:
        freqs = freqs / c.rope_freqs
    angles = (positions.astype(np.float64) * pos_scale)[:, None] * freqs[None, :]  # [n, half]
    cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]
    out = x.copy()
    if c.rope_layout == "adjacent":
        a, b = x[..., 0 : dims : 2], x[..., 1 : dims : 2]
        out[..., 0 : dims : 2] = a * cos - b * sin
        out[..., 1 : dims : 2] = a * sin + b * cos
    else:
        a, b = x[..., :half], x[..., half : dims]
        out[..., :half] = a * cos - b * sin
        out[..., half : dims] = a * sin + b * cos
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
    causal = np.triu(np.ones((n, n), dtype=bool), k=1)  # True where a key lies in the future
    # True where a key lies outside a windowed layer's window: at a position <= p - window.
    outside = np.tril(np.ones((n, n), dtype=bool), k=-c.window) if c.window else causal
    x = model.token_embd[tokens] * c.embed_scale
    per_layer_in = per_layer_inputs(model, tokens, x) if c.per_layer else None
    kv = {}  # layer -> (keys before RoPE, keys after, values), for Gemma 4's shared-KV layers
    for index, layer in enumerate(model.layers):
        sliding = bool(c.sliding) and c.sliding[index]
        head_dim, kv_heads = c.head_dim_of(index), c.kv_heads_of(index)
        h = rms_norm(x, layer.attn_norm, c.eps)
        q = layer.wq(h) + (layer.bq if layer.bq is not None else 0.0)
        q = q.reshape(n, c.heads, head_dim)
        if c.qk_norm:
            q = rms_norm(q, layer.q_norm, c.eps)
        q = rope(q, positions, c, sliding)
        if c.temperature_scale:
            q = q * (1.0 + c.temperature_scale
                     * np.log1p(np.floor(positions / c.temperature_floor)))[:, None, None]
        if index == c.kv_source(index):
            kv[index] = keys_and_values(layer, h, positions, c, sliding, kv_dtype, index)
        k_pre, k_post, v = kv[c.kv_source(index)]
        group = c.heads // kv_heads
        k = np.repeat(k_post, group, axis=1)  # query head i reads KV head i // group
        v = np.repeat(v, group, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) * (c.attn_scale or 1.0 / np.sqrt(head_dim))
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
        attn = np.einsum("hqk,khd->qhd", p, v).reshape(n, c.heads * head_dim)
        out = layer.wo(attn)
        x = x + (rms_norm(out, layer.post_attn_norm, c.eps) if c.post_norms else out)
        h = rms_norm(x, layer.ffn_norm, c.eps)
        gate = layer.w_gate(h)
        act = gelu(gate) if c.gelu else gate / (1.0 + np.exp(-gate))
        out = layer.w_down(act * layer.w_up(h))
        x = x + (rms_norm(out, layer.post_ffn_norm, c.eps) if c.post_norms else out)
        if per_layer_in is not None:
            g = gelu(layer.per_layer_gate(x)) * per_layer_in[:, index, :]
            x = x + rms_norm(layer.per_layer_proj(g), layer.per_layer_post_norm, c.eps)
        x = x * layer.out_scale
    logits = model.output(rms_norm(x, model.output_norm, c.eps))
    if c.final_softcap:
        logits = c.final_softcap * np.tanh(logits / c.final_softcap)
    return logits


def keys_and_values(layer: Layer, h: np.ndarray, positions: np.ndarray, c: Config, sliding: bool, kv_dtype,
                    index: int):
    """A layer's keys before and after RoPE and its values, [n, kv_heads, head_dim] each, rounded to
    kv_dtype (after RoPE) when given."""
    n, head_dim, kv_heads = h.shape[0], c.head_dim_of(index), c.kv_heads_of(index)
    k = layer.wk(h) + (layer.bk if layer.bk is not None else 0.0)
    # Gemma 4: without attn_v the values are the k projection's output, before k's norm.
    v = k if layer.wv is None else layer.wv(h) + (layer.bv if layer.bv is not None else 0.0)
    k, v = k.reshape(n, kv_heads, head_dim), v.reshape(n, kv_heads, head_dim)
    if c.qk_norm:
        k = rms_norm(k, layer.k_norm, c.eps)
    if c.value_norm:
        v = rms_norm(v, 1.0, c.eps)
    k_post = rope(k, positions, c, sliding)
    if kv_dtype is not None:
        k_post = k_post.astype(kv_dtype).astype(np.float64)
        v = v.astype(kv_dtype).astype(np.float64)
    return k, k_post, v


def per_layer_inputs(model: Model, tokens: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Gemma 4's per-layer inputs [n, layers, per_layer] from the scaled embeddings x."""
    c = model.config
    n, width = x.shape
    proj = (model.per_layer_model_proj(x) / np.sqrt(width)).reshape(n, c.layers, c.per_layer)
    proj = rms_norm(proj, model.per_layer_proj_norm, c.eps)
    own = model.per_layer_token_embd[tokens].reshape(n, c.layers, c.per_layer) * np.sqrt(c.per_layer)
    return (proj + own) / np.sqrt(2.0)


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
