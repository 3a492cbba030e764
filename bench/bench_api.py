"""Latency and size of `POST /api/translate` with every attention map, against a live server.

Starts `attnscope serve` (uvicorn) on a free 127.0.0.1 port in a subprocess, then sends one
request at a time from this process (httpx, keep-alive) for English inputs of exactly N source
tokens, in each encoding, and prints p50/p95 of the round trip, the server's own time
(`timings_ms.total`), the response bytes and the output length. It ends with the token-limit
case (256 source tokens): response size and server time.

Output length: the trained bundle stops on its own. A random-weight bundle rarely emits </s>, so
for it requests carry `max_length` = N (a translation about as long as its source) unless
`--max-length` says otherwise.

    python bench/bench_api.py [--tokens 5 20 50] [--requests 30] [--limit-tokens 256]
                              [--threads 1] [--bundle auto|random|tiny|DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    ServerProcess,
    add_bundle_args,
    add_output_args,
    machine_info,
    median,
    model_max_len,
    percentile,
    resolve_bundle,
    table,
    text_with_tokens,
    write_json,
)
from model.tokenizer import Tokenizer

ENCODINGS = ("compact", "nested")


def max_length_for(policy: str, bundle_kind: str, n: int) -> int | None:
    """The request's max_length: none for a trained model (it stops), else N or a number."""
    if policy == "auto":
        return None if bundle_kind in ("real", "path") else n
    if policy == "none":
        return None
    if policy == "n":
        return n
    return int(policy)


