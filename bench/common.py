"""Shared pieces of the benchmark scripts: which bundle to load, inputs of an exact token count,
statistics, tables, JSON output, machine facts and a server started in a subprocess.

Scripts print their figures; nothing here decides pass or fail.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/x.py` puts bench/ first on the path, not the root
    sys.path.insert(0, str(ROOT))

from model.checkpoint import DEFAULT_BUNDLE_DIR, save_bundle  # noqa: E402
from model.config import ModelConfig  # noqa: E402
from model.tokenizer import TokenizationError, Tokenizer  # noqa: E402
from model.transformer import Transformer  # noqa: E402

log = logging.getLogger("bench")

#: The shipped model's dimensions (model/config.py defaults; runs/en-de/train_config.json).
BUNDLED_DIMS: dict[str, int] = dict(
    vocab_size=8000, d_model=256, n_heads=8, n_encoder_layers=3, n_decoder_layers=3, d_ff=1024
)
#: Where the tokenizer of the random stand-in comes from, first found wins (read only).
TOKENIZER_SOURCES = (
    ROOT / "runs" / "en-de" / "tokenizer.json",
    DEFAULT_BUNDLE_DIR / "tokenizer.json",
)
CACHE_DIR = Path(tempfile.gettempdir()) / "attnscope-bench"

#: Plain English to cut inputs of an exact token count from (everyday sentences, Tatoeba style).
CORPUS = (
    "The cat is sleeping on the sofa. I would like a cup of coffee, please. Where is the train "
    "station? We are going to the cinema tomorrow. My brother reads a book every week. It is "
    "raining, so take an umbrella. She bought fresh bread at the market this morning. The "
    "children are playing in the garden behind the house. Can you tell me how to get to the "
    "museum? I have lived in this city for ten years. The weather was nice yesterday, but today "
    "it is cold. He forgot his keys at the office again. We should leave early to catch the "
    "first bus. Our teacher gave us a lot of homework for the weekend. The doctor said that I "
    "need more sleep. Please close the window before you go to bed. They met at a small cafe "
    "near the river. I do not know what to cook for dinner tonight. The new library opens at "
    "nine in the morning. My parents are visiting us next month. Could you speak a little more "
    "slowly? The dog is waiting for his owner at the door. This song reminds me of my "
    "childhood. We walked along the beach until the sun went down. The meeting has been moved "
    "to Thursday afternoon. I think it will snow tonight."
)


# -- bundles --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BundleChoice:
    path: Path
    kind: str  # "real" | "random" | "tiny" | "path"
    description: str


def add_bundle_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bundle",
        default="auto",
        help="auto (model/bundles/en-de when present, else random), random (the bundled "
        "model's dimensions, random weights, the real tokenizer), tiny (the test bundle), or a "
        "bundle directory",
    )


def _tokenizer_for_random() -> Tokenizer:
    for path in TOKENIZER_SOURCES:
        if path.is_file():
            return Tokenizer.from_file(path)
    # No trained tokenizer anywhere (fresh clone, no training run): a small one from the corpus.
    log.warning("no trained tokenizer found; training a small BPE on the bench corpus")
    return Tokenizer.train([CORPUS] * 20, vocab_size=1000, min_frequency=1)


def random_bundle(seed: int = 0) -> Path:
    """A bundle with the shipped model's dimensions, random weights and the real tokenizer.

    Cached in the temp directory, keyed by the tokenizer, so scripts share one copy.
    """
    tok = _tokenizer_for_random()
    key = hashlib.sha256(tok.to_str().encode()).hexdigest()[:12]
    path = CACHE_DIR / f"random-{key}-{seed}"
    if (path / "weights.safetensors").is_file():
        return path
    torch.manual_seed(seed)
    dims = {**BUNDLED_DIMS, "vocab_size": max(BUNDLED_DIMS["vocab_size"], tok.vocab_size)}
    model = Transformer(ModelConfig(**dims, dropout=0.0))
    meta = {
        "name": "en-de-random",
        "source_language": "en",
        "target_language": "de",
        "description": "random weights, shipped model's dimensions (benchmarks only)",
    }
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    save_bundle(tmp, model, tok, meta)
    tmp.replace(path)
    return path


def tiny_bundle() -> Path:
    """The test suite's tiny random bundle (2+2 layers, 4 heads, d_model 32)."""
    from tests.conftest import make_tiny_bundle

    path = CACHE_DIR / "tiny"
    if not (path / "weights.safetensors").is_file():
        make_tiny_bundle(path)
    return path


