"""Hugging Face transformers integration: a transformers ``Cache`` whose layers are VeloxQuant
caches, and the attention function ``"veloxquant"``, which attends on those caches directly
(from the codes, not by decoding them back to a tensor for SDPA).

    import veloxquant.hf
    model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="veloxquant")
    out = model.generate(**inputs, past_key_values=veloxquant.hf.Cache("kivi", model.config))

Importing this module registers the attention function. Two backends hold the layers:

- ``"cpu"``: any spec (``veloxquant.methods()``) but ``kvzip``, whose reconstruction pass needs the
  project's own runtime (the cache refuses to select without it); one ``veloxquant.Cache`` per layer
  and sequence (cross-layer specs pair adjacent layers, eviction policies see the real attention).
  Every query, prompt and generated tokens alike, attends on the compressed cache.
- ``"cuda"``: the specs the CUDA backend holds for the model's heads
  (``veloxquant.cuda_unsupported(spec, kv_heads=..., head_dim=...)`` says why one is not), when
  the package was built with it (``veloxquant.cuda_available``): one ``veloxquant.DeviceCache``
  per layer on the GPU. Generated tokens attend through the fused CUDA
  kernel on the codes; the prompt attends exactly (SDPA over its own keys) while it is encoded, as
  KIVI's own implementation does.

``backend="auto"`` (the default) takes ``"cuda"`` when the model runs on a GPU and the spec and
build allow it, else ``"cpu"``. Keys reach the cache after the model's RoPE, so methods that
re-position keys (streaming_llm's sinks) see rotated keys. Sequences of a batch must have equal
lengths (no padding masks); beam search and ``crop`` are not supported.
"""

from __future__ import annotations

import math
import threading

import numpy as np
import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.cache_utils import Cache as TransformersCache
from transformers.cache_utils import CacheLayerMixin

from . import _veloxquant as _vq

ATTENTION = "veloxquant"

# The cache layer that the current forward pass updated last. transformers calls a layer's
# update() right before its attention function, in the same thread, but does not hand the cache
# to the attention function; the layer is taken back (and cleared) there.
_pending = threading.local()


class _Layer(CacheLayerMixin):
    """One decoder layer of a ``Cache``; its storage lives in the backend objects of the cache."""

    is_compileable = False
    is_sliding = False

    def __init__(self, owner: Cache, index: int):
        super().__init__()
        self._owner = owner
        self._index = index

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self._owner._append(self._index, key_states, value_states)
        _pending.layer = (self._owner, self._index)
        # The attention function reads the compressed cache, not these tensors.
        return key_states, value_states

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.get_seq_length() + query_length, 0

    def get_seq_length(self) -> int:
        return self._owner._tokens

    def get_max_length(self) -> int:
        return self._owner.max_tokens if self._owner.backend == "cuda" else -1

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("veloxquant.hf.Cache cannot drop tokens (crop): compressed blocks are "
                                  "final")

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        raise NotImplementedError("veloxquant.hf.Cache does not support beam search")

    def batch_repeat_interleave(self, repeats: int) -> None:
        if repeats != 1:
            raise NotImplementedError("veloxquant.hf.Cache does not support repeating the batch")

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        raise NotImplementedError("veloxquant.hf.Cache does not support selecting sequences")

    def reset(self) -> None:
        raise NotImplementedError("veloxquant.hf.Cache cannot be reset: make a new one")


