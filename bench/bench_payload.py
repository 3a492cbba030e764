"""Bytes on the wire for every attention map of one translation, and the error of the encoding.

For inputs of exactly N source tokens (and N output tokens, fixed so sizes compare across
models) this takes the model's real trace and measures:

- full floats: the maps as plain JSON lists of float32 values written in full (what BertViz
  ships: `json.dumps(attention.tolist())`), with the token lists;
- nested: our API's `"encoding": "nested"` (lists rounded to 4 decimals);
- compact: our API's `"encoding": "compact"` (uint8 of round(w * 255), base64, with its shape);

as the attention part of the response and as the whole `POST /api/translate` body (tokens,
steps with top-5 alternatives, timings), plus gzip sizes for reference (the app does not gzip),
and the largest |decoded - original| each encoding introduces.

    python bench/bench_payload.py [--tokens 5 20 50 100 256] [--bundle auto|random|tiny|DIR]
                                  [--json FILE]
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.packing import decode_compact
from app.schemas import TranslateOut
from app.service import pack_result
from bench.common import (
    add_bundle_args,
    add_output_args,
    machine_info,
    resolve_bundle,
    suppress_eos,
    table,
    text_with_tokens,
    write_json,
)
from model.checkpoint import load_bundle
from model.experiment import ATTENTION_KINDS
from model.translator import TranslationResult, Translator


def full_float_json(result: TranslationResult) -> bytes:
    """BertViz-style payload: the token lists and every map as nested lists of full floats."""
    assert result.trace is not None
    payload = {
        "source_tokens": result.source_tokens,
        "target_tokens": result.target_tokens,
        "decoder_input_tokens": result.decoder_input_tokens,
        "attention": {kind: result.trace.kind(kind)[:, 0].tolist() for kind in ATTENTION_KINDS},
    }
    return json.dumps(payload).encode()


def response_json(result: TranslationResult, encoding: str, translator: Translator) -> bytes:
    """The exact body `POST /api/translate` sends for this result in `encoding`."""
    opts = SimpleNamespace(encoding=encoding, kinds=None, layers=None, heads=None)
    packed = pack_result(
        result, opts, model_name="bench", device="cpu", tokenizer=translator.tokenizer
    )
    return TranslateOut.model_validate(packed).model_dump_json().encode()


def attention_part(body: bytes) -> bytes:
    """Only the `attention` object of a response, serialised compactly as the API does."""
    return json.dumps(json.loads(body)["attention"], separators=(",", ":")).encode()


def max_errors(result: TranslationResult, compact_body: bytes, nested_body: bytes):
    """Largest |decoded - original| over every weight, for compact and nested."""
    assert result.trace is not None
    compact = json.loads(compact_body)["attention"]
    nested = json.loads(nested_body)["attention"]
    err_c = err_n = 0.0
    n_weights = 0
    for kind in ATTENTION_KINDS:
        original = result.trace.kind(kind)[:, 0].to(torch.float64).numpy()
        n_weights += original.size
        c = compact[kind]
        err_c = max(err_c, float(np.abs(decode_compact(c["data"], c["shape"]) - original).max()))
        w = np.asarray(nested[kind]["weights"], dtype=np.float64)
        err_n = max(err_n, float(np.abs(w - original).max()))
    return err_c, err_n, n_weights


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--tokens",
        type=int,
        nargs="+",
        default=[5, 20, 50, 100, 256],
        help="source tokens (incl. </s>); 256 is the server's default token limit",
    )
    parser.add_argument(
        "--out-ratio", type=float, default=1.0, help="output tokens per source token"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    add_bundle_args(parser)
    add_output_args(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(args.threads)

    choice = resolve_bundle(args.bundle)
    bundle = load_bundle(choice.path, "cpu")
    suppress_eos(bundle.model)
    translator = Translator(bundle)
    c = bundle.config
    print(f"bundle: {choice.description}\n")

    rows = []
    for n in args.tokens:
        if n > c.max_len:
            print(f"  N={n}: skipped, the model takes at most {c.max_len} tokens")
            continue
        text = text_with_tokens(translator.tokenizer, n)
        out_len = min(c.max_len, max(1, round(n * args.out_ratio)))
        result = translator.translate(text, max_len=out_len, need_trace=True)[0]
        assert len(result.source_tokens) == n and len(result.target_tokens) == out_len
        full = full_float_json(result)
        nested = response_json(result, "nested", translator)
        compact = response_json(result, "compact", translator)
        err_c, err_n, n_weights = max_errors(result, compact, nested)
        att_nested, att_compact = attention_part(nested), attention_part(compact)
        row = {
            "tokens": n,
            "out_tokens": out_len,
            "weights": n_weights,
            "full_bytes": len(full),
            "nested_bytes": len(nested),
            "compact_bytes": len(compact),
            "nested_attention_bytes": len(att_nested),
            "compact_attention_bytes": len(att_compact),
            "full_gzip_bytes": len(gzip.compress(full, 6)),
            "compact_gzip_bytes": len(gzip.compress(compact, 6)),
            "full_over_compact": len(full) / len(compact),
            "full_over_nested": len(full) / len(nested),
            "compact_max_error": err_c,
            "nested_max_error": err_n,
        }
        rows.append(row)
        print(
            f"  N={n}: full {len(full) / 1e3:,.1f} kB, nested {len(nested) / 1e3:,.1f} kB, "
            f"compact {len(compact) / 1e3:,.1f} kB",
            flush=True,
        )

    def kb(key: str) -> None:
        for r in rows:
            r[key + "_kb"] = r[key + "_bytes"] / 1e3

    for key in ("full", "nested", "compact", "full_gzip", "compact_gzip"):
        kb(key)
    print()
    print(
        table(
            rows,
            [
                ("tokens", "src tokens"),
                ("out_tokens", "out tokens"),
                ("weights", "weights"),
                ("full_kb", "full floats kB"),
                ("nested_kb", "nested kB"),
                ("compact_kb", "compact kB"),
                ("full_over_compact", "full / compact"),
                ("full_over_nested", "full / nested"),
                ("full_gzip_kb", "full gzip kB"),
                ("compact_gzip_kb", "compact gzip kB"),
            ],
        )
    )
    print()
    print(
        table(
            rows,
            [
                ("tokens", "src tokens"),
                ("compact_max_error", "compact max error"),
                ("nested_max_error", "nested max error"),
            ],
            digits=6,
        )
    )
    print(
        f"\ncompact's bound: 0.5/255 = {0.5 / 255:.6f} (1/255 = {1 / 255:.6f}); "
        "kB = 1000 bytes of the whole response body; weights = every map of all 3 kinds, "
        f"{c.n_encoder_layers}+{c.n_decoder_layers} layers x {c.n_heads} heads"
    )
    write_json(
        args.json,
        {
            "benchmark": "payload",
            "bundle": choice.description,
            "note": args.note,
            "machine": machine_info(args.threads),
            "rows": rows,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
