"""Time until the explorer page has drawn its overview grid after the translate response.

Starts `attnscope serve` on a free 127.0.0.1 port, opens the page in Debian's Chromium (headless,
through Playwright), and for English inputs of exactly N source tokens types the text, presses
Translate, waits for the render to finish and reads the page's own performance measures:

  attnscope:grid   response parsed -> overview grid (every layer x head cell) painted
  attnscope:views  response parsed -> every view drawn (incl. the large Plotly heatmap)

It also reports the request's round trip (Resource Timing), the number of grid cells, the bytes
received and the longest main-thread task during the render (Long Tasks API: how long the page
could not react to input), so the token-limit case (256 tokens) shows whether the page stays
responsive.

A random-weight bundle rarely emits </s>: for it the page's request gets `max_length` = N added
on the way out (a Playwright route), so output lengths match a real translation of that size.

    python bench/bench_page.py [--tokens 5 20 50 256] [--runs 5] [--bundle auto|random|tiny|DIR]
                               [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    ServerProcess,
    add_bundle_args,
    add_output_args,
    machine_info,
    model_max_len,
    percentile,
    resolve_bundle,
    table,
    text_with_tokens,
    write_json,
)
from model.tokenizer import Tokenizer

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Collect long main-thread tasks (> 50 ms) from page load on; the bench reads and clears them.
LONG_TASKS_SCRIPT = """
window.__longTasks = [];
try {
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) window.__longTasks.push(e.duration);
  }).observe({ type: "longtask", buffered: true });
} catch (e) { /* no Long Tasks API: the figure stays empty */ }
"""

READ_MEASURES = """() => {
  const last = (name) => {
    const all = performance.getEntriesByName(name);
    return all.length ? all[all.length - 1].duration : null;
  };
  const req = performance.getEntriesByType("resource")
    .filter((e) => e.name.endsWith("/api/translate"));
  const r = req[req.length - 1];
  const tasks = window.__longTasks.splice(0);
  return {
    grid_ms: last("attnscope:grid"),
    views_ms: last("attnscope:views"),
    fetch_ms: r ? r.responseEnd - r.startTime : null,
    bytes: r ? r.encodedBodySize : null,
    cells: document.querySelectorAll("#overview canvas").length,
    longest_task_ms: tasks.length ? Math.max(...tasks) : 0,
  };
}"""


def run_case(page, text: str, max_length: int | None, runs: int) -> list[dict]:
    """Translate `text` `runs` times (plus one warm-up) and return each run's measures."""

    def add_max_length(route) -> None:
        body = json.loads(route.request.post_data or "{}")
        if max_length is not None:
            body["max_length"] = max_length
        route.continue_(post_data=json.dumps(body))

    page.route("**/api/translate", add_max_length)
    out = []
    try:
        for i in range(runs + 1):
            renders = page.eval_on_selector("#explorer", "e => Number(e.dataset.renders || 0)")
            # Set the value directly: the textarea's maxlength would cut a 256-token input.
            page.eval_on_selector("#text", "(e, t) => { e.value = t; }", text)
            page.click("#translate-button")
            page.wait_for_function(
                "n => Number(document.getElementById('explorer').dataset.renders || 0) > n",
                arg=renders,
                timeout=300_000,
            )
            error = page.eval_on_selector("#error", "e => e.hidden ? null : e.textContent")
            if error:
                raise RuntimeError(f"the page shows an error: {error}")
            m = page.evaluate(READ_MEASURES)
            if i > 0:  # the first run warms up caches and the JIT
                out.append(m)
    finally:
        page.unroute("**/api/translate")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokens", type=int, nargs="+", default=[5, 20, 50, 256])
    parser.add_argument("--runs", type=int, default=5, help="timed translations per case")
    parser.add_argument("--threads", type=int, default=1, help="server's torch threads")
    parser.add_argument(
        "--max-chars", type=int, default=4000, help="server's ATTNSCOPE_MAX_CHARS (256 tokens)"
    )
    parser.add_argument("--chromium", default=CHROMIUM, help="browser executable")
    add_bundle_args(parser)
    add_output_args(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    from playwright.sync_api import sync_playwright

    choice = resolve_bundle(args.bundle)
    tok = Tokenizer.from_file(choice.path / "tokenizer.json")
    fixed_length = choice.kind not in ("real", "path")
    print(f"bundle: {choice.description}")
    rows = []
    env = {"ATTNSCOPE_MAX_CHARS": str(args.max_chars)}
    with (
        ServerProcess(choice.path, threads=args.threads, env=env) as server,
        sync_playwright() as p,
    ):
        browser = p.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 900})
            page.add_init_script(LONG_TASKS_SCRIPT)
            page.goto(server.url + "/")
            page.wait_for_selector("#translate-button:not([disabled])")
            print(f"server: {server.url}; browser: Chromium {browser.version}\n")
            for n in args.tokens:
                if n > model_max_len(choice.path):
                    print(f"  N={n}: skipped, the model takes fewer tokens")
                    continue
                text = text_with_tokens(tok, n)
                runs = run_case(page, text, n if fixed_length else None, args.runs)
                grid = [r["grid_ms"] for r in runs if r["grid_ms"] is not None]
                views = [r["views_ms"] for r in runs if r["views_ms"] is not None]
                row = {
                    "tokens": n,
                    "grid_p50_ms": percentile(grid, 50),
                    "grid_max_ms": max(grid) if grid else float("nan"),
                    "views_p50_ms": percentile(views, 50),
                    "fetch_p50_ms": percentile([r["fetch_ms"] for r in runs], 50),
                    "longest_task_ms": max(r["longest_task_ms"] for r in runs),
                    "cells": runs[-1]["cells"],
                    "kb": (runs[-1]["bytes"] or 0) / 1e3,
                    "runs": runs,
                }
                rows.append(row)
                print(
                    f"  N={n}: grid {row['grid_p50_ms']:.0f} ms after the response, all views "
                    f"{row['views_p50_ms']:.0f} ms, {row['cells']} cells",
                    flush=True,
                )
        finally:
            browser.close()

    print()
    print(
        table(
            rows,
            [
                ("tokens", "src tokens"),
                ("cells", "grid cells"),
                ("kb", "response kB"),
                ("fetch_p50_ms", "request ms"),
                ("grid_p50_ms", "grid drawn ms (p50)"),
                ("grid_max_ms", "grid drawn ms (max)"),
                ("views_p50_ms", "all views ms (p50)"),
                ("longest_task_ms", "longest task ms"),
            ],
            digits=0,
        )
    )
    print(
        f"\n{args.runs} translations per case after one warm-up; grid/views: the page's own "
        "performance.measure from the parsed response; longest task: the longest main-thread "
        "task while rendering (the page cannot react to input meanwhile)"
    )
    write_json(
        args.json,
        {
            "benchmark": "page",
            "bundle": choice.description,
            "chromium_args": CHROMIUM_ARGS,
            "note": args.note,
            "machine": machine_info(args.threads),
            "rows": rows,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
