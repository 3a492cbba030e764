"""Translate + every attention map: attnscope vs Hugging Face `MarianMTModel` of the same size.

The reference is what a user would otherwise pick to see all attention maps of a translation
model: `transformers`' Marian (random weights from a `MarianConfig` with our dimensions, nothing
downloaded), run the way its users get the maps:

  1. `generate(..., output_attentions=True, return_dict_in_generate=True)` (the per-step maps of
     every beam), with the eager attention that `output_attentions` needs, then
  2. the teacher-forced forward over the chosen output with `output_attentions=True` that BertViz
     users run for full maps.

Ours: `Translator.translate(text, beam_size, need_trace=True)`: decoding with a key/value cache on
the fused attention path, then one teacher-forced pass with weights (plus per-step top-5
alternatives, which the reference does not compute).

Fair play: both models have the same dimensions (vocab 8000, d_model 256, 3+3 layers, 8 heads,
d_ff 1024, ReLU, post-norm, sinusoidal positions, tied embeddings), run in one process with the
same torch threads under `torch.inference_mode()`, on inputs of exactly N source tokens, and emit
exactly the same number of output tokens: Marian through `min_new_tokens = max_new_tokens`, ours
through `max_len` with end-of-sentence suppressed in the output layer (the same logit mask that
`min_new_tokens` applies). The two are timed alternately, after warm-up, and the median is shown.

    python bench/bench_reference.py [--tokens 5 20 50 100] [--beams 1 4] [--repeat 7]
                                    [--threads 1] [--bundle auto|random|tiny|DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from bench.common import (
    add_bundle_args,
    add_output_args,
    machine_info,
    median,
    resolve_bundle,
    suppress_eos,
    table,
    text_with_tokens,
    write_json,
)
from model.checkpoint import load_bundle
from model.config import ModelConfig
from model.translator import Translator

log = logging.getLogger("bench.reference")


def marian_like(config: ModelConfig):
    """A randomly initialised MarianMTModel with the same dimensions as `config`."""
    from transformers import MarianConfig, MarianMTModel

    mc = MarianConfig(
        vocab_size=config.vocab_size,
        decoder_vocab_size=config.vocab_size,
        d_model=config.d_model,
        encoder_layers=config.n_encoder_layers,
        decoder_layers=config.n_decoder_layers,
        encoder_attention_heads=config.n_heads,
        decoder_attention_heads=config.n_heads,
        encoder_ffn_dim=config.d_ff,
        decoder_ffn_dim=config.d_ff,
        activation_function="relu",
        max_position_embeddings=max(512, config.max_len),
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=config.tie_embeddings,
        normalize_before=config.norm_first,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        pad_token_id=config.pad_id,
        eos_token_id=config.eos_id,
        bos_token_id=config.bos_id,
        decoder_start_token_id=config.bos_id,
        forced_eos_token_id=None,
    )
    # output_attentions needs the eager attention (SDPA kernels return no weights).
    mc._attn_implementation = "eager"
    torch.manual_seed(0)
    return MarianMTModel(mc).eval()


def timed(fn: Callable[[], object], device: torch.device) -> tuple[float, float, object]:
    """(wall ms, CPU ms of this process, result). On a shared core the CPU time is the steadier
    figure: it leaves out the time other processes held the core."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3, (time.process_time() - c0) * 1e3, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--tokens", type=int, nargs="+", default=[5, 20, 50, 100], help="source tokens (incl. </s>)"
    )
    parser.add_argument(
        "--beams", type=int, nargs="+", default=[1, 4], help="beam sizes (1 = greedy)"
    )
    parser.add_argument(
        "--out-ratio",
        type=float,
        default=1.0,
        help="output tokens per source token (both models produce exactly round(N * ratio))",
    )
    parser.add_argument("--repeat", type=int, default=7, help="timed runs per case (median shown)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs per case")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads for both")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    add_bundle_args(parser)
    add_output_args(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    choice = resolve_bundle(args.bundle)
    bundle = load_bundle(choice.path, device)
    ours = Translator(bundle)
    config = bundle.config
    suppress_eos(bundle.model)
    ref = marian_like(config).to(device)
    tok = ours.tokenizer
    print(f"bundle: {choice.description}")
    print(
        f"ours {bundle.model.num_parameters():,} parameters; Marian "
        f"{sum(p.numel() for p in ref.parameters() if p.requires_grad):,} trainable "
        f"(+ its sinusoidal tables); device {device}, {args.threads} thread(s)\n"
    )

    rows = []
    for n in args.tokens:
        if n > config.max_len:
            print(f"  N={n}: skipped, the model takes at most {config.max_len} tokens")
            continue
        text = text_with_tokens(tok, n)
        ids = torch.tensor([tok.encode(text)], device=device)
        assert ids.size(1) == n
        mask = torch.ones_like(ids)
        out_len = max(1, round(n * args.out_ratio))
        for beam in args.beams:

            def run_ours(text: str = text, beam: int = beam, out_len: int = out_len):
                return ours.translate(text, beam_size=beam, max_len=out_len, need_trace=True)[0]

            def run_ref_generate(ids=ids, mask=mask, beam: int = beam, out_len: int = out_len):
                return ref.generate(
                    ids,
                    attention_mask=mask,
                    num_beams=beam,
                    do_sample=False,
                    max_new_tokens=out_len,
                    min_new_tokens=out_len,
                    output_attentions=True,
                    return_dict_in_generate=True,
                )

            def run_ref_forward(gen, ids=ids, mask=mask):
                # BertViz: the full maps of the chosen output, teacher forced.
                return ref(
                    input_ids=ids,
                    attention_mask=mask,
                    decoder_input_ids=gen.sequences[:1, :-1],
                    output_attentions=True,
                )

            ours_ms, gen_ms, fwd_ms, ours_cpu, ref_cpu = [], [], [], [], []
            with torch.inference_mode():
                for i in range(args.warmup + args.repeat):
                    t_ours, c_ours, res = timed(run_ours, device)
                    t_gen, c_gen, gen = timed(run_ref_generate, device)
                    t_fwd, c_fwd, fwd = timed(lambda gen=gen: run_ref_forward(gen), device)
                    if i >= args.warmup:
                        ours_ms.append(t_ours)
                        gen_ms.append(t_gen)
                        fwd_ms.append(t_fwd)
                        ours_cpu.append(c_ours)
                        ref_cpu.append(c_gen + c_fwd)
            # Same work on both sides: same output length, all three kinds of maps.
            assert len(res.target_tokens) == out_len, (len(res.target_tokens), out_len)
            assert gen.sequences.size(1) == out_len + 1
            assert fwd.cross_attentions[0].shape[-2:] == (out_len, n)
            assert res.trace is not None and tuple(res.trace.cross.shape[-2:]) == (out_len, n)
            ref_total = [g + f for g, f in zip(gen_ms, fwd_ms, strict=True)]
            row = {
                "tokens": n,
                "beam": beam,
                "out_tokens": out_len,
                "ours_ms": median(ours_ms),
                "ref_ms": median(ref_total),
                "ref_generate_ms": median(gen_ms),
                "ref_forward_ms": median(fwd_ms),
                "ratio": median(ref_total) / median(ours_ms),
                "ours_cpu_ms": median(ours_cpu),
                "ref_cpu_ms": median(ref_cpu),
                "ratio_cpu": median(ref_cpu) / median(ours_cpu),
                "ours_runs_ms": ours_ms,
                "ref_runs_ms": ref_total,
            }
            rows.append(row)
            print(
                f"  N={n:<4} beam={beam}: ours {row['ours_ms']:.1f} ms, reference "
                f"{row['ref_ms']:.1f} ms ({row['ratio']:.2f}x; CPU time {row['ratio_cpu']:.2f}x)",
                flush=True,
            )

    print()
    print(
        table(
            rows,
            [
                ("tokens", "src tokens"),
                ("beam", "beam"),
                ("out_tokens", "out tokens"),
                ("ours_ms", "ours ms"),
                ("ref_generate_ms", "ref generate ms"),
                ("ref_forward_ms", "ref forward ms"),
                ("ref_ms", "ref total ms"),
                ("ratio", "ref / ours", 2),
                ("ours_cpu_ms", "ours CPU ms"),
                ("ref_cpu_ms", "ref CPU ms"),
                ("ratio_cpu", "ref / ours (CPU)", 2),
            ],
            digits=1,
        )
    )
    print(
        f"\nmedian of {args.repeat} runs after {args.warmup} warm-up, ours and the reference "
        "alternating; ratio > 1: ours is faster. CPU ms: this process's CPU time (steadier "
        "than wall time when other processes share the core)."
    )
    write_json(
        args.json,
        {
            "benchmark": "reference",
            "bundle": choice.description,
            "device": str(device),
            "threads": args.threads,
            "repeat": args.repeat,
            "note": args.note,
            "machine": machine_info(args.threads),
            "rows": rows,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
