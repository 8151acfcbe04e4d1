"""veloxquant.DeviceCache against the CPU veloxquant.Cache on the same tokens. Runs where the
package was built with the CUDA backend and torch sees a GPU (bench/python/hf_gpu.sh)."""

from __future__ import annotations

import numpy as np
import pytest

import veloxquant

if not veloxquant.cuda_available:
    pytest.skip("veloxquant was built without the CUDA backend", allow_module_level=True)
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no GPU", allow_module_level=True)


@pytest.mark.parametrize("spec", ["fp16", "kivi:kbits=2,vbits=2", "kivi:kbits=4,vbits=4,group=64,residual=32",
                                  "turboquant_mse:bits=3,vbits=3", "turboquant_prod:bits=3,vbits=3"])
def test_decode_attention_matches_the_cpu_cache(spec):
    batch, kv_heads, q_heads, dim, tokens = 2, 2, 8, 128, 700
    rng = np.random.default_rng(3)
    k = rng.standard_normal((batch, kv_heads, tokens, dim)).astype(np.float16)
    v = rng.standard_normal((batch, kv_heads, tokens, dim)).astype(np.float16)
    q = rng.standard_normal((batch, q_heads, dim)).astype(np.float16)
    gpu = veloxquant.DeviceCache(spec, batch=batch, kv_heads=kv_heads, head_dim=dim, capacity=1024, layer=1,
                                 seed=5)
    positions = torch.arange(tokens, device="cuda").expand(batch, tokens).contiguous()
    gpu.append(torch.from_numpy(k).cuda(), torch.from_numpy(v).cuda(), positions)
    out = torch.empty(batch, q_heads, dim, device="cuda")
    gpu.attend(torch.from_numpy(q).cuda(), out)
    torch.cuda.synchronize()
    assert gpu.tokens == tokens
    cpu_bytes = 0
    for b in range(batch):
        cpu = veloxquant.Cache(spec, kv_heads=kv_heads, head_dim=dim, layer=1, seed=5)
        cpu.append(k[b].transpose(1, 0, 2), v[b].transpose(1, 0, 2))
        cpu_bytes += cpu.nbytes
        want = cpu.attend(q[b][None])[0]
        got = out[b].cpu().numpy()
        assert np.max(np.abs(got - want)) < 1e-3 * max(1.0, np.max(np.abs(want))), spec
    assert gpu.nbytes == cpu_bytes


def test_streaming_llm_evicts_as_the_cpu_cache():
    # 4 sinks, KIVI's 32 residual rows and a 32-token block fit the budget the GPU evicts by.
    spec = "streaming_llm:budget=96,sinks=4+kivi:kbits=4,vbits=4,group=32,residual=32"
    kv_heads, q_heads, dim = 2, 8, 128
    rng = np.random.default_rng(4)
    gpu = veloxquant.DeviceCache(spec, batch=1, kv_heads=kv_heads, head_dim=dim, capacity=1024, layer=1,
                                 seed=5)
    cpu = veloxquant.Cache(spec, kv_heads=kv_heads, head_dim=dim, layer=1, seed=5)
    for step in range(120):
        n = 40 if step == 0 else 1
        k = rng.standard_normal((1, kv_heads, n, dim)).astype(np.float16)
        v = rng.standard_normal((1, kv_heads, n, dim)).astype(np.float16)
        q = rng.standard_normal((1, q_heads, dim)).astype(np.float16)
        positions = torch.arange(gpu.tokens, gpu.tokens + n, device="cuda")[None].contiguous()
        gpu.append(torch.from_numpy(k).cuda(), torch.from_numpy(v).cuda(), positions)
        cpu.append(k[0].transpose(1, 0, 2), v[0].transpose(1, 0, 2))
        out = torch.empty(1, q_heads, dim, device="cuda")
        gpu.attend(torch.from_numpy(q).cuda(), out)
        torch.cuda.synchronize()
        want = cpu.attend(q)[0]
        assert np.max(np.abs(out[0].cpu().numpy() - want)) < 2e-3 * max(1.0, np.max(np.abs(want))), step
        gpu.finish_step()
        cpu.finish_step()
        assert gpu.nbytes == cpu.nbytes, step
    assert gpu.tokens == 159
    assert cpu.nbytes < 96 * kv_heads * dim * 2 * 2  # within the budget, whatever the tokens


def test_bad_arrays_are_refused():
    gpu = veloxquant.DeviceCache("fp16", batch=1, kv_heads=2, head_dim=64, capacity=16)
    k = torch.zeros(1, 2, 4, 64, dtype=torch.float32, device="cuda")
    positions = torch.zeros(1, 4, dtype=torch.int64, device="cuda")
    with pytest.raises(veloxquant.ShapeError, match="k: got \\[1, 2, 4, 64\\] of 32-bit float"):
        gpu.append(k, k, positions)
    with pytest.raises(veloxquant.SpecError, match="snapkv"):
        veloxquant.DeviceCache("snapkv+kivi", batch=1, kv_heads=2, head_dim=64, capacity=16)