def measure(
    client: httpx.Client, server_proc: ServerProcess, body: dict, requests: int, warmup: int
) -> dict[str, float | int | list[float]]:
    """Send `body` warmup + requests times; latencies (ms), server times (ms), sizes, and the
    server process's CPU time per request (what the latency would be on an idle core)."""
    lat, server = [], []
    size = out_tokens = 0
    cpu0 = 0.0
    for i in range(warmup + requests):
        if i == warmup:
            cpu0 = server_proc.cpu_seconds()
        t0 = time.perf_counter()
        r = client.post("/api/translate", json=body)
        dt = (time.perf_counter() - t0) * 1e3
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {r.text[:300]}")
        if i >= warmup:
            out = r.json()
            lat.append(dt)
            server.append(out["timings_ms"]["total"])
            size = len(r.content)
            out_tokens = len(out["target_tokens"])
    cpu_ms = (server_proc.cpu_seconds() - cpu0) * 1e3 / max(1, requests)
    return {
        "server_cpu_ms": cpu_ms,
        "p50_ms": percentile(lat, 50),
        "p95_ms": percentile(lat, 95),
        "server_ms": median(server),
        "bytes": size,
        "kb": size / 1e3,
        "out_tokens": out_tokens,
        "latencies_ms": lat,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokens", type=int, nargs="+", default=[5, 20, 50])
    parser.add_argument("--requests", type=int, default=30, help="timed requests per case")
    parser.add_argument("--warmup", type=int, default=3, help="untimed requests per case")
    parser.add_argument(
        "--limit-tokens",
        type=int,
        default=256,
        help="source tokens of the token-limit case (0 = skip it)",
    )
    parser.add_argument("--limit-requests", type=int, default=3)
    parser.add_argument("--beam", type=int, default=1, help="beam_size of every request")
    parser.add_argument(
        "--max-length",
        default="auto",
        help="auto (random bundles: N; trained: none), none, n, or a number",
    )
    parser.add_argument(
        "--max-chars",
        type=int,
        default=4000,
        help="server's ATTNSCOPE_MAX_CHARS, so that the token limit binds first",
    )
    parser.add_argument("--threads", type=int, default=1, help="server's torch threads")
    parser.add_argument("--workers", type=int, default=1, help="server's uvicorn workers")
    add_bundle_args(parser)
    add_output_args(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    choice = resolve_bundle(args.bundle)
    tok = Tokenizer.from_file(choice.path / "tokenizer.json")
    print(f"bundle: {choice.description}")
    rows, limit_rows = [], []
    # The token-limit case needs more characters than the default max_chars (1000) allows:
    # English runs ~4.2 characters per token, so 256 tokens take ~1,100 characters.
    env = {"ATTNSCOPE_MAX_CHARS": str(args.max_chars)}
    with (
        ServerProcess(choice.path, workers=args.workers, threads=args.threads, env=env) as server,
        httpx.Client(base_url=server.url, timeout=300) as client,
    ):
        print(f"server: {server.url}, {args.workers} worker(s), {args.threads} torch thread(s)\n")
        for n in args.tokens:
            text = text_with_tokens(tok, n)
            for enc in ENCODINGS:
                body = {"text": text, "beam_size": args.beam, "encoding": enc}
                ml = max_length_for(args.max_length, choice.kind, n)
                if ml is not None:
                    body["max_length"] = ml
                row = {"tokens": n, "encoding": enc, "max_length": ml}
                row.update(measure(client, server, body, args.requests, args.warmup))
                rows.append(row)
                print(
                    f"  N={n} {enc}: p50 {row['p50_ms']:.1f} ms, p95 {row['p95_ms']:.1f} ms, "
                    f"{row['kb']:.1f} kB",
                    flush=True,
                )
        if args.limit_tokens:
            # The server's limit is min(max_tokens, the model's max_len): 256 for the shipped
            # model, less for the tiny test model.
            n = min(args.limit_tokens, model_max_len(choice.path))
            text = text_with_tokens(tok, n)
            for enc in ENCODINGS:
                body = {"text": text, "beam_size": args.beam, "encoding": enc}
                ml = max_length_for(args.max_length, choice.kind, n)
                if ml is not None:
                    body["max_length"] = ml
                row = {"tokens": n, "encoding": enc, "max_length": ml}
                row.update(measure(client, server, body, args.limit_requests, 1))
                limit_rows.append(row)
                print(
                    f"  limit N={n} {enc}: server {row['server_ms']:.0f} ms, "
                    f"round trip p50 {row['p50_ms']:.0f} ms, {row['kb']:.0f} kB",
                    flush=True,
                )
            # One more than the limit: the server must refuse it with a 4xx, quickly.
            over = text_with_tokens(tok, n + 1)
            t0 = time.perf_counter()
            r = client.post("/api/translate", json={"text": over})
            over_ms = (time.perf_counter() - t0) * 1e3
            over_status, over_detail = r.status_code, r.json().get("detail")
            print(f"  {n + 1} tokens: HTTP {over_status} in {over_ms:.1f} ms: {over_detail}")

    cols = [
        ("tokens", "src tokens"),
        ("out_tokens", "out tokens"),
        ("encoding", "encoding"),
        ("p50_ms", "p50 ms"),
        ("p95_ms", "p95 ms"),
        ("server_ms", "server ms (median)"),
        ("server_cpu_ms", "server CPU ms/req"),
        ("kb", "response kB"),
    ]
    print()
    print(table(rows, cols))
    if limit_rows:
        n = limit_rows[0]["tokens"]
        print(f"\ntoken limit ({n} source tokens):\n")
        print(table(limit_rows, cols))
        print(f"\n{n + 1} source tokens: HTTP {over_status} ({over_detail})")
    print(
        f"\n{args.requests} sequential requests per case after {args.warmup} warm-up; "
        "round trip measured by the client (httpx keep-alive), kB = 1000 bytes of body; "
        "server CPU ms/req: the server process's CPU time per request (its latency on an "
        "idle core)"
    )
    write_json(
        args.json,
        {
            "benchmark": "api",
            "bundle": choice.description,
            "threads": args.threads,
            "workers": args.workers,
            "server_max_chars": args.max_chars,
            "beam": args.beam,
            "note": args.note,
            "machine": machine_info(args.threads),
            "rows": rows,
            "limit_rows": limit_rows,
            "over_limit": {"status": over_status, "detail": over_detail} if limit_rows else None,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