class Cache(TransformersCache):
    """A transformers cache whose layers are compressed by VeloxQuant (``spec``, as the CLI and
    ``veloxquant.methods()`` name methods). Use it with ``attn_implementation="veloxquant"``.

    config: the model's config (layers, heads, head_dim). backend: ``"auto"``, ``"cpu"`` or
    ``"cuda"``. max_tokens: the most tokens a sequence may hold on the CUDA backend, which reserves
    GPU memory for them. seed: mixed into the codecs' random rotations, as in ``veloxquant.Cache``.
    """

    def __init__(self, spec: str, config, *, backend: str = "auto", max_tokens: int = 4096, seed: int = 0):
        self.spec = _vq.canonical_spec(spec)
        if backend not in ("auto", "cpu", "cuda"):
            raise ValueError(f"backend={backend!r}; expected 'auto', 'cpu' or 'cuda'")
        if backend == "cuda" and not _vq.cuda_available:
            raise _vq.Error("backend='cuda': this veloxquant was built without the CUDA backend "
                            "(build it with VELOXQUANT_CUDA=ON pip install .)")
        if max_tokens < 1:
            raise ValueError(f"max_tokens={max_tokens}; expected at least 1")
        config = config.get_text_config() if hasattr(config, "get_text_config") else config
        self.layer_count = config.num_hidden_layers
        self.q_heads = config.num_attention_heads
        self.kv_heads = getattr(config, "num_key_value_heads", None) or self.q_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.q_heads
        # The backend's own answer (the rules DeviceCache and the runtime check).
        self._cuda_unsupported = _vq.cuda_unsupported(self.spec, kv_heads=self.kv_heads,
                                                      head_dim=self.head_dim)
        if backend == "cuda" and self._cuda_unsupported:
            raise _vq.SpecError(f"backend='cuda': {self._cuda_unsupported}")
        self.requested_backend = backend
        self.backend = None if backend == "auto" else backend
        self.max_tokens = max_tokens
        self.seed = seed
        self._tokens = 0
        self._batch = None
        self._store = None  # cpu: [sequence][layer] veloxquant.Cache; cuda: [layer] DeviceCache
        self._prompt = {}  # cuda: layer -> (k, v) of a prompt being attended exactly
        super().__init__(layers=[_Layer(self, i) for i in range(self.layer_count)])

    # --- storage --------------------------------------------------------------------------------

    def _create(self, key_states: torch.Tensor) -> None:
        self._batch = key_states.shape[0]
        if self.backend is None:
            self.backend = ("cuda" if key_states.is_cuda and _vq.cuda_available and not self._cuda_unsupported
                            else "cpu")
        if self.backend == "cuda":
            if not key_states.is_cuda:
                raise _vq.Error("backend='cuda' needs the model on a GPU; its keys are on "
                                + str(key_states.device))
            self._store = [
                _vq.DeviceCache(self.spec, batch=self._batch, kv_heads=self.kv_heads, head_dim=self.head_dim,
                                capacity=self.max_tokens, layer=layer, layers=self.layer_count,
                                seed=self.seed)
                for layer in range(self.layer_count)
            ]
        else:
            self._store = [
                _vq.Cache.for_layers(self.spec, layers=self.layer_count, kv_heads=self.kv_heads,
                                     head_dim=self.head_dim, seed=self.seed)
                for _ in range(self._batch)
            ]

    def _append(self, layer: int, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        batch, kv_heads, n, head_dim = key_states.shape
        if (kv_heads, head_dim) != (self.kv_heads, self.head_dim):
            raise _vq.ShapeError(f"layer {layer}: keys [{batch}, {kv_heads}, {n}, {head_dim}]; expected "
                                 f"{self.kv_heads} KV heads of {self.head_dim} (from the config)")
        if self._store is None:
            self._create(key_states)
        if batch != self._batch:
            raise _vq.ShapeError(f"layer {layer}: batch {batch}; this cache holds {self._batch} sequences")
        if self.backend == "cuda":
            k = key_states.to(torch.float16).contiguous()
            v = value_states.to(torch.float16).contiguous()
            start = self._tokens
            positions = (torch.arange(start, start + n, dtype=torch.int64, device=k.device)
                         .expand(batch, n).contiguous())
            self._store[layer].append(k, v, positions, torch.cuda.current_stream(k.device).cuda_stream)
            if n > 1:
                if start:
                    raise _vq.Error(f"layer {layer}: {n} tokens after {start}; the CUDA backend attends one "
                                    "new token per step once the prompt is in (no chunked prefill)")
                self._prompt[layer] = (key_states, value_states)
        else:
            k = key_states.detach().to(torch.float32).transpose(1, 2).contiguous().cpu().numpy()
            v = value_states.detach().to(torch.float32).transpose(1, 2).contiguous().cpu().numpy()
            for sequence in range(batch):
                self._store[sequence][layer].append(k[sequence], v[sequence])
        if layer == self.layer_count - 1:
            self._tokens += n

    def _attend(self, layer: int, query: torch.Tensor, scaling: float) -> torch.Tensor:
        """Attention output [batch, n, q_heads, head_dim] for query [batch, q_heads, n, head_dim]."""
        batch, q_heads, n, head_dim = query.shape
        default_scale = 1.0 / math.sqrt(head_dim)
        if self.backend == "cuda":
            if n > 1:
                k, v = self._prompt.pop(layer)
                out = F.scaled_dot_product_attention(query, k, v, is_causal=True, scale=scaling,
                                                     enable_gqa=q_heads != k.shape[1]).transpose(1, 2)
            else:
                q = (query[:, :, 0, :] * (scaling / default_scale)).to(torch.float16).contiguous()
                out = torch.empty(batch, q_heads, head_dim, dtype=torch.float32, device=query.device)
                self._store[layer].attend(q, out, torch.cuda.current_stream(query.device).cuda_stream)
                out = out.to(query.dtype).unsqueeze(1)
            self._store[layer].finish_step()  # an evicting spec drops what its budget no longer holds
            return out
        q = ((query.detach().to(torch.float32) * (scaling / default_scale)).transpose(1, 2)
             .contiguous().cpu().numpy())
        out = np.stack([self._store[s][layer].attend(q[s], observe=True) for s in range(batch)])
        if layer == self.layer_count - 1:
            for sequence in self._store:
                for cache in sequence:
                    cache.finish_step()
        return torch.from_numpy(out).to(device=query.device, dtype=query.dtype)

    # --- what a user reads back -------------------------------------------------------------------

    @property
    def nbytes(self) -> int:
        """Exact bytes the compressed layers store (codes, fp16 windows, shared state)."""
        if self._store is None:
            return 0
        if self.backend == "cuda":
            return sum(c.nbytes for c in self._store)
        return sum(c.nbytes for sequence in self._store for c in sequence)

    @property
    def fp16_nbytes(self) -> int:
        """What an fp16 cache of the same tokens would store."""
        return 2 * 2 * self._tokens * (self._batch or 0) * self.layer_count * self.kv_heads * self.head_dim

    def __repr__(self) -> str:
        return (f"veloxquant.hf.Cache({self.spec!r}, backend={self.backend or self.requested_backend!r}, "
                f"tokens={self._tokens}, nbytes={self.nbytes})")


def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers attention function ``"veloxquant"``: attends on the layer of the
    ``veloxquant.hf.Cache`` that was just updated, causally over every token it holds."""
    pending = getattr(_pending, "layer", None)
    _pending.layer = None
    if pending is None or pending[1] != module.layer_idx:
        raise _vq.Error("attn_implementation='veloxquant' attends on a veloxquant.hf.Cache: pass "
                        "past_key_values=veloxquant.hf.Cache(spec, model.config) with use_cache=True")
    if dropout:
        raise _vq.Error(f"dropout={dropout}: the veloxquant attention is for inference (model.eval())")
    cache, layer = pending
    scale = scaling if scaling is not None else 1.0 / math.sqrt(query.shape[-1])
    return cache._attend(layer, query, scale), None


AttentionInterface.register(ATTENTION, attention)
