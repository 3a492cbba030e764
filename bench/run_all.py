"""Run every benchmark with quick settings and collect the figures in bench/results.json.

Each script runs in its own process (a clean interpreter and server), prints its tables, and
writes its JSON; this script merges them. About five minutes on an idle 2-core machine with the
default settings; `--full` uses the issue's full load test (5,000 requests for the memory
figure, no time cap below 5 minutes) and adds the worker/thread comparison.

    python bench/run_all.py [--bundle auto|random|tiny|DIR] [--only reference payload ...]
                            [--full] [--note TEXT] [--out bench/results.json]

Pin it like any benchmark, e.g. `taskset -c 1 nice -n 10 python bench/run_all.py` on a machine
that is busy with something else; child processes (servers, Chromium) inherit the pinning.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench.common import machine_info  # noqa: E402

#: name -> (script, quick arguments)
QUICK: dict[str, tuple[str, list[str]]] = {
    "reference": ("bench_reference.py", ["--repeat", "5", "--warmup", "1"]),
    "payload": ("bench_payload.py", []),
    "api": ("bench_api.py", ["--requests", "20", "--limit-requests", "2"]),
    "page": ("bench_page.py", ["--runs", "3"]),
    "load": (
        "load_test.py",
        ["--duration", "60", "--memory-requests", "5000", "--max-seconds", "60"],
    ),
}
FULL_EXTRA: dict[str, list[str]] = {
    "reference": ["--repeat", "9", "--warmup", "2"],
    "load": ["--duration", "60", "--memory-requests", "5000", "--max-seconds", "300"],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bundle", default="auto", help="passed to every script")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (model, server)")
    parser.add_argument("--only", nargs="+", choices=list(QUICK), help="run only these")
    parser.add_argument("--full", action="store_true", help="issue-size load test + compare")
    parser.add_argument("--note", default="", help="stored with the figures")
    parser.add_argument("--out", type=Path, default=HERE / "results.json")
    args = parser.parse_args(argv)

    names = args.only or list(QUICK)
    results: dict[str, object] = {
        "machine": machine_info(args.threads),
        "note": args.note,
        "full": args.full,
        "benchmarks": {},
    }
    failed = []
    with tempfile.TemporaryDirectory(prefix="attnscope-bench-") as tmp:
        for name in names:
            script, extra = QUICK[name]
            if args.full and name in FULL_EXTRA:
                extra = FULL_EXTRA[name]
            out = Path(tmp) / f"{name}.json"
            cmd = [
                sys.executable,
                str(HERE / script),
                "--bundle",
                args.bundle,
                "--threads",
                str(args.threads),
                "--json",
                str(out),
                *extra,
            ]
            if args.note:
                cmd += ["--note", args.note]
            print(f"\n=== {name}: {' '.join(cmd[1:])}\n", flush=True)
            t0 = time.perf_counter()
            rc = subprocess.call(cmd, cwd=ROOT)
            seconds = time.perf_counter() - t0
            if rc != 0 or not out.is_file():
                failed.append(name)
                print(f"=== {name} failed (exit {rc})", flush=True)
                continue
            data = json.loads(out.read_text())
            data["seconds"] = seconds
            results["benchmarks"][name] = data  # type: ignore[index]
        if args.full and (args.only is None or "load" in args.only):
            out = Path(tmp) / "compare.json"
            cmd = [
                sys.executable,
                str(HERE / "load_test.py"),
                "--bundle",
                args.bundle,
                "--compare",
                "--json",
                str(out),
            ]
            print(f"\n=== load compare: {' '.join(cmd[1:])}\n", flush=True)
            if subprocess.call(cmd, cwd=ROOT) == 0 and out.is_file():
                results["benchmarks"]["load_compare"] = json.loads(out.read_text())  # type: ignore[index]
            else:
                failed.append("load_compare")
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    print(f"\nwrote {args.out}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
