"""The Hugging Face integration in use: greedy generation from a small randomly initialised
Llama (no download) with DynamicCache and with VeloxQuant caches, their outputs and bytes.
An exact cache (fp16) must give DynamicCache's tokens; a random model's next-token logits are
nearly tied, so any compression soon changes its greedy path (quality is measured on trained
models: `veloxquant perplexity`, docs/methods/).

    python python/examples/hf_generate.py
"""

import time

import torch
import transformers

import veloxquant.hf

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
config = transformers.LlamaConfig(vocab_size=512, hidden_size=512, intermediate_size=1024,
                                  num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
                                  max_position_embeddings=4096, initializer_range=0.1)
model = transformers.LlamaForCausalLM(config).to(device=device, dtype=torch.float16).eval()
ids = torch.randint(3, 512, (1, 1024), generator=torch.Generator().manual_seed(1)).to(device)


def run(cache):
    start = time.perf_counter()
    out = model.generate(ids, attention_mask=torch.ones_like(ids), past_key_values=cache, do_sample=False,
                         max_new_tokens=64, min_new_tokens=64, pad_token_id=0)
    return out[0, ids.shape[1]:].tolist(), time.perf_counter() - start


model.set_attn_implementation("sdpa")
run(transformers.DynamicCache(config=config))  # warm-up: CUDA context, kernels, allocator
reference, seconds = run(transformers.DynamicCache(config=config))
print(f"{device}, prompt {ids.shape[1]} tokens, 64 generated greedily")
print(f"DynamicCache (sdpa)            {seconds:6.2f} s  first tokens {reference[:8]}")
model.set_attn_implementation(veloxquant.hf.ATTENTION)
for spec, backend in [("fp16", "cpu"), ("fp16", "auto"), ("kivi:kbits=2,vbits=2", "auto"),
                      ("turboquant_mse:bits=4,vbits=4", "auto"), ("snapkv:budget=256+kivi", "cpu")]:
    cache = veloxquant.hf.Cache(spec, config, backend=backend)
    tokens, seconds = run(cache)
    same = sum(a == b for a, b in zip(tokens, reference))
    print(f"{spec:30s} {cache.backend:4s} {seconds:6.2f} s  {same:2d}/64 tokens as DynamicCache  "
          f"{cache.nbytes:>9,} bytes ({cache.fp16_nbytes / cache.nbytes:.2f}x smaller than fp16)")
