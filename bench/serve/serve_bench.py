#!/usr/bin/env python3
"""What one KV memory budget serves: for each cache spec, `veloxquant serve` with the same
--kv-memory, the most sequences of --context tokens that run at once, and their aggregate decode
tokens/s.

Per spec: a server with room for many sequences (--parallel, --queue) gets `capacity + extra`
streamed requests at once, each a prompt of `context - gen` random token ids and `gen` tokens to
generate (temperature 0, stop never reached), where capacity is what the pool should admit
(pages_total / pages of one such sequence, from the bytes line the server's /metrics reports).
The most sequences running at once is /metrics' veloxquant_running_sequences, polled; aggregate
decode tokens/s counts every token streamed while all admitted sequences of the first wave were
decoding (from the last first token to the first finish) over that time. Writes
bench/results/NAME.json (every raw number, commands, machine, date) and NAME.md.

    python3 bench/serve/serve_bench.py [--model models/vq-hd128.gguf] [--kv-memory 128MiB]
        [--context 8192] [--gen 64] [--specs "fp16 kivi:kbits=2,vbits=2 turboquant_mse:bits=4,vbits=4"]
        [--threads 2] [--llama-server .llamacpp/build/bin/llama-server --llama-types q4_0]
        [--name serve_vq-hd128]

With --llama-server, llama.cpp's server runs the same load beside it, in the same KV memory: as
many slots of --context tokens as its KV type (-ctk/-ctv, flash attention on) fits.

On this 2-core machine the default context is 8192 rather than 32768: prefilling dozens of 32k
prompts (attention quadratic in the prompt) would take hours; the pages a sequence takes grow
linearly past the residual window, so the concurrency ratios barely depend on it.
"""

import argparse
import concurrent.futures
import datetime
import json
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from cpu_name import cpu_name  # noqa: E402
from perplexity_report import ROOT  # noqa: E402

CLI = os.path.join(ROOT, "build", "veloxquant")


