#!/usr/bin/env python3
"""Trains one of the project's evaluation models on the GPU machine.

The architecture is the runtime's "llama" exactly: RMSNorm (eps 1e-5), RoPE on adjacent pairs
(2i, 2i+1) as GGUF llama files store it, grouped-query attention where query head h reads KV
head h // (heads / kv_heads), SwiGLU, and an output projection tied to the token embedding. Every
training window starts with BOS, as every prompt the runtime sees does, so that the model can
learn to park attention on the first token the way large models do (attention sinks).

Input: 16-bit token files written by `veloxquant_tokenizer encode` (train and valid). Output, in
--out: the weights rounded to f16 in .npz shards of at most 15 MB (the GPU machine returns files
of at most 16 MB), and NAME.json with the configuration, the loss curve, the validation loss, the
reference logits' description and the realism measurements (attention on the first token and
key-channel magnitude ratios, per layer). The reference logits for a fixed sequence are computed
in float32 from the f16-rounded weights and stored in the first shard as "ref_logits" with
"ref_tokens".
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {
    # head_dim 128 (Llama/Qwen/Mistral geometry), 3 query heads per KV head.
    "vq-hd128": dict(dim=384, layers=8, heads=3, kv_heads=1, ffn=1024),
    # head_dim 64, 2 query heads per KV head.
    "vq-hd64": dict(dim=256, layers=8, heads=4, kv_heads=2, ffn=768),
    # head_dim 64, 4 KV heads of 2 query heads each, 21M parameters, trained at 8192 tokens.
    "vq-gqa": dict(dim=512, layers=8, heads=8, kv_heads=4, ffn=1024),
}
BOS = 0
EPS = 1e-5
ROPE_BASE = 10000.0


class RMSNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * self.weight).type_as(x)


def rope_tables(head_dim: int, length: int, device):
    inv = ROPE_BASE ** (-torch.arange(0, head_dim, 2, device=device, dtype=torch.float64) / head_dim)
    angles = torch.arange(length, device=device, dtype=torch.float64)[:, None] * inv[None, :]
    return angles.cos().float(), angles.sin().float()


def apply_rope(x, cos, sin):
    """x: [B, H, T, D]; rotates the adjacent pairs (2i, 2i+1) by position * base^(-2i/D)."""
    xf = x.float().unflatten(-1, (-1, 2))
    a, b = xf[..., 0], xf[..., 1]
    out = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
    return out.type_as(x)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, hd = c["dim"], c["dim"] // c["heads"]
        self.heads, self.kv_heads, self.head_dim = c["heads"], c["kv_heads"], hd
        self.attn_norm = RMSNorm(d)
        self.wq = nn.Linear(d, c["heads"] * hd, bias=False)
        self.wk = nn.Linear(d, c["kv_heads"] * hd, bias=False)
        self.wv = nn.Linear(d, c["kv_heads"] * hd, bias=False)
        self.wo = nn.Linear(c["heads"] * hd, d, bias=False)
        self.ffn_norm = RMSNorm(d)
        self.w_gate = nn.Linear(d, c["ffn"], bias=False)
        self.w_up = nn.Linear(d, c["ffn"], bias=False)
        self.w_down = nn.Linear(c["ffn"], d, bias=False)

    def qkv(self, x, cos, sin):
        B, T, _ = x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(B, T, self.heads, self.head_dim).transpose(1, 2)
        k_pre = self.wk(h).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(h).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        return apply_rope(q, cos, sin), k_pre, apply_rope(k_pre, cos, sin), v

    def finish(self, x, attn):
        B, _, T, _ = attn.shape
        x = x + self.wo(attn.transpose(1, 2).reshape(B, T, -1))
        h = self.ffn_norm(x)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))

    def forward(self, x, cos, sin):
        q, _, k, v = self.qkv(x, cos, sin)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.finish(x, attn)


class Llama(nn.Module):
    def __init__(self, c, vocab: int):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(vocab, c["dim"])
        self.blocks = nn.ModuleList(Block(c) for _ in range(c["layers"]))
        self.norm = RMSNorm(c["dim"])
        self.head_dim = c["dim"] // c["heads"]
        std = 0.02
        for name, p in self.named_parameters():
            if p.dim() == 2:
                # Residual-branch outputs scaled down with depth (GPT-2's initialisation).
                scale = 1 / math.sqrt(2 * c["layers"]) if name.endswith(("wo.weight", "w_down.weight")) else 1
                nn.init.normal_(p, std=std * scale)

    def forward(self, tokens):
        T = tokens.shape[1]
        cos, sin = rope_tables(self.head_dim, T, tokens.device)
        x = self.embed(tokens)
        for b in self.blocks:
            x = b(x, cos, sin)
        return F.linear(self.norm(x), self.embed.weight)


def gguf_tensors(model: Llama) -> dict[str, np.ndarray]:
    """The weights under llama.cpp's tensor names, f16, in torch's [out, in] layout, which is the
    row-major layout of GGUF's [in, out] dims."""
    out = {"token_embd.weight": model.embed.weight, "output_norm.weight": model.norm.weight}
    for i, b in enumerate(model.blocks):
        p = f"blk.{i}."
        out.update({p + "attn_norm.weight": b.attn_norm.weight, p + "attn_q.weight": b.wq.weight,
                    p + "attn_k.weight": b.wk.weight, p + "attn_v.weight": b.wv.weight,
                    p + "attn_output.weight": b.wo.weight, p + "ffn_norm.weight": b.ffn_norm.weight,
                    p + "ffn_gate.weight": b.w_gate.weight, p + "ffn_up.weight": b.w_up.weight,
                    p + "ffn_down.weight": b.w_down.weight})
    return {k: v.detach().float().cpu().numpy().astype(np.float16) for k, v in out.items()}


