"""veloxquant.Cache: append, attend against a numpy reference, exact bytes against the CLI."""

import numpy as np
import pytest

import veloxquant as vq

KV_HEADS, HEAD_DIM, Q_PER_KV = 2, 128, 3


def kv(tokens, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    shape = (tokens, KV_HEADS, HEAD_DIM)
    return rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape).astype(dtype)


def reference_attention(k, v, q):
    """Causal grouped-query softmax attention in float64: query i is the (T - nq + i)-th token."""
    tokens, nq = k.shape[0], q.shape[0]
    out = np.zeros(q.shape)
    for i in range(nq):
        seen = tokens - nq + i + 1
        for h in range(q.shape[1]):
            kh = h // Q_PER_KV
            s = k[:seen, kh].astype(np.float64) @ q[i, h] / np.sqrt(HEAD_DIM)
            p = np.exp(s - s.max())
            out[i, h] = (p / p.sum()) @ v[:seen, kh]
    return out


def queries(nq, seed=5):
    return np.random.default_rng(seed).standard_normal((nq, KV_HEADS * Q_PER_KV, HEAD_DIM)).astype(np.float32)


@pytest.mark.parametrize("path", ["auto", "fused", "decoded", "reference"])
def test_fp16_attention_matches_numpy(path):
    k, v = kv(200)
    cache = vq.Cache("fp16", kv_heads=KV_HEADS, head_dim=HEAD_DIM)
    cache.append(k, v)
    q = queries(4)
    out = cache.attend(q, path=path)
    assert out.shape == q.shape and out.dtype == np.float32
    # The cache holds fp16: compare with the reference on the same rounded keys and values.
    k16, v16 = (a.astype(np.float16).astype(np.float32) for a in (k, v))
    np.testing.assert_allclose(out, reference_attention(k16, v16, q), atol=2e-4)


def test_compressed_cache_attends_close_to_exact_and_stores_less():
    k, v = kv(512)
    cache = vq.Cache("kivi:kbits=4,vbits=4", kv_heads=KV_HEADS, head_dim=HEAD_DIM)
    cache.append(k[:300], v[:300])
    cache.append(k[300:], v[300:])  # appends accumulate
    assert cache.tokens == 512 and cache.stored_tokens(0) == 512
    assert cache.fp16_nbytes == 512 * KV_HEADS * HEAD_DIM * 2 * 2
    # 384 tokens at 4 bits plus the 128-token fp16 residual window: under half of fp16.
    assert cache.nbytes == cache.key_nbytes + cache.value_nbytes < cache.fp16_nbytes / 2
    q = queries(2)
    exact = reference_attention(k, v, q)
    err = np.linalg.norm(cache.attend(q) - exact) / np.linalg.norm(exact)
    assert err < 0.1
    keys = cache.decode_keys()
    assert keys.shape == (512, KV_HEADS, HEAD_DIM)
    assert np.linalg.norm(keys - k) < 0.2 * np.linalg.norm(k)
    assert cache.decode_values().shape == (512, KV_HEADS, HEAD_DIM)


def test_float16_input_equals_float32_input_of_the_same_values():
    k, v = kv(64, dtype=np.float16)
    a = vq.Cache("turboquant_mse:bits=4", kv_heads=KV_HEADS, head_dim=HEAD_DIM)
    b = vq.Cache("turboquant_mse:bits=4", kv_heads=KV_HEADS, head_dim=HEAD_DIM)
    a.append(k, v)
    b.append(k.astype(np.float32), v.astype(np.float32))
    q = queries(1)
    assert np.array_equal(a.attend(q), b.attend(q))


def test_same_inputs_same_outputs_and_bytes():
    k, v = kv(300)
    results = []
    for _ in range(2):
        cache = vq.Cache("turboquant_prod:bits=3", kv_heads=KV_HEADS, head_dim=HEAD_DIM, seed=7)
        cache.append(k, v)
        results.append((cache.attend(queries(2)), cache.nbytes))
    assert np.array_equal(results[0][0], results[1][0]) and results[0][1] == results[1][1]


def test_eviction_policy_keeps_its_budget():
    k, v = kv(300)
    cache = vq.Cache("streaming_llm:budget=64,sinks=4+kivi", kv_heads=KV_HEADS, head_dim=HEAD_DIM)
    cache.append(k, v)
    cache.finish_step()
    assert cache.tokens == 300
    assert cache.stored_tokens(0) == 64 and cache.stored_tokens(1) == 64


def test_for_layers_builds_a_models_caches():
    caches = vq.Cache.for_layers("xquant", layers=4, kv_heads=KV_HEADS, head_dim=HEAD_DIM)
    assert len(caches) == 4
    k, v = kv(256)
    for cache in caches:
        cache.append(k, v)
    for cache in caches:
        cache.finish_step()
    # Paired layers share codes: a pair stores less than two layers alone.
    alone = vq.Cache("xquant", kv_heads=KV_HEADS, head_dim=HEAD_DIM)
    alone.append(k, v)
    alone.finish_step()
    assert sum(c.nbytes for c in caches) < 4 * alone.nbytes
    assert "xquant" in repr(caches[0])


# Methods whose bytes depend only on the token count and shape. The others depend on the data
# or on the attention the bench's queries pay before blocks are encoded (kivi_sink, zipcache,
# minicache's retained tokens, xquant's pairs), or are entropy-coded (cachegen).
DATA_DEPENDENT_BYTES = {"cachegen", "kivi_sink", "zipcache", "minicache", "xquant"}