def metrics(url):
    text = httpx.get(url + "/metrics", timeout=10).text
    return {
        m[1]: float(m[2]) for m in re.finditer(r"^((?:veloxquant_|llamacpp:)\w+) ([0-9.e+-]+)$", text, re.M)
    }


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(process, url):
    while True:
        if process.poll() is not None:
            raise SystemExit(f"server exited: {process.stderr.read()}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)


# Bytes per element of llama.cpp's KV types (blocks of 32: scale plus packed values).
LLAMA_TYPE_BYTES = {
    "f16": 2.0,
    "q8_0": 34 / 32,
    "q5_1": 24 / 32,
    "q5_0": 22 / 32,
    "q4_1": 20 / 32,
    "q4_0": 18 / 32,
}


def start_llama(a, kv_type, shape):
    """llama-server with as many slots of --context tokens as its KV type fits in --kv-memory."""
    layers, kv_heads, head_dim = shape
    per_token = layers * kv_heads * head_dim * 2 * LLAMA_TYPE_BYTES[kv_type]
    slots = int(parse_size(a.kv_memory) // (per_token * a.context))
    port = free_port()
    cmd = [
        a.llama_server,
        "-m",
        a.model,
        "-c",
        str(slots * a.context),
        "-np",
        str(slots),
        "-ctk",
        kv_type,
        "-ctv",
        kv_type,
        "-fa",
        "on",
        "-t",
        str(a.threads),
        "--port",
        str(port),
        "--metrics",
        "-b",
        str(a.step_tokens),
        "-ub",
        str(a.step_tokens),
    ]
    process = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    wait_up(process, url)
    return process, url, " ".join(cmd), slots, per_token


def parse_size(text):
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "KB": 1e3, "MB": 1e6, "GB": 1e9}
    for unit, factor in units.items():
        if text.endswith(unit):
            return float(text[: -len(unit)]) * factor
    return float(text)


def start(a, spec):
    port = free_port()
    cmd = [
        os.path.relpath(CLI, ROOT),
        "serve",
        "-m",
        a.model,
        "--kv",
        spec,
        "--kv-memory",
        a.kv_memory,
        "-c",
        str(a.context),
        "--parallel",
        "512",
        "--queue",
        "512",
        "--step-tokens",
        str(a.step_tokens),
        "--page-tokens",
        str(a.page_tokens),
        "-t",
        str(a.threads),
        "--port",
        str(port),
        "--timeout",
        "7200",
    ]
    process = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    wait_up(process, url)
    return process, url, " ".join(cmd)


def one(url, prompt, gen, times):
    """Streams one request; appends (time, tokens so far) per event to `times`."""
    body = {"prompt": prompt, "max_tokens": gen, "temperature": 0, "stream": True, "stop": None}
    with httpx.stream("POST", url + "/v1/completions", json=body, timeout=7200) as r:
        if r.status_code != 200:
            raise SystemExit(f"request failed: {r.status_code} {r.read()}")
        for line in r.iter_lines():
            if line.startswith("data: {") and '"text":""' not in line:
                times.append(time.monotonic())


def load(url, a, prompts, running_metric):
    """Sends every prompt at once, streamed; returns the peak of the running gauge, the per-request
    token times, and the wall time."""
    streams = [[] for _ in prompts]
    peak = [0]
    stop = threading.Event()

    def poll():
        while not stop.is_set():
            peak[0] = max(peak[0], int(metrics(url).get(running_metric, 0)))
            time.sleep(0.05)

    poller = threading.Thread(target=poll)
    poller.start()
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
        list(pool.map(lambda i: one(url, prompts[i], a.gen, streams[i]), range(len(prompts))))
    wall = time.monotonic() - t0
    stop.set()
    poller.join()
    return peak[0], streams, wall


def decode_rate(streams):
    """Tokens streamed while the whole first wave decoded (from its last first token to the first
    finish), over that time; the first wave: the requests whose first token came before any
    request finished."""
    first_finish = min(s[-1] for s in streams)
    wave = [s for s in streams if s[0] <= first_finish]
    start_all = max(s[0] for s in wave)
    window = first_finish - start_all
    tokens = sum(1 for s in wave for t in s if start_all < t <= first_finish)
    return {
        "first_wave": len(wave),
        "decode_window_s": window,
        "decode_tokens_in_window": tokens,
        "aggregate_decode_tokens_per_s": tokens / window if window > 0 else None,
    }


def prompts_for(a, vocab, count):
    rng = random.Random(a.seed)
    return [[rng.randrange(10, vocab) for _ in range(a.context - a.gen)] for _ in range(count)]


def run_ours(a, spec, vocab):
    process, url, command = start(a, spec)
    try:
        m = metrics(url)
        pages, page_bytes = int(m["veloxquant_kv_pages_total"]), int(m["veloxquant_kv_page_bytes"])
        # Pages of one whole sequence, as the server counts them (docs/serve.md).
        rounded = math.ceil(a.context / a.page_tokens) * a.page_tokens
        line = m["veloxquant_kv_fixed_bytes"] + m["veloxquant_kv_bytes_per_token"] * rounded
        per_sequence = math.ceil(math.ceil(line) / page_bytes)
        capacity = pages // per_sequence
        requests = a.requests or capacity + a.extra
        peak, streams, wall = load(url, a, prompts_for(a, vocab, requests), "veloxquant_running_sequences")
        after = metrics(url)
        return {
            "kv": spec,
            "server": "veloxquant",
            "command": command,
            "pages_total": pages,
            "page_bytes": page_bytes,
            "pages_per_sequence": per_sequence,
            "capacity": capacity,
            "requests": requests,
            "most_running": peak,
            **decode_rate(streams),
            "wall_s": wall,
            "preemptions": after["veloxquant_preemptions_total"],
            "pages_free_after": after["veloxquant_kv_pages_free"],
        }
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)