def plant_repeats(window: torch.Tensor, share: float, spans: int, vocab: int, rng: np.random.Generator,
                  near: float = 0.0):
    """In a `share` of the windows, copies `spans` spans of 16..256 tokens each to later places in
    the same window; half of those spans are first replaced by random tokens. Prose alone repeats
    too little for a model this small to learn to copy from its context (induction heads) in this
    many tokens, and without copying a KV cache's far tokens barely matter, which would make every
    retrieval test vacuous. A `near` share of the copies land within 256 tokens of their source:
    short-range copies are the easiest to learn, and the heads learned on them then reach further.
    The choices come from a CPU generator: no GPU round trip per span."""
    B, T = window.shape
    for b in range(B):
        if rng.random() >= share:
            continue
        for _ in range(spans):
            n = int(rng.integers(16, 257))
            src = int(rng.integers(0, T - 2 * n))
            last = T - n if rng.random() >= near else min(T - n, src + n + 256)
            dst = int(rng.integers(src + n, last + 1))
            if rng.random() < 0.5:
                window[b, src:src + n] = torch.from_numpy(rng.integers(2, vocab, n)).to(window.device)
            window[b, dst:dst + n] = window[b, src:src + n]
    return window


def load_task_templates(path: str) -> list[dict]:
    """The JSON lines veloxquant_task_templates writes: parts, gaps (text tokens between the parts)
    and the answer of one long-context task sample each."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def task_window(template: dict, text: np.ndarray, context: int, rng: np.random.Generator) -> np.ndarray:
    """`context` tokens: the template's prompt without its BOS, its gaps filled by consecutive text from a
    random place, the answer, then the text going on. The model learns the tasks' format on training
    text; `eval --tasks` draws its own keys, values and words from the evaluation text."""
    parts, gaps, answer = template["parts"], template["gaps"], template["answer"]
    fixed = sum(len(p) for p in parts) - 1 + len(answer)
    stretch_len = context - fixed
    start = int(rng.integers(0, text.size - stretch_len))
    stretch = text[start:start + stretch_len]
    pieces, at = [np.asarray(parts[0][1:], dtype=np.int64)], 0
    for gap, part in zip(gaps, parts[1:], strict=True):
        pieces += [stretch[at:at + gap], np.asarray(part, dtype=np.int64)]
        at += gap
    pieces += [np.asarray(answer, dtype=np.int64), stretch[at:]]
    window = np.concatenate(pieces)
    assert window.size == context, (window.size, context)
    return window


def batches(tokens: torch.Tensor, batch: int, context: int, gen: torch.Generator, repeat_share: float = 0.0,
            repeat_spans: int = 1, vocab: int = 4096, seed: int = 1, templates: list[dict] | None = None,
            task_share: float = 0.0, repeat_near: float = 0.0):
    """Random windows of `context` tokens after a BOS: inputs [B, context], targets shifted by one. A
    `task_share` of the windows hold a long-context task from `templates` instead."""
    span = torch.arange(context, device=tokens.device)
    rng = np.random.default_rng(seed)
    text = tokens.cpu().numpy() if templates else None
    while True:
        starts = torch.randint(0, tokens.numel() - context, (batch,), generator=gen, device=tokens.device)
        window = plant_repeats(tokens[starts[:, None] + span], repeat_share, repeat_spans, vocab, rng,
                               repeat_near)
        for b in range(batch):
            if templates and rng.random() < task_share:
                tpl = templates[int(rng.integers(0, len(templates)))]
                window[b] = torch.from_numpy(task_window(tpl, text, context, rng)).to(window.device)
        bos = torch.full((batch, 1), BOS, dtype=window.dtype, device=window.device)
        seq = torch.cat([bos, window], dim=1)
        yield seq[:, :-1], seq[:, 1:]


@torch.no_grad()
def validation_loss(model, valid: torch.Tensor, context: int, windows: int, batch: int) -> float:
    """Mean next-token loss (nats) over the first `windows` consecutive windows of the valid text,
    each read after a BOS."""
    model.eval()
    total, count = 0.0, 0
    n = min(windows, (valid.numel() - 1) // context)
    for first in range(0, n, batch):
        rows = []
        for w in range(first, min(n, first + batch)):
            rows.append(torch.cat([valid.new_full((1,), BOS), valid[w * context:(w + 1) * context]]))
        seq = torch.stack(rows)
        with torch.autocast(seq.device.type, dtype=torch.bfloat16):
            logits = model(seq[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), seq[:, 1:].flatten().long(), reduction="sum")
        total += loss.item()
        count += seq[:, 1:].numel()
    model.train()
    return total / count


@torch.no_grad()
def copy_accuracy(model, valid: torch.Tensor, context: int, windows: int, span: int,
                  gen: torch.Generator) -> float:
    """Share of a repeated random span's tokens (all but the first) predicted exactly, the first copy
    at a random depth of a `context`-token window of valid text and the second at its end."""
    model.eval()
    hits, total = 0, 0
    for w in range(windows):
        seq = torch.cat([valid.new_full((1,), BOS), valid[w * context:(w + 1) * context - 1]])
        needle = torch.randint(2, int(valid.max()) + 1, (span,), generator=gen, device=valid.device)
        at = int(torch.randint(1, context - 3 * span, (), generator=gen, device=valid.device))
        seq[at:at + span] = needle
        seq[context - span:] = needle
        with torch.autocast(seq.device.type, dtype=torch.bfloat16):
            logits = model(seq[None])[0]
        guess = logits[context - span:context - 1].argmax(-1)
        hits += int((guess == needle[1:]).sum())
        total += span - 1
    model.train()
    return hits / total


@torch.no_grad()
def realism(model: Llama, valid: torch.Tensor, context: int, windows: int, skip: int) -> list[dict]:
    """Per layer, over `windows` valid windows at full context, computed in float32:
    sink: mean attention probability on position 0 (the BOS), over heads and queries >= skip;
    key_channel_ratio_{pre,post}_rope: per KV head, the largest channel's mean |k| over the median
    channel's, averaged over KV heads; for keys before and after RoPE."""
    model.eval()
    stats = [dict(sink=0.0, key_channel_ratio_pre_rope=0.0, key_channel_ratio_post_rope=0.0)
             for _ in model.blocks]
    cos, sin = rope_tables(model.head_dim, context, valid.device)
    for w in range(windows):
        seq = torch.cat([valid.new_full((1,), BOS), valid[w * context:(w + 1) * context - 1]])[None]
        x = model.embed(seq).float()
        for li, b in enumerate(model.blocks):
            q, k_pre, k, v = b.qkv(x, cos, sin)
            group = b.heads // b.kv_heads
            kr, vr = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
            scores = (q @ kr.transpose(-1, -2)) / math.sqrt(b.head_dim)
            mask = torch.ones(context, context, dtype=torch.bool, device=x.device).triu(1)
            probs = scores.masked_fill(mask, float("-inf")).softmax(-1)
            stats[li]["sink"] += probs[0, :, skip:, 0].mean().item() / windows
            for key, keys in (("key_channel_ratio_pre_rope", k_pre), ("key_channel_ratio_post_rope", k)):
                mags = keys[0].abs().mean(1)  # [kv_heads, head_dim]
                ratio = (mags.max(-1).values / mags.median(-1).values).mean().item()
                stats[li][key] += ratio / windows
            x = b.finish(x, probs @ vr)
    model.train()
    return stats


