"""veloxquant.hf on a small randomly initialised Llama (no download). Needs torch and
transformers, which CI does not install: there these tests are skipped, and they run on the GPU
machine (bench/python/hf_gpu.sh)."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import veloxquant  # noqa: E402
import veloxquant.hf  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
BACKENDS = ["cpu"] + (["cuda"] if DEVICE == "cuda" and veloxquant.cuda_available else [])


def tiny_llama(attn_implementation: str):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=512, hidden_size=256, intermediate_size=512,
                                      num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=1024, initializer_range=0.1)
    model = transformers.LlamaForCausalLM(config).to(device=DEVICE, dtype=torch.float16).eval()
    model.set_attn_implementation(attn_implementation)
    return model


@pytest.fixture(scope="module")
def reference_model():
    return tiny_llama("sdpa")


@pytest.fixture(scope="module")
def model(reference_model):
    m = copy.deepcopy(reference_model)
    m.set_attn_implementation(veloxquant.hf.ATTENTION)
    return m


def prompt(tokens: int, batch: int = 1):
    generator = torch.Generator().manual_seed(1)
    return torch.randint(3, 512, (batch, tokens), generator=generator).to(DEVICE)


def greedy(model, ids, cache, new_tokens):
    out = model.generate(ids, attention_mask=torch.ones_like(ids), past_key_values=cache, do_sample=False,
                         max_new_tokens=new_tokens, min_new_tokens=new_tokens, pad_token_id=0)
    return out[:, ids.shape[1]:].cpu().tolist()


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_fp16_cache_generates_what_dynamic_cache_generates(model, reference_model, backend):
    ids = prompt(40, batch=2)
    want = greedy(reference_model, ids, transformers.DynamicCache(config=reference_model.config), 32)
    cache = veloxquant.hf.Cache("fp16", model.config, backend=backend)
    assert greedy(model, ids, cache, 32) == want
    assert cache.backend == backend
    assert cache.nbytes == cache.fp16_nbytes == 2 * 2 * 2 * (40 + 31) * 4 * 2 * 64


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("spec", ["kivi:kbits=2,vbits=2,residual=32", "turboquant_mse:bits=4,vbits=4"])
def test_compressed_caches_run_and_store_fewer_bytes(model, backend, spec):
    ids = prompt(200)
    cache = veloxquant.hf.Cache(spec, model.config, backend=backend)
    generated = greedy(model, ids, cache, 24)
    assert len(generated[0]) == 24
    assert cache.get_seq_length() == 200 + 23
    assert 0 < cache.nbytes < cache.fp16_nbytes / 2.5


@pytest.mark.parametrize("spec", ["snapkv:budget=64+kivi", "palu", "xquant"])
def test_every_method_runs_on_the_cpu_backend(model, spec):
    cache = veloxquant.hf.Cache(spec, model.config, backend="cpu")
    assert len(greedy(model, prompt(160), cache, 8)[0]) == 8
    assert 0 < cache.nbytes < cache.fp16_nbytes


def test_the_cpu_backend_compresses_like_veloxquant_cache(model):
    """The bytes of one layer equal what veloxquant.Cache stores for the same tokens."""
    cache = veloxquant.hf.Cache("kivi", model.config, backend="cpu")
    greedy(model, prompt(300), cache, 1)
    tokens = cache.get_seq_length()
    alone = veloxquant.Cache("kivi", kv_heads=2, head_dim=64)
    import numpy as np

    alone.append(np.zeros((tokens, 2, 64), np.float32), np.zeros((tokens, 2, 64), np.float32))
    assert cache.nbytes == 4 * alone.nbytes


def test_attention_without_a_veloxquant_cache_is_refused(model):
    with pytest.raises(veloxquant.Error, match="past_key_values=veloxquant.hf.Cache"):
        model(prompt(8), past_key_values=transformers.DynamicCache(config=model.config))


def test_bad_settings_are_refused(model):
    with pytest.raises(veloxquant.SpecError, match="nosuch"):
        veloxquant.hf.Cache("nosuch", model.config)
    with pytest.raises(ValueError, match="backend='tpu'"):
        veloxquant.hf.Cache("kivi", model.config, backend="tpu")
    if veloxquant.cuda_available:
        with pytest.raises(veloxquant.SpecError, match="palu"):
            veloxquant.hf.Cache("palu", model.config, backend="cuda")
    else:
        with pytest.raises(veloxquant.Error, match="without the CUDA backend"):
            veloxquant.hf.Cache("kivi", model.config, backend="cuda")
    cache = veloxquant.hf.Cache("kivi", model.config)
    greedy(model, prompt(8), cache, 2)
    with pytest.raises(NotImplementedError, match="beam search"):
        cache.reorder_cache(torch.tensor([0]))