def run_llama(a, kv_type, vocab, shape):
    process, url, command, slots, per_token = start_llama(a, kv_type, shape)
    try:
        requests = a.requests or slots + a.extra
        peak, streams, wall = load(url, a, prompts_for(a, vocab, requests), "llamacpp:requests_processing")
        return {
            "kv": f"llama.cpp {kv_type}",
            "server": "llama-server",
            "command": command,
            "bytes_per_token": per_token,
            "capacity": slots,
            "requests": requests,
            "most_running": peak,
            **decode_rate(streams),
            "wall_s": wall,
        }
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="models/vq-hd128.gguf")
    p.add_argument("--kv-memory", default="128MiB")
    p.add_argument("--context", type=int, default=8192)
    p.add_argument("--gen", type=int, default=64)
    p.add_argument("--specs", default="fp16 kivi:kbits=2,vbits=2 turboquant_mse:bits=4,vbits=4")
    p.add_argument("--page-tokens", type=int, default=64)
    p.add_argument("--step-tokens", type=int, default=2048)
    p.add_argument(
        "--requests", type=int, default=0, help="requests per spec (0: what the pool admits + --extra)"
    )
    p.add_argument("--extra", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--llama-server", default="", help="llama-server to run beside (bench/llamacpp/build_llama_bench.sh)"
    )
    p.add_argument("--llama-types", default="q4_0", help="its KV types (-ctk/-ctv), one run each")
    p.add_argument("--name", default="serve_vq-hd128")
    a = p.parse_args()
    import gguf

    reader = gguf.GGUFReader(os.path.join(ROOT, a.model))
    vocab = len(reader.fields["tokenizer.ggml.tokens"].data)

    def field(suffix):
        key = next(k for k in reader.fields if k.endswith(suffix))
        return int(reader.fields[key].parts[-1][0])

    heads = field(".attention.head_count")
    shape = (field(".block_count"), field(".attention.head_count_kv"), field(".embedding_length") // heads)
    rows = []
    for spec in a.specs.split():
        rows.append(run_ours(a, spec, vocab))
        print(json.dumps(rows[-1]), flush=True)
    if a.llama_server:
        for kv_type in a.llama_types.split():
            rows.append(run_llama(a, kv_type, vocab, shape))
            print(json.dumps(rows[-1]), flush=True)
    base = rows[0]
    for r in rows:
        r["concurrency_vs_first"] = r["most_running"] / base["most_running"]
        if r["aggregate_decode_tokens_per_s"] and base["aggregate_decode_tokens_per_s"]:
            r["decode_vs_first"] = r["aggregate_decode_tokens_per_s"] / base["aggregate_decode_tokens_per_s"]
    command = (
        f"python3 bench/serve/serve_bench.py --model {a.model} --kv-memory {a.kv_memory} --context "
        f'{a.context} --gen {a.gen} --specs "{a.specs}" --threads {a.threads}'
        + (f' --llama-server {a.llama_server} --llama-types "{a.llama_types}"' if a.llama_server else "")
        + f" --name {a.name}"
    )
    meta = {
        "command": command,
        "machine": f"{cpu_name()}, {os.cpu_count()} cores",
        "date": datetime.date.today().isoformat(),
    }
    out = os.path.join(ROOT, "bench", "results", a.name)
    with open(out + ".json", "w") as f:
        json.dump({**meta, "rows": rows}, f, indent=2)
    lines = [
        f"# Serving at one KV memory budget: {a.model}",
        "",
        f"`{command}` — {meta['machine']}, {meta['date']}. Each server in {a.kv_memory} of KV memory, "
        f"sequences of {a.context} tokens ({a.context - a.gen} prompt + {a.gen} generated, greedy), as many "
        "requests as it should admit plus a few, sent at once. Capacity: what its KV memory admits "
        "(`veloxquant serve`: its pages over one sequence's; llama-server: slots of that many tokens in "
        "its KV type). Most running: the peak of the running gauge (`veloxquant_running_sequences`, "
        "`llamacpp:requests_processing`). Decode tokens/s: every token streamed while the whole first "
        "wave decoded, over that time.",
        "",
        "| server | kv | capacity | most running | vs first | decode tokens/s | vs first | preempted |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        tps = r["aggregate_decode_tokens_per_s"] or 0.0
        lines.append(
            f"| {r['server']} | `{r['kv']}` | {r['capacity']} | {r['most_running']} | "
            f"{r['concurrency_vs_first']:.2f}x | {tps:.1f} | {r.get('decode_vs_first', 0):.2f}x | "
            f"{int(r.get('preemptions', 0))} |"
        )
    with open(out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