def test_bytes_equal_the_cli_bench(cli):
    bench = {r["method"]: r for r in cli("bench", "--kv", "all", "--tokens", "600", "--heads",
                                         str(KV_HEADS), "--head-dim", str(HEAD_DIM))}
    k, v = kv(600)
    compared = 0
    for m in vq.methods():
        if m.kind != "quantizer" or m.calibrated or m.name in DATA_DEPENDENT_BYTES:
            continue
        cache = vq.Cache(m.name, kv_heads=KV_HEADS, head_dim=HEAD_DIM)
        cache.append(k, v)
        cache.finish_step()
        r = bench[m.name]
        assert (cache.key_nbytes, cache.value_nbytes, cache.fp16_nbytes) == (
            r["k_bytes"], r["v_bytes"], r["fp16_bytes"]), m.name
        compared += 1
    assert compared >= 10


def test_wrong_shapes_raise_shape_error():
    cache = vq.Cache("kivi", kv_heads=KV_HEADS, head_dim=HEAD_DIM)
    k, v = kv(8)
    with pytest.raises(vq.ShapeError, match=r"expected \[tokens, 2, 128\]"):
        cache.append(k[:, :1], v[:, :1])
    with pytest.raises(vq.ShapeError, match="expected 3 dimensions of float32 or float16"):
        cache.append(k.astype(np.float64), v)
    with pytest.raises(vq.ShapeError, match="expected 3 dimensions"):
        cache.append(k[0], v[0])
    cache.append(k, v)
    with pytest.raises(vq.ShapeError):
        cache.attend(np.zeros((1, 5, HEAD_DIM), np.float32))  # 5 query heads over 2 KV heads
    assert cache.tokens == 8  # refused appends leave the cache as it was


def test_non_finite_and_huge_values_are_refused():
    cache = vq.Cache("kivi", kv_heads=KV_HEADS, head_dim=HEAD_DIM)
    k, v = kv(8)
    k[2, 1, 5] = np.inf
    with pytest.raises(vq.ShapeError, match="head 1, channel 5 is inf; expected a finite number"):
        cache.append(k, v)
    k[2, 1, 5] = 1e6
    with pytest.raises(vq.ShapeError, match=r"expected \|x\| <= 65504"):
        cache.append(k, v)


def test_bad_arguments():
    with pytest.raises(vq.SpecError, match="kbits"):
        vq.Cache("kivi:kbits=5", kv_heads=1, head_dim=HEAD_DIM)
    cache = vq.Cache("fp16", kv_heads=1, head_dim=HEAD_DIM)
    with pytest.raises(vq.Error, match="path='fast'; expected 'auto'"):
        cache.attend(np.zeros((1, 1, HEAD_DIM), np.float32), path="fast")


def test_a_saved_cache_loads_byte_for_byte(tmp_path):
    rng = np.random.default_rng(5)
    cache = vq.Cache("kivi", kv_heads=2, head_dim=64, layer=3, seed=9)
    cache.append(rng.standard_normal((300, 2, 64), dtype=np.float32),
                 rng.standard_normal((300, 2, 64), dtype=np.float32))
    path = tmp_path / "one.vqc"
    cache.save(str(path))
    loaded = vq.Cache.load(str(path))
    assert (loaded.spec, loaded.tokens, loaded.nbytes) == (cache.spec, cache.tokens, cache.nbytes)
    q = rng.standard_normal((1, 4, 64), dtype=np.float32)
    np.testing.assert_array_equal(loaded.attend(q), cache.attend(q))
    np.testing.assert_array_equal(loaded.decode_keys(), cache.decode_keys())


def test_a_cross_layer_group_is_saved_and_loaded_whole(tmp_path):
    rng = np.random.default_rng(6)
    layers = vq.Cache.for_layers("minicache:start=0", layers=4, kv_heads=1, head_dim=64)
    for c in layers:
        c.append(rng.standard_normal((200, 1, 64), dtype=np.float32),
                 rng.standard_normal((200, 1, 64), dtype=np.float32))
    for c in layers:
        c.finish_step()
    path = tmp_path / "group.vqc"
    vq.save_caches(layers, str(path))
    loaded = vq.load_caches(str(path))
    assert [c.nbytes for c in loaded] == [c.nbytes for c in layers]
    for a, b in zip(loaded, layers):
        np.testing.assert_array_equal(a.decode_values(), b.decode_values())
    with pytest.raises(vq.Error, match="1 of the 4 layers"):
        layers[0].save(str(path))
    with pytest.raises(vq.Error, match="load it with veloxquant.load_caches"):
        vq.Cache.load(str(path))


def test_damaged_or_missing_cache_files_are_refused(tmp_path):
    cache = vq.Cache("fp16", kv_heads=1, head_dim=8)
    cache.append(np.ones((4, 1, 8), np.float32), np.ones((4, 1, 8), np.float32))
    path = tmp_path / "c.vqc"
    cache.save(str(path))
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(vq.Error, match="is corrupt"):
        vq.Cache.load(str(path))
    with pytest.raises(vq.Error, match="cannot open it"):
        vq.Cache.load(str(tmp_path / "missing.vqc"))
    with pytest.raises(vq.Error, match="evicts"):
        evicting = vq.Cache("snapkv:budget=64+kivi", kv_heads=1, head_dim=8)
        evicting.append(np.ones((4, 1, 8), np.float32), np.ones((4, 1, 8), np.float32))
        evicting.save(str(path))
