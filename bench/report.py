"""Print bench/results.json (from run_all.py) as the Markdown tables of bench/README.md.

python bench/report.py [bench/results.json] > figures.md
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import table


def section(title: str, body: str) -> str:
    return f"### {title}\n\n{body}\n"


def report(results: dict[str, Any]) -> str:
    m = results["machine"]
    b = results["benchmarks"]
    out = [
        f"Machine: {m['cpu']}, {m['cores_total']} cores, this run on core(s) "
        f"{m['cores_used']}, {m['torch_threads']} torch thread(s); {m['time']}; "
        f"torch {m['torch']}, Python {m['python']}; load average {m['loadavg_1min']:.1f} "
        "at the start.",
    ]
    if results.get("note"):
        out.append(f"Note: {results['note']}.")
    any_bundle = next(iter(b.values()), {}).get("bundle", "")
    out.append(f"Model: {any_bundle}.\n")
    if "reference" in b:
        out.append(
            section(
                "Translate + all attention maps: ours vs transformers' MarianMTModel",
                table(
                    b["reference"]["rows"],
                    [
                        ("tokens", "src tokens"),
                        ("beam", "beam"),
                        ("out_tokens", "out tokens"),
                        ("ours_ms", "ours ms"),
                        ("ref_ms", "Marian ms"),
                        ("ratio", "Marian / ours", 2),
                        ("ours_cpu_ms", "ours CPU ms"),
                        ("ref_cpu_ms", "Marian CPU ms"),
                        ("ratio_cpu", "ratio (CPU)", 2),
                    ],
                ),
            )
        )
    if "payload" in b:
        rows = b["payload"]["rows"]
        for r in rows:
            for k in ("full", "nested", "compact"):
                r[f"{k}_kb"] = r[f"{k}_bytes"] / 1e3
        out.append(
            section(
                "Payload of one translation with every map",
                table(
                    rows,
                    [
                        ("tokens", "src tokens"),
                        ("out_tokens", "out tokens"),
                        ("full_kb", "full floats kB"),
                        ("nested_kb", "nested kB"),
                        ("compact_kb", "compact kB"),
                        ("full_over_compact", "full / compact"),
                    ],
                    digits=1,
                ),
            )
        )
        errs = ", ".join(f"{r['compact_max_error']:.6f}" for r in rows)
        out.append(f"Compact max error per row: {errs} (bound 0.5/255 = 0.001961).\n")
    if "api" in b:
        cols = [
            ("tokens", "src tokens"),
            ("out_tokens", "out tokens"),
            ("encoding", "encoding"),
            ("p50_ms", "p50 ms"),
            ("p95_ms", "p95 ms"),
            ("server_ms", "server ms"),
            ("server_cpu_ms", "server CPU ms/req"),
            ("kb", "response kB"),
        ]
        api = b["api"]
        body = table(api["rows"], cols)
        if api.get("limit_rows"):
            body += "\n\nToken limit:\n\n" + table(api["limit_rows"], cols)
        if api.get("over_limit"):
            o = api["over_limit"]
            body += f"\n\nOne token more: HTTP {o['status']}: {o['detail']}"
        out.append(section("POST /api/translate with all maps (sequential requests)", body))
    if "page" in b:
        out.append(
            section(
                "Explorer page: overview grid drawn after the response",
                table(
                    b["page"]["rows"],
                    [
                        ("tokens", "src tokens"),
                        ("cells", "grid cells"),
                        ("kb", "response kB"),
                        ("grid_p50_ms", "grid drawn ms (p50)"),
                        ("grid_max_ms", "grid drawn ms (max)"),
                        ("views_p50_ms", "all views ms (p50)"),
                        ("longest_task_ms", "longest task ms"),
                    ],
                    digits=0,
                ),
            )
        )
    cols = [
        ("workers", "workers"),
        ("threads", "threads"),
        ("requests", "requests"),
        ("rps", "req/s"),
        ("p50_ms", "p50 ms"),
        ("p95_ms", "p95 ms"),
        ("p99_ms", "p99 ms"),
        ("errors", "errors"),
    ]
    if "load" in b:
        r = b["load"]["result"]
        body = table([r], cols)
        mem = r.get("memory")
        if mem:
            body += (
                f"\n\nMemory: {mem['requests']:,} requests in {mem['seconds']:.0f} s, "
                f"{mem['errors']} errors; server RSS {mem['rss_before_mib']:.1f} MiB before, "
                f"{mem['rss_after_mib']:.1f} MiB after ({mem['growth_mib']:+.1f} MiB)."
            )
        out.append(
            section(f"Load: {b['load']['clients']} clients, {b['load']['duration']:.0f} s", body)
        )
    if "load_compare" in b:
        out.append(
            section(
                "Load: workers x threads",
                table(b["load_compare"]["compare"], cols),
            )
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "results", nargs="?", type=Path, default=Path(__file__).parent / "results.json"
    )
    args = parser.parse_args(argv)
    print(report(json.loads(args.results.read_text())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