def resolve_bundle(spec: str) -> BundleChoice:
    if spec == "auto":
        spec = "real" if (DEFAULT_BUNDLE_DIR / "weights.safetensors").is_file() else "random"
    if spec == "real":
        return BundleChoice(DEFAULT_BUNDLE_DIR, "real", f"trained bundle {DEFAULT_BUNDLE_DIR}")
    if spec == "random":
        return BundleChoice(
            random_bundle(),
            "random",
            "random weights with the shipped model's dimensions (d_model 256, 3+3 layers, "
            "8 heads, d_ff 1024, vocab 8000) and the trained tokenizer",
        )
    if spec == "tiny":
        return BundleChoice(tiny_bundle(), "tiny", "tiny test bundle (d_model 32, 2+2 layers)")
    path = Path(spec)
    return BundleChoice(path, "path", f"bundle {path}")


class SuppressEos(nn.Module):
    """An output layer with </s> masked: logits [..., vocab] with logits[..., eos] = -inf.

    Benchmarks put it on a model so decoding runs to exactly max_len tokens: the same logit mask
    that `min_new_tokens` applies in transformers.
    """

    def __init__(self, generator: nn.Module, eos_id: int) -> None:
        super().__init__()
        self.generator = generator
        self.eos_id = eos_id

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.generator(x)
        logits[..., self.eos_id] = float("-inf")
        return logits


def suppress_eos(model: Transformer) -> None:
    """Make `model` never produce </s> (fixed output lengths; see SuppressEos)."""
    if not isinstance(model.generator, SuppressEos):
        model.generator = SuppressEos(model.generator, model.config.eos_id)


# -- inputs ---------------------------------------------------------------------------------------
def text_with_tokens(tokenizer: Tokenizer, n: int, corpus: str = CORPUS) -> str:
    """English text whose encoding has exactly `n` ids, the closing </s> included (n >= 2).

    Words with characters the tokenizer does not know (a small test vocabulary) lose those
    characters or are left out.
    """
    if n < 2:
        raise ValueError(f"n must be >= 2 (one word and </s>), got {n}")

    def count(ws: list[str]) -> int | None:
        try:
            return len(tokenizer.encode(" ".join(ws)))
        except TokenizationError:
            return None

    words = []
    for w in corpus.split():
        if count([w]) is None:
            w = "".join(ch for ch in w if ch.isalnum())
        if w and count([w]) is not None:
            words.append(w)
    if not words:
        raise RuntimeError("the tokenizer knows none of the corpus words")
    out: list[str] = []
    i = 0
    # Whole words while they fit; then one-token fillers close the gap exactly.
    while (c := count([*out, words[i % len(words)]])) is not None and c <= n:
        out.append(words[i % len(words)])
        i += 1
    for filler in ("a", "I", ".", ",", "the", *words):
        while (count(out) or 0) < n and (count([*out, filler]) or n + 1) <= n:
            out.append(filler)
    if count(out) != n:
        raise RuntimeError(f"could not build a text of exactly {n} tokens")
    return " ".join(out)


def model_max_len(bundle_dir: Path) -> int:
    """The bundle's positional-table length: the most source tokens it accepts."""
    return int(json.loads((bundle_dir / "config.json").read_text())["max_len"])


