"""BLEU and chrF (sacrebleu defaults) of a bundle on a `source<TAB>reference` file."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import sacrebleu
import torch
from tqdm import tqdm

from model.checkpoint import DEFAULT_BUNDLE_DIR, Bundle, load_bundle
from model.decode import decode

log = logging.getLogger(__name__)


def read_tsv(path: str | Path, limit: int | None = None) -> list[tuple[str, str]]:
    """source<TAB>reference lines; a malformed line is an error naming its number."""
    pairs = []
    with Path(path).open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 2:
                raise ValueError(f"{path}:{n}: expected 'source<TAB>reference'")
            pairs.append((parts[0], parts[1]))
            if limit and len(pairs) >= limit:
                break
    return pairs


@torch.inference_mode()
def translate_all(
    bundle: Bundle,
    sources: list[str],
    beam_size: int = 1,
    batch_size: int = 64,
    progress: bool = True,
) -> list[str]:
    """Translate many sentences in length-sorted batches (less padding), output in input order."""
    tok, model = bundle.tokenizer, bundle.model
    encoded = [tok.encode(s, max_tokens=model.config.max_len, allow_unknown=True) for s in sources]
    order = sorted(range(len(sources)), key=lambda i: len(encoded[i]))
    out: list[str] = [""] * len(sources)
    bar = tqdm(
        total=len(sources),
        desc=f"translating (beam {beam_size})",
        unit="sent",
        file=sys.stderr,
        disable=not progress,
    )
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        src = torch.full(
            (len(idx), max(len(encoded[i]) for i in idx)), tok.pad_id, dtype=torch.long
        )
        for b, i in enumerate(idx):
            src[b, : len(encoded[i])] = torch.tensor(encoded[i])
        result = decode(model, src.to(model.device), beam_size=beam_size, top_k=0, need_trace=False)
        for i, h in zip(idx, result.hypotheses, strict=True):
            out[i] = tok.decode(h.tokens)
        bar.update(len(idx))
    bar.close()
    return out


def score(hypotheses: list[str], references: list[str]) -> dict[str, float]:
    return {
        "bleu": round(sacrebleu.corpus_bleu(hypotheses, [references]).score, 2),
        "chrf": round(sacrebleu.corpus_chrf(hypotheses, [references]).score, 2),
    }


def evaluate(
    bundle: Bundle, pairs: list[tuple[str, str]], beam_size: int = 1, progress: bool = True
) -> dict[str, Any]:
    t0 = time.perf_counter()
    hyps = translate_all(bundle, [s for s, _ in pairs], beam_size, progress=progress)
    result: dict[str, Any] = score(hyps, [r for _, r in pairs])
    result.update(n=len(pairs), beam=beam_size, seconds=round(time.perf_counter() - t0, 1))
    return result


def add_evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tsv", required=True, help="file of source<TAB>reference lines")
    parser.add_argument("--beam", type=int, default=1, help="beam size (1 = greedy)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N lines")
    parser.add_argument("--model", default=str(DEFAULT_BUNDLE_DIR), help="bundle directory")
    parser.add_argument("--device", default="auto")
    parser.add_argument(
        "--record",
        default=None,
        help="also store the scores under this name in the bundle's metrics.json",
    )
    parser.add_argument("--output", default=None, help="write the translations to this file")


def run_evaluate_command(args: argparse.Namespace) -> int:
    bundle = load_bundle(args.model, args.device)
    pairs = read_tsv(args.tsv, args.limit)
    if not pairs:
        raise SystemExit(f"error: {args.tsv} has no source<TAB>reference lines")
    hyps = translate_all(bundle, [s for s, _ in pairs], args.beam)
    result: dict[str, Any] = score(hyps, [r for _, r in pairs])
    result.update(n=len(pairs), beam=args.beam)
    if args.output:
        Path(args.output).write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    result["file"] = Path(args.tsv).name
    if args.record:
        metrics_path = Path(args.model) / "metrics.json"
        metrics = json.loads(metrics_path.read_text()) if metrics_path.is_file() else {}
        metrics.setdefault("evaluation", {})[args.record] = result
        metrics_path.write_text(json.dumps(metrics, indent=2) + "\n")
    print(json.dumps(result))
    return 0
