"""Load test: 16 concurrent clients against `attnscope serve` on 127.0.0.1, mixed sentence lengths.

The client is our own: one asyncio loop in this process with `httpx.AsyncClient`, 16 tasks that
each send `POST /api/translate` (all attention maps; 80% compact as the page asks, 20% nested as
API users do) back to back, with English inputs drawn from a fixed mix of lengths (seeded).
Everything is bounded: phase 1 runs for `--duration` seconds and gives requests/s and latency
percentiles; phase 2 keeps the same load until `--memory-requests` requests have been served in
all (or `--max-seconds` have passed) and compares the server's resident memory (VmRSS of the
server process and its workers, from /proc) before and after. The server runs in a subprocess
on a free 127.0.0.1 port and nothing else is contacted.

`--compare` repeats a shorter phase 1 for each worker/thread setting (uvicorn workers 1 and 2 x
torch threads 1 and 2) and prints them side by side.

    python bench/load_test.py [--clients 16] [--duration 60] [--memory-requests 5000]
                              [--workers 1] [--threads 1] [--compare] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    BundleChoice,
    ServerProcess,
    add_bundle_args,
    add_output_args,
    machine_info,
    percentile,
    resolve_bundle,
    table,
    text_with_tokens,
    write_json,
)
from model.tokenizer import Tokenizer

#: Source lengths (tokens incl. </s>) and how often each is sent: mostly short everyday
#: sentences (Tatoeba averages ~7 words), some long ones.
LENGTH_MIX = {5: 0.2, 10: 0.3, 15: 0.2, 20: 0.15, 30: 0.1, 50: 0.05}
NESTED_SHARE = 0.2


@dataclass
class Results:
    latencies_ms: list[float] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)
    bytes: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return sum(self.statuses.values())

    @property
    def failed(self) -> int:
        return sum(n for s, n in self.statuses.items() if s != 200)


def request_bodies(tok: Tokenizer, fixed_length: bool) -> dict[tuple[int, str], bytes]:
    bodies = {}
    for n in LENGTH_MIX:
        text = text_with_tokens(tok, n)
        for enc in ("compact", "nested"):
            body: dict[str, object] = {"text": text, "encoding": enc}
            if fixed_length:  # random weights rarely stop on their own
                body["max_length"] = n
            bodies[(n, enc)] = json.dumps(body).encode()
    return bodies


async def run_load(
    url: str,
    bodies: dict[tuple[int, str], bytes],
    clients: int,
    seconds: float,
    max_requests: int | None,
    seed: int,
) -> tuple[Results, float]:
    """`clients` tasks send requests until `seconds` pass or `max_requests` were sent."""
    results = Results()
    rng = random.Random(seed)
    lengths, weights = list(LENGTH_MIX), list(LENGTH_MIX.values())
    sent = 0
    start = time.perf_counter()
    deadline = start + seconds
    headers = {"content-type": "application/json"}

    async def one_client(client: httpx.AsyncClient) -> None:
        nonlocal sent
        while time.perf_counter() < deadline and (max_requests is None or sent < max_requests):
            sent += 1
            n = rng.choices(lengths, weights)[0]
            enc = "nested" if rng.random() < NESTED_SHARE else "compact"
            t0 = time.perf_counter()
            try:
                r = await client.post("/api/translate", content=bodies[(n, enc)], headers=headers)
                results.statuses[r.status_code] += 1
                results.bytes += len(r.content)
                if r.status_code == 200:
                    results.latencies_ms.append((time.perf_counter() - t0) * 1e3)
                elif len(results.errors) < 10:
                    results.errors.append(f"HTTP {r.status_code}: {r.text[:200]}")
            except httpx.HTTPError as e:
                results.statuses[type(e).__name__] += 1
                if len(results.errors) < 10:
                    results.errors.append(repr(e))

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        await asyncio.gather(*(one_client(client) for _ in range(clients)))
    return results, time.perf_counter() - start


def summary(res: Results, elapsed: float) -> dict[str, object]:
    lat = res.latencies_ms
    return {
        "requests": res.count,
        "seconds": elapsed,
        "rps": res.count / elapsed if elapsed else 0.0,
        "p50_ms": percentile(lat, 50),
        "p95_ms": percentile(lat, 95),
        "p99_ms": percentile(lat, 99),
        "errors": res.failed,
        "statuses": {str(k): v for k, v in res.statuses.items()},
        "error_samples": res.errors,
        "mb_received": res.bytes / 1e6,
    }


def load_once(
    choice: BundleChoice,
    bodies: dict[tuple[int, str], bytes],
    args: argparse.Namespace,
    workers: int,
    threads: int,
    duration: float,
    memory: bool,
) -> dict[str, object]:
    env = (
        {}
        if args.max_concurrent is None
        else {"ATTNSCOPE_MAX_CONCURRENT": str(args.max_concurrent)}
    )
    with ServerProcess(choice.path, workers=workers, threads=threads, env=env) as server:
        # Warm-up: every worker has loaded its model; run each body once so caches are warm.
        warm, _ = asyncio.run(run_load(server.url, bodies, workers, 120, len(bodies) * 2, 0))
        if warm.failed:
            raise RuntimeError(f"warm-up failed: {warm.errors[:3]}")
        rss_before = server.rss_mib()
        cpu0 = server.cpu_seconds()
        res, elapsed = asyncio.run(
            run_load(server.url, bodies, args.clients, duration, None, args.seed)
        )
        out: dict[str, object] = {"workers": workers, "threads": threads, **summary(res, elapsed)}
        out["server_cpu_s"] = server.cpu_seconds() - cpu0
        out["rss_before_mib"] = rss_before
        out["rss_after_phase1_mib"] = server.rss_mib()
        if memory:
            more = max(0, args.memory_requests - res.count)
            res2, elapsed2 = asyncio.run(
                run_load(server.url, bodies, args.clients, args.max_seconds, more, args.seed + 1)
            )
            total = res.count + res2.count
            rss_after = server.rss_mib()
            out["memory"] = {
                "requests": total,
                "errors": res.failed + res2.failed,
                "seconds": elapsed + elapsed2,
                "rss_before_mib": rss_before,
                "rss_after_mib": rss_after,
                "growth_mib": rss_after - rss_before,
                "phase2": summary(res2, elapsed2),
            }
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of phase 1")
    parser.add_argument(
        "--memory-requests",
        type=int,
        default=5000,
        help="requests in all before the second memory reading (0 = skip phase 2)",
    )
    parser.add_argument(
        "--max-seconds", type=float, default=300.0, help="time cap of phase 2 (memory)"
    )
    parser.add_argument("--workers", type=int, default=1, help="uvicorn workers")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    parser.add_argument(
        "--max-concurrent",
        type=int,
        default=None,
        help="server's ATTNSCOPE_MAX_CONCURRENT (default: the app's setting)",
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="instead: phase 1 only, for workers 1/2 x threads 1/2",
    )
    parser.add_argument(
        "--compare-duration", type=float, default=30.0, help="seconds per compared setting"
    )
    parser.add_argument("--seed", type=int, default=1)
    add_bundle_args(parser)
    add_output_args(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    choice = resolve_bundle(args.bundle)
    tok = Tokenizer.from_file(choice.path / "tokenizer.json")
    bodies = request_bodies(tok, fixed_length=choice.kind not in ("real", "path"))
    mix = ", ".join(f"{n}: {w:.0%}" for n, w in LENGTH_MIX.items())
    print(f"bundle: {choice.description}")
    print(f"{args.clients} clients; source-token mix {mix}; {NESTED_SHARE:.0%} nested\n")
    cols = [
        ("workers", "workers"),
        ("threads", "threads"),
        ("requests", "requests"),
        ("rps", "req/s"),
        ("p50_ms", "p50 ms"),
        ("p95_ms", "p95 ms"),
        ("p99_ms", "p99 ms"),
        ("errors", "errors"),
        ("rss_before_mib", "RSS MiB"),
    ]
    payload: dict[str, object] = {
        "benchmark": "load",
        "bundle": choice.description,
        "clients": args.clients,
        "length_mix": LENGTH_MIX,
        "nested_share": NESTED_SHARE,
        "max_concurrent": args.max_concurrent,
        "note": args.note,
        "machine": machine_info(),
    }
    if args.compare:
        rows = []
        for workers in (1, 2):
            for threads in (1, 2):
                row = load_once(
                    choice, bodies, args, workers, threads, args.compare_duration, memory=False
                )
                rows.append(row)
                print(
                    f"  workers {workers}, threads {threads}: {row['rps']:.1f} req/s, "
                    f"p50 {row['p50_ms']:.0f} ms, p95 {row['p95_ms']:.0f} ms, "
                    f"errors {row['errors']}",
                    flush=True,
                )
        print()
        print(table(rows, cols))
        print(f"\n{args.compare_duration:.0f} s per setting after warm-up")
        payload.update(duration=args.compare_duration, compare=rows)
    else:
        row = load_once(
            choice, bodies, args, args.workers, args.threads, args.duration, memory=True
        )
        print(table([row], cols))
        mem = row.get("memory")
        if isinstance(mem, dict):
            print(
                f"\nmemory: {mem['requests']:,} requests in {mem['seconds']:.0f} s, "
                f"{mem['errors']} errors; server RSS {mem['rss_before_mib']:.1f} MiB before, "
                f"{mem['rss_after_mib']:.1f} MiB after: {mem['growth_mib']:+.1f} MiB"
            )
        if row["error_samples"]:
            print("errors:", *row["error_samples"], sep="\n  ")
        print(
            f"\nphase 1: {args.duration:.0f} s; latency = round trip of successful requests "
            "as the clients saw it"
        )
        payload.update(duration=args.duration, result=row)
    write_json(args.json, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