# -- statistics and output ------------------------------------------------------------------------
def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation; NaN for no values."""
    if not values:
        return float("nan")
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def fmt(value: Any, digits: int = 1) -> str:
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(
    rows: Iterable[dict[str, Any]], columns: Sequence[tuple[str, ...]], digits: int = 1
) -> str:
    """Rows as a Markdown table; columns are (key, header) or (key, header, digits) tuples."""
    rows = list(rows)
    cells = [
        [fmt(r.get(col[0], ""), int(col[2]) if len(col) > 2 else digits) for col in columns]
        for r in rows
    ]
    heads = [col[1] for col in columns]
    widths = [
        max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(heads)
    ]
    lines = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)) + " |",
        "|" + "|".join("-" * (w + 2) for w in widths) + "|",
    ]
    for c in cells:
        lines.append("| " + " | ".join(v.rjust(w) for v, w in zip(c, widths, strict=True)) + " |")
    return "\n".join(lines)


def machine_info(threads: int | None = None) -> dict[str, Any]:
    """What the figures were taken on: CPU, cores usable by this process, load, versions."""
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores_total": os.cpu_count(),
        "cores_used": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "torch_threads": threads if threads is not None else torch.get_num_threads(),
        "loadavg_1min": os.getloadavg()[0],
        "python": platform.python_version(),
        "torch": torch.__version__,
        "time": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def add_output_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", type=Path, default=None, metavar="FILE", help="write figures as JSON"
    )
    parser.add_argument(
        "--note", default="", help="free text stored with the figures (e.g. what else was running)"
    )


def write_json(path: Path | None, payload: dict[str, Any]) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    print(f"\nwrote {path}")


# -- a server in a subprocess ---------------------------------------------------------------------
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_kib(pid: int) -> int:
    """Resident memory (VmRSS, KiB) of `pid` and all its descendants (uvicorn's workers)."""
    total = 0
    for p in [pid, *_descendants(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return total


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of `pid` and its descendants (live ones) so far."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for p in [pid, *_descendants(pid)]:
        try:
            # Fields after the ")" that closes the command name; utime, stime are 14 and 15.
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, ValueError, IndexError):
            continue
    return total


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for c in children:
            out.append(int(c))
            out.extend(_descendants(int(c)))
    return out


class ServerProcess:
    """`with ServerProcess(bundle, workers=1, threads=1) as s:` runs `attnscope serve` (the
    command users run) on a free 127.0.0.1 port in a subprocess until the block ends.

    The subprocess inherits this process's CPU affinity and niceness (so `taskset -c 1 nice`
    on the script pins the server too). Its log goes to a file in the temp directory.
    """

    def __init__(
        self,
        bundle_dir: Path,
        workers: int = 1,
        threads: int = 1,
        env: dict[str, str] | None = None,
        startup_timeout: float = 120.0,
    ) -> None:
        self.bundle_dir = bundle_dir
        self.workers = workers
        self.threads = threads
        self.extra_env = env or {}
        self.startup_timeout = startup_timeout
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = CACHE_DIR / f"server-{self.port}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def rss_mib(self) -> float:
        return rss_kib(self.pid) / 1024

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def __enter__(self) -> ServerProcess:
        import httpx

        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "ATTNSCOPE_THREADS": str(self.threads),
            "OMP_NUM_THREADS": str(self.threads),
            "ATTNSCOPE_DEVICE": "cpu",
            **self.extra_env,
        }
        cmd = [
            sys.executable,
            "-m",
            "app.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--device",
            "cpu",
            "--model",
            str(self.bundle_dir),
            "--workers",
            str(self.workers),
        ]
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            cmd, env=env, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"server exited with {self.proc.returncode}; see {self.log_path}"
                )
            try:
                r = httpx.get(self.url + "/api/health", timeout=2)
                if r.status_code == 200 and r.json().get("models"):
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise RuntimeError(
                    f"server did not start in {self.startup_timeout} s; see {self.log_path}"
                )
            time.sleep(0.2)
        if self.workers > 1:
            # Every worker loads its own models; wait until all of them answer (health is cheap).
            self._wait_for_workers(deadline)
        return self

    def _wait_for_workers(self, deadline: float) -> None:
        # Each worker runs the lifespan (loads its models) and then logs this line; requests
        # reach only workers that have started, but the figures should include every worker.
        while time.monotonic() < deadline:
            text = self.log_path.read_text(errors="replace")
            if text.count("Application startup complete") >= self.workers:
                return
            time.sleep(0.2)
        raise RuntimeError(f"not every worker started in time; see {self.log_path}")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "_log", None) is not None:
            self._log.close()
