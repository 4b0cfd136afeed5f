#!/usr/bin/env python3
"""A load run against `latte serve` (or any OpenAI-compatible server): N clients, each sending
streamed completions one after another for a fixed time; prints requests per second, generated
tokens per second, time to first token p50/p99, and how many requests failed.

  scripts/serve-load.py --url http://127.0.0.1:8080 --clients 16 --seconds 60 --max-tokens 64
  scripts/serve-load.py ... --prompt-tokens 128     # prompts of random token ids (models without a
                                                      # tokenizer, e.g. `latte synth` files)

Only the standard library: it runs wherever python3 does. docs/server.md has measured runs.
"""
import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time
import urllib.parse


def one_request(url, body, api_key, timeout):
    """Sends one streamed completion; returns (ttft seconds, completion tokens) or raises."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer " + api_key
    start = time.monotonic()
    conn.request("POST", "/v1/completions", json.dumps(body), headers)
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:200]!r}")
    ttft, tokens, done = None, 0, False
    for raw in resp:
        line = raw.decode("utf-8").strip()
        if not line.startswith("data: "):
            continue
        data = line[6:]
        if data == "[DONE]":
            done = True
            break
        chunk = json.loads(data)
        if "error" in chunk:
            raise RuntimeError(f"error event: {chunk['error']}")
        if chunk.get("usage"):
            tokens = chunk["usage"]["completion_tokens"]
        if ttft is None and chunk.get("choices"):
            ttft = time.monotonic() - start
    conn.close()
    if not done:
        raise RuntimeError("stream ended without [DONE]")
    return ttft if ttft is not None else time.monotonic() - start, tokens


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompt", default="Once upon a time")
    ap.add_argument("--prompt-tokens", type=int, default=0, help="random token-id prompts of this length instead")
    ap.add_argument("--vocab", type=int, default=1000, help="token ids are drawn below this (with --prompt-tokens)")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    if a.clients < 1 or a.seconds <= 0 or a.max_tokens < 1:
        sys.exit("serve-load: --clients, --seconds and --max-tokens must be positive")

    results, failures, lock = [], [], threading.Lock()
    deadline = time.monotonic() + a.seconds

    def client(i):
        rng = random.Random(i)
        while time.monotonic() < deadline:
            prompt = [rng.randrange(a.vocab) for _ in range(a.prompt_tokens)] if a.prompt_tokens else a.prompt
            body = {"prompt": prompt, "max_tokens": a.max_tokens, "temperature": 0.8, "seed": rng.randrange(1 << 30),
                    "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
            try:
                r = one_request(a.url, body, a.api_key, a.timeout)
                with lock:
                    results.append(r)
            except Exception as e:  # noqa: BLE001 - every failure is counted and shown
                with lock:
                    failures.append(str(e))

    began = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    ttfts = [r[0] for r in results]
    tokens = sum(r[1] for r in results)
    print(f"clients {a.clients}, {elapsed:.1f} s: {len(results)} requests done, {len(failures)} failed")
    if results:
        print(f"requests/s {len(results) / elapsed:.2f} | generated tokens/s {tokens / elapsed:.1f} | "
              f"TTFT p50 {1000 * statistics.median(ttfts):.0f} ms, p99 {1000 * percentile(ttfts, 99):.0f} ms")
    for f in failures[:5]:
        print("failed:", f)
    sys.exit(1 if failures or not results else 0)


if __name__ == "__main__":
    main()
