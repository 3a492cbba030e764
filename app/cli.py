"""`attnscope serve | translate | data | train | evaluate`.

The web stack is imported only by `serve`, so the model commands run without fastapi installed.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from model.checkpoint import DEFAULT_BUNDLE_DIR

log = logging.getLogger("attnscope")


def _translate(args: argparse.Namespace) -> int:
    from model.checkpoint import BundleError, load_bundle
    from model.tokenizer import TokenizationError
    from model.translator import Translator

    try:
        bundle = load_bundle(args.model, args.device)
    except BundleError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    translator = Translator(bundle)
    try:
        result = translator.translate(args.text, beam_size=args.beam, top_k=args.top_k)[0]
    except (TokenizationError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        payload = {
            "translation": result.translation,
            "source_tokens": result.source_tokens,
            "target_tokens": result.target_tokens,
            "attention_shapes": result.trace.shapes() if result.trace is not None else None,
            "score": result.score,
            "model": bundle.name,
            "device": str(bundle.model.device),
        }
        print(json.dumps(payload, ensure_ascii=False))
    else:
        print(result.translation)
    return 0


def _data(args: argparse.Namespace) -> int:
    from model.data import run_data_command

    return run_data_command(args)


def _train(args: argparse.Namespace) -> int:
    from model.train import config_from_args, train

    cfg = config_from_args(args)
    bundle = train(cfg)
    print(bundle)
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from model.checkpoint import BundleError
    from model.evaluate import run_evaluate_command

    try:
        return run_evaluate_command(args)
    except (BundleError, OSError) as e:  # a missing or corrupt bundle, an unreadable TSV file
        print(f"error: {e}", file=sys.stderr)
        return 2


def _serve(args: argparse.Namespace) -> int:
    from app.server import run_server

    return run_server(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnscope", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("translate", help="translate one English sentence to German")
    p.add_argument("text")
    p.add_argument("--beam", type=int, default=4, help="beam size (1 = greedy)")
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--model", default=str(DEFAULT_BUNDLE_DIR), help="bundle directory")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | mps")
    p.add_argument("--json", action="store_true", help="print JSON with tokens and trace shapes")
    p.set_defaults(func=_translate)

    p = sub.add_parser("data", help="build the parallel corpus (Tatoeba + Ding)")
    from model.data import add_data_arguments

    add_data_arguments(p)
    p.set_defaults(func=_data)

    p = sub.add_parser("train", help="train a model and write a bundle")
    from model.train import add_train_arguments

    add_train_arguments(p)
    p.set_defaults(func=_train)

    p = sub.add_parser("evaluate", help="BLEU and chrF of a bundle on a TSV file")
    from model.evaluate import add_evaluate_arguments

    add_evaluate_arguments(p)
    p.set_defaults(func=_evaluate)

    p = sub.add_parser("serve", help="start the web app")
    p.add_argument("--host", default=None)
    p.add_argument("--port", type=int, default=None)
    p.add_argument("--device", default=None, help="auto | cpu | cuda | mps")
    p.add_argument("--model", default=None, help="bundle directory, or a directory of bundles")
    p.add_argument("--workers", type=int, default=None)
    p.set_defaults(func=_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