def save_shards(tensors: dict[str, np.ndarray], extra: dict[str, np.ndarray], out: str, name: str,
                limit: int = 15_000_000) -> list[str]:
    shards, current, size = [], dict(extra), sum(a.nbytes for a in extra.values())
    for k, a in tensors.items():
        if current and size + a.nbytes > limit:
            shards.append(current)
            current, size = {}, 0
        current[k] = a
        size += a.nbytes
    shards.append(current)
    paths = []
    for i, s in enumerate(shards):
        path = os.path.join(out, f"{name}-{i}.npz")
        np.savez(path, **s)
        paths.append(os.path.basename(path))
    return paths


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", choices=sorted(CONFIGS), required=True)
    ap.add_argument("--train", required=True, help="training tokens (uint16)")
    ap.add_argument("--valid", required=True, help="validation tokens (uint16)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=32, help="windows per step")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--valid-windows", type=int, default=400)
    ap.add_argument("--eval-every", type=int, default=400, help="steps between validation checks")
    ap.add_argument("--max-seconds", type=float, default=470,
                    help="stop training early past this many seconds (the GPU machine's call limit)")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--repeat-share", type=float, default=0.0,
                    help="share of training windows with spans copied later in the window (teaches copying)")
    ap.add_argument("--repeat-spans", type=int, default=1, help="spans copied in each such window")
    ap.add_argument("--repeat-near", type=float, default=0.0,
                    help="share of those copies placed within 256 tokens of their source")
    ap.add_argument("--warm-context", type=int, default=0,
                    help="train the first --warm-share of the run on windows this long (same tokens a step)")
    ap.add_argument("--warm-share", type=float, default=0.0,
                    help="share of the run (steps or time) spent on --warm-context windows")
    ap.add_argument("--task-templates", help="long-context task templates (veloxquant_task_templates)")
    ap.add_argument("--task-share", type=float, default=0.0,
                    help="share of windows holding one of those tasks")
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    c = CONFIGS[args.config]
    train = torch.from_numpy(np.fromfile(args.train, dtype=np.uint16).astype(np.int64)).to(dev)
    valid = torch.from_numpy(np.fromfile(args.valid, dtype=np.uint16).astype(np.int64)).to(dev)
    assert int(train.max()) < args.vocab and int(valid.max()) < args.vocab

    model = Llama(c, args.vocab).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), fused=True)
    step_fn = model if args.no_compile else torch.compile(model)
    gen = torch.Generator(device=dev).manual_seed(args.seed)
    templates = load_task_templates(args.task_templates) if args.task_templates else None
    data = batches(train, args.batch, args.context, gen, args.repeat_share, args.repeat_spans, args.vocab,
                   args.seed, templates, args.task_share, args.repeat_near)
    # Copying (induction heads) forms sooner on short windows, where more of them fit a step; the
    # long windows then teach the model to use it at its full context. Tasks need the full context.
    warm_data = None
    if args.warm_context and args.warm_share > 0:
        if args.context % args.warm_context:
            raise SystemExit(f"--warm-context {args.warm_context} must divide --context {args.context}")
        # As many copied spans per token as the long windows carry.
        warm_spans = max(1, args.repeat_spans * args.warm_context // args.context)
        warm_data = batches(train, args.batch * (args.context // args.warm_context), args.warm_context, gen,
                            args.repeat_share, warm_spans, args.vocab, args.seed + 1, None, 0.0,
                            args.repeat_near)
    tokens_per_step = args.batch * args.context
    print(f"{args.config}: {n_params:,} parameters, {train.numel():,} train tokens, "
          f"{args.steps} steps of {tokens_per_step:,} tokens "
          f"({args.steps * tokens_per_step / train.numel():.2f} epochs)",
          flush=True)

    curve, valid_curve, t0 = [], [], time.time()
    steps_done = args.steps
    for step in range(args.steps):
        # The cosine runs over the steps or the time limit, whichever ends first, so that a slower GPU
        # still ends at the low learning rate.
        progress = max(step / args.steps, (time.time() - t0) / args.max_seconds)
        if progress >= 1:
            steps_done = step
            print(f"{args.config}: stopped at step {step} after {args.max_seconds} s", flush=True)
            break
        lr = args.lr * min(1.0, (step + 1) / args.warmup)
        lr *= 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = next(warm_data if warm_data is not None and progress < args.warm_share else data)
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            logits = step_fn(x)
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 50 == 0 or step == args.steps - 1:
            elapsed = time.time() - t0
            curve.append(dict(step=step, loss=round(loss.item(), 4), seconds=round(elapsed, 1)))
            print(f"{args.config} step {step} loss {loss.item():.4f} lr {lr:.2e} "
                  f"{(step + 1) * tokens_per_step / elapsed:,.0f} tok/s", flush=True)
        if step > 0 and step % args.eval_every == 0:
            v = validation_loss(model, valid, args.context, 32, 8)
            valid_curve.append(dict(step=step, valid_loss=round(v, 4)))
            print(f"{args.config} step {step} valid loss {v:.4f} (32 windows)", flush=True)
    train_seconds = time.time() - t0

    # Evaluate what is exported: the weights rounded to f16, computed in float32.
    tensors = gguf_tensors(model)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())
    val = validation_loss(model, valid, args.context, args.valid_windows, 8)
    torch.backends.cuda.matmul.allow_tf32 = False
    stats = realism(model, valid, args.context, windows=2, skip=64)
    copying = copy_accuracy(model, valid, args.context, windows=16, span=32,
                            gen=torch.Generator(device=dev).manual_seed(args.seed))
    ref_tokens = torch.cat([valid.new_full((1,), BOS), valid[:31]])
    with torch.no_grad():
        ref_logits = model(ref_tokens[None])[0].float().cpu().numpy()
    shards = save_shards(tensors, {"ref_tokens": ref_tokens.cpu().numpy().astype(np.int32),
                                   "ref_logits": ref_logits},
                         args.out, args.config)
    report = dict(name=args.config, config=dict(c, head_dim=c["dim"] // c["heads"], vocab=args.vocab,
                                                context=args.context, rope_base=ROPE_BASE, rms_eps=EPS,
                                                tied=True),
                  parameters=n_params, seed=args.seed, steps=steps_done, planned_steps=args.steps,
                  batch=args.batch, lr=args.lr, warmup=args.warmup, repeat_share=args.repeat_share,
                  repeat_spans=args.repeat_spans, repeat_near=args.repeat_near,
                  warm_context=args.warm_context if warm_data is not None else 0,
                  warm_share=args.warm_share if warm_data is not None else 0.0,
                  task_share=args.task_share if templates else 0.0,
                  task_templates=len(templates) if templates else 0, copy_accuracy=round(copying, 4),
                  train_tokens=int(train.numel()),
                  tokens_seen=steps_done * tokens_per_step, train_seconds=round(train_seconds, 1),
                  final_train_loss=curve[-1]["loss"], valid_loss=round(val, 4),
                  valid_ppl=round(math.exp(val), 3),
                  valid_tokens=min(args.valid_windows, (valid.numel() - 1) // args.context) * args.context,
                  curve=curve, valid_curve=valid_curve, realism=stats, shards=shards,
                  device=torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
                  torch=torch.__version__)
    with open(os.path.join(args.out, f"{args.config}.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(f"{args.config}: valid loss {val:.4f} (ppl {math.exp(val):.2f}), copy accuracy {copying:.3f}, "
          f"{train_seconds:.0f} s training", flush=True)
    for i, s in enumerate(stats):
        print(f"{args.config} layer {i}: sink {s['sink']:.3f} "
              f"key ratio pre {s['key_channel_ratio_pre_rope']:.2f} "
              f"post {s['key_channel_ratio_post_rope']:.2f}", flush=True)


if __name__ == "__main__":
    main()
